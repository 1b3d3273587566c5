/* Event generator for benchmarks/analyzer_bench.py: forks PROCS processes; each makes
 * ROUNDS rounds of lseek + pread(1 byte) on its own small file (2 intercepted calls a round),
 * so that under LD_PRELOAD=libiotrace.so the tracer writes PROCS traces of ~2*ROUNDS events.
 * AT_ONCE (default PROCS) bounds the processes alive at a time: 5000 ranks' worth of traces
 * made on a 2-core machine without 5000 processes holding their buffers at once.
 * usage: gen_events DIR ROUNDS PROCS [AT_ONCE] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int work(const char* dir, long rounds, int k) {
  char path[4096];
  snprintf(path, sizeof path, "%s/data-%d.bin", dir, k);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return perror("open"), 1;
  char buf[4096] = {0};
  if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return perror("write"), 1;
  for (long i = 0; i < rounds; i++) {
    off_t off = (off_t)((i * 7919) % 4096);
    lseek(fd, off, SEEK_SET);
    if (pread(fd, buf, 1, off) != 1) return 2;
  }
  close(fd);
  unlink(path);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) return fprintf(stderr, "usage: %s DIR ROUNDS PROCS [AT_ONCE]\n", argv[0]), 2;
  const char* dir = argv[1];
  long rounds = atol(argv[2]);
  int procs = atoi(argv[3]);
  int at_once = argc > 4 ? atoi(argv[4]) : procs;
  if (at_once < 1) at_once = 1;
  int status, bad = 0, alive = 0;
  for (int k = 0; k < procs; k++) {
    if (alive == at_once && wait(&status) > 0) {
      bad |= !WIFEXITED(status) || WEXITSTATUS(status);
      alive--;
    }
    pid_t p = fork();
    if (p == 0) _exit(work(dir, rounds, k));
    if (p < 0) return perror("fork"), 1;
    alive++;
  }
  while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
  return bad;
}
