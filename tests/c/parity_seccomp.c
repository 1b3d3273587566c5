/* Programs in a seccomp sandbox (tests/test_parity.py). Each writes DIR/before, enters the
 * sandbox, writes "sandboxed" to stdout and exits 5; the sandbox allows only what that
 * needs (read, write, exit, exit_group, rt_sigreturn), so untraced it never triggers.
 *   parity_seccomp kill-process DIR   filter by prctl(PR_SET_SECCOMP), SECCOMP_RET_KILL_PROCESS
 *   parity_seccomp kill-syscall DIR   the same filter by the seccomp() system call
 *   parity_seccomp trap DIR           SECCOMP_RET_TRAP (SIGSYS)
 *   parity_seccomp kill-thread DIR    SECCOMP_RET_KILL_THREAD
 *   parity_seccomp errno DIR          SECCOMP_RET_ERRNO(EPERM)
 *   parity_seccomp strict DIR         SECCOMP_MODE_STRICT (read, write, exit, sigreturn: the
 *                                     program ends with the exit system call)
 *   parity_seccomp deny-unshare PROG ARG...  a filter under which unshare fails with EPERM
 *                                     (a container runtime's default), then execs PROG */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "parity_seccomp: unknown architecture"
#endif

#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define IS(nr, action) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, action)

static int install(struct sock_filter* code, unsigned short n, int by_syscall) {
  struct sock_fprog prog = {n, code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  if (by_syscall) return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Only what the program needs from here on; anything else gets `action`. */
static int sandbox(unsigned action, int by_syscall) {
  struct sock_filter code[] = {
      LOAD(arch),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      LOAD(nr),
      IS(__NR_read, SECCOMP_RET_ALLOW),
      IS(__NR_write, SECCOMP_RET_ALLOW),
      IS(__NR_exit, SECCOMP_RET_ALLOW),
      IS(__NR_exit_group, SECCOMP_RET_ALLOW),
      IS(__NR_rt_sigreturn, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, action),
  };
  return install(code, sizeof code / sizeof *code, by_syscall);
}

/* Everything, but unshare fails with EPERM. */
static int deny_unshare(void) {
  struct sock_filter code[] = {
      LOAD(nr),
      IS(__NR_unshare, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  return install(code, sizeof code / sizeof *code, 0);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  if (strcmp(mode, "deny-unshare") == 0) {
    if (deny_unshare() != 0) return 3;
    execv(argv[2], argv + 2);
    return 4;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/before", argv[2]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "before", 6) != 6 || close(fd) != 0) return 3;
  int r;
  if (strcmp(mode, "kill-process") == 0)
    r = sandbox(SECCOMP_RET_KILL_PROCESS, 0);
  else if (strcmp(mode, "kill-syscall") == 0)
    r = sandbox(SECCOMP_RET_KILL_PROCESS, 1);
  else if (strcmp(mode, "trap") == 0)
    r = sandbox(SECCOMP_RET_TRAP, 0);
  else if (strcmp(mode, "kill-thread") == 0)
    r = sandbox(SECCOMP_RET_KILL_THREAD, 0);
  else if (strcmp(mode, "errno") == 0)
    r = sandbox(SECCOMP_RET_ERRNO | EPERM, 0);
  else if (strcmp(mode, "strict") == 0)
    r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0);
  else
    return 2;
  if (r != 0) return 4;
  if (write(1, "sandboxed\n", 10) != 10) return 6;
  if (strcmp(mode, "strict") == 0) syscall(SYS_exit, 5);
  exit(5);
}
