/* Fds closed in bulk (tests/test_faults.py):  close_range DIR range|from
 * writes DIR/f on fd 3 (left open), closes fds 3.. with close_range(3, ~0U, 0) or closefrom(3),
 * then makes a pipe (fds 3 and 4) and writes 5 bytes to it: the write names the pipe. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/f", argv[1]);
  int a = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int b = open(path, O_RDONLY);
  if (a != 3 || b != 4 || write(a, "abc", 3) != 3) return 3;
  if (!strcmp(argv[2], "range")) {
    if (close_range(3, ~0U, 0) != 0) return 4;
  } else {
    closefrom(3);
  }
  int p[2];
  if (pipe(p) != 0 || p[0] != 3 || p[1] != 4) return 5;
  if (write(p[1], "hello", 5) != 5) return 6;
  char buf[8];
  if (read(p[0], buf, sizeof buf) != 5) return 7;
  return 0;
}
