#include "lifecycle.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <atomic>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "fd_table.h"
#include "intern.h"
#include "iotrace.h"
#include "message.h"
#include "metadata.h"
#include "recover.h"
#include "writer.h"

namespace iot {

bool g_interposing = false;
bool g_paused = false;

namespace {
struct ProcessInfo {
  char host[256] = "";
  char exe[PATH_MAX] = "";
  char name[256] = "";
  char role[32] = "main";
  int64_t parent_pid = 0;
  int64_t ppid = 0;        // at start: a parent that exits later leaves the child to init
  int64_t worker_id = -1;  // data-loader / pool worker number, when the Python layer knows it
  int64_t mpi_rank = -1, mpi_size = -1;    // once MPI_Init returned (interpose/mpiio.cc)
  int64_t dist_rank = -1, dist_size = -1;  // once torch.distributed's init returned (Python)
  int64_t wall_ns = 0, mono_ns = 0;        // wall_ns with IOTRACE_CLOCK_SKEW_NS added
  // The latest measurement of this process's job clock against rank 0's (interpose/mpi_clock.cc)
  const char* clock_at = nullptr;  // a literal: where it was taken (nullptr: none yet)
  int64_t clock_mono_ns = 0, clock_offset_ns = 0, clock_rtt_ns = 0;
} g_proc;

pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER;
bool g_started = false;
std::atomic<bool> g_finished{false};

// The process's clock pair (wall, monotonic), read as one moment: the monotonic clock read on
// both sides of the wall clock, and the tightest of a few tries kept. Each process's
// wall - mono puts its events on the job's clock; a thread preempted between two plain reads
// put its whole process 0.5 ms off (seen in CI, torchrun's workers on a loaded machine).
void read_clock_pair() {
  int64_t best_gap = INT64_MAX, wall = 0, mono = 0;
  for (int i = 0; i < 5 && best_gap > 2000; i++) {
    const int64_t m0 = now_ns(), w = wall_ns(), m1 = now_ns();
    if (m1 - m0 < best_gap) best_gap = m1 - m0, wall = w, mono = m0 + (m1 - m0) / 2;
  }
  g_proc.wall_ns = wall + g_config.clock_skew_ns;
  g_proc.mono_ns = mono;
}

void read_identity() {
  struct utsname u;
  if (uname(&u) == 0) {
    snprintf(g_proc.host, sizeof g_proc.host, "%s", u.nodename);
    if (char* dot = strchr(g_proc.host, '.')) *dot = 0;
  }
  long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", g_proc.exe, sizeof g_proc.exe - 1);
  g_proc.exe[n > 0 ? n : 0] = 0;
  if (g_config.name[0]) {
    snprintf(g_proc.name, sizeof g_proc.name, "%s", g_config.name);
  } else {
    const char* base = strrchr(g_proc.exe, '/');
    snprintf(g_proc.name, sizeof g_proc.name, "%s", base ? base + 1 : "process");
  }
  g_proc.ppid = getppid();
  read_clock_pair();
  cpu_mark_start();
}

// /proc/self/cmdline: the arguments, NUL-separated. Returns the bytes read (0 on failure).
long read_cmdline(char* buf, size_t size) {
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = syscall(SYS_read, fd, buf, size);
  syscall(SYS_close, fd);
  return n > 0 ? n : 0;
}

// multiprocessing's spawn and forkserver children are new interpreters started with a
// recognisable command line; name their role and parent even if they never import iotrace.
void detect_python_worker() {
  static char buf[4096];
  long n = read_cmdline(buf, sizeof buf - 1);
  if (n <= 0) return;
  for (long i = 0; i < n; i++)
    if (!buf[i]) buf[i] = ' ';
  buf[n] = 0;
  if (strstr(buf, "multiprocessing.spawn import spawn_main")) {
    snprintf(g_proc.role, sizeof g_proc.role, "spawn");
    const char* pp = strstr(buf, "parent_pid=");
    g_proc.parent_pid = pp ? atoll(pp + 11) : getppid();
  } else if (strstr(buf, "multiprocessing.forkserver import main")) {
    snprintf(g_proc.role, sizeof g_proc.role, "forkserver");
    g_proc.parent_pid = getppid();
  } else if (strstr(buf, "multiprocessing.resource_tracker import main")) {
    snprintf(g_proc.role, sizeof g_proc.role, "resource_tracker");  // spawn's helper process
    g_proc.parent_pid = getppid();
  }
}

// Signals are held across fork until the child has made its files: a child that a signal ends
// at birth (a pool torn down as it starts) still leaves its trace, and no handler runs in the
// middle of the tracer's own set-up. The program's mask is put back as it was.
__thread sigset_t t_fork_mask __attribute__((tls_model("initial-exec")));

void atfork_prepare() {
  KeepErrno keep;
  if (!g_started) return;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &t_fork_mask);
  writer_prepare_fork();
}
void atfork_parent() {
  KeepErrno keep;
  if (!g_started) return;
  writer_parent_after_fork();
  pthread_sigmask(SIG_SETMASK, &t_fork_mask, nullptr);
}
void atfork_child() {
  KeepErrno keep;
  if (!g_started) return;
  struct Unblock {
    ~Unblock() { pthread_sigmask(SIG_SETMASK, &t_fork_mask, nullptr); }
  } unblock;
  int parent = g_pid;
  g_pid = int(syscall(SYS_getpid));
  snprintf(g_proc.role, sizeof g_proc.role, "fork");
  g_proc.parent_pid = parent;
  g_proc.ppid = parent;
  g_proc.worker_id = -1;
  int64_t parent_base = g_proc.wall_ns - g_proc.mono_ns;
  read_clock_pair();
  cpu_mark_start(/*forked=*/true);
  if (!writer_child_after_fork()) {
    g_recording.store(false);
  } else if (g_proc.clock_at) {
    // The parent's measurement holds for the child (one host, one monotonic clock), said on
    // the child's own clock pair: the same job clock for both.
    int64_t offset = g_proc.clock_offset_ns + parent_base - (g_proc.wall_ns - g_proc.mono_ns);
    announce_clock(g_proc.clock_at, g_proc.clock_mono_ns, offset, g_proc.clock_rtt_ns);
  }
}

void at_exit() { before_exit_now("exit"); }

// Do the program's calls reach this library's wrappers? Preloaded, or linked ahead of libc (a
// program built with -liotrace): the lookup of `write` in the program's scope finds ours.
// Loaded by dlopen (the Python module's _core), libc's comes first.
bool wrappers_reached() {
  Dl_info mine, found;
  void* w = dlsym(RTLD_DEFAULT, "write");
  return w && dladdr(reinterpret_cast<void*>(&wrappers_reached), &mine) && dladdr(w, &found) &&
         mine.dli_fbase == found.dli_fbase;
}

}  // namespace

// The first part of a trace file's name: the program's, then the job's id and the process's rank
// where the launcher says them (`train-j4242-r17`), so that a job's ranks sort and glob by rank.
// The variables as iotrace_format reads them (JOB_VARIABLES, RANK_VARIABLES); only the characters
// a file name keeps everywhere.
const char* file_name_part() {
  static char buf[sizeof g_proc.name + 80];
  static const char* const kJob[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"};
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
  size_t n = strlen(g_proc.name);
  memcpy(buf, g_proc.name, n);
  auto add = [&](char tag, const char* const* vars, size_t count, bool digits) {
    for (size_t i = 0; i < count; i++) {
      const char* v = getenv(vars[i]);
      if (!v || !*v) continue;
      size_t k = 0;
      while (v[k] && k < 32 &&
             (digits ? (v[k] >= '0' && v[k] <= '9')
                     : (isalnum(static_cast<unsigned char>(v[k])) || v[k] == '.' || v[k] == '_')))
        k++;
      if (k == 0 || v[k]) return;  // not a plain id: left out
      buf[n++] = '-';
      buf[n++] = tag;
      memcpy(buf + n, v, k);
      n += k;
      return;
    }
  };
  add('j', kJob, 4, false);
  add('r', kRank, 4, true);
  buf[n] = 0;
  return buf;
}

void trace_file_parts(const char** dir, const char** name, const char** host) {
  *dir = g_config.dir;
  *name = file_name_part();
  *host = g_proc.host;
}

void write_process_header(Out& o, const EncodeCtx& ctx) {
  static char cmdline[1 << 16];  // read when the file opens, not kept: it can be long
  // The launcher's variables that say which rank and which job a process is (docs/trace-format.md)
  static const char* const kRankVars[] = {
      "RANK",      "LOCAL_RANK",   "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK",
      "PMI_RANK",  "SLURM_PROCID", "SLURM_JOB_ID", "PBS_JOBID",
      "LSB_JOBID", "FLUX_JOB_ID"};
  const char* ranks[2 * (sizeof kRankVars / sizeof *kRankVars)];
  int n_ranks = 0;
  for (const char* var : kRankVars)
    if (const char* v = getenv(var)) {
      ranks[2 * n_ranks] = var;
      ranks[2 * n_ranks + 1] = v;
      n_ranks++;
    }
  static const char* const kCompression[] = {"zstd", "gzip", "none"};
  ProcessMeta p;
  p.pid = ctx.pid;
  p.ppid = g_proc.ppid;
  p.parent_pid = g_proc.parent_pid;
  p.worker_id = g_proc.worker_id;
  p.mpi_rank = g_proc.mpi_rank;
  p.mpi_size = g_proc.mpi_size;
  p.dist_rank = g_proc.dist_rank;
  p.dist_size = g_proc.dist_size;
  p.host = g_proc.host;
  p.exe = g_proc.exe;
  p.name = g_proc.name;
  p.cmdline = cmdline;
  p.cmdline_len = size_t(read_cmdline(cmdline, sizeof cmdline));
  static char cwd[4096];
  if (syscall(SYS_getcwd, cwd, sizeof cwd) <= 0) cwd[0] = 0;
  p.cwd = cwd;
  p.wall_ns = g_proc.wall_ns;
  p.mono_ns = g_proc.mono_ns;
  p.resolution_ns = g_config.res_ns;
  p.role = g_proc.role;
  p.rank_vars = ranks;
  p.n_rank_vars = n_ranks;
  p.compression = kCompression[int(g_config.compression)];
  p.compact = g_config.compact;
  meta_process(o, p);
}

bool core_start(bool preloaded) {
  KeepErrno keep;  // /sys or /proc may be missing: the program starts with errno 0
  // Signals held while the files are made, as across fork (atfork_prepare): a process that a
  // signal ends as it starts (a pool's spawned workers terminated at once) still leaves its
  // trace, a header and a live file, not an empty file beside a live file cut short.
  sigset_t all, was;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &was);
  pthread_mutex_lock(&g_start_mu);
  if (!g_started) {
    Guard g;
    config_from_env(g_config);
    if (g_config.enable) {
      g_pid = int(syscall(SYS_getpid));
      intern_refilter();
      fd_table_init();
      clock_init();
      cwd_refresh();
      read_identity();
      detect_python_worker();
      if (const char* role = getenv("IOTRACE_ROLE")) {
        snprintf(g_proc.role, sizeof g_proc.role, "%s", role);
        const char* pp = getenv("IOTRACE_PARENT_PID");
        g_proc.parent_pid = pp ? atoll(pp) : 0;
        // Only the process it was meant for: not its own children.
        unsetenv("IOTRACE_ROLE");
        unsetenv("IOTRACE_PARENT_PID");
      }
      messages_init();
      // The image before this one (an exec) left its live file, closed, for us to remove.
      if (const char* prev = getenv("IOTRACE_EXEC_LIVE")) {
        live_remove_if_closed(prev, g_pid);
        unsetenv("IOTRACE_EXEC_LIVE");
      }
      pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
      atexit(at_exit);
      // No signal disposition is touched: a process that a signal ends keeps its records in
      // its live file, finished by a reader (output/recover.h).
      if (writer_begin()) {
        // Linked (built with -liotrace), the program's calls reach the wrappers as a preloaded
        // program's do: they record them. Loaded by dlopen (the Python module), they see none.
        g_interposing = preloaded || wrappers_reached();
        g_recording.store(true);
      }
      g_started = true;
    }
  }
  bool ok = g_started && g_recording.load();
  pthread_mutex_unlock(&g_start_mu);
  pthread_sigmask(SIG_SETMASK, &was, nullptr);
  return ok;
}

void set_process_info(const char* role, int64_t parent_pid, int64_t worker_id) {
  if (role) snprintf(g_proc.role, sizeof g_proc.role, "%s", role);
  if (parent_pid > 0) g_proc.parent_pid = parent_pid;
  if (worker_id >= 0) g_proc.worker_id = worker_id;
}

int64_t job_clock_base() {
  if (g_proc.wall_ns || g_proc.mono_ns) return g_proc.wall_ns - g_proc.mono_ns;
  return wall_ns() + g_config.clock_skew_ns - now_ns();  // not started: nothing is recorded
}

void set_clock(const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns) {
  g_proc.clock_at = at;
  g_proc.clock_mono_ns = mono_ns;
  g_proc.clock_offset_ns = offset_ns;
  g_proc.clock_rtt_ns = rtt_ns;
}

void set_mpi_rank(int64_t rank, int64_t size) {
  g_proc.mpi_rank = rank;
  g_proc.mpi_size = size;
}

void set_dist_rank(int64_t rank, int64_t size) {
  g_proc.dist_rank = rank;
  g_proc.dist_size = size;
}

void before_exec() {
  if (g_started && g_recording.load()) finish_file("exec", false, kExitWaitMs);
}

void after_failed_exec() {
  if (g_started && g_recording.load()) writer_exec_failed();
}

void end_process(const char* reason, int64_t wait_ms) {
  // Not in a vfork child: its memory and fds are the parent's, and so is the trace.
  if (!g_started || syscall(SYS_getpid) != g_pid || g_finished.exchange(true)) return;
  g_recording.store(false);  // first: no flush may reopen a file after the last one closes
  finish_file(reason, true, wait_ms);
}

void before_exit_now(const char* reason) {
  static char copy[64];  // the caller's string may not outlive a wait that gives up
  if (g_finished.load()) return;
  size_t n = strnlen(reason, sizeof copy - 1);  // no snprintf: _exit may come in a handler
  memcpy(copy, reason, n);
  copy[n] = 0;
  end_process(copy, kExitWaitMs);
}

}  // namespace iot

// Preloaded: start before main (IOTRACE_ENABLE=0 keeps it off). Linked (-liotrace): start
// before main only when IOTRACE_ENABLE asks for it (linking is no request to trace every run),
// else at iotrace_init(). Loaded by dlopen (the Python module): wait for iotrace_init().
__attribute__((constructor)) static void iotrace_ctor() {
  const char* pre = getenv("LD_PRELOAD");
  Dl_info info;
  if (pre && dladdr(reinterpret_cast<void*>(&iotrace_ctor), &info) && info.dli_fname) {
    const char* base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strstr(pre, base)) {
      iot::core_start(true);
      return;
    }
  }
  const char* on = getenv("IOTRACE_ENABLE");
  if (on && *on && !iot::config_false(on) && iot::wrappers_reached()) iot::core_start(false);
}

__attribute__((destructor)) static void iotrace_dtor() { iot::before_exit_now("exit"); }
