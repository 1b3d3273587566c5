/* The program's own fds (tests/test_parity.py); run as is, or under parity_seccomp
 * deny-unshare (where the tracer's writer thread cannot have an fd table of its own).
 * Each first writes DIR/before and waits 200 ms (a program that has been running a while:
 * under a short flush interval the trace file exists by then).
 *   parity_fds closefrom DIR     closefrom(3), then DIR/data.bin gets 1000 bytes; a pause;
 *                                exit. (A daemon or a spawner closing what it inherited.)
 *   parity_fds close_range DIR   the same with close_range(3, ~0U, 0)
 *   parity_fds nofile DIR N      RLIMIT_NOFILE of N; prints how many opens of /dev/null
 *                                succeed, and the errno of the first that fails */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int write_data(const char* dir) {
  char path[4096], buf[1000];
  snprintf(path, sizeof path, "%s/data.bin", dir);
  memset(buf, 'd', sizeof buf);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return 4;
  usleep(300000);
  if (close(fd) != 0) return 5;
  printf("fd %d\n", fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/before", argv[2]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "before", 6) != 6 || close(fd) != 0) return 7;
  usleep(200000);
  if (strcmp(argv[1], "closefrom") == 0) {
    closefrom(3);
    return write_data(argv[2]);
  }
  if (strcmp(argv[1], "close_range") == 0) {
    if (close_range(3, ~0U, 0) != 0) return 6;
    return write_data(argv[2]);
  }
  if (strcmp(argv[1], "nofile") == 0 && argc > 3) {
    struct rlimit r = {(rlim_t)atoi(argv[3]), (rlim_t)atoi(argv[3])};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) return 6;
    int n = 0;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0) n++;
    printf("opened %d errno %d\n", n, errno);
    return 0;
  }
  return 2;
}
