// The live file: a process's record buffers, in a file it maps shared. What a thread records is
// in the file the moment it is committed, so it survives the process whatever ends it (a
// signal's default action, SIGKILL, the OOM killer) with no code of the tracer's running then.
// The process's own writer turns the records into frames of the trace file beside it as it
// goes and at exit, then deletes the live file; when the process could not, anyone who finds
// the live file finishes the trace from it (recover.h). docs/trace-format.md, "The live file",
// is the contract; the layout below is its one description.
//
// Layout: the header (page 0), the process's header lines (the JSON text of its iotrace_process
// and process_name events), then segments of chunks. A chunk is a run of records (record.h) of
// one thread, in the order the thread committed them; a thread's chunks follow each other by
// `seq`. A record names a string (a path, an event name) by the address it had in the process;
// an R_STR record in some chunk of the file says which string that address held.
#pragma once
#include <atomic>
#include <stdint.h>

namespace iot {
namespace live {

constexpr char kMagic[8] = {'I', 'O', 'T', 'L', 'I', 'V', 'E', '\n'};
constexpr uint32_t kVersion = 3;  // 2: R_IO records may be short; 3: of 56 bytes (record.h: IoLive)
constexpr uint32_t kOldestVersion = 1;        // still read
constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"
constexpr uint32_t kHeaderBytes = 4096;
constexpr int kMaxSegments = 60;
constexpr char kSuffix[] = ".live";  // the live file is the trace file's name + this

enum Flags : uint32_t {
  kTscTicks = 1,  // records' times are TSC ticks (else CLOCK_MONOTONIC ns)
};

enum ChunkState : uint32_t {
  kFree = 0,    // holds no records of the process (never used, or given back)
  kOpen = 1,    // its thread is writing into it
  kSealed = 2,  // its thread moved on to its next chunk; `committed` is final
};

// A part of the file mapped on its own: chunks, one after another.
struct Segment {
  uint64_t offset;  // in the file
  uint64_t size;
};

struct Chunk {
  uint32_t magic;                   // kChunkMagic
  uint32_t cap;                     // bytes of records the chunk holds, after this header
  std::atomic<uint32_t> committed;  // bytes of whole records its thread has written
  std::atomic<uint32_t> state;      // ChunkState
  uint32_t durable;                 // bytes of records already in the trace file's frames
  uint32_t pending;                 // `durable` once the pending frame is in the file
  int32_t tid;                      // the thread (0: the writer's own strings)
  uint32_t size_class;              // the allocator's (log2 of the chunk's bytes)
  uint64_t seq;                     // order of chunk starts in the process
  int64_t tick, ns;                 // the clock when the chunk was taken: ticks, then ns
  char name[16];                    // the thread's name when last known
  Chunk* next;                      // the thread's next chunk (its address in the process)
  uint32_t encoded;                 // the writer's: bytes of records it has read
  uint32_t held;                    // the writer's: flags for its own bookkeeping
  uint64_t spare;                   // 0
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
};
static_assert(sizeof(Chunk) == 96, "the chunk header is part of the format");

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // where the segments may start: this page and the header lines
  int32_t pid;
  uint32_t flags;
  char host[64];
  char trace_name[256];                          // the trace file, in the same folder
  uint32_t compact, compression, level, res_ns;  // the form the trace file is written in
  uint32_t head_offset, head_len;                // the process's header lines, in this file
  int64_t tick0, ns0;                            // a clock pair taken at start
  std::atomic<uint32_t> n_segments;
  uint32_t pad;
  Segment segment[kMaxSegments];
  std::atomic<uint64_t> chunk_seq;
  std::atomic<uint64_t> dropped;  // events no buffer could be had for
  // What the writer has put in the trace file, and what it is putting there: after a crash the
  // file either holds the pending frame (its size is pending_size) or does not.
  uint64_t file_events, file_lost;      // event lines in the file, lines lost to failed writes
  uint64_t pending_from, pending_size;  // the file's size before and after it (0, 0: none)
  uint64_t pending_events, pending_lost;
  // The end, as the process said it (ended 1) before it finished the file itself; closed 1:
  // the trace file has its end marker, nothing here is needed any more.
  std::atomic<uint32_t> ended, closed;
  int32_t end_tid;
  int64_t end_ns;
  char end_reason[32];
  // Of what the file counts as lost, and of the drops, what no iotrace_lost record in it has
  // told yet; the drops it has told (with the pending frame: pending_drops_said); why lines
  // were lost (an errno; 0: none). A reader that finishes the file tells the rest, once.
  // Added to version 3 in place: zero (nothing told) in the live files written before.
  uint64_t file_unsaid, file_drops_said, pending_drops_said;
  int32_t lost_errno, pad2;
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header fits its page");

}  // namespace live
}  // namespace iot
