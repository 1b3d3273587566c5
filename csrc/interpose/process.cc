// Process events: fork (the child's own trace starts in the atfork handler), exec (flush and
// close before the image is replaced), _exit/_Exit (flush: no atexit handlers will run), and
// vfork, marked so that its child stays out of the parent's trace and tables.
#include <alloca.h>
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
REAL_FN(execvpe, int (*)(const char*, char* const[], char* const[]))
REAL_FN(fexecve, int (*)(int, char* const[], char* const[]))
REAL_FN(_exit, void (*)(int))
REAL_FN(_Exit, void (*)(int))

void record_exec(CallId id, Str* prog, int fd, int64_t t0, bool failed, int ret, int err) {
  if (!passes(prog)) return;
  IoRec rec;
  rec.init(id, t0, now_ticks());
  rec.set_file(prog);
  if (fd >= 0) rec.set_fd(fd);
  if (failed) set_result(rec, ret, err);
  append(&rec, sizeof rec);
  if (t_state) name_string(t_state, prog);
}

// The environment for the next image: the same, plus IOTRACE_ROLE=exec when it will be traced.
// Built on the stack: after vfork the heap is the parent's.
#define EXEC_ENV(envp, out)                                                               \
  size_t out##_n = 0;                                                                     \
  bool out##_traced = false;                                                              \
  for (char* const* e = (envp); e && *e && out##_n < 65536; e++, out##_n++)               \
    if (!strncmp(*e, "LD_PRELOAD=", 11) && strstr(*e, "libiotrace")) out##_traced = true; \
  char** out = static_cast<char**>(alloca((out##_n + 2) * sizeof(char*)));                \
  {                                                                                       \
    size_t k = 0;                                                                         \
    for (size_t i = 0; i < out##_n; i++)                                                  \
      if (strncmp((envp)[i], "IOTRACE_ROLE=", 13)) out[k++] = (envp)[i];                  \
    if (out##_traced) out[k++] = const_cast<char*>("IOTRACE_ROLE=exec");                  \
    out[k] = nullptr;                                                                     \
  }

// exec: one event written just before the image goes (no ret: it does not come back), and if
// it does come back, a second one with the failure, in a new file. `call(envp)` runs the real
// exec with the environment to use.
template <class Call>
int do_exec(CallId id, const char* path, int fd, char* const* envp, Call&& call) {
  // A vfork child (posix_spawn, subprocess) shares the parent's memory: it must not flush or
  // close the parent's trace. It is the one process whose pid is not ours.
  if (!process_on() || t_guard || syscall(SYS_getpid) != g_pid) return call(envp);
  int64_t t0 = now_ticks();
  Str* prog;
  {
    Guard g;
    prog = fd >= 0 ? fd_path(fd)
           : strchr(path ? path : "", '/') ? intern_path(path)
           : path ? intern_abs_path(path, uint32_t(strlen(path)))
                  : nullptr;
    record_exec(id, prog, fd, t0, false, 0, 0);
  }
  EXEC_ENV(envp, env)
  before_exec();
  int ret = call(env);
  int err = errno;
  after_failed_exec();
  {
    Guard g;
    record_exec(id, prog, fd, t0, true, ret, err);
  }
  errno = err;
  return ret;
}

// execl*: the variadic arguments as an argv array (on the stack: exec may follow a vfork).
#define COLLECT_ARGS(first, ap, argv, max)                                         \
  const char* argv[max];                                                           \
  int argc = 0;                                                                    \
  argv[argc++] = first;                                                            \
  while (argc < max - 1 && argv[argc - 1]) argv[argc++] = va_arg(ap, const char*); \
  argv[argc] = nullptr;
}  // namespace

IOT_EXPORT pid_t fork(void) {
  return traced<pid_t>(
      process_on(), C_fork, [&] { return real_fork()(); },
      [&](IoRec& r, pid_t ret, int err) {
        if (ret == 0) return false;  // the child: its own file tells its story
        set_result(r, ret, err);
        return true;
      });
}

// The environ-based forms run as their envp-taking siblings, so the next image can be told it
// was exec'ed.
IOT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return do_exec(C_execve, path, -1, envp,
                 [&](char* const* env) { return real_execve()(path, argv, env); });
}
IOT_EXPORT int execv(const char* path, char* const argv[]) {
  return do_exec(C_execv, path, -1, environ,
                 [&](char* const* env) { return real_execve()(path, argv, env); });
}
IOT_EXPORT int execvp(const char* file, char* const argv[]) {
  return do_exec(C_execvp, file, -1, environ,
                 [&](char* const* env) { return real_execvpe()(file, argv, env); });
}
IOT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return do_exec(C_execvpe, file, -1, envp,
                 [&](char* const* env) { return real_execvpe()(file, argv, env); });
}
IOT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return do_exec(C_fexecve, nullptr, fd, envp,
                 [&](char* const* env) { return real_fexecve()(fd, argv, env); });
}
IOT_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  va_end(ap);
  return do_exec(C_execl, path, -1, environ, [&](char* const* env) {
    return real_execve()(path, const_cast<char* const*>(argv), env);
  });
}
IOT_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  va_end(ap);
  return do_exec(C_execlp, file, -1, environ, [&](char* const* env) {
    return real_execvpe()(file, const_cast<char* const*>(argv), env);
  });
}
IOT_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, 4096)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return do_exec(C_execle, path, -1, envp, [&](char* const* env) {
    return real_execve()(path, const_cast<char* const*>(argv), env);
  });
}

// --- vfork ------------------------------------------------------------------------------------
// Python's subprocess (_posixsubprocess) and others vfork, then dup2/close/sigaction in the
// child through the PLT before exec. The child shares the parent's memory: left alone, those
// calls were recorded as the parent's and rewrote the parent's fd table (the parent's stdout
// then read as the child's pipe). vfork cannot be wrapped by a C function: the child would
// return through the wrapper's frame, which the parent then resumes in. So a few instructions
// mark the thread (iot_vforking) and jump to the real vfork, which returns straight to the
// caller in both processes; in_vfork_child() tells them apart by pid. (x86-64 only; elsewhere
// vfork is not intercepted.)
extern "C" {
__thread int iot_vforking __attribute__((tls_model("initial-exec"))) = 0;

__attribute__((visibility("hidden"), used)) void* iot_vfork_target() {
  static void* real = nullptr;
  if (!real) real = dlsym(RTLD_NEXT, "vfork");
  if (!real) real = dlsym(RTLD_NEXT, "fork");  // no vfork below us: fork keeps the semantics
  return real;
}
}

#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl vfork\n"
    ".type vfork, @function\n"
    "vfork:\n"
    "  endbr64\n"        // a valid indirect-branch target under CET (a no-op elsewhere)
    "  subq $8, %rsp\n"  // the call below needs a 16-byte aligned stack
    "  call iot_vfork_target\n"
    "  addq $8, %rsp\n"
    "  movq iot_vforking@gottpoff(%rip), %rcx\n"
    "  movl $1, %fs:(%rcx)\n"
    "  jmp *%rax\n"
    ".size vfork, .-vfork\n");
#endif

namespace iot {
bool vfork_child_slow() {
  if (syscall(SYS_getpid) != g_pid) return true;
  iot_vforking = 0;  // the parent, back from vfork (or vfork failed)
  return false;
}
}  // namespace iot

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
