/* A known sequence of POSIX calls on files under argv[1]; tests/test_posix.py pins the
 * events one by one. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  static char buf[16384];
  memset(buf, 'a', sizeof buf);
  struct iovec iov[2] = {{buf, 16}, {buf + 16, 32}};
  struct stat st;
  struct statx stx;

  int fd = CALL("open", open(P("data.bin"), O_CREAT | O_WRONLY | O_TRUNC, 0640));
  CALL("write", write(fd, buf, 4096));
  CALL("write", write(fd, buf, 100));
  CALL("pwrite", pwrite(fd, buf, 10, 8000));
  CALL("writev", writev(fd, iov, 2));
  CALL("pwritev", pwritev(fd, iov, 2, 9000));
  CALL("fsync", fsync(fd));
  CALL("ftruncate", ftruncate(fd, 9048));
  CALL("close", close(fd));

  fd = CALL("open", open(P("data.bin"), O_RDONLY));
  CALL("read", read(fd, buf, 1000));
  CALL("lseek", lseek(fd, 5000, SEEK_SET));
  CALL("read", read(fd, buf, 8192));
  CALL("read", read(fd, buf, 10));
  CALL("pread", pread(fd, buf, 50, 100));
  CALL("lseek", lseek(fd, 0, SEEK_SET));
  CALL("readv", readv(fd, iov, 2));
  CALL("preadv", preadv(fd, iov, 2, 200));
  CALL("lseek", lseek(fd, 9038, SEEK_SET));
  CALL("read", read(fd, buf, 100));
  CALL("fstat", fstat(fd, &st));
  CALL("write", write(fd, buf, 1));   /* EBADF: read-only */
  CALL("lseek", lseek(fd, 5, 12345)); /* EINVAL: bad whence */
  CALL("close", close(fd));

  CALL("open", open(P("missing"), O_RDONLY)); /* ENOENT */
  fd = CALL("open", open(P("data.bin"), O_WRONLY | O_APPEND));
  CALL("read", read(fd, buf, 10));  /* EBADF: write-only */
  CALL("write", write(fd, buf, 2)); /* append: offset unknown */
  CALL("close", close(fd));

  CALL("stat", stat(P("data.bin"), &st));
  CALL("stat", stat(P("missing"), &st)); /* ENOENT */
  CALL("lstat", lstat(P("data.bin"), &st));
  CALL("fstatat", fstatat(AT_FDCWD, P("data.bin"), &st, 0));
  CALL("statx", statx(AT_FDCWD, P("data.bin"), 0, STATX_BASIC_STATS, &stx));
  CALL("statx", statx(AT_FDCWD, P("missing"), 0, STATX_BASIC_STATS, &stx)); /* ENOENT */
  CALL("access", access(P("data.bin"), R_OK));
  CALL("access", access(P("missing"), F_OK)); /* ENOENT */
  CALL("mkdir", mkdir(P("sub"), 0755));
  CALL("mkdir", mkdir(P("sub"), 0755)); /* EEXIST */
  CALL("rename", rename(P("data.bin"), P("sub/moved.bin")));
  CALL("truncate", truncate(P("sub/moved.bin"), 10));
  CALL("unlink", unlink(P("sub/moved.bin")));
  CALL("unlink", unlink(P("sub/moved.bin"))); /* ENOENT */
  CALL("rmdir", rmdir(P("sub")));
  CALL("rmdir", rmdir(P("sub"))); /* ENOENT */
  return 0;
}
