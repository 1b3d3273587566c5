#include "decode.h"

#include <algorithm>
#include <vector>

#include "compact_walk.h"
#include "fh_line.h"
#include "json_scan.h"

namespace iot {

namespace {
// File hash -> its code in a block's column: open addressing (where a job reads a million
// files a block names a new one every few rows, and std::unordered_map's node per entry cost a
// tenth of the block's decoding).
class HashCodes {
 public:
  // The code slot of h: -1 when h is new (the caller sets it).
  int32_t& of(uint64_t h) {
    if ((n_ + 1) * 2 > slots_.size()) grow();
    Slot* s = find(h);
    if (s->code < 0) {
      s->h = h;
      n_++;
    }
    return s->code;
  }

 private:
  struct Slot {
    uint64_t h = 0;
    int32_t code = -1;  // -1: empty
  };
  Slot* find(uint64_t h) {
    size_t mask = slots_.size() - 1;
    for (size_t i = size_t((h * 0x9E3779B97F4A7C15ull) >> 32) & mask;; i = (i + 1) & mask)
      if (slots_[i].code < 0 || slots_[i].h == h) return &slots_[i];
  }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& e : old)
      if (e.code >= 0) *find(e.h) = e;
  }
  std::vector<Slot> slots_;
  size_t n_ = 0;
};

// The block's rows into the columns. An I/O row (nearly all of them) is stored in place: the
// columns are sized ahead, uninitialised (Slots), and each value written at the row's index, a
// store per column with no size check or push (a push per column and row was half of the
// decoding). Text and span rows are pushed; before one, the columns are cut back to the rows
// written (settle). A file-name line (a million in a job that reads a million files) adds no
// row and leaves them as they are.
struct ColumnRows {
  EventColumns& cols;
  int64_t pid = 0, res = 1;
  int32_t x_code = -1;
  int32_t name_code[C_COUNT], cat_code[C_COUNT];  // per call: codes of its name and category
  HashCodes hash_code[2];                         // fhash, fhash2: code of each hash
  uint64_t last_hash[2] = {0, 0};                 // runs of one file: no map lookup
  int32_t last_code[2] = {-1, -1};
  size_t appended[2] = {0, 0};  // values hash() appended to fhash, fhash2 (-1: not all are)
  size_t hint = 0;              // the rows the block says it has
  size_t cap = 0;               // rows the columns are sized for (0: exact, as pushes need them)
  size_t sized = 0;             // the most rows they were sized for (kept across a settle)
  int32_t *ph = nullptr, *name = nullptr, *cat = nullptr, *fh = nullptr, *fh2 = nullptr,
          *hh = nullptr, *args_offs = nullptr;
  int64_t *pids = nullptr, *tids = nullptr, *ts = nullptr, *durs = nullptr, *ints[kIntArgs] = {};

  explicit ColumnRows(EventColumns& c) : cols(c) {
    for (int i = 0; i < C_COUNT; i++) name_code[i] = cat_code[i] = -1;
  }
  ~ColumnRows() { settle(); }
  void begin(int64_t p, int64_t r, uint64_t rows) {
    pid = p;
    res = r;
    hint = rows < (1u << 24) ? rows : 0;  // a damaged count must not reserve gigabytes
    cols.reserve(hint);
  }
  // Every column sized for rows [0, n) (the validity words too, so a null is one store).
  void size_all(size_t n) {
    for (DictColumn* d : {&cols.ph, &cols.name, &cols.cat, &cols.fhash, &cols.fhash2, &cols.hhash})
      d->codes.resize(n), d->valid.cover(n);
    for (I64Column* c : {&cols.pid, &cols.tid, &cols.ts_ns, &cols.dur_ns})
      c->v.resize(n), c->valid.cover(n);
    for (I64Column& c : cols.ints) c.v.resize(n), c.valid.cover(n);
    cols.args.offs.resize(n + 1), cols.args.valid.cover(n);
    ph = cols.ph.codes.data(), name = cols.name.codes.data(), cat = cols.cat.codes.data();
    fh = cols.fhash.codes.data(), fh2 = cols.fhash2.codes.data(), hh = cols.hhash.codes.data();
    args_offs = cols.args.offs.data();
    pids = cols.pid.v.data(), tids = cols.tid.v.data(), ts = cols.ts_ns.v.data();
    durs = cols.dur_ns.v.data();
    for (int k = 0; k < kIntArgs; k++) ints[k] = cols.ints[k].v.data();
  }
  void settle() {
    if (!cap) return;
    flush_nulls();
    cap = 0;
    size_all(cols.rows);
  }
  void text(const char* p, size_t n) {
    scan_lines(
        p, n, cols, [](void* self) { static_cast<ColumnRows*>(self)->settle(); }, this);
  }
  void span(const SpanLine& l) {
    settle();
    cols.ph.add(std::string_view("X"));
    cols.name.add(std::string_view(l.name, l.name_len));
    cols.cat.add(std::string_view(l.cat, l.cat_len));
    cols.pid.add(pid);
    cols.tid.add(l.tid);
    cols.ts_ns.add(l.start * res);
    cols.dur_ns.add(l.dur * res);
    scan_args_body(std::string_view(l.args, l.args_len), cols);
    cols.rows++;
  }
  int32_t hash(int k, DictColumn& col, uint64_t h) {
    if (last_code[k] >= 0 && last_hash[k] == h) return last_code[k];
    int32_t& code = hash_code[k].of(h);
    if (code < 0) {  // 16 hex digits, as the JSON form writes the hash
      char text[16];
      hex16_text(h, text);
      // new to the column, as the number was to hash_code, while all its values came from
      // here; once a text row added some, looked up (its hashes may be these)
      const std::string_view hex(text, 16);
      const bool all_ours = col.values() == appended[k];
      code = all_ours ? col.append(hex) : col.code(hex);
      appended[k] = all_ours ? appended[k] + 1 : size_t(-1);
    }
    last_hash[k] = h;
    last_code[k] = code;
    return code;
  }
  // The nulls of the 64 rows of validity word `word`, a bit per row, per nullable column
  // (fhash, fhash2, the int args, hhash, args): stored once a word, not a store per row.
  enum { kFh, kFh2, kInt0, kHh = kInt0 + kIntArgs, kArgs, kNullable };
  uint64_t nulls[kNullable] = {};
  size_t word = 0;
  Validity& valid(int k) {
    if (k == kFh) return cols.fhash.valid;
    if (k == kFh2) return cols.fhash2.valid;
    if (k == kHh) return cols.hhash.valid;
    if (k == kArgs) return cols.args.valid;
    return cols.ints[k - kInt0].valid;
  }
  void flush_nulls() {
    for (int k = 0; k < kNullable; k++)
      if (nulls[k]) valid(k).words[word] &= ~nulls[k], nulls[k] = 0;
  }
  void io(const IoRec& r, const IoTimes& t, int tid) {
    const size_t row = cols.rows;
    if (row >= cap) {
      flush_nulls();
      // Back to what the columns were sized for before a settle (no reallocation: a settle
      // before each of a million file-name lines, when names are not apart, sized them
      // afresh each time, a copy of every column per line); past it, doubling.
      cap = std::max({hint, sized, size_t(64)});
      if (row >= cap) cap = 2 * row;
      sized = cap;
      size_all(cap);
    }
    if ((row >> 6) != word) {
      flush_nulls();
      word = row >> 6;
    }
    const unsigned bit = row & 63;
    const uint16_t call = r.h.call;
    if (name_code[call] < 0) {
      name_code[call] = cols.name.code(kCalls.name[call]);
      cat_code[call] = cols.cat.code(kCalls.cat[call]);
    }
    if (x_code < 0) x_code = cols.ph.code("X");
    ph[row] = x_code;
    pids[row] = pid;
    tids[row] = tid;
    ts[row] = t.start * res;
    durs[row] = t.dur * res;
    name[row] = name_code[call];
    cat[row] = cat_code[call];
    const uint32_t f = r.fields;
    fh[row] = f & F_FHASH ? hash(0, cols.fhash, t.fh) : 0;
    nulls[kFh] |= uint64_t(!(f & F_FHASH)) << bit;
    fh2[row] = f & F_FHASH2 ? hash(1, cols.fhash2, t.fh2) : 0;
    nulls[kFh2] |= uint64_t(!(f & F_FHASH2)) << bit;
    // IoRec's unset values are 0: stored as they are, under a null
    const int64_t v[kIntArgs] = {r.fd,    r.fd2, r.size,  r.offset, r.ret,
                                 r.bytes, r.err, r.flags, r.mode};
    constexpr uint32_t has[kIntArgs] = {F_FD,    F_FD2,   F_SIZE,  F_OFFSET, F_RET,
                                        F_BYTES, F_ERRNO, F_FLAGS, F_MODE};
    for (int k = 0; k < kIntArgs; k++) {
      ints[k][row] = v[k];
      nulls[kInt0 + k] |= uint64_t(!(f & has[k])) << bit;
    }
    hh[row] = 0;
    nulls[kHh] |= uint64_t(1) << bit;
    args_offs[row + 1] = int32_t(cols.args.data.size());
    nulls[kArgs] |= uint64_t(1) << bit;
    cols.rows = row + 1;
  }
};
}  // namespace

bool decode_compact(const char* p, size_t n, EventColumns& cols) {
  ColumnRows rows(cols);
  bool ok = compact_walk(p, n, rows);
  if (!ok) cols.damaged = true;
  return ok;
}

}  // namespace iot
