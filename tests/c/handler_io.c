/* A signal handler's own I/O while the thread it interrupted is inside a traced call
 * (tests/test_faults.py):  handler_io DIR N
 * A SIGALRM every 2 ms; the handler writes one byte to DIR/log each time. The main thread
 * meanwhile blocks in one read of a pipe, which the N-th handler run feeds (and disarms the
 * timer), so every handler write lands inside that read. Prints the handler's count. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int g_log, g_pipe[2], g_n;
static volatile int g_count;

static void on_alarm(int sig) {
  (void)sig;
  if (write(g_log, "x", 1) != 1) _exit(7);
  if (++g_count == g_n) {
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, NULL);
    if (write(g_pipe[1], "!", 1) != 1) _exit(8);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/log", argv[1]);
  g_n = atoi(argv[2]);
  g_log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (g_log < 0 || pipe(g_pipe) != 0) return 3;
  char c;
  /* the pipe's ends are known to the tracer before the timer starts */
  if (write(g_pipe[1], "w", 1) != 1 || read(g_pipe[0], &c, 1) != 1) return 4;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_alarm;
  a.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &a, NULL);
  struct itimerval every = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_REAL, &every, NULL);
  if (read(g_pipe[0], &c, 1) != 1 || c != '!') return 5;
  close(g_log);
  printf("%d\n", g_count);
  return 0;
}
