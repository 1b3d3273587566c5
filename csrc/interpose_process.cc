// Process events: fork (the child's own trace starts in the atfork handler), exec (flush and
// close before the image is replaced), _exit/_Exit (flush: no atexit handlers will run).
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"

using namespace iot;

namespace {
REAL_FN(fork, pid_t (*)(void))
REAL_FN(execve, int (*)(const char*, char* const[], char* const[]))
REAL_FN(execv, int (*)(const char*, char* const[]))
REAL_FN(execvp, int (*)(const char*, char* const[]))
REAL_FN(execvpe, int (*)(const char*, char* const[], char* const[]))
REAL_FN(fexecve, int (*)(int, char* const[], char* const[]))
REAL_FN(_exit, void (*)(int))
REAL_FN(_Exit, void (*)(int))

void record_exec(CallId id, Str* prog, int fd, int64_t t0, bool failed, int ret, int err) {
  if (!passes(prog)) return;
  IoRec rec;
  rec.init(id, t0, now_ns());
  rec.set_file(prog);
  if (fd >= 0) rec.set_fd(fd);
  if (failed) set_result(rec, ret, err);
  append(&rec, sizeof rec);
}

// exec: one event written just before the image goes (no ret: it does not come back), and if
// it does come back, a second one with the failure, in a new file.
template <class Call>
int do_exec(CallId id, const char* path, int fd, Call&& call) {
  if (!process_on() || t_guard) return call();
  int64_t t0 = now_ns();
  Str* prog;
  {
    Guard g;
    prog = fd >= 0 ? fd_path(fd)
           : strchr(path ? path : "", '/') ? intern_path(path)
                                           : path ? intern_abs_path(path, uint32_t(strlen(path))) : nullptr;
    record_exec(id, prog, fd, t0, false, 0, 0);
  }
  before_exec();
  int ret = call();
  int err = errno;
  {
    Guard g;
    record_exec(id, prog, fd, t0, true, ret, err);
  }
  errno = err;
  return ret;
}

// execl*: the variadic arguments as an argv array (on the stack: exec may follow a vfork).
#define COLLECT_ARGS(first, ap, argv, max)         \
  const char* argv[max];                           \
  int argc = 0;                                    \
  argv[argc++] = first;                            \
  while (argc < max - 1 && argv[argc - 1])         \
    argv[argc++] = va_arg(ap, const char*);        \
  argv[argc] = nullptr;
}  // namespace

IOT_EXPORT pid_t fork(void) {
  return traced<pid_t>(process_on(), C_fork, [&] { return real_fork()(); },
                       [&](IoRec& r, pid_t ret, int err) {
                         if (ret == 0) return false;  // the child: its own file tells its story
                         set_result(r, ret, err);
                         return true;
                       });
}

IOT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return do_exec(C_execve, path, -1, [&] { return real_execve()(path, argv, envp); });
}
IOT_EXPORT int execv(const char* path, char* const argv[]) {
  return do_exec(C_execv, path, -1, [&] { return real_execv()(path, argv); });
}
IOT_EXPORT int execvp(const char* file, char* const argv[]) {
  return do_exec(C_execvp, file, -1, [&] { return real_execvp()(file, argv); });
}
IOT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return do_exec(C_execvpe, file, -1, [&] { return real_execvpe()(file, argv, envp); });
}
IOT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return do_exec(C_fexecve, nullptr, fd, [&] { return real_fexecve()(fd, argv, envp); });
}
IOT_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  va_end(ap);
  return do_exec(C_execl, path, -1,
                 [&] { return real_execv()(path, const_cast<char* const*>(argv)); });
}
IOT_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  va_end(ap);
  return do_exec(C_execlp, file, -1,
                 [&] { return real_execvp()(file, const_cast<char* const*>(argv)); });
}
IOT_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return do_exec(C_execle, path, -1,
                 [&] { return real_execve()(path, const_cast<char* const*>(argv), envp); });
}

IOT_EXPORT void _exit(int status) {
  before_exit_now("_exit");
  real__exit()(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
IOT_EXPORT void _Exit(int status) {
  before_exit_now("_exit");
  real__Exit()(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
