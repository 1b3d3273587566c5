// Values past the live record's 32-bit fields (record.h: IoLive): a pread asking for 5 GiB of a
// 10-byte file (the size argument is what is recorded), then a read of stdin that blocks until
// the test writes (a duration of seconds: more than 2^32 ticks or ns on any clock here), then a
// pread of 7 bytes (a short record after the wide ones). Prints "ready", then waits (to be
// killed) when told "wait", else exits.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) return 3;
  char* buf = malloc(64);
  ssize_t got = pread(fd, buf, (size_t)5 << 30, 0);
  if (got != 10) return 4;
  char c;
  if (read(0, &c, 1) != 1) return 5;
  if (pread(fd, buf, 7, 1) != 7) return 6;
  close(fd);
  printf("ready\n");
  fflush(stdout);
  if (strcmp(argv[2], "wait") == 0) pause();
  return 0;
}
