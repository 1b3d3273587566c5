#include "encoder.h"

#include "json_escape.h"
#include "metadata.h"
#include "sysmem.h"

namespace iot {

namespace {
// "00".."99": integers are written two digits at a time.
struct Digits {
  char d[200];
  constexpr Digits() : d() {
    for (int i = 0; i < 100; i++) {
      d[2 * i] = char('0' + i / 10);
      d[2 * i + 1] = char('0' + i % 10);
    }
  }
};
constexpr Digits kDigits;

struct HexPairs {
  char d[512];
  constexpr HexPairs() : d() {
    const char* hex = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
      d[2 * i] = hex[i >> 4];
      d[2 * i + 1] = hex[i & 15];
    }
  }
};
constexpr HexPairs kHex;

inline int digits(uint64_t v) {
  int n = 1;
  for (;;) {  // four at a time: most numbers here have fewer than 8 digits
    if (v < 10) return n;
    if (v < 100) return n + 1;
    if (v < 1000) return n + 2;
    if (v < 10000) return n + 3;
    v /= 10000;
    n += 4;
  }
}

// v's decimal digits, written backwards ending at `end`.
inline void write_u64(char* end, uint64_t v) {
  while (v >= 100) {
    end -= 2;
    memcpy(end, kDigits.d + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10)
    memcpy(end - 2, kDigits.d + 2 * v, 2);
  else
    end[-1] = char('0' + v);
}
}  // namespace

namespace {
char g_scratch[1 << 16];  // where a failed Out writes: its text is thrown away
}  // namespace

void Out::grow(size_t need) {
  if (!failed) {
    size_t c = cap >= (1 << 16) ? cap : 1 << 16;
    while (c < need) c *= 2;
    char* q = static_cast<char*>(mapped ? sys_remap(p, cap, c) : sys_map(c));
    if (q) {
      if (!mapped && n) memcpy(q, p, n);  // out of the caller's buffer
      p = q;
      cap = c;
      mapped = true;
      return;
    }
    if (mapped) sys_unmap(p, cap);
    mapped = false;
    failed = true;
  }
  p = g_scratch;
  cap = sizeof g_scratch;
  n = 0;
}

void Out::release() {
  if (mapped) sys_unmap(p, cap);
  p = nullptr;
  n = cap = 0;
  mapped = false;
  failed = false;
}

void Out::i64(int64_t v) {
  reserve(21);
  uint64_t u = v < 0 ? 0 - uint64_t(v) : uint64_t(v);
  if (v < 0) p[n++] = '-';
  int k = digits(u);
  write_u64(p + n + k, u);  // in place: no temporary, no copy
  n += size_t(k);
}

void Out::u64hex(uint64_t v) {
  reserve(16);
  for (int i = 7; i >= 0; i--, v >>= 8) memcpy(p + n + 2 * i, kHex.d + 2 * (v & 255), 2);
  n += 16;
}

void Out::usec(int64_t q, int res) {
  if (q < 0) {
    ch('-');
    q = -q;
  }
  if (res >= 1000) return i64(q);
  const int per_us = 1000 / res;  // 1000, 100 or 10 units a µs
  i64(q / per_us);
  int r = int(q % per_us);
  reserve(4);
  p[n++] = '.';
  if (per_us == 1000) p[n++] = char('0' + r / 100);
  if (per_us >= 100) p[n++] = char('0' + r / 10 % 10);
  p[n++] = char('0' + r % 10);
}

void Out::json_str(const char* s, size_t len) {
  reserve(json_quoted_max(len));
  if (n + json_quoted_max(len) > cap) return;  // failed, and longer than the scratch
  n += json_quote(p + n, s, len);
}

int64_t to_units(int64_t ns, int res) {
  if (res == 1) return ns;
  return ns >= 0 ? (ns + res / 2) / res : -((res / 2 - ns) / res);
}

static void put_ts(Out& o, int64_t ns, int res) { o.usec(to_units(ns, res), res); }

// `"ts":` is already written: the start, then `,"dur":` and the duration, both in units.
static void put_ts_dur_units(Out& o, int64_t start, int64_t dur, int res) {
  o.usec(start, res);
  o.put(",\"dur\":");
  o.usec(dur, res);
}

static void head(Out& o, char ph, const char* name, size_t name_len, bool quoted_name,
                 const char* cat, size_t cat_len, const EncodeCtx& ctx, int tid) {
  o.put("{\"ph\":\"");
  o.ch(ph);
  o.put("\",\"name\":");
  if (quoted_name) {
    o.ch('"');
    o.put(name, name_len);
    o.ch('"');
  } else {
    o.json_str(name, name_len);
  }
  o.put(",\"cat\":");
  o.json_str(cat, cat_len);
  o.put(",\"pid\":");
  o.i64(ctx.pid);
  o.put(",\"tid\":");
  o.i64(tid);
}

void encode_fh(Out& o, Str* s, int tid, const EncodeCtx& ctx) {
  s->written_gen = ctx.gen;
  meta_fh(o, ctx.pid, tid, s->str, s->len, s->hash);
}

// The constant start of an I/O event line, `{"ph":"X",...,"tid":T,"ts":`, built once per
// (thread, call) and copied afterwards: most of a line, for one memcpy.
static void io_prefix(Out& o, IoPrefixCache& c, uint16_t call, int tid, const EncodeCtx& ctx) {
  if (c.tid != tid || c.pid != ctx.pid || c.gen != ctx.gen) {
    c.tid = tid;
    c.pid = ctx.pid;
    c.gen = ctx.gen;
    memset(c.len, 0, sizeof c.len);
  }
  if (!c.len[call]) {
    char buf[256];
    Out t(buf, sizeof buf);
    const char* name = kCalls.name[call];
    const char* cat = kCalls.cat[call];
    head(t, 'X', name, strlen(name), true, cat, strlen(cat), ctx, tid);
    t.put(",\"ts\":");
    if (t.n <= sizeof c.text[0]) {
      memcpy(c.text[call], t.p, t.n);
      c.len[call] = uint8_t(t.n);
    }
    o.put(t.p, t.n);
    t.release();
    return;
  }
  o.put(c.text[call], c.len[call]);
}

void encode_io_line(Out& o, IoPrefixCache& cache, const IoRec* r, const IoTimes& t, int tid,
                    const EncodeCtx& ctx) {
  uint32_t f = r->fields;
  o.reserve(256);
  io_prefix(o, cache, r->h.call, tid, ctx);
  put_ts_dur_units(o, t.start, t.dur, t.res);
  o.put(",\"args\":{");
  // Fixed key order (the analyzer relies on it for its fast path): see docs/trace-format.md.
  const char* sep = "";
  auto key = [&](const char* k) {
    if (*sep) o.ch(',');
    o.put(k, strlen(k));  // constant strings: the compiler folds strlen
    sep = ",";
  };
  if (f & F_FHASH) {
    key("\"fhash\":\"");
    o.u64hex(t.fh);
    o.ch('"');
  }
  if (f & F_FHASH2) {
    key("\"fhash2\":\"");
    o.u64hex(t.fh2);
    o.ch('"');
  }
  if (f & F_FD) {
    key("\"fd\":");
    o.i64(r->fd);
  }
  if (f & F_FD2) {
    key("\"fd2\":");
    o.i64(r->fd2);
  }
  if (f & F_SIZE) {
    key("\"size\":");
    o.i64(r->size);
  }
  if (f & F_OFFSET) {
    key("\"offset\":");
    o.i64(r->offset);
  }
  if (f & F_RET) {
    key("\"ret\":");
    o.i64(r->ret);
  }
  if (f & F_BYTES) {
    key("\"bytes\":");
    o.i64(r->bytes);
  }
  if (f & F_ERRNO) {
    key("\"errno\":");
    o.i64(r->err);
  }
  if (f & F_FLAGS) {
    key("\"flags\":");
    o.i64(r->flags);
  }
  if (f & F_MODE) {
    key("\"mode\":");
    o.i64(r->mode);
  }
  o.put("}},\n");
}

// A record's start and duration (ticks) → start and dur in units of IOTRACE_RESOLUTION.
static void unit_times(int64_t start, int64_t dur, const EncodeCtx& ctx, int64_t* s, int64_t* d) {
  const int res = ctx.res;
  const int64_t start_ns = ctx.clk.ns(start);
  *s = to_units(start_ns, res);
  *d = to_units(start_ns + ctx.clk.dur(dur), res) - *s;
}

IoTimes io_times(const IoRec* r, const EncodeCtx& ctx) {
  IoTimes t;
  unit_times(r->start, r->dur, ctx, &t.start, &t.dur);
  t.res = ctx.res;
  t.fh = (r->fields & F_FHASH) ? r->file->hash : 0;
  t.fh2 = (r->fields & F_FHASH2) ? r->file2->hash : 0;
  return t;
}

int encode_new_files(Out& o, const IoRec* r, int tid, const EncodeCtx& ctx) {
  int events = 0;
  uint32_t f = r->fields;
  if ((f & F_FHASH) && r->file->written_gen != ctx.gen) encode_fh(o, r->file, tid, ctx), events++;
  if ((f & F_FHASH2) && r->file2->written_gen != ctx.gen)
    encode_fh(o, r->file2, tid, ctx), events++;
  return events;
}

static int encode_io(Out& o, const IoRec* r, int tid, const EncodeCtx& ctx) {
  int events = 1 + encode_new_files(o, r, tid, ctx);
  encode_io_line(o, *ctx.prefix, r, io_times(r, ctx), tid, ctx);
  return events;
}

void encode_span_line(Out& o, const SpanLine& l, const EncodeCtx& ctx) {
  head(o, 'X', l.name, l.name_len, false, l.cat, l.cat_len, ctx, l.tid);
  o.put(",\"ts\":");
  put_ts_dur_units(o, l.start, l.dur, l.res);
  o.put(",\"args\":{");
  o.put(l.args, l.args_len);
  o.put("}},\n");
}

SpanLine span_line(const SpanRec* r, int tid, const EncodeCtx& ctx) {
  SpanLine l;
  l.name = r->name->str;
  l.name_len = r->name->len;
  l.cat = r->cat->str;
  l.cat_len = r->cat->len;
  l.args = reinterpret_cast<const char*>(r + 1);
  l.args_len = r->args_len;
  l.tid = r->tid ? r->tid : tid;
  unit_times(r->start, r->dur, ctx, &l.start, &l.dur);
  l.res = ctx.res;
  return l;
}

static int encode_span(Out& o, const SpanRec* r, int tid, const EncodeCtx& ctx) {
  encode_span_line(o, span_line(r, tid, ctx), ctx);
  return 1;
}

static int encode_mark(Out& o, const MarkRec* r, int tid, const EncodeCtx& ctx) {
  if (r->tid) tid = r->tid;
  o.put("{\"ph\":\"");
  o.ch(r->ph);
  o.put("\",\"name\":");
  o.json_str(r->name->str, r->name->len);
  if (r->cat) {
    o.put(",\"cat\":");
    o.json_str(r->cat->str, r->cat->len);
  }
  o.put(",\"pid\":");
  o.i64(ctx.pid);
  o.put(",\"tid\":");
  o.i64(tid);
  if (r->ph != 'M') {
    o.put(",\"ts\":");
    put_ts(o, ctx.clk.ns(r->ts), ctx.res);
  }
  if (r->ph == 'i') o.put(",\"s\":\"t\"");
  o.put(",\"args\":{");
  o.put(reinterpret_cast<const char*>(r + 1), r->args_len);
  o.put("}},\n");
  return 1;
}

int encode_record(Out& o, const RecHeader* r, int tid, const EncodeCtx& ctx) {
  switch (r->kind) {
    case R_IO: {
      IoRec io;
      io_from_live(*reinterpret_cast<const IoLive*>(r), &io);
      return encode_io(o, &io, tid, ctx);
    }
    case R_SPAN:
      return encode_span(o, reinterpret_cast<const SpanRec*>(r), tid, ctx);
    case R_MARK:
      return encode_mark(o, reinterpret_cast<const MarkRec*>(r), tid, ctx);
  }
  return 0;
}

}  // namespace iot
