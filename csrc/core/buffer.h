// Per-thread record buffers: chunks of the live file (live.h, region.h). The hot path appends a
// record with plain stores and publishes it with one release store; no lock, no syscall, no
// allocation. Each chunk has one producer (its thread) and one consumer (the writer), which
// reads up to `committed` at any time, so a time-bound flush needs no cooperation from the
// traced thread, and what is committed is in the file whatever happens to the process next.
#pragma once
#include <atomic>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "intern.h"
#include "live.h"

namespace iot {

struct ThreadState {
  // The producer's: its chunk, the chunk's records, the write position and the end.
  live::Chunk* cur = nullptr;
  char* data = nullptr;
  uint32_t pos = 0, cap = 0;
  int32_t tid = 0;
  uint32_t want = 0;  // the size of the next chunk: threads that record more get bigger ones
  live::Chunk* read = nullptr;  // the writer's: the oldest chunk of the thread it still reads
  std::atomic<bool> dead{false};
  uint32_t named_gen = 0;       // writer: the file generation its thread_name was written in
  char name[16] = "";           // taken at its first chunk (the kernel forgets it with the thread)
  uint64_t recorded = 0;        // producer: records appended
  ThreadState* next = nullptr;  // registry
  // In the writer's list of threads with a sealed chunk to read (writer.cc, g_ready): a drain
  // for full chunks visits those, not every thread there is.
  std::atomic<bool> queued{false};
  ThreadState* ready_next = nullptr;
  // Records of calls that a signal handler made while this thread was inside the tracer (see
  // Busy): kept here, appended when the tracer's work it interrupted is done. In blocks of 16
  // slots, each had from the arena the first time a handler needs it (most threads never do;
  // a thread held up making its state or taking a chunk on a loaded machine may meet dozens).
  static constexpr uint32_t kNestedBlock = 16, kNestedBlocks = 64;
  static constexpr uint32_t kNested = kNestedBlock * kNestedBlocks;
  std::atomic<uint32_t> nested_n{0};
  struct Nested {
    std::atomic<bool> ready;
    char rec[120];  // an IoLive
  };
  std::atomic<Nested*> nested[kNestedBlocks] = {};
  Nested* nested_at(uint32_t i) {
    return nested[i / kNestedBlock].load(std::memory_order_acquire) + i % kNestedBlock;
  }
};

// Recording on? (set by init, cleared by finalize; the hot path tests it first)
extern std::atomic<bool> g_recording;
extern int g_pid;

// Re-entrancy guard: the tracer's own work and calls made while recording are not traced.
extern __thread int t_guard __attribute__((tls_model("initial-exec")));
// The thread is inside the tracer's bookkeeping of a call (its buffer, its fd table): a signal
// handler's calls that land here are recorded aside (t_nested) and appended afterwards.
extern __thread int t_busy __attribute__((tls_model("initial-exec")));
extern __thread int t_nested __attribute__((tls_model("initial-exec")));
extern __thread ThreadState* t_state __attribute__((tls_model("initial-exec")));
// The depth of the program's signal handlers running on this thread, and the frame of the
// outermost (interpose/signals.cc): what is not async-signal-safe waits for a record outside.
extern __thread int t_in_handler __attribute__((tls_model("initial-exec")));
extern __thread void* t_handler_frame __attribute__((tls_model("initial-exec")));
bool in_signal_handler();

ThreadState* thread_state_create();
// The current chunk cannot hold `need` bytes: seal it, take a fresh one. false: drop the event.
bool buffer_swap(ThreadState* ts, uint32_t need);
void count_dropped();
// The strings a committed record names, in the live file once each (record.h, StrRec).
void define_string(ThreadState* ts, const Str* s);
extern uint32_t g_live_gen;

struct Guard {
  Guard() { ++t_guard; }
  ~Guard() { --t_guard; }
};

// Appends the records a handler left aside (buffer.h's ThreadState::nested).
void append_nested(ThreadState* ts);
struct Busy {
  __attribute__((always_inline)) Busy() { ++t_busy; }
  __attribute__((always_inline)) ~Busy() {
    ThreadState* ts;
    if (--t_busy == 0 && (ts = t_state) &&
        __builtin_expect(ts->nested_n.load(std::memory_order_relaxed) != 0, 0))
      append_nested(ts);
  }
};
// A record for a call made by a signal handler that interrupted the tracer's bookkeeping: a
// slot of the thread's aside list, or NULL (none: the event is dropped, counted).
char* nested_slot(uint32_t* index);
void nested_done(uint32_t index);

// The program's errno across the tracer's own syscalls outside the traced call itself
// (learning an unknown fd before it, the constructor, fork handlers): a call that succeeds
// leaves errno as the program set it, and errno is 0 when main starts.
struct KeepErrno {
  int saved = errno;
  ~KeepErrno() { errno = saved; }
};

// Reserve `size` bytes in the calling thread's buffer; fill them, then commit(size).
__attribute__((always_inline)) inline char* reserve(uint32_t size, ThreadState** out) {
  ThreadState* ts = t_state;
  if (__builtin_expect(ts == nullptr, 0) && !(ts = thread_state_create())) return nullptr;
  if (__builtin_expect(ts->pos + size > ts->cap, 0) && !buffer_swap(ts, size)) {
    count_dropped();
    return nullptr;
  }
  *out = ts;
  return ts->data + ts->pos;
}
__attribute__((always_inline)) inline void commit(ThreadState* ts, uint32_t size) {
  ts->pos += size;
  ts->recorded++;
  ts->cur->committed.store(ts->pos, std::memory_order_release);
}
inline void append(const void* rec, uint32_t size) {
  ThreadState* ts = nullptr;  // set when reserve() gives room (GCC -g cannot tell)
  if (char* p = reserve(size, &ts)) {
    memcpy(p, rec, size);
    commit(ts, size);
  }
}
// After a record naming `s` is committed: say what `s` is, the first time this live file sees it.
__attribute__((always_inline)) inline void name_string(ThreadState* ts, const Str* s) {
  if (s && __builtin_expect(s->live_gen != g_live_gen, 0)) define_string(ts, s);
}
}  // namespace iot
