#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <new>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "compact.h"
#include "config.h"
#include "sink.h"

namespace iot {

std::atomic<bool> g_recording{false};
int g_pid = 0;
__thread int t_guard __attribute__((tls_model("initial-exec"))) = 0;
__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {
constexpr size_t kFrameBytes = 4 << 20;  // text per zstd frame: large frames compress better
constexpr size_t kCompactRows = 65536;   // rows per compact frame (~1 B/event there, 1.5 at 4096)

pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;    // registry of thread states
pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;   // free buffers
pthread_mutex_t g_drain_mu = PTHREAD_MUTEX_INITIALIZER;  // draining, the sink, the text buffer
pthread_mutex_t g_wake_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;

ThreadState* g_threads = nullptr;
Buffer* g_pool = nullptr;
size_t g_in_flight = 0;  // bytes of buffers allocated (pool_mu)
pthread_key_t g_key;
bool g_writer_running = false;
bool g_stop = false;

Sink g_sink;
Out g_text;                    // the frame being built (JSON form), or the compact frame's bytes
CompactBuilder g_compact;      // the frame being built (compact form)
uint32_t g_gen = 1;            // file generation: FH metadata is rewritten for each file
bool g_file_failed = false;
std::atomic<uint64_t> g_written{0}, g_dropped{0}, g_recorded_dead{0};
uint64_t g_file_events = 0;     // event lines in the current file

Buffer* new_buffer(uint32_t cap) {
  Buffer* b = static_cast<Buffer*>(malloc(sizeof(Buffer)));
  new (b) Buffer();
  b->data = static_cast<char*>(malloc(cap));
  b->cap = cap;
  return b;
}

void reset_buffer(Buffer* b) {
  b->committed.store(0, std::memory_order_relaxed);
  b->sealed.store(false, std::memory_order_relaxed);
  b->consumed = 0;
  b->next = nullptr;
}

void wake_writer() {
  pthread_mutex_lock(&g_wake_mu);
  pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_wake_mu);
}

// A free buffer of at least `need` bytes. While more than IOTRACE_MAX_BUFFERED is in flight
// the producer waits for the writer (back-pressure), but never more than ~50 ms per buffer: the
// writer may be unable to free anything (its only candidates are not sealed yet), and the
// traced program must never hang. NULL once recording has stopped.
Buffer* pool_take(uint32_t need) {
  uint32_t cap = uint32_t(g_config.buffer_size);
  if (need > cap) cap = rec_align(need);
  for (int waits = 0;; waits++) {
    pthread_mutex_lock(&g_pool_mu);
    Buffer** pp = &g_pool;
    while (*pp && (*pp)->cap < need) pp = &(*pp)->pool_next;
    if (Buffer* b = *pp) {
      *pp = b->pool_next;
      pthread_mutex_unlock(&g_pool_mu);
      reset_buffer(b);
      return b;
    }
    bool room = g_in_flight + cap <= g_config.max_buffered || !g_writer_running || waits >= 250;
    if (room) g_in_flight += cap;
    pthread_mutex_unlock(&g_pool_mu);
    if (room) return new_buffer(cap);
    if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
    wake_writer();
    struct timespec ts = {0, 200000};
    nanosleep(&ts, nullptr);
  }
}

void pool_give(Buffer* b) {
  pthread_mutex_lock(&g_pool_mu);
  b->pool_next = g_pool;
  g_pool = b;
  pthread_mutex_unlock(&g_pool_mu);
}

void thread_exit(void* p) {
  auto* ts = static_cast<ThreadState*>(p);
  if (!ts) return;
  t_state = nullptr;
  prctl(PR_GET_NAME, ts->name);
  g_recorded_dead.fetch_add(ts->recorded, std::memory_order_relaxed);
  ts->recorded = 0;
  ts->cur->sealed.store(true, std::memory_order_release);  // next stays NULL: the last one
  ts->dead.store(true, std::memory_order_release);
}

// --- draining (g_drain_mu held) -------------------------------------------------------------

// The frame being built: JSON text, or compact rows. A full frame is written at once.
void frame_write() {
  if (g_config.compact) {
    if (!g_compact.rows()) return;
    g_text.n = 0;
    g_compact.finish(g_text, g_pid, g_config.res_ns);
  }
  if (g_text.n) g_sink.write(g_text.p, g_text.n);
  g_text.n = 0;
}

void frame_cut_if_full() {
  if (g_config.compact ? g_compact.rows() >= kCompactRows || g_compact.bytes() >= kFrameBytes
                       : g_text.n >= kFrameBytes)
    frame_write();
}

void emit(const char* s, size_t n) {
  if (g_config.compact) g_compact.text(s, n);
  else g_text.put(s, n);
  frame_cut_if_full();
}

int frame_record(const RecHeader* r, int tid, const EncodeCtx& ctx) {
  int events = g_config.compact ? g_compact.record(r, tid, ctx) : encode_record(g_text, r, tid, ctx);
  frame_cut_if_full();
  return events;
}

bool ensure_file() {
  if (g_sink.is_open()) return true;
  if (g_file_failed) return false;
  const char *dir, *name, *host;
  trace_file_parts(&dir, &name, &host);
  if (!g_sink.open(dir, name, host, g_pid, g_config.compression, g_config.level, g_config.compact)) {
    g_file_failed = true;
    char msg[1200];
    int n = snprintf(msg, sizeof msg, "iotrace: cannot create a trace file in %s: %s\n", dir,
                     strerror(errno));
    syscall(SYS_write, 2, msg, size_t(n));
    return false;
  }
  g_gen++;
  g_file_events = 0;
  for (ThreadState* t = g_threads; t; t = t->next) t->named = false;
  Out head;
  EncodeCtx ctx{g_pid, g_gen, ClockMap()};
  head.put("[\n");
  write_process_header(head, ctx);
  for (size_t i = 0; i < head.n; i++) g_file_events += head.p[i] == '\n';
  g_file_events -= 1;  // the "[" line
  emit(head.p, head.n);
  free(head.p);
  return true;
}

// The kernel's name of a thread (comm); a thread that has ended left its name in ts->name.
void name_thread(ThreadState* ts, const EncodeCtx& ctx) {
  ts->named = true;
  char name[64] = "";
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", ts->tid);
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    long n = syscall(SYS_read, fd, name, sizeof name - 1);
    syscall(SYS_close, fd);
    name[n > 0 ? n : 0] = 0;
    if (n > 0 && name[n - 1] == '\n') name[n - 1] = 0;
  }
  if (!name[0] || ts->dead.load(std::memory_order_acquire)) snprintf(name, sizeof name, "%s", ts->name);
  if (!name[0]) return;
  Out o;
  o.put("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
  o.i64(ctx.pid);
  o.put(",\"tid\":");
  o.i64(ts->tid);
  o.put(",\"args\":{\"name\":");
  o.json_str(name, strlen(name));
  o.put("}},\n");
  emit(o.p, o.n);
  g_file_events++;
  free(o.p);
}

// `sealed_only`: leave a buffer its thread is still writing to alone (no cache lines pulled
// away from the traced thread); the time-bound and final flushes take everything.
// `discard`: no file to write to; the records are consumed and thrown away.
void drain_thread(ThreadState* ts, const EncodeCtx& ctx, bool sealed_only = false,
                  bool discard = false) {
  Buffer* b = ts->read;
  while (b) {
    bool sealed = b->sealed.load(std::memory_order_acquire);
    if (sealed_only && !sealed) break;
    uint32_t end = b->committed.load(std::memory_order_acquire);
    if (b->consumed < end && !ts->named && !discard) name_thread(ts, ctx);
    uint64_t events = 0;
    for (uint32_t at = b->consumed; at < end;) {
      auto* r = reinterpret_cast<const RecHeader*>(b->data + at);
      if (discard) events++;
      else events += uint64_t(frame_record(r, ts->tid, ctx));
      at += r->size;
    }
    g_file_events += events;
    (discard ? g_dropped : g_written).fetch_add(events, std::memory_order_relaxed);
    b->consumed = end;
    if (!sealed) break;
    Buffer* next = b->next;
    pool_give(b);
    b = next;
    ts->read = b;
  }
}

void drain_all(bool sealed_only = false) {
  if (!ensure_file()) {
    // No file: consume and count as dropped so memory does not grow.
    pthread_mutex_lock(&g_reg_mu);
    for (ThreadState* t = g_threads; t; t = t->next)
      drain_thread(t, EncodeCtx{g_pid, g_gen, ClockMap()}, false, /*discard=*/true);
    pthread_mutex_unlock(&g_reg_mu);
    return;
  }
  EncodeCtx ctx{g_pid, g_gen, clock_calibrate()};
  pthread_mutex_lock(&g_reg_mu);
  for (ThreadState** pp = &g_threads; *pp;) {
    ThreadState* t = *pp;
    drain_thread(t, ctx, sealed_only);
    if (t->dead.load(std::memory_order_acquire) && !t->read) {
      *pp = t->next;
      t->~ThreadState();
      free(t);
    } else {
      pp = &t->next;
    }
  }
  pthread_mutex_unlock(&g_reg_mu);
  // A drain for a full buffer leaves a partial frame open (bigger frames compress better:
  // compact ~1.0 B/event at 65,536 rows against ~1.4 at one buffer's ~9,000); every other
  // drain (the time bound, exit, exec, signals, explicit flushes) writes it, so a killed
  // process still loses at most one flush interval.
  if (!sealed_only) frame_write();
}

bool lock_drain(bool may_block) {
  if (may_block) return pthread_mutex_lock(&g_drain_mu) == 0;
  for (int i = 0; i < 200; i++) {  // a signal handler waits at most ~0.2 s
    if (pthread_mutex_trylock(&g_drain_mu) == 0) return true;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

void* writer_main(void*) {
  t_guard = 1;  // nothing this thread does is traced
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  prctl(PR_SET_NAME, "iotrace-writer");
  // A private fd table for the writer: the program's table stops being shared, which keeps
  // the kernel's single-owner fast path for every fd syscall the program makes (no refcount
  // atomics, no f_pos lock), and the trace file never takes one of the program's fd numbers.
  // The copies of the program's fds that unshare made are closed at once, so none is held open.
  // (close_range is probed first: without it, Linux < 5.9, the writer keeps the shared table.)
  if (syscall(SYS_close_range, ~0U, ~0U, 0U) == 0 && syscall(SYS_unshare, CLONE_FILES) == 0)
    syscall(SYS_close_range, 0U, ~0U, 0U);
  Sink::set_writer_thread();
  // The time bound holds even when full buffers wake the writer more often than the flush
  // interval: a drain that comes due takes everything (unsealed buffers, the open frame).
  int64_t last_full = now_ns();
  for (;;) {
    pthread_mutex_lock(&g_wake_mu);
    bool woken = false;
    if (!g_stop) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      int64_t ns = until.tv_nsec + int64_t(g_config.flush_ms) * 1000000;
      until.tv_sec += ns / 1000000000;
      until.tv_nsec = ns % 1000000000;
      woken = pthread_cond_timedwait(&g_wake, &g_wake_mu, &until) == 0;  // a full buffer
    }
    bool stop = g_stop;
    pthread_mutex_unlock(&g_wake_mu);
    if (stop) break;
    const int64_t t = now_ns();
    const bool due = t - last_full >= int64_t(g_config.flush_ms) * 1000000;
    if (!woken || due) last_full = t;
    pthread_mutex_lock(&g_drain_mu);
    if (g_recording.load(std::memory_order_relaxed)) drain_all(/*sealed_only=*/woken && !due);
    pthread_mutex_unlock(&g_drain_mu);
  }
  return nullptr;
}
}  // namespace

ThreadState* thread_state_create() {
  if (!g_recording.load(std::memory_order_relaxed) || t_guard > 1) return nullptr;
  Guard g;
  // malloc + placement new: the library needs no C++ runtime (libstdc++ costs every traced
  // process ~2M instructions of relocations at start-up)
  auto* ts = new (malloc(sizeof(ThreadState))) ThreadState();
  ts->tid = int32_t(syscall(SYS_gettid));
  ts->cur = ts->read = pool_take(0);
  if (!ts->cur) {
    ts->~ThreadState();
    free(ts);
    return nullptr;
  }
  pthread_mutex_lock(&g_reg_mu);
  ts->next = g_threads;
  g_threads = ts;
  pthread_mutex_unlock(&g_reg_mu);
  pthread_setspecific(g_key, ts);
  t_state = ts;
  return ts;
}

Buffer* buffer_swap(ThreadState* ts, uint32_t need) {
  Buffer* nb = pool_take(need);
  if (!nb) return nullptr;
  Buffer* old = ts->cur;
  old->next = nb;
  old->sealed.store(true, std::memory_order_release);
  ts->cur = nb;
  ts->pos = 0;
  wake_writer();
  return nb;
}

void count_dropped() { g_dropped.fetch_add(1, std::memory_order_relaxed); }

void writer_init() {
  static bool done = false;
  if (done) return;
  done = true;
  pthread_key_create(&g_key, thread_exit);
}

void writer_start() {
  g_stop = false;
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10);
  g_writer_running = pthread_create(&th, &attr, writer_main, nullptr) == 0;
  pthread_attr_destroy(&attr);
}

void flush_now(bool may_block) {
  Guard g;
  if (!lock_drain(may_block)) return;
  drain_all();
  pthread_mutex_unlock(&g_drain_mu);
}

void finish_file(const char* reason, bool may_block, bool final) {
  Guard g;
  if (!lock_drain(may_block)) return;
  drain_all();
  if (final) g_file_failed = true;  // ensure_file() opens nothing after the last file
  if (g_sink.is_open()) {
    Out o;
    o.put("{\"ph\":\"M\",\"name\":\"iotrace_end\",\"pid\":");
    o.i64(g_pid);
    o.put(",\"tid\":");
    o.i64(t_state ? t_state->tid : g_pid);
    o.put(",\"args\":{\"events\":");
    o.i64(int64_t(g_file_events));
    o.put(",\"reason\":");
    o.json_str(reason, strlen(reason));
    o.put("}}]\n");
    emit(o.p, o.n);
    frame_write();
    free(o.p);
    g_sink.close();
  }
  pthread_mutex_unlock(&g_drain_mu);
}

void writer_prepare_fork() {
  pthread_mutex_lock(&g_drain_mu);
  pthread_mutex_lock(&g_reg_mu);
  pthread_mutex_lock(&g_pool_mu);
}

void writer_parent_after_fork() {
  pthread_mutex_unlock(&g_pool_mu);
  pthread_mutex_unlock(&g_reg_mu);
  pthread_mutex_unlock(&g_drain_mu);
}

void writer_child_after_fork() {
  // Only this thread exists now. What the parent had buffered is the parent's to write.
  g_threads = nullptr;
  if (ThreadState* ts = t_state) {
    ts->tid = int32_t(syscall(SYS_gettid));
      ts->read = ts->cur;
    ts->pos = 0;
    ts->recorded = 0;
    ts->named = false;
    reset_buffer(ts->cur);
    ts->next = nullptr;
    g_threads = ts;
  }
  g_sink.abandon();
  g_text = Out();
  g_compact.reset();
  g_file_failed = false;
  g_file_events = 0;
  g_written.store(0);
  g_dropped.store(0);
  g_recorded_dead.store(0);
  pthread_mutex_init(&g_pool_mu, nullptr);
  pthread_mutex_init(&g_reg_mu, nullptr);
  pthread_mutex_init(&g_drain_mu, nullptr);
  pthread_mutex_init(&g_wake_mu, nullptr);
  pthread_cond_init(&g_wake, nullptr);
  g_writer_running = false;
}

uint64_t events_written() { return g_written.load(std::memory_order_relaxed); }
uint64_t events_dropped() { return g_dropped.load(std::memory_order_relaxed); }
uint64_t events_recorded() {
  uint64_t n = g_recorded_dead.load(std::memory_order_relaxed);
  pthread_mutex_lock(&g_reg_mu);
  for (ThreadState* t = g_threads; t; t = t->next) n += t->recorded;
  pthread_mutex_unlock(&g_reg_mu);
  return n;
}
const char* trace_path() { return g_sink.path(); }

}  // namespace iot
