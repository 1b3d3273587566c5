/* A signal handler's I/O at a high rate while the thread it interrupts makes traced calls
 * (tests/test_faults.py):  handler_storm DIR N USEC
 * An ITIMER_REAL timer every USEC µs; its SIGALRM handler write()s one byte to DIR/log. The main
 * thread meanwhile makes N pwrite/pread pairs on DIR/data, so the signals land everywhere: in
 * the calls, between them, and inside the tracer's bookkeeping of them. Prints the handler's
 * count and N. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int g_log;
static volatile sig_atomic_t g_count;

static void on_alarm(int sig) {
  (void)sig;
  int saved = 0;
  if (write(g_log, "x", 1) == 1) g_count++;
  (void)saved;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/log", argv[1]);
  g_log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  snprintf(path, sizeof path, "%s/data", argv[1]);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (g_log < 0 || fd < 0) return 3;
  long n = atol(argv[2]), usec = atol(argv[3]);
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_alarm;
  a.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &a, NULL);
  struct itimerval every = {{0, usec}, {0, usec}};
  setitimer(ITIMER_REAL, &every, NULL);
  char buf[8] = "abcdefg";
  for (long i = 0; i < n; i++) {
    if (pwrite(fd, buf, 8, (i * 8) % 4096) != 8 || pread(fd, buf, 8, (i * 8) % 4096) != 8) return 4;
  }
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  printf("%d %ld\n", (int)g_count, n);
  return 0;
}
