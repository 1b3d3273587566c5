/* Many threads on the tracer's slow paths at once, interrupted by a handler that takes them too
 * (tests/test_stack.py):  scratch_stress DIR THREADS ITERS
 * Each thread opens DIR/t/N by a relative path (resolved against the cwd) and writes a byte,
 * then reads it back through an fd made with raw syscalls (the tracer learns its path), ITERS
 * times. A SIGALRM every 100 us does the same on DIR/h in whichever thread it lands (in the
 * middle of the tracer's own work, its calls pass untraced). Every event must name its own
 * file: a scratch buffer shared by two users would mix their paths. Prints the handler's runs. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static int g_iters;
static volatile int g_runs;
static pthread_barrier_t g_start;
static int g_base;
static __thread int t_index; /* 1 + the thread's number; 0: a thread not made here */

/* The fd the tracer has to learn gets a number of its own, made with raw syscalls, far above
 * those the kernel hands out (the lowest free): a number that another thread's close just gave
 * back could be used before that close is done, and an unknown fd then borrows the name of the
 * closing one (not what this test is about). */
static void once(const char* rel, int own) {
  char c;
  int fd = open(rel, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0) _exit(10);
  int raw = (int)syscall(SYS_openat, AT_FDCWD, rel, O_RDONLY);
  if (raw < 0 || syscall(SYS_dup3, raw, own, 0) != own) _exit(11);
  syscall(SYS_close, raw);
  if (read(own, &c, 1) != 1 || close(own) != 0) _exit(12);
}

static void on_alarm(int sig) {
  (void)sig;
  if (t_index == 0) return; /* the tracer's writer, before it blocks signals: not ours */
  once("h", g_base + 2 * t_index + 1);
  __sync_fetch_and_add(&g_runs, 1);
}

static void* worker(void* arg) {
  char rel[64];
  t_index = 1 + (int)(long)arg;
  snprintf(rel, sizeof rel, "t/%ld", (long)arg);
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_UNBLOCK, &alrm, NULL); /* blocked until its t_index is set */
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < g_iters; i++) once(rel, g_base + 2 * t_index);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4 || chdir(argv[1]) != 0) return 2;
  int n = atoi(argv[2]);
  g_iters = atoi(argv[3]);
  t_index = n + 1; /* the main thread's handler runs */
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 6;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) return 7;
  g_base = (int)(r.rlim_cur < 65536 ? r.rlim_cur : 65536) - (2 * n + 4);
  if (g_base < 4 * n + 64) return 7; /* too close to the numbers in use */
  pthread_t* t = calloc((size_t)n, sizeof *t);
  if (!t || pthread_barrier_init(&g_start, NULL, (unsigned)n + 1) != 0) return 3;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_alarm;
  a.sa_flags = SA_RESTART;
  sigemptyset(&a.sa_mask);
  if (sigaction(SIGALRM, &a, NULL) != 0) return 4;
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, NULL); /* the threads start with it blocked */
  for (long i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, worker, (void*)i) != 0) return 5;
  pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
  struct itimerval every = {{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &every, NULL);
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  printf("%d\n", g_runs);
  return 0;
}
