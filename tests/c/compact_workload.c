/* A fixed, single-threaded sequence of POSIX and stdio calls on files under argv[1]:
 * tests/test_compact.py traces it in the JSON and in the compact form and compares the
 * events. Sizes and offsets are scattered on purpose, so that offsets, sizes and returns
 * often differ from what the compact form predicts (the fd's expected position, ret = size),
 * and there are failing calls (errno), a dup'ed fd, a rename and stdio streams. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  static char buf[16384];
  memset(buf, 'c', sizeof buf);
  struct iovec iov[3] = {{buf, 10}, {buf + 10, 200}, {buf + 210, 3000}};
  struct stat st;
  long total = 0;

  int fd = CALL("creat", creat(P("a.bin"), 0644));
  for (int i = 0; i < 16; i++) total += CALL("write", write(fd, buf, 1000 + 37 * i)); /* 20440 B */
  CALL("close", close(fd));

  fd = CALL("open", open(P("a.bin"), O_RDWR));
  for (int i = 0; i < 24; i++) {
    CALL("lseek", lseek(fd, (i * 7919L) % total, SEEK_SET));
    CALL("read", read(fd, buf, 100 + 13 * i));
  }
  /* 512 B at scattered offsets, some near or past the end: partial and empty reads */
  for (int i = 0; i < 12; i++) CALL("pread", pread(fd, buf, 512, (i * 2039L) % (total + 600)));
  for (int i = 0; i < 8; i++) CALL("pwrite", pwrite(fd, buf, 64 + i, total + 4096L * i));
  CALL("fstat", fstat(fd, &st));
  CALL("writev", writev(fd, iov, 3)); /* at the position the last read left */
  CALL("lseek", lseek(fd, -500, SEEK_END));
  CALL("readv", readv(fd, iov, 3)); /* 500 of 3210 */
  CALL("read", read(fd, buf, 100)); /* at the end: 0 */
  int fd2 = CALL("dup", dup(fd));
  CALL("lseek", lseek(fd2, 123, SEEK_SET));
  CALL("read", read(fd2, buf, 77));
  CALL("read", read(fd, buf, 77)); /* the shared position: 200 */
  CALL("close", close(fd2));
  CALL("close", close(fd));

  CALL("stat", stat(P("a.bin"), &st));
  CALL("stat", stat(P("missing"), &st));                             /* ENOENT */
  CALL("open", open(P("nodir/x"), O_RDONLY));                        /* ENOENT */
  CALL("open", open(P("a.bin"), O_WRONLY | O_CREAT | O_EXCL, 0600)); /* EEXIST */
  CALL("rename", rename(P("a.bin"), P("b.bin")));

  FILE* f = CALLP("fopen", fopen(P("s.txt"), "w+"));
  for (int i = 0; i < 10; i++) CALL("fwrite", fwrite(buf, 1, 50 + i, f));
  CALL("fseek", fseek(f, 17, SEEK_SET));
  for (int i = 0; i < 6; i++) CALL("fread", fread(buf, 7, 3 + i, f));
  CALL("fclose", fclose(f));
  f = CALLP("fopen", fopen(P("b.bin"), "r"));
  for (int i = 0; i < 4; i++) CALL("fread", fread(buf, 1000, 1 + i, f));
  CALL("fclose", fclose(f));
  CALLP("fopen", fopen(P("missing"), "r")); /* ENOENT */

  CALL("unlink", unlink(P("b.bin")));
  CALL("unlink", unlink(P("s.txt")));
  CALL("unlink", unlink(P("b.bin"))); /* ENOENT */
  return 0;
}
