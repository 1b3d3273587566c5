// A child that a signal ended ran no code of the tracer's as it died: its records are in its
// live file. The traced parent that reaps it finishes its trace there and then, with the
// signal as the end's reason ("signal:9"); a reader finding it later could only say "killed".
// The wait is made as wait4 (what glibc's wait and waitpid are), so the end also gets the
// CPU time the child used (its rusage), which it could not write itself; a wait for one child
// (waitpid(pid), as Python's multiprocessing and subprocess wait) also gets how long it waited
// for a CPU, read while it is a zombie (a peek with WNOWAIT first; the wait then reaps it).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose.h"
#include "recover.h"
#include "sysmem.h"
#include "tracer_stack.h"
#include "writer.h"

using namespace iot;

namespace {
REAL_FN(wait4, pid_t (*)(pid_t, int*, int, struct rusage*))
REAL_FN(waitid, int (*)(idtype_t, id_t, siginfo_t*, int))

struct Dead {
  pid_t pid;
  int sig;
  int64_t cpu_ns, cpu_wait_ns;
};

struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

// Does `name` end in .live and name the trace of `pid` on `host`: <name>-<host>-<pid>[-n].*?
bool names_child(const char* name, const char* host, pid_t pid) {
  size_t n = strlen(name), sl = strlen(live::kSuffix);
  if (n <= sl || strcmp(name + n - sl, live::kSuffix) != 0) return false;
  char key[128];
  int k = snprintf(key, sizeof key, "-%s-%d", host, int(pid));
  for (const char* p = strstr(name, key); p; p = strstr(p + 1, key)) {
    char after = p[k];
    if (after == '.' || after == '-') return true;
  }
  return false;
}

void finish_children(void* arg) {
  auto* d = static_cast<Dead*>(arg);
  const char *dir, *name, *host;
  trace_file_parts(&dir, &name, &host);
  long fd = syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  constexpr size_t kBuf = 32 << 10;
  char* buf = static_cast<char*>(sys_map(kBuf));
  char reason[32], path[4096];
  snprintf(reason, sizeof reason, "signal:%d", d->sig);
  for (long got; buf && (got = syscall(SYS_getdents64, fd, buf, kBuf)) > 0;) {
    for (long at = 0; at < got;) {
      auto* e = reinterpret_cast<Dirent64*>(buf + at);
      at += e->reclen;
      if (!names_child(e->name, host, d->pid)) continue;
      if (snprintf(path, sizeof path, "%s/%s", dir, e->name) >= int(sizeof path)) continue;
      RecoverResult r;
      live_finish(path, reason, &r, d->cpu_ns, d->cpu_wait_ns);
    }
  }
  sys_unmap(buf, kBuf);
  syscall(SYS_close, fd);
}

void reaped(pid_t pid, int sig, int64_t cpu_ns, int64_t cpu_wait_ns = -1) {
  if (pid <= 0 || sig <= 0 || !process_on() || t_guard) return;
  Guard g;
  KeepErrno keep;
  Dead d{pid, sig, cpu_ns, cpu_wait_ns};
  on_tracer_stack(finish_children, &d);
}

// Before a wait for child `pid`: has a signal ended it? Asked without reaping it (WNOWAIT), as
// the wait itself would wait (WNOHANG, stopped or continued children when the wait reports
// them), and then its wait for a CPU read from /proc. false: the wait must not be made, the
// peek was cut short by a signal (EINTR: the program gets it, as from its own wait).
bool peek(pid_t pid, int options, int64_t* cpu_wait_ns) {
  *cpu_wait_ns = -1;
  if (pid <= 0 || !process_on() || t_guard) return true;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int o = WEXITED | WNOWAIT | (options & (WNOHANG | __WALL | __WCLONE | __WNOTHREAD));
  if (options & WUNTRACED) o |= WSTOPPED;
  if (options & WCONTINUED) o |= WCONTINUED;
  int saved = errno;
  if (syscall(SYS_waitid, P_PID, pid, &si, o, nullptr) != 0) {
    if (errno == EINTR) return false;
    errno = saved;  // (ECHILD and the like: the wait says it)
    return true;
  }
  if (si.si_pid == pid && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED))
    *cpu_wait_ns = cpu_wait_of_ns(pid);
  errno = saved;
  return true;
}

int killed_by(int status) { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }
}  // namespace

// The status is asked for even when the caller passes NULL: the tracer needs it, the program
// gets what it asked for.
IOT_EXPORT pid_t wait(int* status) {
  int st = 0;
  struct rusage ru;
  pid_t r = real_wait4()(-1, &st, 0, &ru);
  if (r > 0 && status) *status = st;
  if (r > 0) reaped(r, killed_by(st), rusage_cpu_ns(ru));
  return r;
}
IOT_EXPORT pid_t waitpid(pid_t pid, int* status, int options) {
  int st = 0;
  struct rusage ru;
  int64_t wait_ns;
  if (!peek(pid, options, &wait_ns)) return -1;
  pid_t r = real_wait4()(pid, &st, options, &ru);
  if (r > 0 && status) *status = st;
  if (r > 0) reaped(r, killed_by(st), rusage_cpu_ns(ru), r == pid ? wait_ns : -1);
  return r;
}
IOT_EXPORT pid_t wait3(int* status, int options, struct rusage* ru) {
  int st = 0;
  struct rusage own;
  pid_t r = real_wait4()(-1, &st, options, ru ? ru : &own);
  if (r > 0 && status) *status = st;
  if (r > 0) reaped(r, killed_by(st), rusage_cpu_ns(ru ? *ru : own));
  return r;
}
IOT_EXPORT pid_t wait4(pid_t pid, int* status, int options, struct rusage* ru) {
  int st = 0;
  struct rusage own;
  int64_t wait_ns;
  if (!peek(pid, options, &wait_ns)) return -1;
  pid_t r = real_wait4()(pid, &st, options, ru ? ru : &own);
  if (r > 0 && status) *status = st;
  if (r > 0) reaped(r, killed_by(st), rusage_cpu_ns(ru ? *ru : own), r == pid ? wait_ns : -1);
  return r;
}
IOT_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t* info, int options) {
  int r = real_waitid()(idtype, id, info, options);
  if (r == 0 && info && info->si_pid > 0 &&
      (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED))
    reaped(info->si_pid, info->si_status, -1);  // (no rusage: waitid's is the raw syscall's)
  return r;
}
