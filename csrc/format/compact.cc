#include "compact.h"

#include <new>
#include <stdlib.h>
#include <string.h>

#include "compact_walk.h"

namespace iot {

void CompactBuilder::reset() {
  for (Out& c : col_) {
    if (c.failed) c.release();
    c.n = 0;
  }
  if (tmp_.failed) tmp_.release();
  if (col_[kKinds].p) start_small();  // a column released for want of memory starts again
  rows_ = 0;
  prev_tid_ = 0;
  prev_end_ = 0;
  // Tables that were used only (a short process's first frame then touches none of their
  // pages: a page fault costs it a few µs).
  if (n_files_) memset(file_idx_, 0, (file_mask_ + 1) * sizeof file_idx_[0]);
  file_mask_ = kFileStart - 1;
  if (n_strs_) memset(str_idx_, 0, sizeof str_idx_);
  if (any_known_) memset(known_, 0, sizeof known_);
  n_files_ = n_strs_ = 0;
  any_known_ = false;
}

void CompactBuilder::start_small() {
  for (int i = 0; i < kColumns; i++)
    if (!col_[i].p) col_[i] = Out(small_[i], sizeof small_[i]);
}

bool CompactBuilder::failed() const {
  for (const Out& c : col_)
    if (c.failed) return true;
  return tmp_.failed;
}

void CompactBuilder::release() {
  reset();
  for (Out& c : col_) c.release();
  tmp_.release();
}

size_t CompactBuilder::bytes() const {
  size_t n = 0;
  for (const Out& c : col_) n += c.n;
  return n;
}

void CompactBuilder::text(const char* s, size_t n) {
  if (!n) return;
  if (__builtin_expect(!col_[kKinds].p, 0)) start_small();
  col_[kKinds].ch(0);
  col_[kTextLens].uvar(n);
  col_[kText].put(s, n);
  rows_++;
}

void CompactBuilder::times(int tid, int64_t start, int64_t dur) {
  col_[kTids].uvar(zz(wrap_sub(tid, prev_tid_)));
  prev_tid_ = tid;
  col_[kGaps].uvar(zz(wrap_sub(start, prev_end_)));
  col_[kDurs].uvar(zz(dur));
  prev_end_ = wrap_add(start, dur);
}

uint32_t CompactBuilder::file_slot(uint64_t hash) const {
  uint32_t s = uint32_t(hash) & file_mask_;
  while (file_idx_[s] && file_key_[s] != hash) s = (s + 1) & file_mask_;
  return s;
}

// The lookup starts on kFileStart slots (a frame of a few files touches a page or two of it,
// not a random page each) and moves to all kFileSlots when it is half full, rebuilt from the
// frame's list of hashes.
void CompactBuilder::grow_files() {
  memset(file_idx_, 0, (file_mask_ + 1) * sizeof file_idx_[0]);
  file_mask_ = kFileSlots - 1;
  const Out& hashes = col_[kHashes];
  if (hashes.failed || hashes.n < size_t(n_files_) * 8) return;  // the frame is lost anyway
  for (int i = 0; i < n_files_; i++) {
    uint64_t h;
    memcpy(&h, hashes.p + size_t(i) * 8, 8);
    uint32_t s = file_slot(h);
    if (!file_idx_[s]) file_key_[s] = h, file_idx_[s] = i + 1;
  }
}

void CompactBuilder::file(uint64_t hash) {
  uint32_t s = file_slot(hash);
  if (file_idx_[s]) return col_[kFiles].uvar(uint64_t(file_idx_[s] - 1));
  // New in this frame: its index is the list's length, its 8 bytes follow in kHashes.
  col_[kFiles].uvar(uint64_t(n_files_));
  if (n_files_ < kFileSlots / 2) {
    if (uint32_t(n_files_) >= (file_mask_ + 1) / 2) {
      grow_files();
      s = file_slot(hash);
    }
    file_key_[s] = hash, file_idx_[s] = n_files_ + 1;
  }
  col_[kHashes].put(reinterpret_cast<const char*>(&hash), 8);
  n_files_++;
}

void CompactBuilder::str(const Str* p) {
  uint32_t s = uint32_t(reinterpret_cast<uintptr_t>(p) >> 4) & (kStrSlots - 1);
  while (str_idx_[s] && str_key_[s] != p) s = (s + 1) & (kStrSlots - 1);
  if (str_idx_[s]) return col_[kStrs].uvar(uint64_t(str_idx_[s] - 1));
  // New in this frame: its index is the list's length, its length and bytes follow in kStrText.
  col_[kStrs].uvar(uint64_t(n_strs_));
  col_[kStrText].uvar(p->len);
  col_[kStrText].put(p->str, p->len);
  if (n_strs_ < kStrSlots / 2) str_key_[s] = p, str_idx_[s] = n_strs_ + 1;
  n_strs_++;
}

int CompactBuilder::record(const RecHeader* h, int tid, const EncodeCtx& ctx) {
  if (__builtin_expect(!col_[kKinds].p, 0)) start_small();
  tmp_.n = 0;
  if (h->kind == R_SPAN) {
    const auto* r = reinterpret_cast<const SpanRec*>(h);
    const SpanLine l = span_line(r, tid, ctx);
    col_[kKinds].ch(char(kSpanRow));
    // A span is recorded when it ends, after the calls inside it: its gap is mostly negative.
    times(l.tid, l.start, l.dur);
    str(r->name);
    str(r->cat);
    col_[kTextLens].uvar(l.args_len);
    col_[kText].put(l.args, l.args_len);
    rows_++;
    return 1;
  }
  if (h->kind != R_IO) {  // metadata, instants, counters: kept as their JSON text
    int events = encode_record(tmp_, h, tid, ctx);
    text(tmp_.p, tmp_.n);
    return events;
  }
  IoRec r;
  io_from_live(*reinterpret_cast<const IoLive*>(h), &r);
  int events = 1 + encode_new_files(tmp_, &r, tid, ctx);
  text(tmp_.p, tmp_.n);
  const IoTimes t = io_times(&r, ctx);
  const uint32_t f = r.fields;
  col_[kKinds].ch(char(1 + r.h.call));
  times(tid, t.start, t.dur);
  col_[kMasks].uvar(f);
  if (f & F_FHASH) file(t.fh);
  if (f & F_FHASH2) file(t.fh2);
  if (f & F_FD) col_[kFds].uvar(zz(r.fd));
  if (f & F_FD2) col_[kFds].uvar(zz(r.fd2));
  if (f & F_SIZE) col_[kSizes].uvar(zz(r.size));
  FdPositions fds{pos_, known_};
  if (f & F_OFFSET) col_[kOffsets].uvar(zz(wrap_sub(r.offset, fds.expect(r))));
  if (f & F_RET) col_[kRets].uvar(zz(wrap_sub(r.ret, (f & F_SIZE) ? r.size : 0)));
  if (f & F_BYTES) col_[kExtras].uvar(zz(r.bytes));
  if (f & F_ERRNO) col_[kExtras].uvar(zz(r.err));
  if (f & F_FLAGS) col_[kExtras].uvar(zz(r.flags));
  if (f & F_MODE) col_[kExtras].uvar(zz(r.mode));
  fds.update(r);
  any_known_ |= (f & F_FD) != 0;
  rows_++;
  return events;
}

void CompactBuilder::finish(Out& out, int pid, int res) {
  static_assert(kColumns == kCompactColumns, "writer and renderer columns differ");
  static_assert(1 + C_COUNT < kSpanRow, "a call's kind byte would collide with the span row's");
  out.put(kCompactMagic, 4);
  out.ch(char(kCompactVersion));
  out.uvar(uint64_t(pid));
  out.uvar(uint64_t(res));
  out.uvar(rows_);
  for (const Out& c : col_) out.uvar(c.n);
  for (const Out& c : col_) out.put(c.p, c.n);
  reset();  // the next frame starts from nothing: each decodes on its own
}

// --- rendering ---------------------------------------------------------------------------

bool compact_is(const char* p, size_t n) { return n >= 4 && memcmp(p, kCompactMagic, 4) == 0; }

namespace {
// The walker's rows as the JSON form's lines.
struct JsonRows {
  Out& out;
  IoPrefixCache* cache = nullptr;
  EncodeCtx ctx{};
  ~JsonRows() { free(cache); }
  void begin(int64_t pid, int64_t, uint64_t) {
    cache = static_cast<IoPrefixCache*>(malloc(sizeof(IoPrefixCache)));
    new (cache) IoPrefixCache();
    ctx = EncodeCtx{int(pid), 1, ClockMap(), 1};
  }
  void text(const char* p, size_t n) { out.put(p, n); }
  void span(const SpanLine& l) { encode_span_line(out, l, ctx); }
  void io(const IoRec& r, const IoTimes& t, int tid) {
    encode_io_line(out, *cache, &r, t, tid, ctx);
  }
};
}  // namespace

bool compact_render(const char* data, size_t n, Out& out) {
  JsonRows rows{out};
  return compact_walk(data, n, rows);
}

}  // namespace iot
