#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <new>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "compact.h"
#include "config.h"
#include "message.h"
#include "metadata.h"
#include "sink.h"
#include "sysmem.h"

namespace iot {

std::atomic<bool> g_recording{false};
int g_pid = 0;
__thread int t_guard __attribute__((tls_model("initial-exec"))) = 0;
__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {
constexpr size_t kFrameBytes = 4 << 20;  // text per zstd frame: large frames compress better
constexpr size_t kCompactRows = 65536;   // rows per compact frame (~1 B/event there, 1.5 at 4096)

// Only the writer drains (and fork holds the lock across fork). Threads register under
// reg_mu; the writer walks the registry without it (only the writer unlinks) and unlinks
// ended threads only when it gets the lock at once. The pool has its own lock; the writer
// never waits for it either (see pool_give_back). So the writer never waits on a lock that a
// program thread could hold while that thread waits for the writer from a signal handler.
pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_drain_mu = PTHREAD_MUTEX_INITIALIZER;

std::atomic<ThreadState*> g_threads{nullptr};
ThreadState* g_free_states = nullptr;  // ended threads' states, for reuse (reg_mu)
Buffer* g_pool = nullptr;
Buffer* g_give_later = nullptr;  // writer-only: buffers to return when the pool lock is free
size_t g_in_flight = 0;          // bytes of buffers allocated (pool_mu)
pthread_key_t g_key;
std::atomic<bool> g_writer_running{false};

// Waking the writer and waiting for it, with futex words: atomics and two system calls, so
// any thread can do both, a signal handler included, and every wait has a deadline.
std::atomic<uint32_t> g_wake{0};                 // bumped to wake the writer
std::atomic<uint32_t> g_asked{0};                // drains asked for by other threads
std::atomic<uint32_t> g_served{0};               // the last of them the writer has done
std::atomic<const char*> g_end_reason{nullptr};  // the asked drain also ends the file
std::atomic<bool> g_end_final{false};            // ... and no file is opened after it
std::atomic<int> g_end_tid{0};                   // the thread that ended it

Sink g_sink;
Out g_text;                // the frame being built (JSON form), or the compact frame's bytes
CompactBuilder g_compact;  // the frame being built (compact form)
uint32_t g_gen = 1;        // file generation: FH metadata is rewritten for each file
bool g_file_failed = false;
bool g_exec_closed = false;  // the file was ended for an exec: no new one until it fails
std::atomic<uint64_t> g_written{0}, g_dropped{0}, g_recorded_dead{0};
uint64_t g_file_events = 0;     // event lines written to the current file
uint64_t g_frame_events = 0;    // event lines in the frame being built
bool g_frame_has_loss = false;  // the frame holds an iotrace_lost record
uint64_t g_lost = 0;            // event lines of this file lost to failed writes
uint64_t g_lost_unsaid = 0;     // of them (and drops), not yet told by an iotrace_lost record
uint64_t g_drops_said = 0;      // g_dropped already counted into g_lost_unsaid
int g_lost_errno = 0;           // why they were lost (0: no buffer could be had)

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const struct timespec* rel) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, rel, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  futex(word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}
struct timespec ms_span(int64_t ms) {
  return timespec{time_t(ms / 1000), long(ms % 1000) * 1000000};
}

void wake_writer() {
  int saved = errno;
  g_wake.fetch_add(1, std::memory_order_release);
  futex_wake_all(&g_wake);
  errno = saved;
}

Buffer* new_buffer(uint32_t cap) {
  void* mem = arena_alloc(sizeof(Buffer));
  char* data = static_cast<char*>(sys_map(cap));
  if (!mem || !data) {
    sys_unmap(data, cap);
    return nullptr;  // the Buffer's few bytes stay in the arena
  }
  Buffer* b = new (mem) Buffer();
  b->data = data;
  b->cap = cap;
  return b;
}

void reset_buffer(Buffer* b) {
  b->committed.store(0, std::memory_order_relaxed);
  b->sealed.store(false, std::memory_order_relaxed);
  b->consumed = 0;
  b->next = nullptr;
}

// A free buffer of at least `need` bytes. While more than IOTRACE_MAX_BUFFERED is in flight
// the producer waits for the writer (back-pressure), but never more than ~50 ms per buffer: the
// writer may be unable to free anything (its only candidates are not sealed yet), and the
// traced program must never hang. NULL once recording has stopped, or when no memory is left.
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
    bool room = g_in_flight + cap <= g_config.max_buffered ||
                !g_writer_running.load(std::memory_order_relaxed) || waits >= 250;
    if (room) g_in_flight += cap;
    pthread_mutex_unlock(&g_pool_mu);
    if (room) {
      Buffer* b = new_buffer(cap);
      if (!b) {
        pthread_mutex_lock(&g_pool_mu);
        g_in_flight -= cap;
        pthread_mutex_unlock(&g_pool_mu);
      }
      return b;
    }
    if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
    wake_writer();
    struct timespec ts = {0, 200000};
    nanosleep(&ts, nullptr);
  }
}

// The writer returns consumed buffers. It never waits for the pool lock: a program thread
// that a signal interrupted inside pool_take holds it, and may be waiting for the writer.
void pool_give_back(Buffer* b) {
  if (b) {
    b->pool_next = g_give_later;
    g_give_later = b;
  }
  if (!g_give_later || pthread_mutex_trylock(&g_pool_mu) != 0) return;
  Buffer* last = g_give_later;
  while (last->pool_next) last = last->pool_next;
  last->pool_next = g_pool;
  g_pool = g_give_later;
  g_give_later = nullptr;
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

// Text into the frame being built; emit() then cuts the frame when it is full.
void append_text(const char* s, size_t n) {
  if (g_config.compact)
    g_compact.text(s, n);
  else
    g_text.put(s, n);
}
void emit(const char* s, size_t n);

// An event line the tracer writes itself (metadata), counted like the others.
void emit_line(const Out& o) {
  g_frame_events++;
  emit(o.p, o.n);
}

// `{"ph":"M","name":"iotrace_lost",...}`: events of this process that are not in the file
// (their frame could not be written, or no buffer could be had), and why.
void emit_loss_record() {
  char buf[512];
  Out o(buf, sizeof buf);
  const char* why = g_lost_errno ? strerrordesc_np(g_lost_errno) : "no trace buffer could be had";
  meta_lost(o, g_pid, g_lost_unsaid, why ? why : "write error");
  g_frame_events++;
  append_text(o.p, o.n);  // no cut here: frame_write is on its way
  o.release();
  g_frame_has_loss = true;
}

void begin_file();

// FH lines and thread names are written once per generation (a file, or what follows a lost
// frame of it).
void new_generation() {
  g_gen++;
  for (ThreadState* t = g_threads.load(std::memory_order_acquire); t; t = t->next) t->named = false;
}

// Events lost or dropped and not yet told go into the frame being built, as one record.
void tell_losses() {
  uint64_t dropped = g_dropped.load(std::memory_order_relaxed);
  if (dropped > g_drops_said && g_sink.is_open()) {
    g_lost_unsaid += dropped - g_drops_said;
    g_drops_said = dropped;
    if (!g_lost_errno) {
      say_once(kMsgDropped, "events were dropped (no trace buffer could be had); ",
               "the trace counts them (iotrace_lost)");
    }
  }
  if (g_lost_unsaid && !g_frame_has_loss && g_sink.is_open()) emit_loss_record();
}

// The frame being built: JSON text, or compact rows. A full frame is written at once. A
// frame that cannot be written is counted as lost and told in the next frame that can.
// `last`: the end of the file, which may use the room the sink keeps for it on a full disk.
void frame_write(bool last = false) {
  tell_losses();
  if (g_config.compact) {
    if (!g_compact.rows()) return;
    g_text.n = 0;
    g_compact.finish(g_text, g_pid, g_config.res_ns);
  }
  bool ok = !g_text.n || g_sink.write(g_text.p, g_text.n, last);
  g_text.n = 0;
  uint64_t lines = g_frame_events, told = g_frame_has_loss ? 1 : 0;
  g_frame_events = 0;
  g_frame_has_loss = false;
  if (ok) {
    g_file_events += lines;
    if (told) g_lost_unsaid = 0;
    return;
  }
  g_lost += lines - told;
  g_lost_unsaid += lines - told;
  g_lost_errno = g_sink.error();
  if (g_lost_errno == ESTALE) {
    say_once(kMsgReplaced, g_sink.path(), ": the trace file was replaced by another file or a ",
             "symlink; it is not written to any more");
  } else {
    const char* why = strerrordesc_np(g_lost_errno);
    say_once(kMsgLost, "cannot write ", g_sink.path(), ": ", why ? why : "write error",
             "; events are being lost (the trace counts them: iotrace_lost)");
  }
  // The lost frame may have held the first FH line of a file or a thread's name: the next
  // frames write them again. A file that holds nothing yet starts again, header first.
  new_generation();
  if (g_sink.size() == 0) begin_file();
}

void frame_cut_if_full() {
  if (g_config.compact ? g_compact.rows() >= kCompactRows || g_compact.bytes() >= kFrameBytes
                       : g_text.n >= kFrameBytes)
    frame_write();
}

void emit(const char* s, size_t n) {
  append_text(s, n);
  frame_cut_if_full();
}

int frame_record(const RecHeader* r, int tid, const EncodeCtx& ctx) {
  int events =
      g_config.compact ? g_compact.record(r, tid, ctx) : encode_record(g_text, r, tid, ctx);
  g_frame_events += uint64_t(events);
  frame_cut_if_full();
  return events;
}

bool ensure_file() {
  if (g_sink.is_open()) return true;
  if (g_file_failed || g_exec_closed) return false;
  const char *dir, *name, *host;
  trace_file_parts(&dir, &name, &host);
  if (!g_sink.open(dir, name, host, g_pid, g_config.compression, g_config.level,
                   g_config.compact)) {
    g_file_failed = true;
    const char* why = strerrordesc_np(errno);
    say_once(kMsgNoFile, "cannot create a trace file in ", dir, ": ", why ? why : "error",
             " (this process is not traced)");
    return false;
  }
  begin_file();
  return true;
}

// The start of a file's text, `[` and the process's header lines, into the (empty) frame.
void begin_file() {
  new_generation();
  g_file_events = g_frame_events = 0;
  char buf[4096];
  Out head(buf, sizeof buf);
  EncodeCtx ctx{g_pid, g_gen, ClockMap(), g_config.res_ns};
  head.put("[\n");
  write_process_header(head, ctx);
  uint64_t lines = 0;
  for (size_t i = 0; i < head.n; i++) lines += head.p[i] == '\n';
  g_frame_events += lines - 1;  // the "[" line is not an event
  emit(head.p, head.n);
  head.release();
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
  if (!name[0] || ts->dead.load(std::memory_order_acquire))
    snprintf(name, sizeof name, "%s", ts->name);
  if (!name[0]) return;
  char buf[512];
  Out o(buf, sizeof buf);
  meta_thread_name(o, ctx.pid, ts->tid, name, strlen(name));
  emit_line(o);
  o.release();
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
      if (discard)
        events++;
      else
        events += uint64_t(frame_record(r, ts->tid, ctx));
      at += r->size;
    }
    (discard ? g_dropped : g_written).fetch_add(events, std::memory_order_relaxed);
    b->consumed = end;
    if (!sealed) break;
    Buffer* next = b->next;
    pool_give_back(b);
    b = next;
    ts->read = b;
  }
}

// Ended threads whose buffers are all consumed leave the registry, when its lock is free now.
void unlink_ended_threads() {
  if (pthread_mutex_trylock(&g_reg_mu) != 0) return;
  ThreadState* prev = nullptr;
  for (ThreadState* t = g_threads.load(std::memory_order_relaxed); t;) {
    ThreadState* next = t->next;
    if (t->dead.load(std::memory_order_acquire) && !t->read) {
      if (prev)
        prev->next = next;
      else
        g_threads.store(next, std::memory_order_release);
      t->~ThreadState();
      t->next = g_free_states;
      g_free_states = t;
    } else {
      prev = t;
    }
    t = next;
  }
  pthread_mutex_unlock(&g_reg_mu);
}

void drain_all(bool sealed_only = false) {
  if (!ensure_file()) {
    // No file: consume and count as dropped so memory does not grow.
    for (ThreadState* t = g_threads.load(std::memory_order_acquire); t; t = t->next)
      drain_thread(t, EncodeCtx{g_pid, g_gen, ClockMap(), g_config.res_ns}, false,
                   /*discard=*/true);
    unlink_ended_threads();
    return;
  }
  EncodeCtx ctx{g_pid, g_gen, clock_calibrate(), g_config.res_ns};
  for (ThreadState* t = g_threads.load(std::memory_order_acquire); t; t = t->next) {
    if (ctx.gen != g_gen) ctx.gen = g_gen;  // a lost frame started a new generation
    drain_thread(t, ctx, sealed_only);
  }
  unlink_ended_threads();
  pool_give_back(nullptr);
  // A drain for a full buffer leaves a partial frame open (bigger frames compress better:
  // compact ~1.0 B/event at 65,536 rows against ~1.4 at one buffer's ~9,000); every other
  // drain (the time bound, exit, exec, signals, explicit flushes) writes it, so a killed
  // process still loses at most one flush interval.
  if (!sealed_only) frame_write();
}

// The end marker and `]`, then close (drain lock held, everything drained).
void end_file(const char* reason, int tid) {
  if (!g_sink.is_open()) return;
  frame_write();  // what is pending, as any frame
  // The loss record, if any, and the end marker: one small frame, in the room kept for it.
  tell_losses();
  char buf[512];
  Out o(buf, sizeof buf);
  meta_end(o, g_pid, tid, now_ns(), g_file_events + g_frame_events, reason, g_lost,
           g_dropped.load(std::memory_order_relaxed));
  append_text(o.p, o.n);
  frame_write(/*last=*/true);
  o.release();
  g_sink.close();
}

// After the end of a file: `final`, no file is opened again (exit); an exec's, none until the
// exec fails (else the writer's next periodic drain would start one in the exec's window).
void close_for(const char* reason, bool final) {
  if (final)
    g_file_failed = true;
  else if (strcmp(reason, "exec") == 0)
    g_exec_closed = true;
}

// A drain asked for by another thread: everything, then the end of the file if asked.
void serve_request() {
  if (const char* reason = g_end_reason.exchange(nullptr, std::memory_order_acq_rel)) {
    bool final = g_end_final.load(std::memory_order_acquire);
    drain_all();
    end_file(reason, g_end_tid.load(std::memory_order_relaxed));
    close_for(reason, final);
  } else if (g_recording.load(std::memory_order_relaxed)) {
    drain_all();
  }
}

bool lock_drain_bounded(int64_t ms) {
  for (int64_t i = 0; i < ms; i++) {
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
  // The copies of the program's fds that unshare made are closed at once, but for one of its
  // stderr: the tracer's messages go there, wherever the program points fd 2 later.
  // (close_range is probed first: without it, Linux < 5.9, the writer keeps the shared table.)
  if (syscall(SYS_close_range, ~0U, ~0U, 0U) == 0 && syscall(SYS_unshare, CLONE_FILES) == 0) {
    long err = syscall(SYS_fcntl, 2, F_DUPFD_CLOEXEC, 3);
    if (err > 3) syscall(SYS_dup3, err, 3, O_CLOEXEC), syscall(SYS_close, err);
    syscall(SYS_close_range, 0U, 2U, 0U);
    syscall(SYS_close_range, err >= 0 ? 4U : 3U, ~0U, 0U);
    message_fd_set(err >= 0 ? 3 : kNoMessages);
  }
  Sink::set_writer_thread();
  // The time bound holds even when full buffers wake the writer more often than the flush
  // interval: a drain that comes due takes everything (unsealed buffers, the open frame).
  int64_t last_full = now_ns();
  for (;;) {
    uint32_t seen = g_wake.load(std::memory_order_acquire);
    bool asked =
        g_asked.load(std::memory_order_acquire) != g_served.load(std::memory_order_relaxed);
    bool woken = true;  // by a full buffer or a request (else: the time bound)
    if (!asked) {
      struct timespec rel = ms_span(g_config.flush_ms);
      woken = futex(&g_wake, FUTEX_WAIT_PRIVATE, seen, &rel) == 0 || errno == EAGAIN;
    }
    uint32_t asked_seq = g_asked.load(std::memory_order_acquire);
    asked = asked_seq != g_served.load(std::memory_order_relaxed);
    const int64_t t = now_ns();
    const bool due = t - last_full >= int64_t(g_config.flush_ms) * 1000000;
    if (!woken || due || asked) last_full = t;
    pthread_mutex_lock(&g_drain_mu);
    if (asked)
      serve_request();
    else if (g_recording.load(std::memory_order_relaxed))
      drain_all(/*sealed_only=*/woken && !due);
    pthread_mutex_unlock(&g_drain_mu);
    if (asked) {
      g_served.store(asked_seq, std::memory_order_release);
      futex_wake_all(&g_served);
    }
  }
  return nullptr;
}

// Ask the writer for a drain (and the end of the file) and wait for it, `ms` at most.
// Async-signal-safe. false: not done in time (the process goes on, or dies, without it).
bool ask_writer(const char* end_reason, bool final, int64_t ms) {
  if (end_reason) {
    g_end_tid.store(t_state ? t_state->tid : int(syscall(SYS_gettid)), std::memory_order_relaxed);
    g_end_final.store(final, std::memory_order_release);
    g_end_reason.store(end_reason, std::memory_order_release);
  }
  uint32_t mine = g_asked.fetch_add(1, std::memory_order_acq_rel) + 1;
  wake_writer();
  const int64_t deadline = now_ns() + ms * 1000000;
  for (;;) {
    uint32_t done = g_served.load(std::memory_order_acquire);
    if (int32_t(done - mine) >= 0) return true;
    int64_t left = deadline - now_ns();
    if (left <= 0) return false;
    struct timespec rel = {time_t(left / 1000000000), long(left % 1000000000)};
    futex(&g_served, FUTEX_WAIT_PRIVATE, done, &rel);
  }
}

// No writer thread (it could not be started): the asking thread drains itself, giving up
// rather than waiting long for the lock.
void drain_here(const char* end_reason, bool final, int64_t ms) {
  if (!lock_drain_bounded(ms)) return;
  if (end_reason) {
    drain_all();
    end_file(end_reason, t_state ? t_state->tid : g_pid);
    close_for(end_reason, final);
  } else {
    drain_all();
  }
  pthread_mutex_unlock(&g_drain_mu);
}

void sync_drain(const char* end_reason, bool final, int64_t ms) {
  int saved = errno;
  Guard g;
  if (g_writer_running.load(std::memory_order_acquire))
    ask_writer(end_reason, final, ms);
  else
    drain_here(end_reason, final, ms);
  errno = saved;
}
}  // namespace

ThreadState* thread_state_create() {
  if (!g_recording.load(std::memory_order_relaxed) || t_guard > 1) return nullptr;
  Guard g;
  pthread_mutex_lock(&g_reg_mu);
  void* mem = g_free_states;
  if (mem) g_free_states = g_free_states->next;
  pthread_mutex_unlock(&g_reg_mu);
  if (!mem && !(mem = arena_alloc(sizeof(ThreadState)))) return nullptr;
  auto* ts = new (mem) ThreadState();
  ts->tid = int32_t(syscall(SYS_gettid));
  ts->cur = ts->read = pool_take(0);
  if (!ts->cur) {
    ts->~ThreadState();
    pthread_mutex_lock(&g_reg_mu);
    ts->next = g_free_states;
    g_free_states = ts;
    pthread_mutex_unlock(&g_reg_mu);
    return nullptr;
  }
  pthread_mutex_lock(&g_reg_mu);
  ts->next = g_threads.load(std::memory_order_relaxed);
  g_threads.store(ts, std::memory_order_release);
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
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10);
  g_writer_running.store(pthread_create(&th, &attr, writer_main, nullptr) == 0,
                         std::memory_order_release);
  pthread_attr_destroy(&attr);
}

void writer_exec_failed() {
  pthread_mutex_lock(&g_drain_mu);
  g_exec_closed = false;
  pthread_mutex_unlock(&g_drain_mu);
}

void flush_now(int64_t wait_ms) { sync_drain(nullptr, false, wait_ms); }

void finish_file(const char* reason, bool final, int64_t wait_ms) {
  sync_drain(reason, final, wait_ms);
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
  g_threads.store(nullptr, std::memory_order_relaxed);
  if (ThreadState* ts = t_state) {
    ts->tid = int32_t(syscall(SYS_gettid));
    ts->read = ts->cur;
    ts->pos = 0;
    ts->recorded = 0;
    ts->named = false;
    reset_buffer(ts->cur);
    ts->next = nullptr;
    g_threads.store(ts, std::memory_order_relaxed);
  }
  g_give_later = nullptr;
  g_sink.abandon();
  g_text.n = 0;  // its mapping is this process's own copy now
  g_compact.reset();
  g_file_failed = g_exec_closed = false;
  g_file_events = g_frame_events = 0;
  g_frame_has_loss = false;
  g_lost = g_lost_unsaid = g_drops_said = 0;
  g_lost_errno = 0;
  g_written.store(0);
  g_dropped.store(0);
  g_recorded_dead.store(0);
  g_asked.store(0);
  g_served.store(0);
  g_end_reason.store(nullptr);
  messages_reset();
  pthread_mutex_init(&g_pool_mu, nullptr);
  pthread_mutex_init(&g_reg_mu, nullptr);
  pthread_mutex_init(&g_drain_mu, nullptr);
  g_writer_running.store(false);
}

uint64_t events_written() { return g_written.load(std::memory_order_relaxed); }
uint64_t events_dropped() { return g_dropped.load(std::memory_order_relaxed); }
uint64_t events_recorded() {
  Guard g;
  uint64_t n = g_recorded_dead.load(std::memory_order_relaxed);
  pthread_mutex_lock(&g_reg_mu);
  for (ThreadState* t = g_threads.load(std::memory_order_relaxed); t; t = t->next) n += t->recorded;
  pthread_mutex_unlock(&g_reg_mu);
  return n;
}
const char* trace_path() { return g_sink.path(); }

}  // namespace iot
