// Process events: fork (the child's own trace starts in the atfork handler), exec (flush and
// close before the image is replaced), posix_spawn, _exit/_Exit (flush: no atexit handlers will
// run), and vfork, marked so that its child stays out of the parent's trace and tables. exec and
// posix_spawn also hand the child what it needs to be traced like this process (NextEnv).
#include <alloca.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"
#include "region.h"
#include "sysmem.h"

using namespace iot;

namespace {
REAL_FN(fork, pid_t (*)(void))
REAL_FN(clone, int (*)(int (*)(void*), void*, int, void*, ...))
REAL_FN(execve, int (*)(const char*, char* const[], char* const[]))
REAL_FN(execvpe, int (*)(const char*, char* const[], char* const[]))
REAL_FN(fexecve, int (*)(int, char* const[], char* const[]))
using spawn_fn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                         const posix_spawnattr_t*, char* const[], char* const[]);
REAL_FN(posix_spawn, spawn_fn)
REAL_FN(posix_spawnp, spawn_fn)
REAL_FN(_exit, void (*)(int))
REAL_FN(_Exit, void (*)(int))

// The program an exec or spawn runs, as the event's file: a name the call looks up in PATH
// (execvp, posix_spawnp...) stays as given; any other path is resolved against the cwd.
Str* program(const char* path, int fd, bool search) {
  if (fd >= 0) return fd_path(fd);
  if (!path) return nullptr;
  if (search && !strchr(path, '/')) return intern_abs_path(path, uint32_t(strlen(path)));
  return intern_path(path);
}

void record_exec(CallId id, Str* prog, int fd, int64_t t0, bool failed, int ret, int err) {
  if (!passes(prog)) return;
  IoLive rec;
  rec.init(id, t0, now_ticks());
  rec.set_file(prog);
  if (fd >= 0) rec.set_fd(fd);
  if (failed) set_result(rec, ret, err);
  rec.h.size = rec.packed_size();
  append(&rec, rec.h.size);
  if (t_state) name_string(t_state, prog);
}

// --- the environment of the next image ------------------------------------------------------
// A child stays traced like this process: when the environment exec or posix_spawn is given
// lacks them, LD_PRELOAD (this library first, the child's other entries kept) and the IOTRACE_*
// settings this process started with go back in (not with IOTRACE_INHERIT=0); the relative
// IOTRACE_DIR this process was given becomes the absolute one (a shell passes its own copy of
// its variables on, not the environ that config.cc made absolute); IOTRACE_ROLE=exec tells the
// next image of this process what it is (a new process, vfork'd or spawned, gets none: its own
// start-up finds its role, as multiprocessing's `spawn`). A variable the child's environment sets
// stays the child's, and its IOTRACE_ENABLE=0 leaves it as it is. An environment that needs nothing
// is passed as it is; a changed one is built in a few hundred bytes of stack when it fits, else in
// mapped memory: never malloc, as exec may come in a vfork child, whose heap and its locks are the
// parent's.

// A vfork child's big environments: a mapping made there stays in the parent's address space,
// so each thread keeps one and reuses it (the parent thread is stopped while its vfork child
// runs), and the parent frees it on its next intercepted call (vfork_child_slow).
struct EnvMap {
  void* p;
  size_t n;
};
__thread EnvMap t_vfork_env __attribute__((tls_model("initial-exec"))) = {nullptr, 0};

constexpr char kRoleExec[] = "IOTRACE_ROLE=exec";

// Does the LD_PRELOAD value `v` name this library: an entry (the loader splits at ':' and ' ')
// whose file name is ours? Another copy of iotrace counts: the child is traced either way.
bool names_us(const char* v) {
  const char* base = g_config.lib_base;
  size_t bn = strlen(base);
  while (*v) {
    const char* end = v + strcspn(v, ": ");
    const char* name = end;
    while (name > v && name[-1] != '/') name--;
    if (size_t(end - name) == bn && !memcmp(name, base, bn)) return true;
    v = *end ? end + 1 : end;
  }
  return false;
}

class NextEnv {
 public:
  // `envp`: what the program gives the child (NULL: nothing); `vfork_child`: this process is
  // a vfork child (see t_vfork_env); `image`: the child is the next image of this process.
  NextEnv(char* const* envp, bool vfork_child, bool image);
  ~NextEnv() { sys_unmap(map_, map_n_); }  // exec failed, or posix_spawn returned
  NextEnv(const NextEnv&) = delete;
  NextEnv& operator=(const NextEnv&) = delete;
  char* const* get() const { return env_; }

 private:
  char* room(size_t bytes, bool vfork_child);
  char* const* env_;
  void* map_ = nullptr;  // a mapping of this call (not in a vfork child)
  size_t map_n_ = 0;
  alignas(char*) char small_[256];  // the tracer's share of the program's stack
};

// Memory for `bytes` of new environment: the stack buffer, this thread's vfork mapping, or a
// mapping of this call. NULL when out of memory (the child then gets what it was given).
char* NextEnv::room(size_t bytes, bool vfork_child) {
  if (bytes <= sizeof small_) return small_;
  if (!vfork_child) {
    map_ = sys_map(bytes);
    map_n_ = bytes;
    return static_cast<char*>(map_);
  }
  EnvMap& m = t_vfork_env;
  if (m.n < bytes) {
    void* p = m.p ? sys_remap(m.p, m.n, bytes) : sys_map(bytes);
    if (!p) return nullptr;
    m = {p, bytes};
  }
  return static_cast<char*>(m.p);
}

NextEnv::NextEnv(char* const* envp, bool vfork_child, bool image) : env_(envp) {
  const Config& c = g_config;
  if (!c.preload) return;  // nothing known to pass on
  size_t n = 0, n_preload = 0, n_role = 0;
  const char* preload = nullptr;  // the value of the last LD_PRELOAD entry: the loader's
  bool enable_seen = false, role_exec = false;
  size_t dir = ~size_t(0);  // the first IOTRACE_DIR entry: the child's getenv finds it
  uint64_t present = 0;     // bit i: c.inherited[i]'s variable is set
  for (; envp && envp[n]; n++) {
    const char* e = envp[n];
    if (!strncmp(e, "LD_PRELOAD=", 11)) {
      preload = e + 11;
      n_preload++;
    }
    if (strncmp(e, "IOTRACE_", 8)) continue;
    if (!strncmp(e + 8, "ROLE=", 5)) {
      n_role++;
      role_exec = !strcmp(e, kRoleExec);
      continue;
    }
    if (!strncmp(e + 8, "EXEC_LIVE=", 10)) {
      n_role++;  // goes, as the role does: the next image gets ours
      continue;
    }
    if (!enable_seen && !strncmp(e + 8, "ENABLE=", 7)) {
      enable_seen = true;
      if (config_false(e + 15)) return;  // the child's own opt-out: nothing added
    }
    if (dir == ~size_t(0) && !strncmp(e + 8, "DIR=", 4)) dir = n;
    for (int i = 0; i < c.n_inherited; i++)
      if (same_var(e, c.inherited[i])) present |= uint64_t(1) << i;
  }
  bool ours = preload && names_us(preload);
  bool add_preload = c.inherit && !ours;
  bool traced = ours || add_preload;
  uint64_t add = 0;
  if (c.inherit)
    add = ~present & (c.n_inherited == 64 ? ~uint64_t(0) : (uint64_t(1) << c.n_inherited) - 1);
  bool fix_dir = dir != ~size_t(0) && c.dir_given && !strcmp(envp[dir], c.dir_given);
  bool role = traced && image;
  // The next image of this process removes our live file, which the exec closed (writer.cc):
  // it is told where it is.
  const char* live = role ? exec_live_entry() : nullptr;
  bool role_kept = role ? n_role == 1 && role_exec && !live : n_role == 0;
  if (!add_preload && !add && !fix_dir && role_kept) return;

  size_t count = n - (add_preload ? n_preload : 0) - n_role + size_t(__builtin_popcountll(add)) +
                 add_preload + role + (live != nullptr);
  size_t theirs = add_preload && preload && *preload ? strlen(preload) : 0;
  size_t mine = strlen(c.preload);
  size_t array = (count + 1) * sizeof(char*);
  char* mem = room(array + (add_preload ? mine + 1 + theirs + 1 : 0), vfork_child);
  if (!mem) return;
  char** out = reinterpret_cast<char**>(mem);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char* e = envp[i];
    if ((add_preload && !strncmp(e, "LD_PRELOAD=", 11)) || !strncmp(e, "IOTRACE_ROLE=", 13) ||
        !strncmp(e, "IOTRACE_EXEC_LIVE=", 18))
      continue;
    out[k++] = const_cast<char*>(fix_dir && i == dir ? c.dir_entry : e);
  }
  for (int i = 0; i < c.n_inherited; i++)
    if (add >> i & 1) out[k++] = const_cast<char*>(c.inherited[i]);
  if (add_preload) {
    char* s = mem + array;
    out[k++] = s;
    memcpy(s, c.preload, mine);
    s += mine;
    if (theirs) {
      *s++ = ':';
      memcpy(s, preload, theirs);
      s += theirs;
    }
    *s = 0;
  }
  if (role) out[k++] = const_cast<char*>(kRoleExec);
  if (live) out[k++] = const_cast<char*>(live);
  out[k] = nullptr;
  env_ = out;
}

// Is this a vfork child (posix_spawn, subprocess)? It shares the parent's memory: it must not
// flush or close the parent's trace, nor record. It is the one process whose pid is not ours.
bool vforked() { return syscall(SYS_getpid) != g_pid; }

// exec: one event written just before the image goes (no ret: it does not come back), and if
// it does come back, a second one with the failure, in a new file. `call(envp)` runs the real
// exec with the environment to use.
template <class Call>
int do_exec(CallId id, const char* path, int fd, char* const* envp, Call&& call) {
  if (!g_interposing || t_guard) return call(envp);
  bool child = vforked();
  NextEnv env(envp, child, !child);
  if (child || !process_on()) return call(env.get());
  int64_t t0 = now_ticks();
  Str* prog;
  {
    Guard g;
    prog = program(path, fd, id == C_execvp || id == C_execvpe || id == C_execlp);
    record_exec(id, prog, fd, t0, false, 0, 0);
  }
  before_exec();
  int ret = call(env.get());
  int err = errno;
  after_failed_exec();
  {
    Guard g;
    record_exec(id, prog, fd, t0, true, ret, err);
  }
  errno = err;
  return ret;
}

// posix_spawn[p]: glibc execs the child with an internal execve no wrapper sees, so the child's
// environment is made here, before. (envp NULL is no environment, not environ: glibc and musl
// pass it to execve as it is.) One event in the parent: the program as its file, ret the
// child's pid, or -1 with the returned error as errno.
template <class Call>
int do_spawn(CallId id, pid_t* pid, const char* path, char* const* envp, Call&& call) {
  if (!g_interposing || t_guard) return call(pid, envp);
  bool child = vforked();
  NextEnv env(envp, child, false);
  if (child || !process_on()) return call(pid, env.get());
  pid_t spawned = -1;
  if (!pid) pid = &spawned;
  int64_t t0 = now_ticks();
  int rc = call(pid, env.get());
  int64_t t1 = now_ticks();
  int err = errno;
  {
    Guard g;
    Str* prog = program(path, -1, id == C_posix_spawnp);
    if (passes(prog)) {
      IoLive rec;
      rec.init(id, t0, t1);
      rec.set_file(prog);
      set_result(rec, rc ? -1 : *pid, rc);
      rec.h.size = rec.packed_size();
      append(&rec, rec.h.size);
    }
  }
  errno = err;
  return rc;
}

// execl*: the variadic arguments as an argv array of exactly their number (counted first on a
// copy of the list), on the stack as glibc's own execl has it: the same stack as untraced, and
// no heap (exec may follow a vfork). As in glibc, the list is read up to the first NULL after
// `first` (declared non-null), and `ap` is left after that NULL (execle's envp comes next).
#define COLLECT_ARGS(first, ap, argv)                                            \
  size_t argv##_n = 1;                                                           \
  {                                                                              \
    va_list count;                                                               \
    va_copy(count, ap);                                                          \
    while (va_arg(count, const char*)) argv##_n++;                               \
    va_end(count);                                                               \
  }                                                                              \
  auto argv = static_cast<const char**>(alloca((argv##_n + 1) * sizeof(char*))); \
  argv[0] = first;                                                               \
  for (size_t i = 1; i <= argv##_n; i++) argv[i] = va_arg(ap, const char*);
}  // namespace

IOT_EXPORT pid_t fork(void) {
  return traced<pid_t>(
      process_on(), C_fork, [&] { return real_fork()(); },
      [&](IoLive& r, pid_t ret, int err) {
        if (ret == 0) return false;  // the child: its own file tells its story
        set_result(r, ret, err);
        return true;
      });
}

// clone() of a process that shares this one's memory (CLONE_VM without CLONE_THREAD: a
// hand-made vfork, posix_spawn's way): the child runs on this thread's memory, its TLS
// included, until it execs or exits, so it is marked as a vfork child is (iot_vforking): it
// neither records nor touches the tracer's tables, and its calls are not taken for the
// parent's. One event in the parent, `clone`, with the child's pid. Other clones (threads,
// fork-like ones) are what they are: pthread_create's and fork's paths see to those.
IOT_EXPORT int clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  pid_t* ptid = va_arg(ap, pid_t*);
  void* tls = va_arg(ap, void*);
  pid_t* ctid = va_arg(ap, pid_t*);
  va_end(ap);
  bool shares = (flags & CLONE_VM) && !(flags & CLONE_THREAD);
  if (!shares || !process_on() || t_guard)
    return real_clone()(fn, stack, flags, arg, ptid, tls, ctid);
  int64_t t0 = now_ticks();
  iot_vforking = 1;
  int ret = real_clone()(fn, stack, flags, arg, ptid, tls, ctid);
  int err = errno;
  // Back in the parent. A CLONE_VFORK child has exec'd or exited; another one may still run
  // on this memory, and keeps the mark until this thread's next intercepted call.
  if (flags & CLONE_VFORK) iot_vforking = 0;
  {
    Guard g;
    IoLive rec;
    rec.init(C_clone, t0, now_ticks());
    set_result(rec, ret, err);
    rec.set_flags(flags);
    rec.h.size = rec.packed_size();
    append(&rec, rec.h.size);
  }
  errno = err;
  return ret;
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
  COLLECT_ARGS(arg, ap, argv)
  va_end(ap);
  return do_exec(C_execl, path, -1, environ, [&](char* const* env) {
    return real_execve()(path, const_cast<char* const*>(argv), env);
  });
}
IOT_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv)
  va_end(ap);
  return do_exec(C_execlp, file, -1, environ, [&](char* const* env) {
    return real_execvpe()(file, const_cast<char* const*>(argv), env);
  });
}
IOT_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return do_exec(C_execle, path, -1, envp, [&](char* const* env) {
    return real_execve()(path, const_cast<char* const*>(argv), env);
  });
}

IOT_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                           const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return do_spawn(C_posix_spawn, pid, path, envp, [&](pid_t* p, char* const* env) {
    return real_posix_spawn()(p, path, actions, attr, argv, env);
  });
}
IOT_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                            const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return do_spawn(C_posix_spawnp, pid, file, envp, [&](pid_t* p, char* const* env) {
    return real_posix_spawnp()(p, file, actions, attr, argv, env);
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
  iot_vforking = 0;     // the parent, back from vfork (or vfork failed)
  if (t_vfork_env.p) {  // its child's environment (NextEnv): the child has exec'd or exited
    sys_unmap(t_vfork_env.p, t_vfork_env.n);
    t_vfork_env = {nullptr, 0};
  }
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
