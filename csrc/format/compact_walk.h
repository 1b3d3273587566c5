// The reading half of the compact form: one walk over a block's rows, in file order, that
// both readers use: the JSON renderer (compact.cc: the lines the JSON form would have
// written) and the column decoder (decode.cc: the analyzer's columns, no JSON text). The
// writer's half is CompactBuilder (compact.cc); both apply the rules of compact.h.
//
// A visitor has:
//   void begin(int64_t pid, int64_t res_ns, uint64_t rows);  once, before any row
//   void text(const char* p, size_t n);                a text row: whole JSON lines
//   void span(const SpanLine& l);                      a span row (name, cat, args: in the block)
//   void io(const IoRec& r, const IoTimes& t, int tid);  an I/O row (file hashes in t.fh/fh2)
// compact_walk returns false when the block is damaged; the rows before the damage were
// visited.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compact.h"

namespace iot {

namespace compact_detail {
// A column's bytes; any read past its end (or a varint longer than 10 bytes) clears `*ok`,
// one flag for the whole block, so that a row is checked once, not column by column.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool* ok;
  uint64_t uvar() {
    if (p < end && !(*p & 0x80)) return *p++;  // most values: one byte
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    *ok = false;
    return 0;
  }
  int64_t svar() { return unzz(uvar()); }
  uint8_t byte() {
    if (p >= end) return *ok = false, 0;
    return *p++;
  }
};

// A growable array of a block's files or strings (the walk's; freed with it).
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
}  // namespace compact_detail

template <class Visitor>
bool compact_walk(const char* data, size_t n, Visitor& v) {
  using compact_detail::List;
  using compact_detail::Reader;
  if (!compact_is(data, n) || n < 5 || uint8_t(data[4]) != kCompactVersion) return false;
  bool ok = true;
  Reader h{reinterpret_cast<const uint8_t*>(data) + 5, reinterpret_cast<const uint8_t*>(data) + n,
           &ok};
  const int64_t pid = int64_t(h.uvar()), res = int64_t(h.uvar());
  const uint64_t rows = h.uvar();
  enum { kColumns = kCompactColumns };
  uint64_t len[kColumns];
  for (uint64_t& l : len) l = h.uvar();
  if (!ok || !(res == 1 || res == 10 || res == 100 || res == 1000)) return false;
  Reader col[kColumns];
  const uint8_t* at = h.p;
  for (int i = 0; i < kColumns; i++) {
    if (len[i] > uint64_t(h.end - at)) return false;
    col[i] = Reader{at, at + len[i], &ok};
    at += len[i];
  }
  Reader &kinds = col[0], &tids = col[1], &masks = col[2], &gaps = col[3], &durs = col[4],
         &files = col[5], &hashes = col[6], &fdc = col[7], &sizes = col[8], &offsets = col[9],
         &rets = col[10], &extras = col[11], &text_lens = col[12], &text = col[13], &strs = col[14],
         &str_text = col[15];

  int64_t pos[kFdSlots];
  bool known[kFdSlots] = {};
  FdPositions fds{pos, known};
  struct Text {
    const char* p;
    size_t n;
  };
  List<uint64_t> file_list;
  List<Text> str_list;
  // The next `len` bytes of `c` as text (the walk only points into the block).
  auto take = [&](Reader& c, uint64_t len) -> Text {
    if (!ok || len > uint64_t(c.end - c.p)) return ok = false, Text{"", 0};
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
    tid = wrap_add(tid, tids.svar());
    start = wrap_add(prev_end, gaps.svar());
    dur = durs.svar();
    prev_end = wrap_add(start, dur);
  };
  v.begin(pid, res, rows);
  for (uint64_t row = 0; row < rows && ok; row++) {
    const uint8_t kind = kinds.byte();
    if (!ok) break;
    if (kind == 0) {
      const Text t = take(text, text_lens.uvar());
      if (ok) v.text(t.p, t.n);
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
      if (ok) v.span(l);
      continue;
    }
    if (kind - 1 >= C_COUNT || !kCalls.name[kind - 1]) {
      ok = false;
      break;
    }
    IoRec r;  // its values (no memset of the whole record: a row is a few stores)
    r.h.call = uint16_t(kind - 1);
    r.fd = r.fd2 = r.size = r.offset = r.ret = r.bytes = r.flags = r.mode = 0;
    r.err = 0;
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
    if (f & F_OFFSET) r.offset = wrap_add(offsets.svar(), fds.expect(r));
    if (f & F_RET) r.ret = wrap_add(rets.svar(), (f & F_SIZE) ? r.size : 0);
    if (f & F_BYTES) r.bytes = extras.svar();
    if (f & F_ERRNO) r.err = int32_t(extras.svar());
    if (f & F_FLAGS) r.flags = extras.svar();
    if (f & F_MODE) r.mode = extras.svar();
    fds.update(r);
    if (ok) v.io(r, t, int(tid));
  }
  return ok;
}

}  // namespace iot
