/* Many events and many files under argv[1]: for each of argv[2] files, create it and write
 * (its index + 1) bytes, then argv[3] preads of 256 B from big.bin (64 KiB, made by the
 * test) at offsets that walk the file and wrap. tests/test_compact.py: frames, sizes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const char* dir = argv[1];
  int files = atoi(argv[2]), per = atoi(argv[3]);
  static char buf[65536], path[4096];
  memset(buf, 'm', sizeof buf);
  snprintf(path, sizeof path, "%s/big.bin", dir);
  int big = open(path, O_RDONLY);
  if (big < 0) return 1;
  long k = 0;
  for (int f = 0; f < files; f++) {
    snprintf(path, sizeof path, "%s/f%04d", dir, f);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, f + 1) != f + 1) return 1;
    close(fd);
    for (int i = 0; i < per; i++, k++)
      if (pread(big, buf, 256, (k * 256) % 65536) != 256) return 1;
  }
  close(big);
  return 0;
}
