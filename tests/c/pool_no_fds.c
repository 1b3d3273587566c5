/* A pool of threads that record about 1 MiB after the program has used up its fds: opens FILE,
 * lowers RLIMIT_NOFILE to 32, opens /dev/null until EMFILE, then N threads each pwrite W single
 * bytes to FILE at offsets i*W .. i*W+W-1. The tracer can then get no fd of its own to make
 * its live file's pages ready and must have them through the mapping.
 *   pool_no_fds FILE N W   -> prints "fds K wrote N*W" (K: the /dev/null opens that worked) */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static int g_fd;
static long g_writes;
static long g_wrote[4096];

static void* work(void* arg) {
  long i = (long)arg;
  for (long k = 0; k < g_writes; k++)
    if (pwrite(g_fd, "y", 1, i * g_writes + k) == 1) g_wrote[i]++;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  long n = atol(argv[2]);
  g_writes = atol(argv[3]);
  if (n > 4096) return 2;
  g_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (g_fd < 0) return 3;
  struct rlimit r = {32, 32};
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) return 4;
  long fds = 0;
  while (open("/dev/null", O_RDONLY) >= 0) fds++;
  if (errno != EMFILE) return 5;
  pthread_t* t = calloc(n, sizeof *t);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 << 10);
  for (long i = 0; i < n; i++)
    if (pthread_create(&t[i], &a, work, (void*)i) != 0) return 6;
  long wrote = 0;
  for (long i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    wrote += g_wrote[i];
  }
  printf("fds %ld wrote %ld\n", fds, wrote);
  return 0;
}
