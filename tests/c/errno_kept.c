/* errno after calls that succeed, each the first of its kind in the process (so the tracer
 * also resolves the real function then), on fds the tracer has not seen opened (stdin, a pipe
 * from pipe(2)): a call that succeeds leaves errno as the program set it. Prints one line per
 * call, "<call> <result> <errno>", the same traced and untraced.
 *   errno_kept DIR      (stdin: a pipe holding "abc\n")
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHOW(call, expr)                    \
  do {                                      \
    errno = 0;                              \
    long r_ = (long)(expr);                 \
    printf("%s %ld %d\n", call, r_, errno); \
  } while (0)

int main(int argc, char** argv) {
  printf("main %d\n", errno); /* 0 at program start, whatever the constructor did */
  if (argc < 2) return 2;
  char buf[64], path[4096];
  SHOW("fgets", fgets(buf, sizeof buf, stdin) != NULL);
  SHOW("fgets-eof", fgets(buf, sizeof buf, stdin) != NULL);
  int p[2];
  if (pipe(p) != 0) return 3;
  SHOW("write-pipe", write(p[1], "xy", 2));
  SHOW("read-pipe", read(p[0], buf, 2));
  struct stat st;
  SHOW("fstat-pipe", fstat(p[0], &st));
  SHOW("close-pipe", close(p[1]));
  SHOW("read-eof", read(p[0], buf, 1));
  snprintf(path, sizeof path, "%s/f", argv[1]);
  int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
  SHOW("pwrite", pwrite(fd, "abcdef", 6, 0));
  SHOW("lseek", lseek(fd, 2, SEEK_SET));
  SHOW("read", read(fd, buf, 10));
  SHOW("close", close(fd));
  DIR* d = opendir(argv[1]);
  long entries = 0;
  errno = 0;
  while (readdir(d)) entries++;
  printf("readdir-end %ld %d\n", entries, errno);
  SHOW("closedir", closedir(d));
  FILE* f = fopen(path, "r");
  SHOW("fread", fread(buf, 1, sizeof buf, f));
  SHOW("fclose", fclose(f));
  return 0;
}
