// Perfetto's native protobuf (`-o job.pftrace`): TracePacket/TrackEvent, written by hand from
// the columns of a batch (a generic protobuf library costs microseconds per message, too slow
// for 10M events). The schema used (field numbers from perfetto/protos/perfetto/trace/...):
//
//   Trace         { repeated TracePacket packet = 1; }
//   TracePacket   { uint64 timestamp = 8; uint32 trusted_packet_sequence_id = 10;
//                   TrackEvent track_event = 11; InternedData interned_data = 12;
//                   uint32 sequence_flags = 13; bytes compressed_packets = 50;
//                   TrackDescriptor track_descriptor = 60; }
//   TrackEvent    { Type type = 9; uint64 track_uuid = 11; uint64 name_iid = 10; string name = 23;
//                   repeated uint64 category_iids = 3;
//                   repeated DebugAnnotation debug_annotations = 4;
//                   int64 counter_value = 30; double double_counter_value = 44;
//                   repeated fixed64 flow_ids = 47; repeated fixed64 terminating_flow_ids = 48; }
//   DebugAnnotation { uint64 name_iid = 1; bool bool_value = 2; int64 int_value = 4;
//                   double double_value = 5; string legacy_json_value = 9;
//                   uint64 string_value_iid = 17; }
//   InternedData  { event_categories = 1; event_names = 2; debug_annotation_names = 3;
//                   debug_annotation_string_values = 29 }  (each {iid = 1; name/str = 2})
//   TrackDescriptor { uint64 uuid = 1; string name = 2; ProcessDescriptor process = 3;
//                   ThreadDescriptor thread = 4; uint64 parent_uuid = 5;
//                   CounterDescriptor counter = 8; }
//   ProcessDescriptor { int32 pid = 1; string process_name = 6; }
//   ThreadDescriptor  { int32 pid = 1; int32 tid = 2; string thread_name = 5; }
//
// X events become a SLICE_BEGIN and a SLICE_END packet (TrackEvent has no duration). Every thread
// of an input file is a packet sequence with its own interning, whose first packet makes the
// thread's track the default one (TracePacketDefaults { TrackEventDefaults track_event_defaults
// = 11 { uint64 track_uuid = 11; } } = 59): events need not name it. Packets are batched into
// `compressed_packets` (zlib), which Perfetto inflates.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "part.h"

namespace iotx {

// Track uuids, kept small because every event repeats its track's. The low two bits tell the
// kind: 0 thread (numbered by process and tid, so that the files of an exec'd process share
// the thread), 1 process, 2 counter, 3 the export's notes (and, with the top bit, threads
// whose tids do not fit 22 bits).
inline uint64_t process_uuid(int64_t vpid) { return uint64_t(vpid) << 2 | 1; }
inline uint64_t thread_uuid(uint64_t sort_index, int64_t tid) {
  if (tid >= 0 && tid < (1 << 22))  // Linux tids stay below 2**22 (pid_max): 4 varint bytes
    return (sort_index << 22 | uint64_t(tid)) << 2;
  // virtual tids (asyncio tasks: 2**26 and up) and others: long uuids of their own
  return (1ull << 63) | (sort_index << 32 | (uint64_t(tid) & 0xFFFFFFFFu)) << 2 | 3;
}
inline uint64_t counter_uuid(uint64_t file_index, uint64_t n) {
  return (file_index << 24 | n) << 2 | 2;
}
constexpr uint64_t kNoteTrack = 3;
constexpr size_t kMaxInternedString = 256;  // longer string values are written as JSON text
constexpr size_t kRecentStarts = 4096;      // per thread, slice starts remembered (the 1 ns rule)

struct ProtoParams {
  uint32_t seq = 1;         // the file's first trusted_packet_sequence_id (8 are its own)
  int64_t vpid = 0;         // the pid shown
  int64_t pid = 0;          // the traced pid
  uint64_t sort_index = 0;  // the process's number (thread uuids)
  uint64_t file_index = 0;  // the file's number (counter uuids)
  int level = 0;  // zlib level of compressed_packets; 0: FastDeflate (deflate.h); -1: none
  size_t batch_bytes = 256 << 10;  // packet bytes per compressed_packets
  bool deflate_thread = false;     // compressed (and written) by a thread beside the writing
};

// The slices last written on one thread (start, duration), for the 1 ns rule: a ring of the
// last kRecentStarts. A thread's slices are written in order of their ends, so a slice that
// starts after every earlier one (most I/O calls) needs no look-up, and a parent finds the
// children written before it among the last entries that overlap its start.
class RecentStarts {
 public:
  // A slice starting at the ns of a slice already written there that is not longer (a child,
  // written first) starts 1 ns earlier. Returns the start to write.
  int64_t begin(int64_t ts, int64_t dur);

 private:
  std::vector<int64_t> ts_, dur_;  // the ring, oldest at next_ once full
  size_t next_ = 0;
  int64_t max_start_ = INT64_MIN;
};

class ProtoWriter : public PartWriter {
 public:
  ProtoWriter(int fd, const ProtoParams& p);
  ~ProtoWriter() override;
  void encode(const BatchView& b, const int64_t* rows, size_t n, const int64_t* flow_rows,
              const uint64_t* flow_ids, size_t n_flows) override;
  int hold(const BatchView& b, int64_t row, const uint64_t* flows, size_t n_flows) override;
  void release(int slot, uint64_t flow_in, const uint64_t* outs, size_t n_outs) override;
  void thread(int64_t tid, std::string_view name) override;
  void close() override;

 private:
  struct Interner {
    uint32_t field;
    StrIds ids;
  };
  // The last strings an args object interned and their iids, compared before the hash table:
  // such rows repeat their keys and many values (a merged slice's "merged", "call", "pread",
  // its file). Looking each up again was 7.5% of the 64-file export with its budget; half that
  // with these.
  struct Recent {
    static constexpr int kN = 8;
    std::string s[kN];
    uint64_t iid[kN] = {};  // 0: empty
    int next = 0;
    const uint64_t* find(std::string_view v) const {
      for (int i = 0; i < kN; i++)
        if (iid[i] && s[i].size() == v.size() && !memcmp(s[i].data(), v.data(), v.size()))
          return &iid[i];
      return nullptr;
    }
    void put(std::string_view v, uint64_t id) {
      s[next].assign(v.data(), v.size());
      iid[next] = id;
      next = (next + 1) % kN;
    }
  };
  // The iids of the paths of names_ an args object names (a merged slice's file), by the
  // path's address: names_ keeps a path's bytes in place, so one address is one path, and a
  // hit hashes no text (the 64 files of a budgeted export interleave, past Recent's reach).
  struct ByAddress {
    struct Slot {
      const char* p = nullptr;
      uint64_t iid = 0;  // 0: not yet
    };
    Slot slots[256];
    uint64_t* at(std::string_view s) {
      Slot& e = slots[(reinterpret_cast<uintptr_t>(s.data()) >> 3) & 255];
      if (e.p != s.data()) e = Slot{s.data(), 0};
      return &e.iid;
    }
  };
  // A thread's packet sequence: its own interning, and its track as the default one (so that
  // no event repeats it).
  struct Seq {
    std::string field;    // trusted_packet_sequence_id, as a field
    uint32_t number = 0;  // 1, 2, ... in the writer: a path's owner (FileNames' note)
    Interner names{2, {}}, cats{1, {}}, arg_names{3, {}}, values{29, {}};
    Buf pending[4];  // new interned entries by field: categories, names, arg names, values
    bool has_pending = false;
    uint64_t batch = 0;                           // the batch the caches below are for
    std::vector<uint64_t> name_codes, cat_codes;  // iid per dictionary code (0: not yet)
    std::vector<uint64_t> value_codes[3];         // fname, fname2, hhash: value iid per code
    uint64_t fixed_keys[kIntArgs + 3] = {};       // arg name iids of the column args
    Recent recent_keys, recent_values;            // of args objects
    ByAddress paths;                              // of args objects: restored file names
    int64_t last_ts = 0;                          // the sequence's clock (see put_timestamp)
  };
  struct Thread {
    uint64_t uuid = 0;
    std::string end_tail;  // a SLICE_END packet after its timestamp: the same on a thread
    RecentStarts starts;
    Seq seq;
  };
  struct Held {
    int64_t tid, ts, dur;
    std::string te;
    std::vector<uint64_t> outs;
  };

  void batch(const BatchView& b);
  Thread& thread_of(int64_t tid);  // and makes its sequence the current one
  uint32_t seq_id(size_t k) const;
  // The iid of s in the sequence (a new one goes in its next packet's InternedData). `stable`:
  // s outlives the writer (a path of names_), not copied.
  uint64_t intern(Interner& in, std::string_view s, bool stable = false);
  uint64_t name_iid(const BatchView& b, int64_t r);
  uint64_t cat_iid(const BatchView& b, int64_t r);
  uint64_t arg_name_iid(const Arg& a) {
    if (a.key_id < 0) {
      if (const uint64_t* iid = seq_->recent_keys.find(a.key)) return *iid;
      uint64_t iid = intern(seq_->arg_names, a.key);
      seq_->recent_keys.put(a.key, iid);
      return iid;
    }
    uint64_t& iid = seq_->fixed_keys[a.key_id];
    if (!iid) iid = intern(seq_->arg_names, a.key);
    return iid;
  }
  void event_head(const BatchView& b, int64_t r, Kind kind);
  void annotations(const BatchView& b, int64_t r);
  void write_arg(const Arg& a);
  void merged_annotations(const BatchView& b, int64_t r);
  void json_annotation(uint64_t key, std::string_view text);
  void small_annotation(uint64_t key, uint8_t field, uint64_t v);
  bool fast_event(const BatchView& b, int64_t r, Kind kind, Thread& t);
  void end_packet(Thread& t, int64_t end);
  uint64_t fixed_key(int k);
  void counters(const BatchView& b, int64_t r);
  void emit(int64_t ts);  // a packet with te_ at ts, on the current sequence
  void emit_slice(Thread& t, int64_t ts, int64_t dur);
  void thread_descriptor(const Thread& t, int64_t tid, std::string_view name);
  void flush();   // hands raw_'s packets over to be compressed and written (see Z)
  void finish();  // waits for the packets handed over: written

  ProtoParams p_;
  std::unordered_map<int64_t, Thread> threads_;
  int64_t last_tid_ = 0;
  Thread* last_thread_ = nullptr;
  Seq* seq_ = nullptr;  // the current thread's
  const BatchView* batch_ = nullptr;
  uint64_t batch_no_ = 0;
  std::unordered_map<std::string, uint64_t> counters_;
  std::vector<Held> held_;
  Buf te_, raw_;
  std::string json_;
  struct Z;
  std::unique_ptr<Z> z_;
};

// The head of the trace: one descriptor per process (vpid, label).
std::string process_descriptors(const std::vector<std::pair<int64_t, std::string>>& procs);
// The export's notes as instants on a global track of their own ((text, ts in ns) each).
std::string note_packets(const std::vector<std::pair<std::string, int64_t>>& notes, uint32_t seq);

}  // namespace iotx
