// The export's view of one decoded batch of events (the reader's columns, columns.h of the
// format), taken over through the Arrow C data interface: the writers read the buffers in
// place, with no copy and no Arrow library. And the one place where an event's args are
// listed (from the args object's JSON text, or from the arg columns), so that the .pftrace and
// the JSON writers show the same args.
//
// Read side only (the C++ standard library is used freely): never in the preloaded tracer.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arrow_c.h"
#include "str_table.h"

namespace iotx {

// Validity bitmap (Arrow: bit set = valid); null pointer: all valid.
inline bool valid_at(const uint8_t* bits, int64_t i) {
  return !bits || ((bits[i >> 3] >> (i & 7)) & 1);
}

struct StrArray {  // utf8: int32 offsets + data
  const int32_t* offs = nullptr;
  const char* data = nullptr;
  const uint8_t* valid = nullptr;
  int64_t off = 0, length = 0, nulls = 0;
  std::string_view at(int64_t i) const {
    i += off;
    return std::string_view(data + offs[i], size_t(offs[i + 1] - offs[i]));
  }
  bool has(int64_t i) const { return offs && valid_at(valid, i + off); }
};

struct DictCol {  // dictionary<int32, utf8>
  const int32_t* codes = nullptr;
  const uint8_t* valid = nullptr;
  int64_t off = 0;
  int64_t nulls = 0;
  StrArray dict;
  bool has(int64_t r) const { return codes && valid_at(valid, r + off); }
  int32_t code(int64_t r) const { return codes[r + off]; }
  int64_t values() const { return codes ? dict.length : 0; }
};

struct IntCol {  // int64; 0 under nulls
  const int64_t* v = nullptr;
  const uint8_t* valid = nullptr;
  int64_t off = 0;
  int64_t nulls = 0;
  bool has(int64_t r) const { return v && valid_at(valid, r + off); }
  int64_t at(int64_t r) const { return v ? v[r + off] : 0; }
};

// The int args in their column order (columns.h: fd .. mode).
enum IntArg { A_FD, A_FD2, A_SIZE, A_OFFSET, A_RET, A_BYTES, A_ERRNO, A_FLAGS, A_MODE, kIntArgs };
constexpr int kKeyFname = kIntArgs, kKeyFname2 = kIntArgs + 1, kKeyHhash = kIntArgs + 2;
// The keys of the column args, by key id: the int args, then fname, fname2, hhash.
constexpr std::string_view kColumnKeys[kIntArgs + 3] = {"fd",   "fd2",   "size",   "offset",
                                                        "ret",  "bytes", "errno",  "flags",
                                                        "mode", "fname", "fname2", "hhash"};

// One batch of events. Owns the Arrow array it was given (released with it); a column the
// batch does not have reads as all null.
class BatchView {
 public:
  // Takes over `array` (its release is moved here; the caller's struct is left released).
  // `schema` is only read. Throws std::runtime_error on columns of an unexpected type.
  BatchView(const ArrowSchema& schema, ArrowArray* array);
  ~BatchView();
  BatchView(const BatchView&) = delete;
  BatchView& operator=(const BatchView&) = delete;

  int64_t rows = 0;
  DictCol ph, name, cat, fhash, fhash2, hhash;
  IntCol pid, tid, ts, dur;
  IntCol ints[kIntArgs];
  StrArray args;
  // A budget's merged slices (export/budget.py) for the .pftrace: their args as columns, not as
  // JSON text to parse per slice: the calls merged, the call's name, their summed ns (beside
  // `bytes` and `fhash`). Listed as the args object {"merged", "call", "bytes", "time_us",
  // "fhash"} would be (ProtoWriter::merged_annotations).
  IntCol merged_calls, merged_ns;
  DictCol merged_call;
  // The int arg columns with a value in some row (most batches use four or five of the nine).
  int active[kIntArgs];
  int n_active = 0;

  // The column of this name, for the Python side's numpy views (nullptr: absent or not int).
  const IntCol* int_column(std::string_view col) const;
  const DictCol* dict_column(std::string_view col) const;

  // Moves every event onto the job clock: a time t becomes t + shift(t), shift the line through
  // the n points (at[i], shift[i]) (at increasing; the first's shift before it, the last's
  // after it: iotrace_format.clock). Start and end are moved alike (dur becomes the moved end
  // less the moved start), so events keep their order and nesting.
  void move_times(const int64_t* at, const int64_t* shift, size_t n);

 private:
  ArrowArray array_{};
  std::vector<int64_t> moved_ts_, moved_dur_;  // the moved columns, when moved
};

// The shift at time t of the line through the points (at, shift) (BatchView::move_times),
// rounded down: t + shift_at(t) never decreases as t grows.
int64_t shift_at(const int64_t* at, const int64_t* shift, size_t n, int64_t t);

// The args of a row without an args object, from the columns, in their order (the one place it
// is written): hhash (DFTracer's host hash), fd .. mode, then the file names of fhash and fhash2.
// on_int(key id, value); on_str(key id, dictionary: 0 fhash, 1 fhash2, 2 hhash, code).
template <class Int, class Str>
inline void column_args(const BatchView& b, int64_t r, Int&& on_int, Str&& on_str) {
  if (b.hhash.has(r)) on_str(kKeyHhash, 2, b.hhash.code(r));
  for (int j = 0; j < b.n_active; j++) {
    const IntCol& c = b.ints[b.active[j]];
    if (valid_at(c.valid, r + c.off)) on_int(b.active[j], c.v[r + c.off]);
  }
  if (b.fhash.has(r)) on_str(kKeyFname, 0, b.fhash.code(r));
  if (b.fhash2.has(r)) on_str(kKeyFname2, 1, b.fhash2.code(r));
}

// One arg of an event, as both writers show it.
struct Arg {
  enum Type : uint8_t { INT, UINT, DOUBLE, BOOL, STR, JSON };
  Type type = INT;
  std::string_view key;
  int64_t i = 0;          // INT, BOOL
  uint64_t u = 0;         // UINT (above INT64_MAX)
  double d = 0;           // DOUBLE
  std::string_view s;     // STR: the value; JSON: its JSON text
  std::string_view raw;   // the value's JSON text as written (args object only)
  bool restored = false;  // fname/fname2: a path restored from an FH line
  // Column args (for the writers' caches): key_id 0..8 the int args, 9 fname, 10 fname2,
  // 11 hhash (-1: a key of the args object); dict 0 fhash, 1 fhash2, 2 hhash when the value is
  // that dictionary's `code` (-1: not from a dictionary).
  int8_t key_id = -1, dict = -1;
  int32_t code = 0;
};

// Lists the args of a row: the args object's members in their order when the row has one
// (`fhash`/`fhash2` taken out, their paths appended as `fname`/`fname2`), else the arg columns
// (hhash, fd .. mode, fname, fname2). A hash without a known path stays the hash, and is
// remembered in `unresolved`.
class ArgLister {
 public:
  explicit ArgLister(const FileNames& names) : names_(names) {}
  // Lists the args of row r: size() of them, arg(0 .. size() - 1), valid until the next call.
  void list(const BatchView& b, int64_t r);
  // The value of a column arg from a dictionary (column_args' on_str): for fhash/fhash2 the
  // path (or the hash when no FH line named it: `restored` false), for hhash the string.
  std::string_view dict_value(const BatchView& b, int dict, int32_t code, bool* restored);
  size_t size() const { return n_; }
  const Arg& arg(size_t i) const { return args_[i]; }
  std::vector<std::string> unresolved() const;
  // A new batch: forget the codes of the last one.
  void batch() { fname_cache_[0].clear(), fname_cache_[1].clear(); }
  // Looks the paths of a batch's fhash (dict 0) or fhash2 (1) dictionary up at once (the
  // table's slots fetched a few codes ahead: a batch of a job that reads a million files has
  // thousands of new ones), for dict_value; on_path(path) for each path found.
  template <class F>
  void resolve(const BatchView& b, int dict, F&& on_path);

 private:
  Arg& add() {
    if (n_ == args_.size()) args_.resize(n_ * 2 + 16);
    Arg& a = args_[n_++];
    a.raw = {};
    a.restored = false;
    a.key_id = a.dict = -1;
    return a;
  }
  std::string& scratch();  // a buffer for an unescaped string, kept until the next row
  void fname_text(std::string_view hash, int which);
  bool parse_object(std::string_view text);

  const FileNames& names_;
  std::vector<Arg> args_;
  size_t n_ = 0;
  std::deque<std::string> scratch_;  // a deque: growing never moves a buffer an Arg views
  size_t scratch_used_ = 0;
  // per dictionary code of fhash/fhash2: the path (a view into names_, stable, or the dictionary)
  std::vector<std::string_view> fname_cache_[2];
  std::vector<uint8_t> fname_known_[2];
  std::unordered_map<std::string, bool> unresolved_;
  std::string restored_[2];  // the fhash/fhash2 texts of the args object being listed
};

template <class F>
void ArgLister::resolve(const BatchView& b, int dict, F&& on_path) {
  const DictCol& col = dict ? b.fhash2 : b.fhash;
  size_t n = size_t(col.values());
  if (!n || !names_.size()) return;
  std::vector<std::string_view>& cache = fname_cache_[dict];
  std::vector<uint8_t>& known = fname_known_[dict];
  if (cache.size() < n) {
    cache.resize(n);
    known.assign(n, 0);
  }
  constexpr size_t kAhead = 8;
  uint64_t hs[kAhead];
  for (size_t i = 0; i < n + kAhead; i++) {
    if (i >= kAhead) {  // the code whose slot was fetched kAhead codes ago
      size_t c = i - kAhead;
      // found: as dict_value would have it; else left to dict_value (which remembers the hash
      // as unresolved when a row uses it)
      if (!known[c] && names_.find(col.dict.at(int64_t(c)), hs[c % kAhead], &cache[c])) {
        known[c] = 1;
        on_path(cache[c]);
      }
    }
    if (i < n) names_.prefetch(hs[i % kAhead] = str_hash(col.dict.at(int64_t(i))));
  }
}

// JSON helpers of both writers.
void json_string(std::string& out, std::string_view s);  // a quoted, escaped literal
size_t utf8_chars(std::string_view s);                   // code points (Python's len)

}  // namespace iotx
