#include "chrome_json.h"

#include <stdio.h>
#include <zlib.h>

#include <stdexcept>

#include "deflate.h"

namespace iotx {

namespace {

constexpr size_t kFlushBytes = 1 << 20;  // text deflated (or written) at a time

char* put_uint(char* o, uint64_t v) {
  char tmp[20];
  int n = 0;
  do tmp[n++] = char('0' + v % 10), v /= 10;
  while (v);
  while (n) *o++ = tmp[--n];
  return o;
}

char* put_int(char* o, int64_t v) {
  if (v < 0) {
    *o++ = '-';
    return put_uint(o, 0 - uint64_t(v));
  }
  return put_uint(o, uint64_t(v));
}

// ns as the µs of the trace format: whole µs, then up to three decimals without trailing zeros.
char* put_us(char* o, int64_t ns) {
  uint64_t u = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  if (ns < 0) *o++ = '-';
  o = put_uint(o, u / 1000);
  unsigned frac = unsigned(u % 1000);
  if (frac) {
    char d[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
    size_t len = 4;
    while (d[len - 1] == '0') len--;
    memcpy(o, d, len);
    o += len;
  }
  return o;
}

char* put(char* o, std::string_view s) {
  memcpy(o, s.data(), s.size());
  return o + s.size();
}

}  // namespace

struct JsonWriter::Z {
  z_stream s{};
  std::string buf;
  FastDeflate fast;
  int level;
  explicit Z(int level) : level(level) {
    if (level > 0 && deflateInit2(&s, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: deflateInit2 failed");
  }
  ~Z() {
    if (level > 0) deflateEnd(&s);
  }
  void run(std::string_view in, int mode, FdOut& out) {
    if (!level) {  // FastDeflate: every flush a piece of its own (sync-flushed)
      if (in.empty()) return;
      std::string_view z = fast.piece(in.data(), in.size());
      out.write(z.data(), z.size());
      return;
    }
    s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    s.avail_in = uInt(in.size());
    buf.resize(1 << 18);
    do {
      s.next_out = reinterpret_cast<Bytef*>(&buf[0]);
      s.avail_out = uInt(buf.size());
      if (deflate(&s, mode) == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
      out.write(buf.data(), buf.size() - s.avail_out);
    } while (s.avail_out == 0);
  }
};

JsonWriter::JsonWriter(int fd, int64_t vpid, int64_t pid, int level)
    : PartWriter(fd, pid, vpid - pid), vpid_(vpid), level_(level) {
  if (level >= 0) z_ = std::make_unique<Z>(level);
  text_.room(kFlushBytes + (64 << 10));
}

JsonWriter::~JsonWriter() = default;

void JsonWriter::batch(const BatchView& b) {
  // (its merged slices come with their args object: the columns are the .pftrace's)
  if (b.merged_calls.v)
    throw std::runtime_error("the JSON writer takes merged slices' args as text");
  kinds(b);
  lister_.batch();
  q_ph_.assign(size_t(b.ph.values()), std::string());
  q_name_.assign(size_t(b.name.values()), std::string());
  q_cat_.assign(size_t(b.cat.values()), std::string());
  q_value_[0].assign(size_t(b.fhash.values()), std::string());
  q_value_[1].assign(size_t(b.fhash2.values()), std::string());
  q_value_[2].assign(size_t(b.hhash.values()), std::string());
}

const std::string& JsonWriter::quoted(std::vector<std::string>& cache, const DictCol& col,
                                      int64_t r) {
  std::string& q = cache[size_t(col.code(r))];
  if (q.empty()) json_string(q, col.dict.at(col.code(r)));
  return q;
}

// The args object: the column args from the columns (ints written here, strings quoted once
// per batch and code), an args object's members through ArgLister.
void JsonWriter::args(const BatchView& b, int64_t r, Buf& out) {
  if (!b.args.has(r)) {
    size_t bound = 16 + size_t(kIntArgs) * 36;
    for (int dict = 0; dict < 3; dict++) {
      const DictCol& col = dict == 0 ? b.fhash : dict == 1 ? b.fhash2 : b.hhash;
      if (!col.has(r)) continue;
      std::string& q = q_value_[dict][size_t(col.code(r))];
      if (q.empty()) {
        bool restored;
        json_string(q, lister_.dict_value(b, dict, col.code(r), &restored));
      }
      bound += q.size() + 16;
    }
    char* o = out.room(bound);
    char* start = o;
    o = put(o, ",\"args\":{");
    char* first = o;
    auto key = [&](int k) {
      if (o != first) *o++ = ',';
      *o++ = '"';
      o = put(o, kColumnKeys[k]);
      *o++ = '"';
      *o++ = ':';
    };
    column_args(
        b, r,
        [&](int k, int64_t v) {
          key(k);
          o = put_int(o, v);
        },
        [&](int k, int dict, int32_t code) {
          key(k);
          o = put(o, q_value_[dict][size_t(code)]);
        });
    if (o == first)
      o = start;  // no args
    else
      *o++ = '}';
    out.advance(o);
    return;
  }
  lister_.list(b, r);
  if (!lister_.size()) return;
  std::string& t = scratch_;
  t.assign(",\"args\":{");
  for (size_t k = 0; k < lister_.size(); k++) {
    const Arg& a = lister_.arg(k);
    if (k) t.push_back(',');
    json_string(t, a.key);
    t.push_back(':');
    if (!a.raw.empty()) {  // the value as the trace wrote it
      t.append(a.raw.data(), a.raw.size());
      continue;
    }
    char tmp[32];
    switch (a.type) {
      case Arg::INT:
        t.append(tmp, size_t(put_int(tmp, a.i) - tmp));
        break;
      case Arg::UINT:
        t.append(tmp, size_t(put_uint(tmp, a.u) - tmp));
        break;
      case Arg::DOUBLE:
        t.append(tmp, size_t(snprintf(tmp, sizeof tmp, "%.17g", a.d)));
        break;
      case Arg::BOOL:
        t.append(a.i ? "true" : "false");
        break;
      case Arg::STR:
        json_string(t, a.s);
        break;
      case Arg::JSON:
        t.append(a.s.data(), a.s.size());
        break;
    }
  }
  t.push_back('}');
  out.bytes(t);
}

void JsonWriter::event(const BatchView& b, int64_t r, Kind kind, Buf& out) {
  const std::string& ph = quoted(q_ph_, b.ph, r);
  static const std::string kNoName = "\"\"";
  const std::string& name = b.name.has(r) ? quoted(q_name_, b.name, r) : kNoName;
  const std::string* cat = b.cat.has(r) ? &quoted(q_cat_, b.cat, r) : nullptr;
  char* o = out.room(160 + ph.size() + name.size() + (cat ? cat->size() : 0));
  o = put(o, "{\"ph\":");
  o = put(o, ph);
  o = put(o, ",\"name\":");
  o = put(o, name);
  if (cat) {
    o = put(o, ",\"cat\":");
    o = put(o, *cat);
  }
  o = put(o, ",\"pid\":");
  o = put_int(o, vpid_);
  o = put(o, ",\"tid\":");
  o = put_int(o, tid_of(b, r) + shift_);
  o = put(o, ",\"ts\":");
  o = put_us(o, b.ts.at(r));
  if (kind == K_SLICE) {
    o = put(o, ",\"dur\":");
    o = put_us(o, b.dur.at(r));
  }
  out.advance(o);
  args(b, r, out);
  out.byte('}');
}

void JsonWriter::flow(char ph, uint64_t id, int64_t tid, int64_t ts) {
  // Flow events (v1) at the slice's start on its thread: Perfetto binds each to the slice
  // open there ("bp":"e" for the arrow's end as well).
  char* o = text_.room(200);
  o = put(o, ph == 'f' ? ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":" : ",\n{\"ph\":\"s\",\"id\":");
  o = put_uint(o, id);
  o = put(o, ",\"pid\":");
  o = put_int(o, vpid_);
  o = put(o, ",\"tid\":");
  o = put_int(o, tid);
  o = put(o, ",\"ts\":");
  o = put_us(o, ts);
  o = put(o, ",\"cat\":\"flow\",\"name\":\"flow\"}");
  text_.advance(o);
}

void JsonWriter::encode(const BatchView& b, const int64_t* rows, size_t n, const int64_t* flow_rows,
                        const uint64_t* flow_ids, size_t n_flows) {
  batch(b);
  size_t f = 0;
  for (size_t k = 0; k < n; k++) {
    int64_t r = rows[k];
    Kind kind = this->kind(b, r);
    if (kind == K_NONE) continue;
    int64_t tid = tid_of(b, r);
    seen(tid);
    while (f < n_flows && flow_rows[f] < r) f++;
    for (; f < n_flows && flow_rows[f] == r; f++) flow('s', flow_ids[f], tid + shift_, b.ts.at(r));
    text_.bytes(",\n", 2);
    event(b, r, kind, text_);
    if (text_.size() >= kFlushBytes) flush(false);
  }
}

int JsonWriter::hold(const BatchView& b, int64_t row, const uint64_t* flows, size_t n_flows) {
  batch(b);
  int64_t tid = tid_of(b, row);
  seen(tid);
  line_.clear();
  event(b, row, K_SLICE, line_);
  held_.push_back(Held{tid + shift_, b.ts.at(row), line_.str(), {flows, flows + n_flows}});
  return int(held_.size() - 1);
}

void JsonWriter::release(int slot, uint64_t flow_in, const uint64_t* outs, size_t n_outs) {
  Held& h = held_.at(size_t(slot));
  if (flow_in) flow('f', flow_in, h.tid, h.ts);
  for (uint64_t id : h.outs) flow('s', id, h.tid, h.ts);
  for (size_t i = 0; i < n_outs; i++) flow('s', outs[i], h.tid, h.ts);
  text_.bytes(",\n", 2);
  text_.bytes(h.line);
  h.line.clear();
  h.line.shrink_to_fit();
  if (text_.size() >= kFlushBytes) flush(false);
}

void JsonWriter::thread(int64_t tid, std::string_view name) {
  std::string t = ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
  char tmp[24];
  t.append(tmp, size_t(put_int(tmp, vpid_) - tmp));
  t.append(",\"tid\":");
  t.append(tmp, size_t(put_int(tmp, tid + shift_) - tmp));
  t.append(",\"args\":{\"name\":");
  json_string(t, name);
  t.append("}}");
  text_.bytes(t);
}

void JsonWriter::flush(bool sync) {
  std::string_view t = text_.view();
  crc_ = uint32_t(crc32(crc_, reinterpret_cast<const Bytef*>(t.data()), uInt(t.size())));
  size_ += t.size();
  if (z_)
    z_->run(t, sync ? Z_SYNC_FLUSH : Z_NO_FLUSH, out_);
  else
    out_.write(t.data(), t.size());
  text_.clear();
}

void JsonWriter::close() { flush(true); }

}  // namespace iotx
