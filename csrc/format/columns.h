// The decoded events of one block, column by column, in the analyzer's schema, handed to Python
// through the Arrow C data interface (the ArrowSchema / ArrowArray structs of the Arrow
// specification: pyarrow imports them without a copy, and no Arrow C++ library is needed).
// Read side only: this code uses the C++ standard library, so it is never in the preloaded
// tracer.
//
// Columns (EVENT_COLUMNS, in this order): ph, name, cat (dictionary strings), pid, tid, ts_ns,
// dur_ns (int64), fhash, fhash2 (dictionary strings: 16 hex digits for iotrace traces), fd,
// fd2, size, offset, ret, bytes, errno, flags, mode (int64, null where the event has none),
// hhash (dictionary string: DFTracer's host hash), args (the args object as JSON text when it
// holds keys other than those above, else null). Metadata lines (ph M) are not events: they
// are kept as text (`meta`), as are the examples of lines that could not be read.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct ArrowSchema;
struct ArrowArray;

namespace iot {

constexpr const char* kEventColumns[] = {
    "ph",  "name", "cat",    "pid", "tid",   "ts_ns", "dur_ns", "fhash", "fhash2", "fd",
    "fd2", "size", "offset", "ret", "bytes", "errno", "flags",  "mode",  "hhash",  "args"};

// A vector's allocator whose resize leaves the new elements unset: the column decoder sizes a
// block's columns ahead and stores each row's values at its index (decode.cc), so zeroing
// them first would write every column twice.
template <class T>
struct NoInit : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = NoInit<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
template <class T>
using Slots = std::vector<T, NoInit<T>>;

// Validity as Arrow's bitmap (bit set: valid), grown only by nulls: the words past the last
// null are all valid and never stored, so a valid value costs nothing here, and the nulls are
// counted once, at the end (most int columns are null in most rows).
struct Validity {
  std::vector<uint64_t> words;  // bits of rows [0, 64 * words.size()); set unless null
  size_t rows_hint = 0;         // the rows the block is expected to have: words made at once
  void null_at(size_t row) {
    if ((row >> 6) >= words.size()) grow(row);
    words[row >> 6] &= ~(uint64_t(1) << (row & 63));
  }
  void valid_at(size_t) {}
  void grow(size_t row);
  void cover(size_t rows) {  // words for rows [0, rows) at least
    if (words.size() * 64 < rows) words.resize((rows + 63) / 64, ~uint64_t(0));
  }
  int64_t nulls() const;
};

struct I64Column {
  Slots<int64_t> v;
  Validity valid;
  void add(int64_t x) {
    valid.valid_at(v.size());
    v.push_back(x);
  }
  void add_null() {
    valid.null_at(v.size());
    v.push_back(0);
  }
  void add(int64_t x, bool has) { has ? add(x) : add_null(); }
};

// Strings as int32 codes into a dictionary of distinct values (first seen, first coded).
struct DictColumn {
  Slots<int32_t> codes;
  Validity valid;
  std::string data;              // the values, back to back
  std::vector<int32_t> offs{0};  // value i is data[offs[i], offs[i + 1])
  std::vector<int32_t> slots;    // open addressing: code + 1, 0 empty
  size_t indexed = 0;            // the values in `slots` (those after: appended, hashed later)
  int32_t last = -1;             // the previous code: runs of one value skip the hash
  int32_t code(std::string_view s);
  // A value known to be new to the column, its code; hashed only if code() is called later
  // (the compact decoder's file hashes: known new by their numbers).
  int32_t append(std::string_view s);
  void add(std::string_view s) { add_code(code(s)); }
  void add_code(int32_t c) {
    valid.valid_at(codes.size());
    codes.push_back(c);
  }
  void add_null() {
    valid.null_at(codes.size());
    codes.push_back(0);
  }
  size_t values() const { return offs.size() - 1; }
};

struct StrColumn {
  Slots<int32_t> offs{0};
  std::string data;
  Validity valid;
  void add(std::string_view s) {
    valid.valid_at(offs.size() - 1);
    data.append(s.data(), s.size());
    offs.push_back(int32_t(data.size()));
  }
  void add_null() {
    valid.null_at(offs.size() - 1);
    offs.push_back(int32_t(data.size()));
  }
};

// The int64 args, in their column order (fd .. mode).
enum IntArg { A_FD, A_FD2, A_SIZE, A_OFFSET, A_RET, A_BYTES, A_ERRNO, A_FLAGS, A_MODE, kIntArgs };
constexpr const char* kIntArgNames[kIntArgs] = {"fd",    "fd2",   "size",  "offset", "ret",
                                                "bytes", "errno", "flags", "mode"};

struct EventColumns {
  DictColumn ph, name, cat;
  I64Column pid, tid, ts_ns, dur_ns;
  DictColumn fhash, fhash2;
  I64Column ints[kIntArgs];
  DictColumn hhash;
  StrColumn args;
  size_t rows = 0;

  std::string meta;  // metadata lines, each followed by '\n'
  size_t meta_lines = 0;
  // File-name lines (FH) as the tracer writes them (fh_line.h), kept out of `meta` when a
  // reader asks (names_apart): the hash (16 hex digits) as its number, the paths back to back.
  // A job that reads a million files has a million of them: no JSON scan, no line each.
  bool names_apart = false;
  std::vector<uint64_t> name_hash;
  std::vector<int64_t> name_offs{0};  // path i is name_bytes[name_offs[i], name_offs[i + 1])
  std::string name_bytes;
  int64_t bad_lines = 0;
  std::vector<std::string> bad_examples;  // the first 3, cut at 200 bytes
  bool damaged = false;                   // a compact block that could not be read to its end

  void bad(std::string_view line);
  void reserve(size_t n);  // room for n more rows (a compact block says how many it has)
  void add_meta(std::string_view line) {
    meta.append(line.data(), line.size());
    meta.push_back('\n');
    meta_lines++;
  }
};

// Move the columns into a struct array (one child per column) and its schema; the array's
// release frees them. Both structs must be unused (release NULL) when called.
void export_columns(EventColumns&& cols, ArrowSchema* schema, ArrowArray* array);

}  // namespace iot
