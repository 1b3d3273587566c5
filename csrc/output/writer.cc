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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "converter.h"
#include "message.h"
#include "metadata.h"
#include "region.h"
#include "sink.h"
#include "sysmem.h"
#include "tracer_stack.h"

namespace iot {

std::atomic<bool> g_recording{false};
int g_pid = 0;
uint32_t g_live_gen = 0;
__thread int t_guard __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_busy __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_nested __attribute__((tls_model("initial-exec"))) = 0;
__thread ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread int t_in_handler __attribute__((tls_model("initial-exec"))) = 0;
__thread void* t_handler_frame __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {
// The state being made for this thread (thread_state_create), before it is t_state.
__thread ThreadState* t_creating __attribute__((tls_model("initial-exec"))) = nullptr;

// A thread's chunks grow from one page (most threads record little: thousands of threads
// fit, and each touches one page of the live file) to IOTRACE_BUFFER_SIZE as it records more.
// (1 KiB first chunks, four threads to a page, work as well since populating the live file
// keeps to whole pages; measured, they help threads that make a few calls and not those that
// make dozens, so a page it stays.) The second chunk is a page too, and only then they double:
// a pool thread that makes a few dozen calls touches two pages, not three (each new page of the
// live file costs ~2 us on ext4, most of what a short thread's tracing costs it).
constexpr uint32_t kFirstChunk = 4 << 10;

// Only the writer drains (and fork holds the lock across fork). Threads register under
// reg_mu; the writer walks the registry without it (only the writer unlinks) and unlinks
// ended threads only when it gets the lock at once. It gives chunks back to the region only
// when the region's lock is free at once (see give_back). So the writer never waits on a lock
// that a program thread could hold while that thread waits for the writer from a signal handler.
pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_drain_mu = PTHREAD_MUTEX_INITIALIZER;

std::atomic<ThreadState*> g_threads{nullptr};
ThreadState* g_free_states = nullptr;  // ended threads' states, for reuse (reg_mu)
// Threads that sealed a chunk since the writer last looked: pushed by their thread (one
// compare-and-swap per chunk), taken all at once by the writer. A drain for full chunks then
// costs what those threads recorded, not a visit to each of a thousand threads of a pool.
std::atomic<ThreadState*> g_ready{nullptr};
// The chunks in use when the writer last drained: a full chunk wakes it again only once that
// many more bytes are in use, not once per chunk (1,024 threads sealing a page each would
// otherwise wake it a thousand times, and each wake costs a context switch of a busy core).
std::atomic<uint64_t> g_use_at_drain{0};
uint64_t g_frames_done = 0, g_frames_given = 0;  // frames written; as of the last give_back
// The writer thread runs only while it is needed: from when a process's chunks in use pass
// writer_threshold() (it gives them back as it writes them) until it has been idle for a while.
// Most processes never start one: they record less, and finish their trace on their own thread when
// they end (on the tracer's stack). So a traced program is no more a multi-threaded program than it
// is untraced, which the kernel (unshare(CLONE_NEWUSER), setns), glibc (set*id in every thread),
// Python (fork's warning) and RLIMIT_NPROC tell apart. Calls that change what a thread is
// (credentials, capabilities, namespaces, seccomp, fork) stop it first and keep it from starting
// until they return (WriterHold).
enum WriterState : int { kStopped, kRunning, kExiting };
std::atomic<int> g_wstate{kStopped};
std::atomic<bool> g_wstop{false};  // asked to end
std::atomic<int> g_wtid{0};        // its tid while it runs
std::atomic<int> g_hold{0};        // calls in progress during which no writer may start
pthread_t g_wthread;
bool g_wjoin = false;                                   // g_wthread is to be joined (g_life_mu)
pthread_mutex_t g_life_mu = PTHREAD_MUTEX_INITIALIZER;  // starts and stops, one at a time

// Waking the writer and waiting for it, with futex words: atomics and two system calls, so
// any thread can do both, a signal handler included, and every wait has a deadline.
std::atomic<uint32_t> g_wake{0};                 // bumped to wake the writer
std::atomic<uint32_t> g_asked{0};                // drains asked for by other threads
std::atomic<uint32_t> g_served{0};               // the last of them the writer has done
std::atomic<const char*> g_end_reason{nullptr};  // the asked drain also ends the file
std::atomic<bool> g_end_final{false};            // ... and no file is opened after it
std::atomic<int> g_end_tid{0};                   // the thread that ended it

Converter g_conv;  // the trace file and the frame being built
TraceFileId g_file;
char g_head[1 << 17];  // the process's header lines (64 KiB of them at most are its cmdline)
size_t g_head_len = 0;
bool g_exec_closed = false;  // the file was ended for an exec: nothing more until it fails
std::atomic<uint64_t> g_written{0}, g_dropped{0}, g_recorded_dead{0};

// Chunks the writer holds: read into the frame being built and not yet in the file
// (kInFrame), or done with by their thread and read whole (kOutOfChain). One is given back to
// the region once it is both out of its chain and in the file.
enum Held : uint32_t { kInFrame = 1, kOutOfChain = 2, kStrings = 4 };
live::Chunk** g_held = nullptr;
size_t g_n_held = 0, g_held_cap = 0;
live::Chunk* g_strings = nullptr;  // the writer's chunk of R_STR records kept past their chunk
bool g_ending = false;             // the last drain and the end marker are being written
bool g_unreachable = false;        // after a chroot, the trace folder is out of reach
bool g_end_failed = false;         // ... and some of it could not be

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

void writer_maybe_start();

// Chunks in use past which a writer thread converts them as the program runs (on another
// core, where there is one), rather than all at the end: 1 MiB (about 9,000 events), or 1/64
// of the cap.
uint64_t writer_threshold() {
  uint64_t t = region_max() / 64;
  return t > (1 << 20) ? t : (1 << 20);
}

// A chunk for a thread's next `need` bytes. At the cap, the producer waits for the writer
// (back-pressure) as long as the writer gets on. It may be unable to free anything (its only
// candidates are not sealed yet), and the traced program must never hang: once it has written
// nothing for kStuckWaits waits the chunk is refused (events dropped, counted), and so is every
// chunk asked for at once until it writes again (g_stuck_at), so such a spell costs 1 s, not
// 1 s per chunk.
constexpr int kStuckWaits = 5000;  // waits of 200 us: a writer that wrote nothing for 1 s is stuck
std::atomic<uint64_t> g_stuck_at{UINT64_MAX};  // g_written when a wait last gave up

live::Chunk* take_chunk(ThreadState* ts, uint32_t need) {
  uint32_t want = ts->want ? ts->want : kFirstChunk;  // the chunk's bytes, its header included
  uint64_t seen = g_written.load(std::memory_order_relaxed);
  for (int waits = 0, stuck = 0;; waits++) {
    if (live::Chunk* c = region_take(need, want, ts->tid)) {
      uint32_t max = uint32_t(g_config.buffer_size);
      // The thread's name, for the trace and for a reader of the live file: at its first chunk
      // (a thread that ends says nothing: thread_gone).
      if (!ts->want) {
        prctl(PR_GET_NAME, c->name);
        memcpy(ts->name, c->name, sizeof ts->name);
      }
      ts->want = !ts->want ? want : want < max ? want * 2 : max;
      if (region_in_use() > writer_threshold()) writer_maybe_start();
      return c;
    }
    if (waits == 0) writer_maybe_start();
    // Memory in flight is at its cap: wait for the writer as long as it gets on (on a loaded
    // machine it can be off the CPU for tens of ms, and the 50 ms this waited at most lost
    // events), and drop (counted) only once it has written nothing for kStuckWaits waits.
    uint64_t w = g_written.load(std::memory_order_relaxed);
    if (w != seen) {
      seen = w;
      stuck = 0;
    }
    if (w == g_stuck_at.load(std::memory_order_relaxed)) return nullptr;  // still stuck
    if (++stuck > kStuckWaits) {
      g_stuck_at.store(w, std::memory_order_relaxed);
      return nullptr;
    }
    if (!g_recording.load(std::memory_order_relaxed) ||
        g_wstate.load(std::memory_order_relaxed) != kRunning || region_in_use() == 0)
      return nullptr;
    wake_writer();
    struct timespec t = {0, 200000};
    nanosleep(&t, nullptr);
  }
}

void hold(live::Chunk* c, uint32_t flag) {
  if (!c->held) {
    if (g_n_held == g_held_cap) {
      size_t cap = g_held_cap ? 2 * g_held_cap : 4096;
      void* p = g_held ? sys_remap(g_held, g_held_cap * sizeof *g_held, cap * sizeof *g_held)
                       : sys_map(cap * sizeof *g_held);
      if (!p) return;  // not held: given back at the end instead (the region is lost with it)
      g_held = static_cast<live::Chunk**>(p);
      g_held_cap = cap;
    }
    g_held[g_n_held++] = c;
  }
  c->held |= flag;
}

// Held chunks that are done go back to the region, when its lock is free now (a program
// thread that a signal interrupted inside region_take holds it, and may be waiting for us).
// Only after a frame was written: before that none is done (a drain for full chunks leaves
// its frame open, and its held chunks may be thousands).
void give_back() {
  if (g_frames_done == g_frames_given) return;
  g_frames_given = g_frames_done;
  size_t k = 0;
  for (size_t i = 0; i < g_n_held; i++) {
    live::Chunk* c = g_held[i];
    bool done = (c->held & kOutOfChain) && !(c->held & kInFrame) &&
                c->durable == c->committed.load(std::memory_order_relaxed);
    if (done) {
      c->held = 0;
      if (region_give(c, /*try_only=*/true)) continue;
      c->held = kOutOfChain;
    }
    g_held[k++] = c;
  }
  g_n_held = k;
}

// The frame about to be written holds the records of the held chunks up to `encoded`: should
// the process die now, the live file says what the trace file holds if the write completes.
void before_frame(void*, uint64_t from, uint64_t to, uint64_t lines) {
  live::Header* h = region();
  if (!h) return;
  for (size_t i = 0; i < g_n_held; i++)
    if (g_held[i]->held & kInFrame) g_held[i]->pending = g_held[i]->encoded;
  h->pending_events = g_conv.file_events() + lines;
  h->pending_lost = g_conv.lost();
  h->pending_drops_said = g_conv.drops_said();
  h->pending_from = from;
  __atomic_store_n(&h->pending_size, to, __ATOMIC_RELEASE);
}

// Written (or lost, and counted so): those records are done with.
void after_frame(void*, bool ok) {
  if (!ok && g_ending) {
    // The process's last frames could not be written (its fds used up, a full disk, its
    // trace file out of reach): they stay in the live file, not marked written, and the live
    // file stays for a reader to finish (end_failed), unless a later frame is written.
    g_end_failed = true;
    if (live::Header* h = region()) {
      __atomic_store_n(&h->pending_size, 0, __ATOMIC_RELEASE);
      h->pending_from = 0;
    }
    return;
  }
  // A frame written after one that was not (the end's, in the room kept for it) gives up the
  // records of that one: counted as lost, in the file; the live file has nothing left to add.
  g_end_failed = false;
  g_frames_done++;
  for (size_t i = 0; i < g_n_held; i++) {
    live::Chunk* c = g_held[i];
    if (!(c->held & kInFrame)) continue;
    c->durable = c->pending;
    if (c->durable == c->encoded) c->held &= ~uint32_t(kInFrame);
  }
  if (live::Header* h = region()) {
    h->file_events = g_conv.file_events();
    h->file_lost = g_conv.lost();
    h->file_unsaid = g_conv.lost_unsaid();
    h->file_drops_said = g_conv.drops_said();
    h->lost_errno = g_conv.lost_errno();
    __atomic_store_n(&h->pending_size, 0, __ATOMIC_RELEASE);
    h->pending_from = 0;
  }
}

// An R_STR record of a chunk that will be given back goes on in the writer's own chunk: later
// records may name the same string, and the live file must still say what it is.
void keep_string(const RecHeader* r) {
  if (!region()) return;
  if (!g_strings ||
      g_strings->committed.load(std::memory_order_relaxed) + r->size > g_strings->cap) {
    // 4 KiB first (a short process names a few files), each next one twice the last, to 64 KiB.
    uint32_t want = g_strings ? g_strings->cap + sizeof(live::Chunk) : 2 << 10;
    want = want < (32 << 10) ? 2 * want : 64 << 10;
    if (g_strings) g_strings->state.store(live::kSealed, std::memory_order_release);
    g_strings = region_take(r->size, want, 0, /*ahead=*/false);
    if (!g_strings) return;
    g_strings->held = kStrings;
  }
  uint32_t at = g_strings->committed.load(std::memory_order_relaxed);
  memcpy(g_strings->data() + at, r, r->size);
  g_strings->committed.store(at + r->size, std::memory_order_release);
}

// Has this thread ended? Threads are not asked to say so (a destructor registered for that
// costs a malloc, which the first record of a thread cannot risk: it may be in a signal handler
// that interrupted malloc): the writer asks the kernel about a thread that recorded nothing
// since its last look. A tid the kernel gave again to a new thread only keeps the old state
// a while longer.
bool thread_gone(ThreadState* ts) {
  if (ts->tid == g_pid || ts->dead.load(std::memory_order_acquire)) return false;
  int saved = errno;
  bool gone = syscall(SYS_tgkill, g_pid, ts->tid, 0) != 0 && errno == ESRCH;
  errno = saved;
  return gone;
}

// --- draining (g_drain_mu held) -------------------------------------------------------------

// The kernel's name of a thread (comm), as the thread saw it when it started recording (and
// when it ended); the kernel is asked only when that is not known (a thousand threads must not
// cost a thousand reads of /proc).
void name_thread(ThreadState* ts) {
  ts->named_gen = g_conv.generation();
  char name[64] = "";
  long fd = -1;
  if (!ts->name[0] && !ts->dead.load(std::memory_order_acquire)) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", ts->tid);
    fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  }
  if (fd >= 0) {
    long n = syscall(SYS_read, fd, name, sizeof name - 1);
    syscall(SYS_close, fd);
    name[n > 0 ? n : 0] = 0;
    if (n > 0 && name[n - 1] == '\n') name[n - 1] = 0;
  }
  if (!name[0]) snprintf(name, sizeof name, "%s", ts->name);
  if (name[0]) g_conv.thread_name(ts->tid, name, strlen(name));
}

// `sealed_only`: leave a chunk its thread is still writing to alone (no cache lines pulled
// away from the traced thread); the time-bound and final flushes take everything.
void drain_thread(ThreadState* ts, const ClockMap& clk, bool sealed_only = false) {
  live::Chunk* c = ts->read;
  while (c) {
    bool sealed = c->state.load(std::memory_order_acquire) == live::kSealed;
    if (sealed_only && !sealed) break;
    uint32_t end = c->committed.load(std::memory_order_acquire);
    // Its last chunk, with nothing new: if the thread has ended, that chunk is its last word
    // (read again: the thread may have committed more before it ended).
    // (Under the registry's lock, so that events_recorded counts its records once.) Not asked
    // while the file ends: what each thread committed is read either way, and a pool's
    // thousand ended threads cost a thousand tgkills then, on the exiting process's time.
    if (!sealed && c->encoded == end && !c->next && !g_ending && thread_gone(ts) &&
        pthread_mutex_trylock(&g_reg_mu) == 0) {
      g_recorded_dead.fetch_add(ts->recorded, std::memory_order_relaxed);
      ts->recorded = 0;
      ts->dead.store(true, std::memory_order_release);
      pthread_mutex_unlock(&g_reg_mu);
      c->state.store(live::kSealed, std::memory_order_release);
      sealed = true;
      end = c->committed.load(std::memory_order_acquire);
    }
    uint64_t events = 0;
    if (c->encoded < end) hold(c, kInFrame);
    while (c->encoded < end) {
      auto* r = reinterpret_cast<const RecHeader*>(c->data() + c->encoded);
      if (r->size < sizeof(RecHeader) || r->size > end - c->encoded) {
        c->encoded = end;  // not a record: the rest of the chunk cannot be read
        break;
      }
      // Counted as read before it is encoded: a frame cut by this record holds it.
      c->encoded += r->size;
      if (r->kind == R_STR) {
        keep_string(r);
        continue;
      }
      // A lost frame starts a new generation, which names the thread again.
      if (ts->named_gen != g_conv.generation()) name_thread(ts);
      events += uint64_t(g_conv.record(r, ts->tid, clk));
    }
    // Records read since the last frame was cut (a cut inside this chunk's records clears the
    // flag) are in the frame being built.
    if (c->encoded > c->durable) hold(c, kInFrame);
    g_written.fetch_add(events, std::memory_order_relaxed);
    if (!sealed) break;
    live::Chunk* next = c->next;
    hold(c, kOutOfChain);
    c = next;
    ts->read = c;
  }
}

// Ended threads whose chunks are all read leave the registry, when its lock is free now.
void unlink_ended_threads() {
  if (pthread_mutex_trylock(&g_reg_mu) != 0) return;
  ThreadState* prev = nullptr;
  for (ThreadState* t = g_threads.load(std::memory_order_relaxed); t;) {
    ThreadState* next = t->next;
    if (t->dead.load(std::memory_order_acquire) && !t->read &&
        !t->queued.load(std::memory_order_acquire)) {
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
  if (!g_conv.writable()) return;
  ClockMap clk = clock_calibrate();
  g_conv.set_dropped(g_dropped.load(std::memory_order_relaxed));
  // The threads that sealed a chunk; each is let go of before it is read, so a chunk it seals
  // meanwhile puts it in the list again.
  for (ThreadState* t = g_ready.exchange(nullptr, std::memory_order_acquire); t;) {
    ThreadState* next = t->ready_next;
    t->queued.store(false, std::memory_order_release);
    if (sealed_only) drain_thread(t, clk, true);
    t = next;
  }
  if (!sealed_only) {
    // Every thread: open chunks too, and ended threads found and let go (none is in the list
    // now, and an ended thread seals nothing more).
    for (ThreadState* t = g_threads.load(std::memory_order_acquire); t; t = t->next)
      drain_thread(t, clk);
    unlink_ended_threads();
  }
  g_use_at_drain.store(region_in_use(), std::memory_order_relaxed);
  // A drain for a full chunk leaves a partial frame open (bigger frames compress better:
  // compact ~1.0 B/event at 65,536 rows against ~1.4 at one chunk's ~9,000); every other
  // drain (the time bound, exit, exec, explicit flushes) writes it.
  if (!sealed_only) g_conv.frame_write();
  give_back();
}

// The end marker and `]`, then close (drain lock held, everything drained).
void end_file(const char* reason, int tid) {
  g_conv.set_dropped(g_dropped.load(std::memory_order_relaxed));
  g_conv.end(reason, tid, now_ns(), cpu_since_start_ns(), mpi_cpu_ns(), host_cpu_wait_of_run_us(),
             cpu_wait_since_start_ns());
  give_back();
}

// The last drain and the end of the file, as one phase: what it cannot write is left in the
// live file (after_frame).
void last_drain_and_end(const char* reason, int tid) {
  g_ending = true;
  g_end_failed = false;
  g_conv.set_quiet_losses(true);
  drain_all();
  end_file(reason, tid);
  g_conv.set_quiet_losses(false);
  g_ending = false;
}

// After the end of a file: the live file goes. Not for an exec: the image may go on if the exec
// fails, recording into the same live file for a new trace file; the next image (or a reader)
// removes it, closed, when the exec worked.
void close_for(const char* reason, bool final) {
  if (g_end_failed) {
    if (!final && strcmp(reason, "exec") == 0) g_exec_closed = true;
    return;  // the live file keeps what the trace file could not take
  }
  if (!final && strcmp(reason, "exec") == 0) {
    if (live::Header* h = region()) h->closed.store(1, std::memory_order_release);
    g_exec_closed = true;
  } else {
    region_remove();
  }
}

// A drain asked for by another thread: everything, then the end of the file if asked.
void serve_request() {
  if (const char* reason = g_end_reason.exchange(nullptr, std::memory_order_acq_rel)) {
    bool final = g_end_final.load(std::memory_order_acquire);
    last_drain_and_end(reason, g_end_tid.load(std::memory_order_relaxed));
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

// How long the writer stays without work before it ends: a few flush intervals.
int64_t idle_limit_ns() { return 4 * int64_t(g_config.flush_ms) * 1000000; }

void* writer_main(void*) {
  t_guard = 1;  // nothing this thread does is traced
  g_wtid.store(int(syscall(SYS_gettid)), std::memory_order_release);
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  prctl(PR_SET_NAME, "iotrace-writer");
  // A private fd table for the writer: its trace file's fd never takes one of the program's
  // numbers, nor keeps a file of the program's open (unshare copies the table: the copies are
  // closed at once). Where unshare is refused (a container's seccomp profile) the writer opens
  // the trace file for each write and closes it again.
  bool own_table =
      syscall(SYS_close_range, ~0U, ~0U, 0U) == 0 && syscall(SYS_unshare, CLONE_FILES) == 0;
  if (own_table) syscall(SYS_close_range, 0U, ~0U, 0U);
  Sink::set_writer_thread(own_table);
  // The time bound holds even when full chunks wake the writer more often than the flush
  // interval: a drain that comes due takes everything (unsealed chunks, the open frame).
  int64_t last_full = now_ns(), last_work = last_full;
  uint64_t written = g_written.load(std::memory_order_relaxed);
  for (;;) {
    uint32_t seen = g_wake.load(std::memory_order_acquire);
    bool asked =
        g_asked.load(std::memory_order_acquire) != g_served.load(std::memory_order_relaxed);
    bool woken = true;  // by a full chunk or a request (else: the time bound)
    if (!asked && !g_wstop.load(std::memory_order_acquire)) {
      struct timespec rel = ms_span(g_config.flush_ms);
      woken = futex(&g_wake, FUTEX_WAIT_PRIVATE, seen, &rel) == 0 || errno == EAGAIN;
    }
    uint32_t asked_seq = g_asked.load(std::memory_order_acquire);
    asked = asked_seq != g_served.load(std::memory_order_relaxed);
    const int64_t t = now_ns();
    const bool due = t - last_full >= int64_t(g_config.flush_ms) * 1000000;
    if (!woken || due || asked) last_full = t;
    pthread_mutex_lock(&g_drain_mu);
    bool stop = g_wstop.load(std::memory_order_acquire);
    if (asked)
      serve_request();
    else if (g_recording.load(std::memory_order_relaxed))
      drain_all(/*sealed_only=*/woken && !due && !stop);
    // Idle for long enough, or asked to go: the thread ends (its fd table with it). A request
    // made meanwhile is still served: it is checked again once the state says exiting.
    uint64_t now_written = g_written.load(std::memory_order_relaxed);
    if (now_written != written || asked) last_work = t, written = now_written;
    bool idle = t - last_work >= idle_limit_ns() && region_in_use() <= writer_threshold();
    if (stop || idle || !g_recording.load(std::memory_order_relaxed)) {
      g_wstate.store(kExiting, std::memory_order_seq_cst);
      if (g_asked.load(std::memory_order_seq_cst) != asked_seq && !stop) {
        g_wstate.store(kRunning, std::memory_order_seq_cst);  // someone asked just now
      } else {
        g_conv.sink().release_fd();
        pthread_mutex_unlock(&g_drain_mu);
        if (asked) {
          g_served.store(asked_seq, std::memory_order_release);
          futex_wake_all(&g_served);
        }
        break;
      }
    }
    pthread_mutex_unlock(&g_drain_mu);
    if (asked) {
      g_served.store(asked_seq, std::memory_order_release);
      futex_wake_all(&g_served);
    }
    // The next two of the biggest chunks a thread takes, ready before it asks (taken on
    // the traced thread, 1 MiB of the file's blocks is ~0.4 ms of its time).
    region_prepare(2 * uint64_t(g_config.buffer_size));
  }
  Sink::set_writer_thread(false);
  return nullptr;
}

// The writer thread, when it is wanted and allowed: not while a WriterHold is on, not from a
// signal handler (pthread_create may need a lock the interrupted code holds: the next record
// made outside one starts it), and never waiting for a start or stop in progress (the caller
// records on).
void writer_maybe_start() {
  if (g_unreachable || in_signal_handler() ||
      g_wstate.load(std::memory_order_acquire) == kRunning ||
      g_hold.load(std::memory_order_acquire) || !g_recording.load(std::memory_order_relaxed) ||
      g_end_reason.load(std::memory_order_relaxed) || pthread_mutex_trylock(&g_life_mu) != 0)
    return;
  if (g_wstate.load(std::memory_order_acquire) != kRunning && !g_hold.load()) {
    if (g_wjoin) pthread_join(g_wthread, nullptr);  // one that ended on its own
    g_wjoin = false;
    g_wstop.store(false);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    g_wstate.store(kRunning, std::memory_order_release);
    // Born with every signal blocked: a process-directed signal must never find the writer
    // (the program's handler would run on it) before writer_main blocks them itself.
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    if (pthread_create(&g_wthread, &attr, writer_main, nullptr) == 0)
      g_wjoin = true;
    else
      g_wstate.store(kStopped, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &was, nullptr);
    pthread_attr_destroy(&attr);
  }
  pthread_mutex_unlock(&g_life_mu);
}

// Ask the writer for a drain (and the end of the file) and wait for it, `ms` at most.
// Async-signal-safe. false: not done in time, or no writer to do it.
bool ask_writer(const char* end_reason, bool final, int64_t ms) {
  if (g_wstate.load(std::memory_order_seq_cst) != kRunning) return false;
  if (end_reason) {
    g_end_tid.store(t_state ? t_state->tid : int(syscall(SYS_gettid)), std::memory_order_relaxed);
    g_end_final.store(final, std::memory_order_release);
    g_end_reason.store(end_reason, std::memory_order_release);
  }
  uint32_t mine = g_asked.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (g_wstate.load(std::memory_order_seq_cst) != kRunning) {
    // It was ending as we asked: it serves requests made before it said so, not ours.
    g_end_reason.store(nullptr, std::memory_order_release);
    return false;
  }
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

// No writer thread: the asking thread drains itself, on the tracer's stack (it may be a
// signal handler on a small one), giving up rather than waiting long for the lock. What it
// cannot finish stays in the live file.
struct HereWork {
  const char* end_reason;
  bool final;
  int tid;
};
void drain_here_on_stack(void* p) {
  auto* w = static_cast<HereWork*>(p);
  if (w->end_reason) {
    last_drain_and_end(w->end_reason, w->tid);
    close_for(w->end_reason, w->final);
  } else {
    drain_all();
  }
}
void drain_here(const char* end_reason, bool final, int64_t ms) {
  if (!lock_drain_bounded(ms)) return;
  HereWork w{end_reason, final, t_state ? t_state->tid : int(syscall(SYS_gettid))};
  on_tracer_stack(drain_here_on_stack, &w);
  pthread_mutex_unlock(&g_drain_mu);
}

void sync_drain(const char* end_reason, bool final, int64_t ms) {
  int saved = errno;
  Guard g;
  if (end_reason)
    region_end(end_reason, t_state ? t_state->tid : int(syscall(SYS_gettid)), now_ns());
  // Out of reach: the live file keeps everything, with the end it was told.
  if (!g_unreachable && !ask_writer(end_reason, final, ms)) drain_here(end_reason, final, ms);
  errno = saved;
}

// The trace file and the live file of this process (at start, in a fork child, after a failed
// exec), with the header lines of the process as they are now.
bool begin_files() {
  if (g_unreachable) return false;  // a chroot'ed process's children: never a file in the jail
  const char *dir, *name, *host;
  trace_file_parts(&dir, &name, &host);
  if (!Sink::create(dir, name, host, g_pid, trace_suffix(g_config.compact, g_config.compression),
                    &g_file)) {
    const char* why = strerrordesc_np(errno);
    say_once(kMsgNoFile, "cannot create a trace file in ", dir, ": ", why ? why : "error",
             " (this process is not traced)");
    return false;
  }
  Out head(g_head, sizeof g_head);
  EncodeCtx ctx{g_pid, 0, ClockMap(), g_config.res_ns};
  write_process_header(head, ctx);
  g_head_len = head.p == g_head ? head.n : 0;  // it never outgrows the buffer (cmdline <= 64 KiB)
  head.release();
  const char* slash = strrchr(g_file.path, '/');
  RegionSetup rs{g_file.path,
                 slash ? slash + 1 : g_file.path,
                 g_pid,
                 host,
                 g_config.compact,
                 uint32_t(g_config.compression),
                 uint32_t(g_config.level),
                 uint32_t(g_config.res_ns),
                 g_head,
                 g_head_len,
                 g_config.max_buffered};
  if (!region_create(rs)) {
    const char* why = strerrordesc_np(errno);
    say_once(kMsgNoFile, "cannot create the live file beside ", g_file.path, ": ",
             why ? why : "error", " (this process is not traced)");
    syscall(SYS_unlinkat, AT_FDCWD, g_file.path, 0);
    return false;
  }
  g_conv.setup(ConverterSetup{g_pid, g_config.compact, g_config.compression, g_config.level,
                              g_config.res_ns});
  g_conv.set_hooks(FrameHooks{before_frame, after_frame, nullptr});
  g_conv.attach(g_file, 0, g_head, g_head_len);
  g_conv.frame_write();  // the file's start, now: the file says whose it is from the first
  g_live_gen = region_generation() | (uint32_t(g_pid) << 12);
  return true;
}
}  // namespace

// Set while this thread makes its state: it may hold the registry's lock before t_creating is
// set, so a handler that lands then must not make one too (nested_slot).
__thread bool t_making_state __attribute__((tls_model("initial-exec"))) = false;

ThreadState* thread_state_create() {
  if (!g_recording.load(std::memory_order_relaxed) || t_guard > 1 || t_making_state) return nullptr;
  Guard g;
  t_making_state = true;
  struct Done {
    ~Done() { t_making_state = false; }
  } done;
  // An ended thread's state when one is had at once; else fresh memory (a thread that waited
  // here for the lock would have nowhere to keep a signal handler's records meanwhile).
  void* mem = nullptr;
  if (pthread_mutex_trylock(&g_reg_mu) == 0) {
    mem = g_free_states;
    if (mem) g_free_states = g_free_states->next;
    pthread_mutex_unlock(&g_reg_mu);
  }
  if (!mem && !(mem = arena_alloc(sizeof(ThreadState)))) return nullptr;
  auto* ts = new (mem) ThreadState();
  t_creating = ts;  // from here a signal handler's calls wait in its aside slots
  ts->tid = int32_t(syscall(SYS_gettid));
  ts->cur = ts->read = take_chunk(ts, 0);
  if (!ts->cur) {
    t_creating = nullptr;
    ts->~ThreadState();
    pthread_mutex_lock(&g_reg_mu);
    ts->next = g_free_states;
    g_free_states = ts;
    pthread_mutex_unlock(&g_reg_mu);
    return nullptr;
  }
  ts->data = ts->cur->data();
  ts->cap = ts->cur->cap;
  pthread_mutex_lock(&g_reg_mu);
  ts->next = g_threads.load(std::memory_order_relaxed);
  g_threads.store(ts, std::memory_order_release);
  pthread_mutex_unlock(&g_reg_mu);
  t_state = ts;
  t_creating = nullptr;
  return ts;
}

bool buffer_swap(ThreadState* ts, uint32_t need) {
  live::Chunk* c = take_chunk(ts, need);
  if (!c) return false;
  live::Chunk* old = ts->cur;
  old->next = c;
  old->state.store(live::kSealed, std::memory_order_release);
  ts->cur = c;
  ts->data = c->data();
  ts->cap = c->cap;
  ts->pos = 0;
  if (!ts->queued.exchange(true, std::memory_order_acq_rel)) {
    ThreadState* head = g_ready.load(std::memory_order_relaxed);
    do ts->ready_next = head;
    while (!g_ready.compare_exchange_weak(head, ts, std::memory_order_release,
                                          std::memory_order_relaxed));
  }
  // The sealed chunk is converted at the next drain; woken for it only when memory in flight
  // counts (a wake per chunk costs a system call, and a context switch of the writer, per KiB
  // that a thread records), and has grown by a quarter of the threshold since the last drain.
  uint64_t use = region_in_use(), threshold = writer_threshold();
  if (use > threshold && use >= g_use_at_drain.load(std::memory_order_relaxed) + threshold / 4)
    wake_writer();
  return true;
}

// The state whose aside slots a handler's call takes: the thread's, or the one being made.
ThreadState* aside_state() { return t_state ? t_state : t_creating; }

char* nested_slot(uint32_t* index) {
  ThreadState* ts = aside_state();
  // A thread's first kept call is filled before its state is made (commit_first): a handler
  // that lands in that fill makes the state itself (async-signal-safe, as a first record in a
  // handler does), and the interrupted call then commits into it. Dropping the handler's call
  // lost 5-10 events in 1 run of 3 of test_scratch_is_never_shared under load.
  if (!ts) ts = thread_state_create();
  if (!ts) {
    count_dropped();
    return nullptr;
  }
  // A handler of a handler may claim the next slot between our read and write: one atomic add.
  uint32_t i = ts->nested_n.fetch_add(1, std::memory_order_relaxed);
  if (i >= ThreadState::kNested) {
    count_dropped();
    return nullptr;  // the slot count stays past the end: append_nested resets it
  }
  // The block, the first time it is needed: the arena is async-signal-safe (an atomic add, or
  // a mapping); a handler of this handler that made it first wins (ours stays unused).
  std::atomic<ThreadState::Nested*>& block = ts->nested[i / ThreadState::kNestedBlock];
  if (!block.load(std::memory_order_acquire)) {
    auto* fresh = static_cast<ThreadState::Nested*>(
        arena_alloc(ThreadState::kNestedBlock * sizeof(ThreadState::Nested)));
    ThreadState::Nested* none = nullptr;
    if (fresh) block.compare_exchange_strong(none, fresh, std::memory_order_acq_rel);
    if (!block.load(std::memory_order_acquire)) {
      count_dropped();
      return nullptr;  // no memory: the slot stays not ready, and is skipped
    }
  }
  ThreadState::Nested* slot = ts->nested_at(i);
  slot->ready.store(false, std::memory_order_relaxed);
  *index = i;
  return slot->rec;
}

void nested_done(uint32_t index) {
  aside_state()->nested_at(index)->ready.store(true, std::memory_order_release);
}

// The records handlers left aside, in the order they were made, into the buffer. A handler that
// interrupts this records aside again (Busy), and is taken in the next round.
void append_nested(ThreadState* ts) {
  Busy busy;
  uint32_t done = 0;
  for (;;) {
    uint32_t n = ts->nested_n.load(std::memory_order_acquire);
    uint32_t upto = n < ThreadState::kNested ? n : ThreadState::kNested;
    for (; done < upto; done++) {
      if (!ts->nested[done / ThreadState::kNestedBlock].load(std::memory_order_acquire)) continue;
      ThreadState::Nested& slot = *ts->nested_at(done);
      if (!slot.ready.load(std::memory_order_acquire)) continue;  // (cannot be: handlers end first)
      auto* r = reinterpret_cast<IoLive*>(slot.rec);
      if (r->h.kind != R_IO) continue;  // filtered out
      ThreadState* t;
      if (char* p = reserve(sizeof(IoLive), &t)) {
        uint32_t size = r->packed_size();
        memcpy(p, r, size);
        reinterpret_cast<IoLive*>(p)->h.size = size;
        commit(t, size);
        if (r->fields & F_FHASH) name_string(t, r->file);
        if (r->fields & F_FHASH2) name_string(t, r->file2);
      }
    }
    // Nothing claimed meanwhile: the list is empty again.
    if (ts->nested_n.compare_exchange_strong(n, 0, std::memory_order_acq_rel)) return;
  }
}

void count_dropped() {
  g_dropped.fetch_add(1, std::memory_order_relaxed);
  if (live::Header* h = region()) h->dropped.fetch_add(1, std::memory_order_relaxed);
}

void define_string(ThreadState* ts, const Str* s) {
  uint32_t size = rec_align(uint32_t(sizeof(StrRec)) + s->len + 1);
  ThreadState* t;
  char* p = reserve(size, &t);
  if (!p) return;
  auto* r = reinterpret_cast<StrRec*>(p);
  r->h = RecHeader{size, R_STR, 0};
  r->len = s->len;
  r->pad = 0;
  r->addr = reinterpret_cast<uint64_t>(s);
  r->hash = s->hash;
  memcpy(r + 1, s->str, s->len + 1);
  t->pos += size;  // committed like a record, but not counted as one: it is no event
  t->cur->committed.store(t->pos, std::memory_order_release);
  const_cast<Str*>(s)->live_gen = g_live_gen;
}

bool writer_begin() { return begin_files(); }

// The writer, if it runs, has ended when this returns: joined, and gone from the kernel's
// thread list (pthread_join returns when its tid is cleared, a moment before the kernel drops
// the task: unshare(CLONE_NEWUSER) and /proc's thread count see that later).
void writer_stop() {
  pthread_mutex_lock(&g_life_mu);
  int tid = g_wtid.load(std::memory_order_acquire);
  if (g_wstate.load(std::memory_order_acquire) == kRunning) {
    g_wstop.store(true, std::memory_order_release);
    wake_writer();
  }
  if (g_wjoin) {
    pthread_join(g_wthread, nullptr);
    g_wjoin = false;
    for (int i = 0; tid > 0 && i < 100000 && syscall(SYS_tgkill, g_pid, tid, 0) == 0; i++)
      sched_yield();
  }
  g_wstate.store(kStopped, std::memory_order_release);
  g_wtid.store(0, std::memory_order_release);
  pthread_mutex_unlock(&g_life_mu);
}

namespace {
// fchown of a file of ours found by path, checked to be it (never a file swapped in).
void chown_ours(const char* path, uint64_t dev, uint64_t ino, unsigned uid) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st;
  if (syscall(SYS_fstat, fd, &st) == 0 && uint64_t(st.st_dev) == dev && uint64_t(st.st_ino) == ino)
    syscall(SYS_fchown, fd, uid, -1);
  syscall(SYS_close, fd);
}

// The folder's access ACL (system.posix_acl_access) with an entry giving `uid` rwx, and the
// mask widened to let it through. The xattr's layout: a version word (2), then entries of
// (tag, perm, id) sorted by tag and id.
void grant_folder(const char* dir, unsigned uid) {
  struct Entry {
    uint16_t tag, perm;
    uint32_t id;
  };
  constexpr uint16_t kUserObj = 1, kUser = 2, kGroupObj = 4, kMask = 0x10, kOther = 0x20;
  constexpr size_t kMax = 64;
  struct {
    uint32_t version;
    Entry e[kMax];
  } acl;
  long n = syscall(SYS_getxattr, dir, "system.posix_acl_access", &acl, sizeof acl);
  size_t count;
  if (n >= long(sizeof(uint32_t)) && acl.version == 2) {
    count = (size_t(n) - sizeof(uint32_t)) / sizeof(Entry);
  } else {
    struct stat st;
    if (syscall(SYS_stat, dir, &st) != 0) return;
    acl.version = 2;
    acl.e[0] = Entry{kUserObj, uint16_t((st.st_mode >> 6) & 7), ~0u};
    acl.e[1] = Entry{kGroupObj, uint16_t((st.st_mode >> 3) & 7), ~0u};
    acl.e[2] = Entry{kOther, uint16_t(st.st_mode & 7), ~0u};
    count = 3;
  }
  bool have_user = false, have_mask = false;
  for (size_t i = 0; i < count; i++) {
    if (acl.e[i].tag == kUser && acl.e[i].id == uid) acl.e[i].perm = 7, have_user = true;
    if (acl.e[i].tag == kMask) acl.e[i].perm = 7, have_mask = true;
  }
  if (!have_user && count < kMax) acl.e[count++] = Entry{kUser, 7, uid};
  if (!have_mask && count < kMax) acl.e[count++] = Entry{kMask, 7, ~0u};
  for (size_t i = 1; i < count; i++)  // sorted by (tag, id), as the kernel wants them
    for (size_t j = i;
         j > 0 && (acl.e[j - 1].tag > acl.e[j].tag ||
                   (acl.e[j - 1].tag == acl.e[j].tag && acl.e[j - 1].id > acl.e[j].id));
         j--) {
      Entry t = acl.e[j];
      acl.e[j] = acl.e[j - 1];
      acl.e[j - 1] = t;
    }
  syscall(SYS_setxattr, dir, "system.posix_acl_access", &acl,
          sizeof(uint32_t) + count * sizeof(Entry), 0);
}

// Cut `root` off the front of an absolute path, in place. false: the path is not under it.
bool under_root(char* path, const char* root) {
  size_t n = strlen(root);
  if (strncmp(path, root, n) != 0 || path[n] != '/') return false;
  memmove(path, path + n, strlen(path + n) + 1);
  return true;
}
}  // namespace

void writer_files_to_user(unsigned uid) {
  KeepErrno keep;
  Guard g;
  pthread_mutex_lock(&g_drain_mu);
  chown_ours(g_file.path, g_file.dev, g_file.ino, uid);
  region_chown(uid);
  grant_folder(g_config.dir, uid);
  pthread_mutex_unlock(&g_drain_mu);
}

void writer_root_changed(const char* root) {
  if (strcmp(root, "/") == 0) return;
  KeepErrno keep;
  Guard g;
  pthread_mutex_lock(&g_drain_mu);
  bool reach =
      under_root(g_config.dir, root) && under_root(g_file.path, root) && region_rebase(root);
  if (reach)
    g_conv.sink().set_path(g_file.path);
  else
    g_unreachable = true;  // the live file keeps the records; a reader finishes the trace
  pthread_mutex_unlock(&g_drain_mu);
}

void writer_hold() {
  KeepErrno keep;
  g_hold.fetch_add(1, std::memory_order_acq_rel);
  writer_stop();
}

void writer_release() { g_hold.fetch_sub(1, std::memory_order_acq_rel); }

bool writer_running() { return g_wstate.load(std::memory_order_acquire) == kRunning; }

void writer_exec_failed() {
  pthread_mutex_lock(&g_drain_mu);
  if (g_exec_closed) {
    g_exec_closed = false;
    // The image goes on: a new trace file, written from the same live file.
    const char *dir, *name, *host;
    trace_file_parts(&dir, &name, &host);
    if (Sink::create(dir, name, host, g_pid, trace_suffix(g_config.compact, g_config.compression),
                     &g_file)) {
      const char* slash = strrchr(g_file.path, '/');
      region_retarget(slash ? slash + 1 : g_file.path);
      g_dropped.store(0, std::memory_order_relaxed);  // the new file counts its own, from 0
      g_conv.attach(g_file, 0, g_head, g_head_len);
      g_conv.frame_write();
    } else {
      g_recording.store(false);
    }
  }
  pthread_mutex_unlock(&g_drain_mu);
}

void flush_now(int64_t wait_ms) { sync_drain(nullptr, false, wait_ms); }

void finish_file(const char* reason, bool final, int64_t wait_ms) {
  sync_drain(reason, final, wait_ms);
}

// Fork: the child must not inherit a half-held lock, nor see a writer thread in the parent
// that it has not (Python counts the threads after fork and warns); the writer is stopped,
// and starts again in either process only when it is needed.
void writer_prepare_fork() {
  writer_hold();
  pthread_mutex_lock(&g_drain_mu);
  pthread_mutex_lock(&g_reg_mu);
  region_lock();
}

void writer_parent_after_fork() {
  region_unlock();
  pthread_mutex_unlock(&g_reg_mu);
  pthread_mutex_unlock(&g_drain_mu);
  writer_release();
}

bool writer_child_after_fork() {
  // Only this thread exists now. What the parent had recorded is the parent's to write, in
  // its live file: the child makes its own, and its records start in a chunk of it.
  region_reinit_lock();
  tracer_stack_after_fork();
  pthread_mutex_init(&g_reg_mu, nullptr);
  pthread_mutex_init(&g_drain_mu, nullptr);
  g_threads.store(nullptr, std::memory_order_relaxed);
  g_free_states = nullptr;
  g_ready.store(nullptr, std::memory_order_relaxed);
  g_use_at_drain.store(0, std::memory_order_relaxed);
  g_n_held = 0;
  g_strings = nullptr;
  g_conv.forget();
  g_exec_closed = false;
  g_written.store(0);
  g_stuck_at.store(UINT64_MAX);
  g_dropped.store(0);
  g_recorded_dead.store(0);
  g_asked.store(0);
  g_served.store(0);
  g_end_reason.store(nullptr);
  g_wstate.store(kStopped);
  g_wstop.store(false);
  g_wtid.store(0);
  g_hold.store(0);
  g_wjoin = false;
  pthread_mutex_init(&g_life_mu, nullptr);
  messages_reset();
  bool ok = begin_files();
  if (ThreadState* ts = t_state) {
    ts->tid = int32_t(syscall(SYS_gettid));
    ts->want = 0;
    ts->cur = ts->read = ok ? take_chunk(ts, 0) : nullptr;
    ts->pos = ts->cap = 0;
    ts->data = nullptr;
    ts->recorded = 0;
    ts->named_gen = 0;
    ts->next = nullptr;
    ts->queued.store(false, std::memory_order_relaxed);
    if (ts->cur) {
      ts->data = ts->cur->data();
      ts->cap = ts->cur->cap;
      g_threads.store(ts, std::memory_order_relaxed);
    } else {
      t_state = nullptr;  // a fresh state at its next record, if recording goes on
    }
  }
  return ok;
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
const char* trace_path() { return g_file.path; }

}  // namespace iot
