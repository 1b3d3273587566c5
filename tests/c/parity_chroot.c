/* A program that chroots (tests/test_parity.py):  parity_chroot JAIL
 * Writes JAIL/before, chroots into JAIL, then writes /inside (JAIL/inside) and exits 0: the
 * jail holds those two files and nothing else. First chroot(NULL), which the kernel refuses
 * (EFAULT) and the tracer must pass on as is (glibc's prototype says nonnull). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int put(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "data", 4) != 4 || close(fd) != 0) return -1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/before", argv[1]);
  if (put(path) != 0) return 3;
  const char* volatile none = NULL;
  int r = chroot(none);
  printf("null %d %d\n", r, r ? errno : 0);
  if (chroot(argv[1]) != 0 || chdir("/") != 0) return 4;
  if (put("/inside") != 0) return 5;
  printf("jailed\n");
  return 0;
}
