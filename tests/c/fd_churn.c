/* fd numbers reused across threads at once: THREADS threads each do ROUNDS rounds of
 * open(DIR/t<k>-<r % 4>, O_WRONLY | O_CREAT | O_TRUNC) + 3 writes of 10 bytes + close. The
 * kernel hands the lowest free fd to whichever thread opens next, so a number one thread has
 * just closed is reopened by another while the first is still in the tracer's close handling.
 *   fd_churn DIR THREADS ROUNDS      prints "<k> <tid>" for each thread k
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char* dir;
static long rounds;
static long tids[64];

static void* worker(void* arg) {
  long k = (long)arg;
  tids[k] = syscall(SYS_gettid);
  char path[4096], buf[10] = "0123456789";
  for (long r = 0; r < rounds; r++) {
    snprintf(path, sizeof path, "%s/t%ld-%ld", dir, k, r % 4);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      perror("open");
      exit(1);
    }
    for (int i = 0; i < 3; i++)
      if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) exit(2);
    close(fd);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) return fprintf(stderr, "usage: %s DIR THREADS ROUNDS\n", argv[0]), 2;
  dir = argv[1];
  long n = atol(argv[2]);
  rounds = atol(argv[3]);
  if (n < 1 || n > 64) return 2;
  pthread_t th[64];
  for (long k = 0; k < n; k++) pthread_create(&th[k], NULL, worker, (void*)k);
  for (long k = 0; k < n; k++) pthread_join(th[k], NULL);
  for (long k = 0; k < n; k++) printf("%ld %ld\n", k, tids[k]);
  return 0;
}
