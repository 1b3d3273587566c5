/* Signal handlers on a small alternate stack (tests/test_parity.py). A program that handles
 * its own crashes runs the handler on a sigaltstack of its own size; 8 KiB is common (the
 * kernel's MINSIGSTKSZ is 2 KiB, glibc's old SIGSTKSZ 8 KiB).
 *   parity_altstack io DIR       a SIGSEGV handler on an 8 KiB stack opens DIR/crash, writes
 *                                to it and _exits 43 (a crash reporter)
 *   parity_altstack longjmp DIR  a SIGSEGV handler on an 8 KiB stack siglongjmps back; the
 *                                program then writes DIR/after and exits 0 (recovery)
 * DIR/before is written before the fault. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALT_SIZE 8192

static const char* g_dir;
static sigjmp_buf g_back;

static void put(const char* name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) _exit(40);
  if (write(fd, name, strlen(name)) != (ssize_t)strlen(name)) _exit(41);
  if (close(fd) != 0) _exit(42);
}

static void on_segv_io(int sig) {
  (void)sig;
  put("crash");
  _exit(43);
}

static void on_segv_jump(int sig) {
  (void)sig;
  siglongjmp(g_back, 1);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_dir = argv[2];
  static char alt[ALT_SIZE];
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  if (sigaltstack(&ss, NULL) != 0) return 3;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_flags = SA_ONSTACK;
  sigemptyset(&a.sa_mask);
  int jump = strcmp(argv[1], "longjmp") == 0;
  a.sa_handler = jump ? on_segv_jump : on_segv_io;
  if (sigaction(SIGSEGV, &a, NULL) != 0) return 4;
  put("before");
  if (jump && sigsetjmp(g_back, 1)) {
    put("after");
    printf("recovered\n");
    return 0;
  }
  *(volatile int*)0 = 1;
  printf("not reached\n");
  return 5;
}
