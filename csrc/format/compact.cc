#include "compact.h"

#include <new>
#include <stdlib.h>
#include <string.h>

namespace iot {

namespace {
inline uint64_t zz(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
inline int64_t unzz(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }
inline int64_t sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

constexpr int kFdSlots = 1024;

// What the next offset on an fd is expected to be: where the last transfer on it ended, or
// where an lseek put it. Writer and renderer apply the same rule to the same rows.
inline bool is_seek(uint16_t call) { return call == C_lseek || call == C_lseek64; }

struct FdPositions {
  int64_t* pos;
  bool* known;
  int64_t expect(const IoRec& r) const {
    if (!(r.fields & F_FD) || r.fd < 0 || r.fd >= kFdSlots || !known[r.fd]) return 0;
    return pos[r.fd];
  }
  void update(const IoRec& r) {
    if (!(r.fields & F_FD) || r.fd < 0 || r.fd >= kFdSlots || !(r.fields & F_RET)) return;
    if (is_seek(r.h.call)) {
      if (r.ret >= 0) pos[r.fd] = r.ret, known[r.fd] = true;
    } else if ((r.fields & F_OFFSET) && r.ret > 0) {
      pos[r.fd] = add(r.offset, r.ret), known[r.fd] = true;
    }
  }
};

}  // namespace

void CompactBuilder::reset() {
  for (Out& c : col_) c.n = 0;
  rows_ = 0;
  prev_tid_ = 0;
  prev_end_ = 0;
  n_files_ = n_strs_ = 0;
  memset(file_idx_, 0, sizeof file_idx_);
  memset(str_idx_, 0, sizeof str_idx_);
  memset(known_, 0, sizeof known_);
}

size_t CompactBuilder::bytes() const {
  size_t n = 0;
  for (const Out& c : col_) n += c.n;
  return n;
}

void CompactBuilder::text(const char* s, size_t n) {
  if (!n) return;
  col_[kKinds].ch(0);
  col_[kTextLens].uvar(n);
  col_[kText].put(s, n);
  rows_++;
}

void CompactBuilder::times(int tid, int64_t start, int64_t dur) {
  col_[kTids].uvar(zz(sub(tid, prev_tid_)));
  prev_tid_ = tid;
  col_[kGaps].uvar(zz(sub(start, prev_end_)));
  col_[kDurs].uvar(zz(dur));
  prev_end_ = add(start, dur);
}

void CompactBuilder::file(uint64_t hash) {
  uint32_t s = uint32_t(hash) & (kFileSlots - 1);
  while (file_idx_[s] && file_key_[s] != hash) s = (s + 1) & (kFileSlots - 1);
  if (file_idx_[s]) return col_[kFiles].uvar(uint64_t(file_idx_[s] - 1));
  // New in this frame: its index is the list's length, its 8 bytes follow in kHashes.
  col_[kFiles].uvar(uint64_t(n_files_));
  col_[kHashes].put(reinterpret_cast<const char*>(&hash), 8);
  if (n_files_ < kFileSlots / 2) file_key_[s] = hash, file_idx_[s] = n_files_ + 1;
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
  const IoRec& r = *reinterpret_cast<const IoRec*>(h);
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
  if (f & F_OFFSET) col_[kOffsets].uvar(zz(sub(r.offset, fds.expect(r))));
  if (f & F_RET) col_[kRets].uvar(zz(sub(r.ret, (f & F_SIZE) ? r.size : 0)));
  if (f & F_BYTES) col_[kExtras].uvar(zz(r.bytes));
  if (f & F_ERRNO) col_[kExtras].uvar(zz(r.err));
  if (f & F_FLAGS) col_[kExtras].uvar(zz(r.flags));
  if (f & F_MODE) col_[kExtras].uvar(zz(r.mode));
  fds.update(r);
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

namespace {
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint64_t uvar() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  int64_t svar() { return unzz(uvar()); }
  uint8_t byte() {
    if (p >= end) return ok = false, 0;
    return *p++;
  }
};

// A growable array of a block's files or strings (the renderer's; freed with it).
template <class T>
struct List {
  T* p = nullptr;
  size_t n = 0, cap = 0;
  ~List() { free(p); }
  T push(T v) {
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      p = static_cast<T*>(realloc(p, cap * sizeof(T)));
    }
    return p[n++] = v;
  }
};
}  // namespace

bool compact_is(const char* p, size_t n) { return n >= 4 && memcmp(p, kCompactMagic, 4) == 0; }

bool compact_render(const char* data, size_t n, Out& out) {
  if (!compact_is(data, n) || n < 5 || uint8_t(data[4]) != kCompactVersion) return false;
  Reader h{reinterpret_cast<const uint8_t*>(data) + 5, reinterpret_cast<const uint8_t*>(data) + n};
  const int64_t pid = int64_t(h.uvar()), res = int64_t(h.uvar());
  const uint64_t rows = h.uvar();
  enum { kColumns = kCompactColumns };
  uint64_t len[kColumns];
  for (uint64_t& l : len) l = h.uvar();
  if (!h.ok || !(res == 1 || res == 10 || res == 100 || res == 1000)) return false;
  Reader col[kColumns];
  const uint8_t* at = h.p;
  for (int i = 0; i < kColumns; i++) {
    if (len[i] > uint64_t(h.end - at)) return false;
    col[i] = Reader{at, at + len[i]};
    at += len[i];
  }
  Reader &kinds = col[0], &tids = col[1], &masks = col[2], &gaps = col[3], &durs = col[4],
         &files = col[5], &hashes = col[6], &fdc = col[7], &sizes = col[8], &offsets = col[9],
         &rets = col[10], &extras = col[11], &text_lens = col[12], &text = col[13],
         &strs = col[14], &str_text = col[15];

  int64_t pos[kFdSlots];
  bool known[kFdSlots] = {};
  FdPositions fds{pos, known};
  bool ok = true;
  struct Text { const char* p; size_t n; };
  List<uint64_t> file_list;
  List<Text> str_list;
  // The next `len` bytes of `c` as text (the renderer only points into the block).
  auto take = [&](Reader& c, uint64_t len) -> Text {
    if (!c.ok || len > uint64_t(c.end - c.p)) return ok = false, Text{"", 0};
    Text t{reinterpret_cast<const char*>(c.p), size_t(len)};
    c.p += len;
    return t;
  };
  // An index into the block's list; the list's length appends the next item of its column.
  auto file = [&]() -> uint64_t {
    const uint64_t i = files.uvar();
    if (i < file_list.n) return file_list.p[i];
    if (i != file_list.n) return ok = false, 0;
    uint64_t hash = 0;
    const Text t = take(hashes, 8);
    if (ok) memcpy(&hash, t.p, 8);
    return file_list.push(hash);
  };
  auto string = [&]() -> Text {
    const uint64_t i = strs.uvar();
    if (i < str_list.n) return str_list.p[i];
    if (i != str_list.n) return ok = false, Text{"", 0};
    return str_list.push(take(str_text, str_text.uvar()));
  };
  int64_t tid = 0, prev_end = 0;
  auto times = [&](int64_t& start, int64_t& dur) {  // tid, gap and dur of an I/O or span row
    tid = add(tid, tids.svar());
    start = add(prev_end, gaps.svar());
    dur = durs.svar();
    prev_end = add(start, dur);
  };
  auto* cache = static_cast<IoPrefixCache*>(malloc(sizeof(IoPrefixCache)));
  new (cache) IoPrefixCache();
  const EncodeCtx ctx{int(pid), 1, ClockMap()};
  for (uint64_t row = 0; row < rows && ok; row++) {
    const uint8_t kind = kinds.byte();
    if (!kinds.ok) { ok = false; break; }
    if (kind == 0) {
      const Text t = take(text, text_lens.uvar());
      if ((ok = ok && text_lens.ok)) out.put(t.p, t.n);
      continue;
    }
    if (kind == kSpanRow) {
      SpanLine l{};
      l.res = int(res);
      times(l.start, l.dur);
      l.tid = int(tid);
      const Text name = string(), cat = string(), args = take(text, text_lens.uvar());
      l.name = name.p, l.name_len = name.n, l.cat = cat.p, l.cat_len = cat.n;
      l.args = args.p, l.args_len = args.n;
      for (const Reader& c : col) ok = ok && c.ok;
      if (ok) encode_span_line(out, l, ctx);
      continue;
    }
    if (kind - 1 >= C_COUNT || !kCalls.name[kind - 1]) { ok = false; break; }
    IoRec r;
    memset(&r, 0, sizeof r);
    r.h.call = uint16_t(kind - 1);
    IoTimes t{};
    t.res = int(res);
    times(t.start, t.dur);
    const uint32_t f = uint32_t(masks.uvar());
    r.fields = f;
    if (f & F_FHASH) t.fh = file();
    if (f & F_FHASH2) t.fh2 = file();
    if (f & F_FD) r.fd = fdc.svar();
    if (f & F_FD2) r.fd2 = fdc.svar();
    if (f & F_SIZE) r.size = sizes.svar();
    if (f & F_OFFSET) r.offset = add(offsets.svar(), fds.expect(r));
    if (f & F_RET) r.ret = add(rets.svar(), (f & F_SIZE) ? r.size : 0);
    if (f & F_BYTES) r.bytes = extras.svar();
    if (f & F_ERRNO) r.err = int32_t(extras.svar());
    if (f & F_FLAGS) r.flags = extras.svar();
    if (f & F_MODE) r.mode = extras.svar();
    fds.update(r);
    for (const Reader& c : col) ok = ok && c.ok;
    if (ok) encode_io_line(out, *cache, &r, t, int(tid), ctx);
  }
  free(cache);
  for (const Reader& c : col) ok = ok && c.ok;
  return ok;
}

}  // namespace iot
