// The shape every wrapper shares: leave early when off or inside the tracer's own work;
// otherwise clock, real call, clock, record, errno restored. `fill` names the file and args and
// says whether the event passes the include/exclude filter.
#pragma once
#include <dlfcn.h>
#include <errno.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "fd_table.h"
#include "intern.h"
#include "lifecycle.h"
#include "record.h"

#define IOT_EXPORT extern "C" __attribute__((visibility("default")))

// Set by the vfork stand-in (interpose/process.cc) in the calling thread just before the real
// vfork. The child then runs on this thread's memory until it execs or exits, and must neither
// record nor touch the tracer's tables (they are the parent's); the parent clears it on its
// next intercepted call. C linkage: the stand-in is a few instructions of assembly.
extern "C" __thread int iot_vforking __attribute__((tls_model("initial-exec")));

namespace iot {

// Where a record that cannot be kept (no buffer) is filled, for the fill's bookkeeping.
extern __thread IoLive t_spare __attribute__((tls_model("initial-exec")));

// The slow half of in_vfork_child: one getpid, only while iot_vforking is set.
bool vfork_child_slow();
__attribute__((always_inline)) inline bool in_vfork_child() {
  return __builtin_expect(iot_vforking != 0, 0) && vfork_child_slow();
}

// The next definition of a libc function (looked up once, on first use).
template <class F>
inline F next_fn(F& slot, const char* name) {
  if (__builtin_expect(slot == nullptr, 0)) slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  return slot;
}
#define REAL_FN(name, ...)                       \
  using name##_fn = __VA_ARGS__;                 \
  static name##_fn real_##name##_slot = nullptr; \
  static inline name##_fn real_##name() { return ::iot::next_fn(real_##name##_slot, #name); }

__attribute__((always_inline)) inline bool posix_on() {
  return g_interposing && g_config.posix && !g_paused &&
         g_recording.load(std::memory_order_relaxed) && !in_vfork_child();
}
__attribute__((always_inline)) inline bool stdio_on() {
  return g_interposing && g_config.stdio && !g_paused &&
         g_recording.load(std::memory_order_relaxed) && !in_vfork_child();
}
__attribute__((always_inline)) inline bool mpi_on() {
  return g_interposing && g_config.mpi && !g_paused &&
         g_recording.load(std::memory_order_relaxed) && !in_vfork_child();
}
__attribute__((always_inline)) inline bool hdf5_on() {
  return g_interposing && g_config.hdf5 && !g_paused &&
         g_recording.load(std::memory_order_relaxed) && !in_vfork_child();
}
__attribute__((always_inline)) inline bool process_on() {
  return g_interposing && g_recording.load(std::memory_order_relaxed) && !in_vfork_child();
}

// Does an event on this file pass the filter? (NULL: a call that names no file)
__attribute__((always_inline)) inline bool passes(Str* file) {
  return file ? file->traced : g_trace_unnamed;
}

// A call made by a signal handler that interrupted this thread inside the tracer (t_busy): its
// record goes to the thread's aside list (its buffer is in the middle of a record), and the
// fill leaves the thread's recycling lists alone (t_nested), which the interrupted code may be
// changing. Appended when the interrupted work ends (Busy).
template <class R, class Call, class Fill>
__attribute__((noinline)) R traced_aside(CallId id, Call&& call, Fill&& fill) {
  int64_t t0 = now_ticks();
  R ret = call();
  int64_t t1 = now_ticks();
  int err = errno;
  {
    Busy busy;
    ++t_nested;
    uint32_t slot;
    IoLive spare;
    char* mem = nested_slot(&slot);
    IoLive& r = mem ? *reinterpret_cast<IoLive*>(mem) : spare;
    r.init(id, t0, t1);
    bool keep = fill(r, ret, err);
    --t_nested;
    if (mem) {
      if (!keep) r.h.kind = 0;  // filtered out: the slot is skipped
      nested_done(slot);
    }
  }
  errno = err;
  return ret;
}

// The thread's first record kept (filled in t_spare): its state and first chunk made, the
// record copied in.
__attribute__((noinline)) inline void commit_first(const IoLive& r) {
  ThreadState* ts = nullptr;  // set when reserve() gives room (GCC -g cannot tell)
  char* p = reserve(sizeof(IoLive), &ts);
  if (!p) return;
  const uint32_t n = r.packed_size();
  memcpy(p, &r, n);
  reinterpret_cast<IoLive*>(p)->h.size = n;
  commit(ts, n);
  name_string(ts, (r.fields & F_FHASH) ? r.file : nullptr);
  name_string(ts, (r.fields & F_FHASH2) ? r.file2 : nullptr);
}

template <class R, class Call, class Fill>
__attribute__((always_inline)) inline R traced(bool on, CallId id, Call&& call, Fill&& fill) {
  if (!on || t_guard) return call();
  if (__builtin_expect(t_busy != 0, 0)) return traced_aside<R>(id, call, fill);
  int64_t t0 = now_ticks();
  R ret = call();  // not busy: a signal handler's calls in it are recorded (blocking reads...)
  int64_t t1 = now_ticks();
  int err = errno;
  {
    Busy busy;  // the tracer's own work: a handler that lands here records aside
    // Filled in place in the thread's buffer (committed only if it passes the filter); the
    // fill runs even when the event is dropped, for its fd bookkeeping, into a record of the
    // thread's that is thrown away (not on the program's stack: it may be a handler's small one).
    // A thread gets its state and its first chunk with its first record kept (commit_first):
    // one whose calls are all filtered out (libraries, /proc, outside IOTRACE_INCLUDE) costs none.
    ThreadState* ts = t_state;
    IoLive* rec = nullptr;
    if (__builtin_expect(ts != nullptr, 1))
      rec = static_cast<IoLive*>(static_cast<void*>(reserve(sizeof(IoLive), &ts)));
    IoLive& r = rec ? *rec : t_spare;
    r.init(id, t0, t1);
    if (fill(r, ret, err)) {
      if (__builtin_expect(rec != nullptr, 1)) {
        Str* f1 = (r.fields & F_FHASH) ? r.file : nullptr;
        Str* f2 = (r.fields & F_FHASH2) ? r.file2 : nullptr;
        r.h.size = r.packed_size();
        commit(ts, r.h.size);
        name_string(ts, f1);
        name_string(ts, f2);
      } else if (!ts) {
        commit_first(r);
      }
    }
  }
  errno = err;
  return ret;
}

// Common fills.
template <class R>
inline void set_result(IoLive& r, R ret, int err) {
  r.set_ret(int64_t(ret));
  if (int64_t(ret) < 0) r.set_errno(err);
}

}  // namespace iot
