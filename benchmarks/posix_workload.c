/* A small-I/O workload: N rounds of lseek + read + pread + fstat on a 4 MiB file (4 calls a
 * round). Prints the loop's wall time in ns and the number of intercepted calls it made. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/tmp/iotrace-bench.dat";
  long rounds = argc > 2 ? atol(argv[2]) : 100000;
  const int block = 4096, nblocks = 1024;
  static char buf[4096];
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return perror("open"), 1;
  for (int i = 0; i < nblocks; i++)
    if (write(fd, buf, block) != block) return perror("write"), 1;
  struct stat st;
  long long t0 = now();
  for (long i = 0; i < rounds; i++) {
    off_t off = (off_t)((i * 7919) % nblocks) * block;  /* scattered, as a sampler would */
    lseek(fd, off, SEEK_SET);
    if (read(fd, buf, block) != block) return 2;
    if (pread(fd, buf, block, (off + block) % ((off_t)nblocks * block)) != block) return 3;
    fstat(fd, &st);
  }
  long long t1 = now();
  close(fd);
  unlink(path);
  printf("%lld %ld\n", t1 - t0, rounds * 4);
  return 0;
}
