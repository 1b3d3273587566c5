// Calls that change what a thread is: its credentials, capabilities, namespaces, seccomp filter,
// root. glibc applies set*id and setgroups to every thread of the process (and aborts it when
// one thread fails); capset, PR_SET_KEEPCAPS and PR_SET_SECUREBITS are per thread; the kernel
// refuses unshare(CLONE_NEWUSER) and setns into a user namespace to a process with more than
// one thread. The tracer's writer thread must not be one of the threads these calls meet: it is
// ended before them, and none starts before they return (writer_hold). Then:
//  * a process that gives up root for another user hands that user its trace files (and the
//    trace folder), so that it, and what it runs, go on writing there;
//  * a seccomp filter ends the trace first: after it, the tracer's own system calls may kill
//    the process, or the thread;
//  * after chroot the trace folder is found again inside the new root, or not at all (the
//    records then stay in the live file, for a reader to finish): never in a folder of the same
//    name inside the jail.
// Raw system calls (syscall(SYS_...)) through libc's syscall() are seen; inline ones are not
// (docs/limits.md).
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"
#include "writer.h"

#undef syscall  // this file defines it (libc_syscall.h)

using namespace iot;

namespace {
REAL_FN(setuid, int (*)(uid_t))
REAL_FN(setgid, int (*)(gid_t))
REAL_FN(seteuid, int (*)(uid_t))
REAL_FN(setegid, int (*)(gid_t))
REAL_FN(setreuid, int (*)(uid_t, uid_t))
REAL_FN(setregid, int (*)(gid_t, gid_t))
REAL_FN(setresuid, int (*)(uid_t, uid_t, uid_t))
REAL_FN(setresgid, int (*)(gid_t, gid_t, gid_t))
REAL_FN(setgroups, int (*)(size_t, const gid_t*))
REAL_FN(initgroups, int (*)(const char*, gid_t))
REAL_FN(setfsuid, int (*)(uid_t))
REAL_FN(setfsgid, int (*)(gid_t))
REAL_FN(capset, int (*)(cap_user_header_t, const cap_user_data_t))
REAL_FN(prctl, int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long))
REAL_FN(unshare, int (*)(int))
REAL_FN(setns, int (*)(int, int))
REAL_FN(chroot, int (*)(const char*))
REAL_FN(syscall, long (*)(long, long, long, long, long, long, long))

// Only where the tracer runs in this process's memory (not in a vfork child: its threads are
// the parent's, and so is the writer), and for the program's calls, not the tracer's own.
bool held_here() { return g_interposing && !t_guard && !in_vfork_child(); }

struct Hold {
  bool on = held_here();
  Hold() {
    if (on) writer_hold();
  }
  ~Hold() {
    if (on) writer_release();
  }
};

// Root becoming another user (`uid`, -1: unchanged): the trace's files become that user's.
void before_uid(uid_t uid) {
  if (held_here() && uid != uid_t(-1) && uid != 0 && syscall(SYS_geteuid) == 0)
    writer_files_to_user(uid);
}

// A seccomp filter is about to be installed: the trace ends now, cleanly.
void before_seccomp() {
  if (held_here()) end_process("seccomp", kExitWaitMs);
}
}  // namespace

IOT_EXPORT int setuid(uid_t u) {
  Hold h;
  before_uid(u);
  return real_setuid()(u);
}
IOT_EXPORT int seteuid(uid_t u) {
  Hold h;
  before_uid(u);
  return real_seteuid()(u);
}
IOT_EXPORT int setreuid(uid_t r, uid_t e) {
  Hold h;
  before_uid(e != uid_t(-1) ? e : r);
  return real_setreuid()(r, e);
}
IOT_EXPORT int setresuid(uid_t r, uid_t e, uid_t s) {
  Hold h;
  before_uid(e != uid_t(-1) ? e : r);
  return real_setresuid()(r, e, s);
}
IOT_EXPORT int setgid(gid_t g) {
  Hold h;
  return real_setgid()(g);
}
IOT_EXPORT int setegid(gid_t g) {
  Hold h;
  return real_setegid()(g);
}
IOT_EXPORT int setregid(gid_t r, gid_t e) {
  Hold h;
  return real_setregid()(r, e);
}
IOT_EXPORT int setresgid(gid_t r, gid_t e, gid_t s) {
  Hold h;
  return real_setresgid()(r, e, s);
}
IOT_EXPORT int setgroups(size_t n, const gid_t* list) {
  Hold h;
  return real_setgroups()(n, list);
}
IOT_EXPORT int initgroups(const char* user, gid_t g) {
  Hold h;
  return real_initgroups()(user, g);
}
IOT_EXPORT int setfsuid(uid_t u) {
  Hold h;
  return real_setfsuid()(u);
}
IOT_EXPORT int setfsgid(gid_t g) {
  Hold h;
  return real_setfsgid()(g);
}
IOT_EXPORT int capset(cap_user_header_t hdr, const cap_user_data_t data) {
  Hold h;
  return real_capset()(hdr, data);
}

IOT_EXPORT int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  unsigned long a = va_arg(ap, unsigned long), b = va_arg(ap, unsigned long),
                c = va_arg(ap, unsigned long), d = va_arg(ap, unsigned long);
  va_end(ap);
  // Names, dumpability, timer slack...: nothing of the tracer's is concerned.
  bool per_thread = option == PR_SET_KEEPCAPS || option == PR_SET_SECUREBITS ||
                    option == PR_CAPBSET_DROP || option == PR_CAP_AMBIENT ||
                    option == PR_SET_NO_NEW_PRIVS || option == PR_SET_SECCOMP;
  if (!per_thread) return real_prctl()(option, a, b, c, d);
  Hold h;
  if (option == PR_SET_SECCOMP) before_seccomp();
  return real_prctl()(option, a, b, c, d);
}

IOT_EXPORT int unshare(int flags) {
  Hold h;
  return real_unshare()(flags);
}
IOT_EXPORT int setns(int fd, int nstype) {
  Hold h;
  return real_setns()(fd, nstype);
}

IOT_EXPORT int chroot(const char* path) {
  Hold h;
  Str* root = nullptr;
  // A program may pass NULL (the kernel says EFAULT) where glibc's prototype says nonnull,
  // which lets the compiler drop a plain check: the pointer is compared through an opaque copy.
  const char* given = path;
  __asm__("" : "+r"(given));
  if (held_here() && given) {
    Guard g;
    root = intern_path(path);  // the new root as the old one names it
  }
  int r = real_chroot()(path);
  int err = errno;
  if (r == 0 && root) writer_root_changed(root->str);
  errno = err;
  return r;
}

// The raw forms of the calls above, through libc's syscall() (libseccomp, some runtimes).
// (The tracer's own syscall() calls come here too, guarded: they pass straight through.)
IOT_EXPORT long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long), a4 = va_arg(ap, long),
       a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (t_guard) return real_syscall()(nr, a1, a2, a3, a4, a5, a6);
  switch (nr) {
    case SYS_seccomp:
    case SYS_setuid:
    case SYS_setgid:
    case SYS_setreuid:
    case SYS_setregid:
    case SYS_setresuid:
    case SYS_setresgid:
    case SYS_setgroups:
    case SYS_capset:
    case SYS_unshare:
    case SYS_setns: {
      Hold h;
      if (nr == SYS_seccomp && (a1 == SECCOMP_SET_MODE_FILTER || a1 == SECCOMP_SET_MODE_STRICT))
        before_seccomp();
      return real_syscall()(nr, a1, a2, a3, a4, a5, a6);
    }
    default:
      return real_syscall()(nr, a1, a2, a3, a4, a5, a6);
  }
}
