/* The workload of the golden live files (tests/make_golden.py, the `live<N>/` sets): a fixed set
 * of calls on files under argv[1] (default /tmp/iotrace-golden-data), then SIGKILL, so that its
 * trace is only in its live file and a reader must finish it from there:
 *   open live.bin (O_CREAT|O_WRONLY|O_TRUNC, 0644), 3 x pwrite of 100 bytes at 0, 100, 200,
 *   fsync, close, rename live.bin -> moved.bin, open moved.bin, pread of 50 at 25, read of 10,
 *   close, raise(SIGKILL)
 * The opens carry flags and a mode and the rename two files (the long form of a record in
 * version 2 of the live file), the others do not (the short form).
 * Build: cc -O0 -fno-builtin -D_GNU_SOURCE live_workload.c -o live_workload */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/tmp/iotrace-golden-data";
  char a[4096], b[4096], buf[100];
  snprintf(a, sizeof a, "%s/live.bin", dir);
  snprintf(b, sizeof b, "%s/moved.bin", dir);
  memset(buf, 'x', sizeof buf);
  int fd = open(a, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return 1;
  for (int i = 0; i < 3; i++)
    if (pwrite(fd, buf, 100, i * 100) != 100) return 1;
  fsync(fd);
  close(fd);
  if (rename(a, b) != 0) return 1;
  fd = open(b, O_RDONLY);
  if (fd < 0 || pread(fd, buf, 50, 25) != 50 || read(fd, buf, 10) != 10) return 1;
  close(fd);
  raise(SIGKILL);
  return 1;
}
