/* Many small preads at scattered offsets, for a trace that outgrows its disk
 * (tests/test_faults.py):  many_preads FILE N
 * FILE is made here (64 KiB); prints "done N" when all N preads returned 8 bytes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = atol(argv[2]);
  static char buf[65536];
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return 3;
  for (long i = 0; i < n; i++)
    if (pread(fd, buf, 8, (off_t)((i * 7919 * 8) % 65528)) != 8) return 4;
  close(fd);
  printf("done %ld\n", n);
  return 0;
}
