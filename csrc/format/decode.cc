#include "decode.h"

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

struct ColumnRows {
  EventColumns& cols;
  int64_t pid = 0, res = 1;
  int32_t x_code = -1;
  int32_t name_code[C_COUNT], cat_code[C_COUNT];  // per call: codes of its name and category
  HashCodes hash_code[2];                         // fhash, fhash2: code of each hash
  uint64_t last_hash[2] = {0, 0};                 // runs of one file: no map lookup
  int32_t last_code[2] = {-1, -1};

  explicit ColumnRows(EventColumns& c) : cols(c) {
    for (int i = 0; i < C_COUNT; i++) name_code[i] = cat_code[i] = -1;
  }
  void begin(int64_t p, int64_t r, uint64_t rows) {
    pid = p;
    res = r;
    cols.reserve(rows < (1u << 24) ? rows : 0);  // a damaged count must not reserve gigabytes
  }
  void text(const char* p, size_t n) { scan_lines(p, n, cols); }
  void times(int tid, int64_t start, int64_t dur) {
    if (x_code < 0) x_code = cols.ph.code("X");
    cols.ph.add_code(x_code);
    cols.pid.add(pid);
    cols.tid.add(tid);
    cols.ts_ns.add(start * res);
    cols.dur_ns.add(dur * res);
  }
  void span(const SpanLine& l) {
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
  void hash(int k, DictColumn& col, uint64_t h) {
    if (last_code[k] >= 0 && last_hash[k] == h) return col.add_code(last_code[k]);
    int32_t& code = hash_code[k].of(h);
    if (code < 0) {  // 16 hex digits, as the JSON form writes the hash
      char text[16];
      hex16_text(h, text);
      code = col.code(std::string_view(text, 16));
    }
    last_hash[k] = h;
    last_code[k] = code;
    col.add_code(code);
  }
  void io(const IoRec& r, const IoTimes& t, int tid) {
    const uint16_t call = r.h.call;
    if (name_code[call] < 0) {
      name_code[call] = cols.name.code(kCalls.name[call]);
      cat_code[call] = cols.cat.code(kCalls.cat[call]);
    }
    times(tid, t.start, t.dur);
    cols.name.add_code(name_code[call]);
    cols.cat.add_code(cat_code[call]);
    const uint32_t f = r.fields;
    if (f & F_FHASH)
      hash(0, cols.fhash, t.fh);
    else
      cols.fhash.add_null();
    if (f & F_FHASH2)
      hash(1, cols.fhash2, t.fh2);
    else
      cols.fhash2.add_null();
    cols.ints[A_FD].add(r.fd, f & F_FD);
    cols.ints[A_FD2].add(r.fd2, f & F_FD2);
    cols.ints[A_SIZE].add(r.size, f & F_SIZE);
    cols.ints[A_OFFSET].add(r.offset, f & F_OFFSET);
    cols.ints[A_RET].add(r.ret, f & F_RET);
    cols.ints[A_BYTES].add(r.bytes, f & F_BYTES);
    cols.ints[A_ERRNO].add(r.err, f & F_ERRNO);
    cols.ints[A_FLAGS].add(r.flags, f & F_FLAGS);
    cols.ints[A_MODE].add(r.mode, f & F_MODE);
    cols.hhash.add_null();
    cols.args.add_null();
    cols.rows++;
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
