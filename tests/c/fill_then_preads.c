/* The program fills the disk its trace is on, then makes K small preads and exits
 * (tests/test_faults.py):  fill_then_preads FILE K
 * The trace file is made first (iotrace_flush, found at run time), so it holds its tail
 * reserve before the disk fills; what is pending at exit then meets a full disk.
 * Prints "filled B done K" (B: the bytes FILE took). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long k = atol(argv[2]);
  void (*flush)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "iotrace_flush");
  if (flush) flush();
  static char buf[4096];
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  long filled = 0;
  for (;;) {
    ssize_t w = write(fd, buf, sizeof buf);
    if (w <= 0) break;
    filled += w;
  }
  if (errno != ENOSPC || filled < 8) return 4;
  for (long i = 0; i < k; i++)
    if (pread(fd, buf, 8, (off_t)((i * 7919 * 8) % (filled - 8))) != 8) return 5;
  close(fd);
  printf("filled %ld done %ld\n", filled, k);
  return 0;
}
