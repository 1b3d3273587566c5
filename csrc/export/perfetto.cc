#include "perfetto.h"

#include <string.h>
#include <zlib.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "deflate.h"

namespace iotx {

namespace {

enum : uint8_t {
  SLICE_BEGIN = 1,
  SLICE_END = 2,
  INSTANT = 3,
  COUNTER = 4,
  INCREMENTAL_STATE_CLEARED = 1,
  NEEDS_INCREMENTAL_STATE = 2,
};

// Tags (field << 3 | wire type) as bytes.
constexpr uint8_t T_PACKET = 0x0A;                       // Trace.packet = 1
constexpr uint8_t T_TIMESTAMP = 0x40;                    // 8
constexpr uint8_t T_SEQ = 0x50;                          // 10
constexpr uint8_t T_TRACK_EVENT = 0x5A;                  // 11
constexpr uint8_t T_INTERNED = 0x62;                     // 12
constexpr uint8_t T_FLAGS = 0x68;                        // 13
constexpr uint8_t T_TYPE = 0x48;                         // TrackEvent.type = 9
constexpr uint8_t T_TRACK_UUID = 0x58;                   // 11
constexpr uint8_t T_NAME_IID = 0x50;                     // 10
constexpr uint8_t T_CATEGORY_IID = 0x18;                 // 3
constexpr uint8_t T_ANNOTATION = 0x22;                   // 4
constexpr uint8_t T_A_NAME_IID = 0x08;                   // DebugAnnotation.name_iid = 1
constexpr uint8_t T_A_BOOL = 0x10;                       // 2
constexpr uint8_t T_A_INT = 0x20;                        // 4
constexpr uint8_t T_A_DOUBLE = 0x29;                     // 5, fixed64
constexpr uint8_t T_A_JSON = 0x4A;                       // 9
constexpr uint8_t T_A_STRING_IID[2] = {0x88, 0x01};      // 17
constexpr uint8_t T_COUNTER[2] = {0xF0, 0x01};           // 30
constexpr uint8_t T_DOUBLE_COUNTER[2] = {0xE1, 0x02};    // 44, fixed64
constexpr uint8_t T_FLOW[2] = {0xF9, 0x02};              // 47, fixed64
constexpr uint8_t T_TERMINATING_FLOW[2] = {0x81, 0x03};  // 48, fixed64
constexpr uint8_t T_EVENT_NAME[2] = {0xBA, 0x01};        // TrackEvent.name = 23
constexpr uint8_t T_COMPRESSED[2] = {0x92, 0x03};        // TracePacket.compressed_packets = 50
constexpr uint8_t T_DESCRIPTOR[2] = {0xE2, 0x03};        // TracePacket.track_descriptor = 60
constexpr uint8_t T_DEFAULTS[2] = {0xDA, 0x03};          // TracePacket.trace_packet_defaults = 59
constexpr uint8_t T_CLOCK_ID[2] = {0xD0, 0x03};  // timestamp_clock_id = 58 (packet, defaults)
constexpr uint8_t T_CLOCK_SNAPSHOT = 0x32;       // TracePacket.clock_snapshot = 6

// Clocks: the times are on the trace's clock (BOOTTIME, Perfetto's default); a thread's packets
// give theirs on a clock of its sequence that counts from the sequence's previous timestamp.
constexpr uint8_t kTraceClock = 6;         // BUILTIN_CLOCK_BOOTTIME
constexpr uint8_t kIncrementalClock = 64;  // 64..127: a sequence's own clocks

// A packet's timestamp on a thread's sequence: the time since the sequence's previous one (2-3
// bytes instead of 6: a 1M-files export's packets are 13% smaller). A time before that one (a
// slice that starts before the end of one written before it) is written whole, on the trace's
// clock, and leaves the sequence's clock where it was, as Perfetto's own SDK does. At most 14
// bytes.
inline char* put_timestamp(char* o, int64_t ts, int64_t& last) {
  *o++ = char(T_TIMESTAMP);
  if (ts >= last) {
    o = put_varint(o, uint64_t(ts - last));
    last = ts;
    return o;
  }
  o = put_varint(o, uint64_t(ts));
  *o++ = char(T_CLOCK_ID[0]);
  *o++ = char(T_CLOCK_ID[1]);
  *o++ = char(kTraceClock);
  return o;
}

int pending_index(uint32_t field) { return field == 1 ? 0 : field == 2 ? 1 : field == 3 ? 2 : 3; }

uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

// A packet framed as a Trace.packet field.
void framed(Buf& out, std::string_view body) {
  out.byte(T_PACKET);
  out.varint(body.size());
  out.bytes(body);
}

std::string track_descriptor(uint64_t uuid, std::string_view name, bool has_name,
                             std::string_view process, std::string_view thread, uint64_t parent,
                             bool counter) {
  Buf body;
  body.tag(1, 0);
  body.varint(uuid);
  if (has_name) body.ld(2, name);
  if (!process.empty()) body.ld(3, process);
  if (!thread.empty()) body.ld(4, thread);
  if (parent) {
    body.tag(5, 0);
    body.varint(parent);
  }
  if (counter) body.ld(8, "");
  Buf field;
  field.bytes(T_DESCRIPTOR, 2);
  field.varint(body.size());
  field.bytes(body.view());
  Buf out;
  framed(out, field.view());
  return out.str();
}

}  // namespace

// --- the 1 ns rule ------------------------------------------------------------------------------

int64_t RecentStarts::begin(int64_t ts, int64_t dur) {
  int64_t out = ts;
  if (ts <= max_start_) {
    // The shortest slice written at this start (ProtoPart's dict of starts kept the shortest
    // one not moved, and a moved one is not shorter). Going back in write order, a slice
    // that ended before `ts` ended after all older ones: none of those can start at `ts`.
    size_t n = ts_.size(), i = next_;
    int64_t shortest = INT64_MAX;
    for (size_t k = 0; k < n; k++) {
      i = (i == 0 ? n : i) - 1;
      if (ts_[i] == ts)
        shortest = std::min(shortest, dur_[i]);
      else if (ts_[i] + dur_[i] < ts)
        break;
    }
    if (shortest <= dur) out = ts - 1;
  }
  max_start_ = std::max(max_start_, ts);
  if (ts_.size() < kRecentStarts) {
    ts_.push_back(ts);
    dur_.push_back(dur);
  } else {
    ts_[next_] = ts;
    dur_[next_] = dur;
    next_ = (next_ + 1) % kRecentStarts;
  }
  return out;
}

// --- the writer --------------------------------------------------------------------------------

// Compresses and writes the packets: with ProtoParams::deflate_thread, on a thread of its own
// once a file fills a batch (the writing of the next batches overlaps the deflate of this one,
// on the other core; a small file's one batch is compressed on the calling thread, no thread
// started). Up to kDepth batches wait for it: the writer and the reader ahead of it share the
// cores with it, and a single slot made the writer wait whenever the deflate was a batch behind.
struct ProtoWriter::Z {
  static constexpr size_t kDepth = 3;
  z_stream s{};
  std::string buf;
  FastDeflate fast;
  int level;
  FdOut& out;
  // the thread, the batches handed over to it (in order; the first is the one it writes) and
  // the buffers of those written, for the next ones
  std::thread worker;
  std::mutex m;
  std::condition_variable cv;
  std::deque<Buf> jobs;
  std::vector<Buf> spare;
  bool done = false;
  std::exception_ptr error;

  Z(int level, FdOut& out) : level(level), out(out) {
    if (level > 0 && deflateInit(&s, level) != Z_OK)
      throw std::runtime_error("zlib: deflateInit failed");
  }
  ~Z() {
    stop();
    if (level > 0) deflateEnd(&s);
  }
  std::string_view compress(const char* in, size_t n) {
    if (!level) return fast.compress(in, n);
    deflateReset(&s);
    buf.resize(deflateBound(&s, uLong(n)));
    s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
    s.avail_in = uInt(n);
    s.next_out = reinterpret_cast<Bytef*>(&buf[0]);
    s.avail_out = uInt(buf.size());
    if (deflate(&s, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed");
    return std::string_view(buf.data(), buf.size() - s.avail_out);
  }
  // One compressed_packets packet of these packets, written (or them as they are: level < 0).
  void write(const Buf& raw) {
    if (level < 0) {
      out.write(raw.view().data(), raw.size());
      return;
    }
    std::string_view z = compress(raw.view().data(), raw.size());
    Buf head;
    head.byte(T_PACKET);
    head.varint(2 + varint_len(z.size()) + z.size());
    head.bytes(T_COMPRESSED, 2);
    head.varint(z.size());
    out.write(head.view().data(), head.size());
    out.write(z.data(), z.size());
  }
  // Takes raw's packets (raw is left empty, with the buffer of an earlier batch): written on
  // the thread, in order; `async` false: here, after those handed over before.
  void hand_over(Buf& raw, bool async) {
    if (!async && !worker.joinable()) {
      write(raw);
      raw.clear();
      return;
    }
    if (!worker.joinable()) worker = std::thread([this] { run(); });
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return jobs.size() < kDepth || error; });
    if (error) std::rethrow_exception(error);
    Buf next;
    if (!spare.empty()) {
      next = std::move(spare.back());
      spare.pop_back();
    } else {
      next.room(raw.size() + (64 << 10));  // as big as raw's: the two are swapped
    }
    std::swap(raw, next);
    jobs.push_back(std::move(next));
    cv.notify_all();
  }
  // Waits until what was handed over is written; rethrows its error.
  void wait() {
    if (!worker.joinable()) return;
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return jobs.empty(); });
    if (error) std::rethrow_exception(error);
  }
  void stop() {
    if (!worker.joinable()) return;
    {
      std::lock_guard<std::mutex> l(m);
      done = true;
    }
    cv.notify_all();
    worker.join();
  }
  void run() {
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      cv.wait(l, [&] { return !jobs.empty() || done; });
      if (jobs.empty()) return;
      Buf& job = jobs.front();    // (a deque's push_back moves no element)
      bool failed = bool(error);  // (only this thread sets it)
      l.unlock();
      std::exception_ptr e;
      try {
        if (!failed) write(job);
      } catch (...) {
        e = std::current_exception();
      }
      job.clear();
      l.lock();
      if (e) error = e;  // rethrown by the caller's next hand_over or wait
      spare.push_back(std::move(job));
      jobs.pop_front();
      cv.notify_all();
    }
  }
};

ProtoWriter::ProtoWriter(int fd, const ProtoParams& p)
    : PartWriter(fd, p.pid, p.vpid - p.pid), p_(p), z_(std::make_unique<Z>(p.level, out_)) {
  raw_.room(p.batch_bytes + (64 << 10));
}

ProtoWriter::~ProtoWriter() = default;

uint32_t ProtoWriter::seq_id(size_t k) const {
  // The file's first 8 threads: ids of its own, small (every packet repeats its id); more
  // threads: ids apart, numbered by file and thread.
  if (k < 8) return p_.seq + uint32_t(k);
  return 0x80000000u | uint32_t((p_.file_index & 0x7FFF) << 16) | uint32_t(k & 0xFFFF);
}

uint64_t ProtoWriter::intern(Interner& in, std::string_view s, bool stable) {
  uint64_t iid;
  if (stable && &in == &seq_->values) {
    // A path of names_: the first sequence that interns it keeps its iid in the path's record,
    // and finds it there again (no look-up, no slot: a trace of a million files, each read by
    // one thread, interns each path in one sequence); the others look it up in their table.
    uint32_t note[2];
    FileNames::get_note(s, note);
    if (note[0] == seq_->number) return note[1];
    if (note[0]) {
      bool added;
      iid = in.ids.get(s, true, &added);
      if (!added) return iid;
    } else {
      note[0] = seq_->number;
      note[1] = in.ids.take_id();
      FileNames::set_note(s, note);
      iid = note[1];
    }
  } else {
    bool added;
    iid = in.ids.get(s, stable, &added);
    if (!added) return iid;
  }
  // The entry {iid = 1; name = 2} goes in the InternedData of the sequence's next packet: the
  // first that uses it.
  size_t entry = 1 + varint_len(iid) + 1 + varint_len(s.size()) + s.size();
  Buf& out = seq_->pending[pending_index(in.field)];
  char* o = out.room(entry + 16);
  o = put_varint(o, in.field << 3 | 2);
  o = put_varint(o, entry);
  *o++ = 0x08;  // iid = 1, varint
  o = put_varint(o, iid);
  *o++ = 0x12;  // name (str) = 2, bytes
  o = put_varint(o, s.size());
  memcpy(o, s.data(), s.size());
  out.advance(o + s.size());
  seq_->has_pending = true;
  return iid;
}

void ProtoWriter::batch(const BatchView& b) {
  kinds(b);
  lister_.batch();
  batch_ = &b;
  batch_no_++;
}

uint64_t ProtoWriter::name_iid(const BatchView& b, int64_t r) {
  if (!b.name.has(r)) return intern(seq_->names, "");
  uint64_t& iid = seq_->name_codes[size_t(b.name.code(r))];
  if (!iid) iid = intern(seq_->names, b.name.dict.at(b.name.code(r)));
  return iid;
}

uint64_t ProtoWriter::cat_iid(const BatchView& b, int64_t r) {
  if (!b.cat.has(r)) return intern(seq_->cats, "");
  uint64_t& iid = seq_->cat_codes[size_t(b.cat.code(r))];
  if (!iid) iid = intern(seq_->cats, b.cat.dict.at(b.cat.code(r)));
  return iid;
}

ProtoWriter::Thread& ProtoWriter::thread_of(int64_t tid) {
  Thread* t = last_thread_;
  if (!t || tid != last_tid_) {
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      uint32_t id = seq_id(threads_.size());
      it = threads_.emplace(tid, Thread()).first;
      t = &it->second;
      t->seq.number = uint32_t(threads_.size());
      t->uuid = thread_uuid(p_.sort_index, tid);
      Buf seq;
      seq.byte(T_SEQ);
      seq.varint(id);
      t->seq.field = seq.str();
      Buf tail;
      tail.bytes(t->seq.field);
      tail.byte(T_TRACK_EVENT);
      tail.byte(2);
      tail.byte(T_TYPE);
      tail.byte(SLICE_END);
      t->end_tail = tail.str();
      thread_descriptor(*t, tid, {});
      // The sequence's first packet: clears its incremental state, makes the thread's track
      // the default one of its events and the sequence's clock the default one of their
      // timestamps, and defines that clock: 0 at the trace clock's 0, counting up by the
      // packets' timestamps (a snapshot at 0 in every sequence: the trace clock's snapshots
      // must not go back).
      Buf track, defaults, clock, clocks, body;
      track.byte(T_TRACK_UUID);
      track.varint(t->uuid);
      defaults.bytes(T_CLOCK_ID, 2);
      defaults.byte(kIncrementalClock);
      defaults.ld(11, track.view());
      clock.bytes("\x08\x06\x10\x00", 4);  // clock_id = trace clock, timestamp = 0
      clocks.ld(1, clock.view());
      clock.clear();
      clock.bytes("\x08\x40\x10\x00\x18\x01", 6);  // clock_id = 64, timestamp = 0, incremental
      clocks.ld(1, clock.view());
      body.bytes(t->seq.field);
      body.byte(T_FLAGS);
      body.byte(INCREMENTAL_STATE_CLEARED | NEEDS_INCREMENTAL_STATE);
      body.bytes(T_DEFAULTS, 2);
      body.varint(defaults.size());
      body.bytes(defaults.view());
      body.byte(T_CLOCK_SNAPSHOT);
      body.varint(clocks.size());
      body.bytes(clocks.view());
      framed(raw_, body.view());
    } else {
      t = &it->second;  // unordered_map nodes stay put
    }
    last_tid_ = tid;
    last_thread_ = t;
  }
  Seq& s = t->seq;
  if (s.batch != batch_no_ && batch_) {  // the dictionary caches are the batch's
    s.batch = batch_no_;
    s.name_codes.assign(size_t(batch_->name.values()), 0);
    s.cat_codes.assign(size_t(batch_->cat.values()), 0);
    s.value_codes[0].assign(size_t(batch_->fhash.values()), 0);
    s.value_codes[1].assign(size_t(batch_->fhash2.values()), 0);
    s.value_codes[2].assign(size_t(batch_->hhash.values()), 0);
  }
  seq_ = &s;
  return *t;
}

void ProtoWriter::thread_descriptor(const Thread& t, int64_t tid, std::string_view name) {
  Buf th;
  th.tag(1, 0);
  th.varint(uint64_t(p_.vpid));
  th.tag(2, 0);
  th.varint(uint64_t(tid + shift_));
  if (!name.empty()) th.ld(5, name);
  raw_.bytes(track_descriptor(t.uuid, {}, false, {}, th.view(), 0, false));
}

void ProtoWriter::event_head(const BatchView& b, int64_t r, Kind kind) {
  uint64_t name = name_iid(b, r), cat = cat_iid(b, r);
  te_.clear();
  char* o = te_.room(40);
  *o++ = char(T_TYPE);
  *o++ = char(kind == K_SLICE ? SLICE_BEGIN : INSTANT);
  *o++ = char(T_NAME_IID);
  o = put_varint(o, name);
  *o++ = char(T_CATEGORY_IID);
  o = put_varint(o, cat);
  te_.advance(o);
}

// DebugAnnotation {name_iid, int value or string value iid} at o (room for 24 bytes).
inline char* annotation_at(char* o, uint64_t key, uint8_t field, uint64_t v) {
  char* len = o + 1;  // < 128: filled in after
  o[0] = char(T_ANNOTATION);
  o[2] = char(T_A_NAME_IID);
  o = put_varint(o + 3, key);
  *o++ = char(field);
  if (field == T_A_STRING_IID[0]) *o++ = char(T_A_STRING_IID[1]);
  o = put_varint(o, v);
  *len = char(o - len - 1);
  return o;
}

// DebugAnnotation {name_iid, value}: small ones (all but JSON text) written in place.
void ProtoWriter::small_annotation(uint64_t key, uint8_t field, uint64_t v) {
  te_.advance(annotation_at(te_.room(24), key, field, v));
}

uint64_t ProtoWriter::fixed_key(int k) {
  uint64_t& iid = seq_->fixed_keys[k];
  if (!iid) iid = intern(seq_->arg_names, kColumnKeys[k]);
  return iid;
}

void ProtoWriter::annotations(const BatchView& b, int64_t r) {
  if (b.merged_calls.v) return merged_annotations(b, r);
  if (!b.args.has(r)) {
    // The common rows: the column args straight from the columns (ArgLister::list gives the
    // same args, one struct each: several times the work).
    column_args(
        b, r, [&](int k, int64_t v) { small_annotation(fixed_key(k), T_A_INT, uint64_t(v)); },
        [&](int k, int dict, int32_t code) {
          uint64_t& iid = seq_->value_codes[dict][size_t(code)];
          bool restored;
          if (!iid) {
            std::string_view v = lister_.dict_value(b, dict, code, &restored);
            iid = utf8_chars(v) <= kMaxInternedString ? intern(seq_->values, v, restored)
                                                      : UINT64_MAX;
          }
          if (iid != UINT64_MAX) {
            small_annotation(fixed_key(k), T_A_STRING_IID[0], iid);
          } else {
            json_.clear();
            json_string(json_, lister_.dict_value(b, dict, code, &restored));
            json_annotation(fixed_key(k), json_);
          }
        });
    return;
  }
  lister_.list(b, r);
  for (size_t k = 0; k < lister_.size(); k++) write_arg(lister_.arg(k));
}

// One arg of an args object (or of a merged slice) as a DebugAnnotation.
void ProtoWriter::write_arg(const Arg& a) {
  uint64_t key = arg_name_iid(a);
  uint64_t v = 0;
  uint8_t field = T_A_INT;
  switch (a.type) {
    case Arg::INT:
      v = uint64_t(a.i);
      break;
    case Arg::UINT:
      v = a.u;
      break;
    case Arg::BOOL:
      field = T_A_BOOL;
      v = a.i ? 1 : 0;
      break;
    case Arg::DOUBLE: {
      char* o = te_.room(24);
      *o++ = char(T_ANNOTATION);
      *o++ = char(1 + varint_len(key) + 9);
      *o++ = char(T_A_NAME_IID);
      o = put_varint(o, key);
      *o++ = char(T_A_DOUBLE);
      te_.advance(put_fixed64(o, double_bits(a.d)));
      return;
    }
    case Arg::STR: {
      // interned unless long: a dictionary's value once per batch and code
      uint64_t iid;
      uint64_t* cached = a.dict >= 0  ? &seq_->value_codes[a.dict][size_t(a.code)]
                         : a.restored ? seq_->paths.at(a.s)
                                      : nullptr;
      const uint64_t* recent = cached ? nullptr : seq_->recent_values.find(a.s);
      if (cached && *cached) {
        iid = *cached;
      } else if (recent) {
        iid = *recent;
      } else {
        iid = utf8_chars(a.s) <= kMaxInternedString ? intern(seq_->values, a.s, a.restored)
                                                    : UINT64_MAX;
        if (cached)
          *cached = iid;
        else if (a.s.size() <= kMaxInternedString)
          seq_->recent_values.put(a.s, iid);
      }
      if (iid != UINT64_MAX) {
        char* o = te_.room(24);
        *o++ = char(T_ANNOTATION);
        *o++ = char(1 + varint_len(key) + 2 + varint_len(iid));
        *o++ = char(T_A_NAME_IID);
        o = put_varint(o, key);
        *o++ = char(T_A_STRING_IID[0]);
        *o++ = char(T_A_STRING_IID[1]);
        te_.advance(put_varint(o, iid));
        return;
      }
      json_.clear();
      if (!a.raw.empty())
        json_.append(a.raw.data(), a.raw.size());
      else
        json_string(json_, a.s);
      json_annotation(key, json_);
      return;
    }
    case Arg::JSON:
      json_annotation(key, a.s);
      return;
  }
  char* o = te_.room(32);
  *o++ = char(T_ANNOTATION);
  *o++ = char(1 + varint_len(key) + 1 + varint_len(v));
  *o++ = char(T_A_NAME_IID);
  o = put_varint(o, key);
  *o++ = char(field);
  te_.advance(put_varint(o, v));
}

// A merged slice's args (the budget's, BatchView::merged_calls): the Args its args object
// {"merged":N,"call":"pread"[,"bytes":B],"time_us":U[,"fhash":H]} would list, in that order,
// written as that object's are (the same interned ids, the same bytes), without the text.
void ProtoWriter::merged_annotations(const BatchView& b, int64_t r) {
  Arg a;
  a.key = "merged";
  a.i = b.merged_calls.at(r);
  write_arg(a);
  if (b.merged_call.has(r)) {
    a = Arg{};
    a.key = "call";
    a.type = Arg::STR;
    a.s = b.merged_call.dict.at(b.merged_call.code(r));
    write_arg(a);
  }
  if (b.ints[A_BYTES].has(r)) {
    a = Arg{};
    a.key = "bytes";
    a.i = b.ints[A_BYTES].at(r);
    write_arg(a);
  }
  a = Arg{};
  a.key = "time_us";
  a.type = Arg::DOUBLE;
  // ns / 1000, as strtod read it from the text "q.rrr": both the double nearest to it (ns
  // exact in a double: summed times under 2**53 ns, 104 days)
  a.d = double(b.merged_ns.at(r)) / 1000.0;
  write_arg(a);
  if (b.fhash.has(r)) {
    a = Arg{};
    a.key = "fname";
    a.key_id = int8_t(kKeyFname);
    a.type = Arg::STR;
    a.s = lister_.dict_value(b, 0, b.fhash.code(r), &a.restored);
    write_arg(a);
  }
}

void ProtoWriter::json_annotation(uint64_t key, std::string_view text) {
  size_t body = 1 + varint_len(key) + 1 + varint_len(text.size()) + text.size();
  char* o = te_.room(body + 16);
  *o++ = char(T_ANNOTATION);
  o = put_varint(o, body);
  *o++ = char(T_A_NAME_IID);
  o = put_varint(o, key);
  *o++ = char(T_A_JSON);
  o = put_varint(o, text.size());
  memcpy(o, text.data(), text.size());
  te_.advance(o + text.size());
}

void ProtoWriter::counters(const BatchView& b, int64_t r) {
  lister_.list(b, r);
  std::string_view name = b.name.has(r) ? b.name.dict.at(b.name.code(r)) : std::string_view();
  int64_t ts = b.ts.at(r);
  std::string track;
  for (size_t k = 0; k < lister_.size(); k++) {
    const Arg& a = lister_.arg(k);
    if (a.type != Arg::INT && a.type != Arg::UINT && a.type != Arg::DOUBLE) continue;
    // the counter track's name, as Perfetto's JSON importer names it
    track.assign(name);
    track.push_back(' ');
    track.append(a.key);
    auto it = counters_.find(track);
    if (it == counters_.end()) {
      uint64_t uuid = counter_uuid(p_.file_index, counters_.size());
      it = counters_.emplace(track, uuid).first;
      raw_.bytes(track_descriptor(uuid, track, true, {}, {}, process_uuid(p_.vpid), true));
    }
    te_.clear();
    te_.byte(T_TYPE);
    te_.byte(COUNTER);
    te_.byte(T_TRACK_UUID);
    te_.varint(it->second);
    if (a.type == Arg::DOUBLE) {
      te_.bytes(T_DOUBLE_COUNTER, 2);
      te_.fixed64(double_bits(a.d));
    } else {
      te_.bytes(T_COUNTER, 2);
      te_.varint(a.type == Arg::INT ? uint64_t(a.i) : a.u);
    }
    emit(ts);
  }
}

// The common event (a slice or an instant with column args only, no flow): its packet written
// straight into the batch, its lengths filled in after (a byte each, mostly: the few bigger
// ones are moved up). Fields of a message may come in any order: the new interned entries go
// after the event. false: the row needs the general path (a value written as JSON text).
bool ProtoWriter::fast_event(const BatchView& b, int64_t r, Kind kind, Thread& t) {
  Seq& seq = *seq_;
  for (int dict = 0; dict < 3; dict++) {  // the string values' iids, or not this path
    const DictCol& col = dict == 0 ? b.fhash : dict == 1 ? b.fhash2 : b.hhash;
    if (!col.has(r)) continue;
    uint64_t& iid = seq.value_codes[dict][size_t(col.code(r))];
    if (!iid) {
      bool restored;
      std::string_view v = lister_.dict_value(b, dict, col.code(r), &restored);
      iid = utf8_chars(v) <= kMaxInternedString ? intern(seq.values, v, restored) : UINT64_MAX;
    }
    if (iid == UINT64_MAX) return false;
  }
  int64_t ts = b.ts.at(r), dur = b.dur.at(r);
  int64_t begin = kind == K_SLICE ? t.starts.begin(ts, dur) : ts;
  uint64_t name = name_iid(b, r), cat = cat_iid(b, r);
  size_t start = raw_.size();
  char* o = raw_.room(512);  // the head, 12 annotations of at most 25 bytes, the lengths
  o += 2;                    // T_PACKET and a one-byte length, for now
  o = put_timestamp(o, begin, seq.last_ts);
  memcpy(o, seq.field.data(), seq.field.size());
  o += seq.field.size();
  *o++ = char(T_TRACK_EVENT);
  char* len = o++;
  char* te = o;
  *o++ = char(T_TYPE);
  *o++ = char(kind == K_SLICE ? SLICE_BEGIN : INSTANT);
  *o++ = char(T_NAME_IID);
  o = put_varint(o, name);
  *o++ = char(T_CATEGORY_IID);
  o = put_varint(o, cat);
  column_args(
      b, r, [&](int k, int64_t v) { o = annotation_at(o, fixed_key(k), T_A_INT, uint64_t(v)); },
      [&](int k, int dict, int32_t code) {
        o = annotation_at(o, fixed_key(k), T_A_STRING_IID[0], seq.value_codes[dict][size_t(code)]);
      });
  size_t n = size_t(o - te);
  if (n < 128) {
    *len = char(n);
  } else {  // < 2**14: room was for 512
    memmove(te + 1, te, n);
    len[0] = char(n | 0x80);
    len[1] = char(n >> 7);
    o++;
  }
  raw_.advance(o);
  if (seq.has_pending) {  // by field: categories, names, annotation names, values
    size_t interned = 0;
    for (Buf& p : seq.pending) interned += p.size();
    raw_.byte(T_INTERNED);
    raw_.varint(interned);
    for (Buf& p : seq.pending) raw_.bytes(p.view()), p.clear();
    seq.has_pending = false;
  }
  char* pk = raw_.data() + start;  // (the buffer may have moved)
  size_t body = raw_.size() - start - 2;
  pk[0] = char(T_PACKET);
  if (body < 128) {
    pk[1] = char(body);
  } else {
    size_t extra = varint_len(body) - 1;
    raw_.room(extra);
    pk = raw_.data() + start;
    memmove(pk + 2 + extra, pk + 2, body);
    put_varint(pk + 1, body);
    raw_.advance(pk + 2 + extra + body);
  }
  if (kind == K_SLICE) end_packet(t, ts + dur);
  return true;
}

void ProtoWriter::end_packet(Thread& t, int64_t end) {
  size_t tail = t.end_tail.size();  // < 100 bytes: the packet's length is a byte
  char* o = raw_.room(tail + 16);
  o[0] = char(T_PACKET);
  char* e = put_timestamp(o + 2, end, t.seq.last_ts);
  memcpy(e, t.end_tail.data(), tail);
  e += tail;
  o[1] = char(e - o - 2);
  raw_.advance(e);
}

void ProtoWriter::emit(int64_t ts) {
  Seq& seq = *seq_;
  size_t interned = 0;
  if (seq.has_pending) {
    for (Buf& p : seq.pending) interned += p.size();
  }
  size_t te = te_.size();
  char stamp[16];
  size_t stamp_size = size_t(put_timestamp(stamp, ts, seq.last_ts) - stamp);
  size_t body = stamp_size + seq.field.size() + 1 + varint_len(te) + te;
  if (interned) body += 1 + varint_len(interned) + interned;
  char* o = raw_.room(body + 16);
  *o++ = char(T_PACKET);
  o = put_varint(o, body);
  memcpy(o, stamp, stamp_size);
  o += stamp_size;
  memcpy(o, seq.field.data(), seq.field.size());
  o += seq.field.size();
  if (interned) {  // by field: categories, names, annotation names, values
    *o++ = char(T_INTERNED);
    o = put_varint(o, interned);
    for (Buf& p : seq.pending) {
      memcpy(o, p.view().data(), p.size());
      o += p.size();
      p.clear();
    }
    seq.has_pending = false;
  }
  *o++ = char(T_TRACK_EVENT);
  o = put_varint(o, te);
  memcpy(o, te_.view().data(), te);
  raw_.advance(o + te);
}

void ProtoWriter::emit_slice(Thread& t, int64_t ts, int64_t dur) {
  emit(t.starts.begin(ts, dur));
  end_packet(t, ts + dur);
}

void ProtoWriter::encode(const BatchView& b, const int64_t* rows, size_t n,
                         const int64_t* flow_rows, const uint64_t* flow_ids, size_t n_flows) {
  batch(b);
  // The batch's file names: looked up, and their slots in the last thread's interning fetched,
  // ahead of the rows (cache misses on tables of a million files otherwise).
  for (int dict = 0; dict < 2; dict++)
    lister_.resolve(b, dict, [&](std::string_view path) {
      if (seq_) seq_->values.ids.prefetch(str_hash(path));
    });
  size_t f = 0;
  for (size_t k = 0; k < n; k++) {
    int64_t r = rows[k];
    Kind kind = this->kind(b, r);
    if (kind == K_NONE) continue;
    int64_t tid = tid_of(b, r);
    seen(tid);
    if (kind == K_COUNTER) {
      thread_of(tid);  // on the thread's sequence
      counters(b, r);
    } else {
      Thread& t = thread_of(tid);
      while (f < n_flows && flow_rows[f] < r) f++;
      bool flows = f < n_flows && flow_rows[f] == r;
      if (!flows && !b.args.has(r) && !b.merged_calls.v && fast_event(b, r, kind, t)) {
        if (raw_.size() >= p_.batch_bytes) flush();
        continue;
      }
      event_head(b, r, kind);
      annotations(b, r);
      for (; f < n_flows && flow_rows[f] == r; f++) {
        te_.bytes(T_FLOW, 2);
        te_.fixed64(flow_ids[f]);
      }
      if (kind == K_SLICE)
        emit_slice(t, b.ts.at(r), b.dur.at(r));
      else
        emit(b.ts.at(r));
    }
    if (raw_.size() >= p_.batch_bytes) flush();
  }
  batch_ = nullptr;  // the batch's columns go away after the call
}

int ProtoWriter::hold(const BatchView& b, int64_t row, const uint64_t* flows, size_t n_flows) {
  batch(b);
  int64_t tid = tid_of(b, row);
  seen(tid);
  thread_of(tid);
  event_head(b, row, K_SLICE);
  annotations(b, row);
  held_.push_back(Held{tid, b.ts.at(row), b.dur.at(row), te_.str(), {flows, flows + n_flows}});
  batch_ = nullptr;
  return int(held_.size() - 1);
}

void ProtoWriter::release(int slot, uint64_t flow_in, const uint64_t* outs, size_t n_outs) {
  Held& h = held_.at(size_t(slot));
  te_.clear();
  te_.bytes(h.te);
  if (flow_in) {
    te_.bytes(T_TERMINATING_FLOW, 2);
    te_.fixed64(flow_in);
  }
  for (uint64_t id : h.outs) te_.bytes(T_FLOW, 2), te_.fixed64(id);
  for (size_t i = 0; i < n_outs; i++) te_.bytes(T_FLOW, 2), te_.fixed64(outs[i]);
  emit_slice(thread_of(h.tid), h.ts, h.dur);
  h.te.clear();
  h.te.shrink_to_fit();
  if (raw_.size() >= p_.batch_bytes) flush();
}

void ProtoWriter::thread(int64_t tid, std::string_view name) {
  // its descriptor again, now with the name (known once the file is read)
  thread_descriptor(thread_of(tid), tid, name);
}

void ProtoWriter::flush() {
  if (raw_.size()) z_->hand_over(raw_, p_.deflate_thread);
}

void ProtoWriter::finish() {
  if (raw_.size()) z_->hand_over(raw_, false);
  z_->wait();
}

void ProtoWriter::close() {
  finish();
  z_->stop();
}

// --- head and notes --------------------------------------------------------------------------

std::string process_descriptors(const std::vector<std::pair<int64_t, std::string>>& procs) {
  std::string out;
  for (const auto& [vpid, label] : procs) {
    Buf process;
    process.tag(1, 0);
    process.varint(uint64_t(vpid));
    process.ld(6, label);
    out += track_descriptor(process_uuid(vpid), {}, false, process.view(), {}, 0, false);
  }
  return out;
}

std::string note_packets(const std::vector<std::pair<std::string, int64_t>>& notes, uint32_t seq) {
  if (notes.empty()) return {};
  std::string out = track_descriptor(kNoteTrack, "iotrace export", true, {}, {}, 0, false);
  for (const auto& [text, ts] : notes) {
    Buf te;
    te.byte(T_TYPE);
    te.byte(INSTANT);
    te.byte(T_TRACK_UUID);
    te.varint(kNoteTrack);
    te.bytes(T_EVENT_NAME, 2);
    te.varint(text.size());
    te.bytes(text);
    Buf body;
    body.byte(T_TIMESTAMP);
    body.varint(uint64_t(ts));
    body.byte(T_SEQ);
    body.varint(seq);
    body.ld(11, te.view());
    Buf p;
    framed(p, body.view());
    out += p.str();
  }
  return out;
}

}  // namespace iotx
