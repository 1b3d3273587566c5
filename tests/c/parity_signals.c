/* Signals as the program sees them (tests/test_parity.py).
 *   parity_signals siginterrupt      SIGALRM handler installed by signal(), made interrupting
 *                                    by siginterrupt(SIGALRM, 1); alarm(1); a read of an empty
 *                                    pipe: prints its result and errno (-1, EINTR)
 *   parity_signals status            the SigBlk, SigIgn and SigCgt lines of /proc/self/status
 *   parity_signals vfork DIR SECS    writes DIR/before, prints "ready", then vforks a child
 *                                    that sleeps SECS before it _exits; the parent waits in
 *                                    vfork (SIGTERM kills it there at once)
 *   parity_signals init DIR          as PID 1 of a PID namespace: a child sends SIGTERM to it
 *                                    while it polls for 1 s; prints what poll returned (init
 *                                    does not get signals it has no handler for)
 *   parity_signals raise DIR         a thread writes CLOCK_MONOTONIC stamps (ns) to DIR/stamps
 *                                    in a loop; once it has written 100000, the main thread
 *                                    puts the time in DIR/raised and raises SIGTERM
 *   parity_signals handlers          handlers set with sigaction (with and without SA_SIGINFO),
 *                                    signal, bsd_signal, sysv_signal and sigset, read back
 *                                    (the handler, the flags, what signal() returns) and run:
 *                                    prints what it saw, then the SigCgt line
 *   parity_signals longjmp FILE      a SIGUSR1 handler left by siglongjmp, then 20000 writes
 *                                    to FILE: prints the process's thread count (1 untraced;
 *                                    traced, the writer thread started afterwards: 2) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_signal(int sig) { (void)sig; }

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_in(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
}

static int put(const char* dir, const char* name) {
  int fd = open_in(dir, name);
  if (fd < 0 || write(fd, name, strlen(name)) != (ssize_t)strlen(name) || close(fd) != 0) return -1;
  return 0;
}

static int interrupted_read(void) {
  int p[2];
  if (pipe(p) != 0) return 3;
  if (signal(SIGALRM, on_signal) == SIG_ERR) return 4;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (siginterrupt(SIGALRM, 1) != 0) return 5;
#pragma GCC diagnostic pop
  alarm(1);
  char c;
  errno = 0;
  ssize_t r = read(p[0], &c, 1);
  printf("read %zd errno %d\n", r, errno);
  return 0;
}

static int status(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 3;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "SigBlk:", 7) || !strncmp(line, "SigIgn:", 7) ||
        !strncmp(line, "SigCgt:", 7))
      fputs(line, stdout);
  fclose(f);
  return 0;
}

static int vfork_wait(const char* dir, int secs) {
  if (put(dir, "before") != 0) return 3;
  printf("ready\n");
  fflush(stdout);
  pid_t pid = vfork();
  if (pid == 0) {
    sleep((unsigned)secs);
    _exit(0);
  }
  if (pid < 0) return 4;
  int st;
  waitpid(pid, &st, 0);
  printf("child done\n");
  return 0;
}

static int init(const char* dir) {
  if (put(dir, "before") != 0) return 3;
  pid_t pid = fork();
  if (pid == 0) {
    usleep(200000);
    kill(getppid(), SIGTERM);
    _exit(0);
  }
  if (pid < 0) return 4;
  errno = 0;
  int r = poll(NULL, 0, 1000);
  int e = errno;
  int st;
  waitpid(pid, &st, 0);
  printf("pid %d poll %d errno %d\n", (int)getpid(), r, e);
  return 0;
}

static int g_stamps;
static atomic_int g_written;

static void* stamper(void* arg) {
  (void)arg;
  char line[32];
  for (;;) {
    int n = snprintf(line, sizeof line, "%lld\n", now_ns());
    if (write(g_stamps, line, (size_t)n) != n) _exit(9);
    atomic_fetch_add(&g_written, 1);
  }
  return NULL;
}

static int raise_term(const char* dir) {
  g_stamps = open_in(dir, "stamps");
  int raised = open_in(dir, "raised");
  if (g_stamps < 0 || raised < 0 || ftruncate(raised, 32) != 0) return 3;
  /* the time of the raise goes to a shared mapping of DIR/raised: no system call between it
   * and the raise */
  char* at = mmap(NULL, 32, PROT_READ | PROT_WRITE, MAP_SHARED, raised, 0);
  if (at == MAP_FAILED) return 4;
  memset(at, ' ', 32);
  pthread_t th;
  if (pthread_create(&th, NULL, stamper, NULL) != 0) return 5;
  while (atomic_load(&g_written) < 100000) usleep(100);
  snprintf(at, 31, "%lld", now_ns());
  raise(SIGTERM);
  return 6;
}

typedef void (*handler_t)(int);
handler_t bsd_signal(int sig, handler_t h); /* exported by glibc, declared only for old X/Open */
static volatile int g_plain_runs, g_info_runs, g_info_code;
static void on_plain(int sig) {
  (void)sig;
  g_plain_runs++;
}
static void on_info(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  g_info_runs++;
  g_info_code = si->si_code;
}

/* The action as sigaction reads it back: is the handler the one set, which flags. */
static void show(const char* what, int sig, void* want) {
  struct sigaction a;
  if (sigaction(sig, NULL, &a) != 0) {
    printf("%s: sigaction failed\n", what);
    return;
  }
  void* h = (a.sa_flags & SA_SIGINFO) ? (void*)a.sa_sigaction : (void*)a.sa_handler;
  printf("%s: handler %s flags %#x usr2-masked %d\n", what, h == want ? "same" : "differs",
         (unsigned)a.sa_flags, sigismember(&a.sa_mask, SIGUSR2));
}

static int handlers(void) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_plain;
  a.sa_flags = SA_RESTART | SA_NODEFER;
  sigemptyset(&a.sa_mask);
  sigaddset(&a.sa_mask, SIGUSR2);
  if (sigaction(SIGUSR1, &a, NULL) != 0) return 3;
  show("sigaction plain", SIGUSR1, (void*)on_plain);
  memset(&a, 0, sizeof a);
  a.sa_sigaction = on_info;
  a.sa_flags = SA_SIGINFO | SA_RESETHAND;
  struct sigaction old;
  if (sigaction(SIGUSR1, &a, &old) != 0) return 4;
  printf("old: handler %s flags %#x\n",
         (void*)old.sa_handler == (void*)on_plain ? "same" : "differs", (unsigned)old.sa_flags);
  show("sigaction siginfo", SIGUSR1, (void*)on_info);
  raise(SIGUSR1);
  printf("siginfo runs %d code %d\n", g_info_runs, g_info_code);
  show("after resethand", SIGUSR1, (void*)SIG_DFL);
  handler_t r = signal(SIGUSR2, on_plain);
  printf("signal first returns %s\n", r == SIG_DFL ? "SIG_DFL" : "other");
  r = signal(SIGUSR2, SIG_IGN);
  printf("signal again returns %s\n", r == on_plain ? "on_plain" : "other");
  show("signal ign", SIGUSR2, (void*)SIG_IGN);
  r = signal(SIGUSR2, on_plain);
  show("signal", SIGUSR2, (void*)on_plain);
  raise(SIGUSR2);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  r = sysv_signal(SIGHUP, on_plain);
  show("sysv_signal", SIGHUP, (void*)on_plain);
  raise(SIGHUP);
  r = bsd_signal(SIGHUP, on_plain);
  printf("bsd_signal returns %s\n", r == on_plain ? "on_plain" : "other");
  show("bsd_signal", SIGHUP, (void*)on_plain);
  raise(SIGHUP);
  r = sigset(SIGWINCH, on_plain);
  show("sigset", SIGWINCH, (void*)on_plain);
  raise(SIGWINCH);
  r = sigset(SIGWINCH, SIG_DFL);
  printf("sigset returns %s\n", r == on_plain ? "on_plain" : "other");
#pragma GCC diagnostic pop
  printf("plain runs %d\n", g_plain_runs);
  fflush(stdout);
  return status();
}

static sigjmp_buf g_jump;
static void on_usr1_jump(int sig) {
  (void)sig;
  siglongjmp(g_jump, 1);
}

static int threads_now(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Threads:", 8)) n = atoi(line + 8);
  if (f) fclose(f);
  return n;
}

static int left_by_longjmp(const char* path) {
  if (signal(SIGUSR1, on_usr1_jump) == SIG_ERR) return 3;
  if (sigsetjmp(g_jump, 1) == 0) {
    raise(SIGUSR1);
    return 4; /* not reached: the handler jumps */
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 5;
  for (int i = 0; i < 20000; i++)
    if (write(fd, "x", 1) != 1) return 6;
  close(fd);
  printf("threads %d\n", threads_now());
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (strcmp(mode, "siginterrupt") == 0) return interrupted_read();
  if (strcmp(mode, "status") == 0) return status();
  if (strcmp(mode, "handlers") == 0) return handlers();
  if (argc < 3) return 2;
  if (strcmp(mode, "longjmp") == 0) return left_by_longjmp(argv[2]);
  if (strcmp(mode, "vfork") == 0 && argc > 3) return vfork_wait(argv[2], atoi(argv[3]));
  if (strcmp(mode, "init") == 0) return init(argv[2]);
  if (strcmp(mode, "raise") == 0) return raise_term(argv[2]);
  return 2;
}
