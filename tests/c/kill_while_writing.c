/* A process killed in the middle of its work (tests/test_live.py):  kill_while_writing FILE
 * pwrites one byte at offset i for i = 0, 1, 2, ... until it is killed, printing "ready" after
 * the first 1000. FILE's size then tells how many pwrites completed: the trace must hold each
 * of them once (the last one may be missing: done, but killed before it was recorded). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  for (long i = 0;; i++) {
    if (pwrite(fd, "x", 1, i) != 1) return 4;
    if (i == 1000) {
      printf("ready\n");
      fflush(stdout);
    }
  }
}
