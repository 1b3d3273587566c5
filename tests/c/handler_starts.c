/* A handler that records while its thread is inside libc's thread and memory bookkeeping
 * (tests/test_stack.py):  handler_starts FILE RUNS
 * The main thread creates and joins threads and mallocs, over and over; a SIGALRM every 50 us
 * writes 16 bytes to FILE 16 times, RUNS times in all. Only the handler records, so the
 * tracer's buffers fill (and its writer is wanted) inside the handler, which may have
 * interrupted pthread_create, pthread_join or malloc holding locks that starting a thread
 * takes: a tracer that started one there would wait forever on its own thread. The short-lived
 * threads get the signal too (two handlers may run at once: the counts are atomic). Prints the
 * handler's writes that wrote their 16 bytes. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int g_fd, g_runs;
static int g_done, g_writes;

static void on_alarm(int sig) {
  (void)sig;
  if (__atomic_fetch_add(&g_done, 1, __ATOMIC_RELAXED) >= g_runs) return;
  for (int i = 0; i < 16; i++)
    if (write(g_fd, "0123456789abcdef", 16) == 16)
      __atomic_fetch_add(&g_writes, 1, __ATOMIC_RELAXED);
}

static void* nothing(void* arg) { return arg; }

/* Keeps the process multi-threaded (malloc then takes its arena's lock), with SIGALRM blocked. */
static void* sleeper(void* arg) {
  pause();
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  g_runs = atoi(argv[2]);
  if (g_fd < 0) return 3;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_alarm;
  a.sa_flags = SA_RESTART;
  if (sigaction(SIGALRM, &a, NULL) != 0) return 4;
  sigset_t alrm, was;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, &was);
  pthread_t s;
  if (pthread_create(&s, NULL, sleeper, NULL) != 0) return 5;
  pthread_sigmask(SIG_SETMASK, &was, NULL);
  struct itimerval every = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &every, NULL);
  for (unsigned k = 0; __atomic_load_n(&g_done, __ATOMIC_RELAXED) < g_runs; k++) {
    pthread_t t;
    if (k % 4096 == 0 && pthread_create(&t, NULL, nothing, NULL) == 0) pthread_join(t, NULL);
    void* p[16];
    for (int i = 0; i < 16; i++)
      p[i] = malloc(2048 + 512 * i); /* past the thread cache: the arena lock */
    for (int i = 0; i < 16; i++) free(p[i]);
  }
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  close(g_fd);
  printf("%d\n", __atomic_load_n(&g_writes, __ATOMIC_RELAXED));
  return 0;
}
