/* A small-I/O workload: rounds of lseek + read + pread + fstat on a 4 MiB file (4 calls a
 * round), at scattered offsets as a random sampler makes them.
 *
 *   posix_workload FILE ROUNDS            the loop's wall time in ns, and the calls made
 *   posix_workload FILE ROUNDS alternate  under the preloaded tracer: blocks of 250 rounds,
 *       recorded and paused (iotrace_pause) in turn, so that the machine's drift hits both
 *       alike; prints ns per call of the recorded blocks and of the paused ones.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { BLOCK = 4096, NBLOCKS = 1024, ROUNDS_PER_TURN = 250 };
static char buf[BLOCK];

static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) static int rounds(int fd, long first, long n) {
  struct stat st;
  for (long i = first; i < first + n; i++) {
    off_t off = (off_t)((i * 7919) % NBLOCKS) * BLOCK;
    lseek(fd, off, SEEK_SET);
    if (read(fd, buf, BLOCK) != BLOCK) return 2;
    if (pread(fd, buf, BLOCK, (off + BLOCK) % ((off_t)NBLOCKS * BLOCK)) != BLOCK) return 3;
    fstat(fd, &st);
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/tmp/iotrace-bench.dat";
  long n = argc > 2 ? atol(argv[2]) : 100000;
  int alternate = argc > 3 && strcmp(argv[3], "alternate") == 0;
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return perror("open"), 1;
  for (int i = 0; i < NBLOCKS; i++)
    if (write(fd, buf, BLOCK) != BLOCK) return perror("write"), 1;
  int rc = 0;
  if (!alternate) {
    long long t0 = now();
    rc = rounds(fd, 0, n);
    printf("%lld %ld\n", now() - t0, n * 4);
  } else {
    void (*pause_fn)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "iotrace_pause");
    if (!pause_fn) return fprintf(stderr, "not under the iotrace preload library\n"), 1;
    long long on_ns = 0, off_ns = 0;
    for (long i = 0; i < n && !rc; i += ROUNDS_PER_TURN) {
      int recorded = (i / ROUNDS_PER_TURN) % 2 == 0;
      pause_fn(!recorded);
      long long t0 = now();
      rc = rounds(fd, i, ROUNDS_PER_TURN);
      long long dt = now() - t0;
      if (recorded)
        on_ns += dt;
      else
        off_ns += dt;
    }
    pause_fn(0);
    long calls_each = n / 2 * 4;
    printf("%.1f %.1f %ld\n", (double)on_ns / calls_each, (double)off_ns / calls_each, calls_each);
  }
  close(fd);
  unlink(path);
  return rc;
}
