// Per-thread event buffers: the hot path appends a record with plain stores and publishes it
// with one release store; no lock, no syscall, no allocation. Each buffer has one producer
// (its thread) and one consumer (the writer), which reads up to `committed` at any time, so a
// time-bound flush needs no cooperation from the traced thread.
#pragma once
#include <atomic>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

namespace iot {

struct Buffer {
  std::atomic<uint32_t> committed{0};  // bytes published by the producer
  std::atomic<bool> sealed{false};     // producer moved on to `next`; no more writes here
  uint32_t consumed = 0;               // writer-only
  uint32_t cap = 0;
  Buffer* next = nullptr;       // set before `sealed`
  Buffer* pool_next = nullptr;  // free pool link
  char* data = nullptr;
};

struct ThreadState {
  Buffer* cur = nullptr;  // producer's buffer
  uint32_t pos = 0;       // producer's write position in cur
  int32_t tid = 0;
  Buffer* read = nullptr;  // writer's buffer (oldest not yet consumed)
  std::atomic<bool> dead{false};
  bool named = false;           // writer: thread_name written to the current file
  char name[16] = "";           // saved at thread exit (the kernel forgets it with the thread)
  uint64_t recorded = 0;        // producer: records appended
  ThreadState* next = nullptr;  // registry
};

// Recording on? (set by init, cleared by finalize; the hot path tests it first)
extern std::atomic<bool> g_recording;
extern int g_pid;

// Re-entrancy guard: the tracer's own work and calls made while recording are not traced.
extern __thread int t_guard __attribute__((tls_model("initial-exec")));
extern __thread ThreadState* t_state __attribute__((tls_model("initial-exec")));

ThreadState* thread_state_create();
// The current buffer cannot hold `need` bytes: seal it, take a fresh one. NULL: drop the event.
Buffer* buffer_swap(ThreadState* ts, uint32_t need);
void count_dropped();

struct Guard {
  Guard() { ++t_guard; }
  ~Guard() { --t_guard; }
};

// The program's errno across the tracer's own syscalls outside the traced call itself
// (learning an unknown fd before it, the constructor, fork handlers): a call that succeeds
// leaves errno as the program set it, and errno is 0 when main starts.
struct KeepErrno {
  int saved = errno;
  ~KeepErrno() { errno = saved; }
};

// Reserve `size` bytes in the calling thread's buffer; fill them, then commit(size).
inline char* reserve(uint32_t size, ThreadState** out) {
  ThreadState* ts = t_state;
  if (__builtin_expect(ts == nullptr, 0) && !(ts = thread_state_create())) return nullptr;
  Buffer* b = ts->cur;
  if (__builtin_expect(ts->pos + size > b->cap, 0) && !(b = buffer_swap(ts, size))) {
    count_dropped();
    return nullptr;
  }
  *out = ts;
  return b->data + ts->pos;
}
inline void commit(ThreadState* ts, uint32_t size) {
  ts->pos += size;
  ts->recorded++;
  ts->cur->committed.store(ts->pos, std::memory_order_release);
}
inline void append(const void* rec, uint32_t size) {
  ThreadState* ts;
  if (char* p = reserve(size, &ts)) {
    memcpy(p, rec, size);
    commit(ts, size);
  }
}

}  // namespace iot
