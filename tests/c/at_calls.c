/* Relative paths against the cwd, *at calls against a dirfd, dup/dup2/F_DUPFD keeping the
 * file name, mmap/munmap of a file, opendir/readdir/closedir. argv[1]: an empty folder. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  struct stat st;
  struct statx stx;
  char buf[64];

  CALL("chdir", chdir(g_dir));
  int fd = CALL("open", open("rel.txt", O_CREAT | O_RDWR, 0600));
  CALL("write", write(fd, "hello world\n", 12));
  int dfd = CALL("open", open(".", O_RDONLY | O_DIRECTORY));
  CALL("mkdirat", mkdirat(dfd, "sub", 0700));
  int sfd = CALL("openat", openat(dfd, "sub/../sub/./x.txt", O_CREAT | O_WRONLY, 0600));
  CALL("close", close(sfd));
  CALL("fstatat", fstatat(dfd, "sub/x.txt", &st, AT_SYMLINK_NOFOLLOW));
  CALL("unlinkat", unlinkat(dfd, "sub/x.txt", 0));
  CALL("statx", statx(dfd, "rel.txt", 0, STATX_BASIC_STATS, &stx));
  CALL("fstatat", fstatat(fd, "", &st, AT_EMPTY_PATH));
  CALL("faccessat", faccessat(dfd, "rel.txt", R_OK, 0));
  CALL("openat", openat(dfd, "nope/x", O_RDONLY)); /* ENOENT */

  int d2 = CALL("dup", dup(fd));
  CALL("write", write(d2, "abc", 3)); /* shares fd's offset: 12 */
  CALL("dup2", dup2(fd, 50));
  CALL("pread", pread(50, buf, 5, 6));
  int d3 = CALL("fcntl", fcntl(fd, F_DUPFD, 60));
  CALL("read", read(d3, buf, 4)); /* offset 15: at the end */
  CALL("close", close(d2));
  CALL("close", close(50));
  CALL("close", close(d3));

  void* m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  say(1, "mmap %d %d\n", m != MAP_FAILED, m == MAP_FAILED ? errno : 777);
  void* anon = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CALL("munmap", munmap(m, 4096));
  munmap(anon, 8192); /* anonymous: not I/O */
  errno = 0;
  void* bad = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 3); /* EINVAL: unaligned offset */
  say(1, "mmap %d %d\n", bad != MAP_FAILED, errno);
  CALL("close", close(fd));

  DIR* d = opendir(".");
  say(1, "opendir %d 777\n", d != NULL);
  int entries = 0;
  while (readdir(d)) entries++;
  say(1, "entries %d 777\n", entries);
  CALL("closedir", closedir(d));
  errno = 0;
  d = opendir("nope");
  say(1, "opendir %d %d\n", d != NULL, errno);

  CALL("chdir", chdir("sub"));
  fd = CALL("open", open("../rel.txt", O_RDONLY));
  CALL("close", close(fd));
  CALL("fchdir", fchdir(dfd));
  CALL("renameat", renameat(dfd, "rel.txt", dfd, "sub/rel2.txt"));
  CALL("unlink", unlink("sub/rel2.txt"));
  CALL("rmdir", rmdir("sub"));
  CALL("close", close(dfd));
  return 0;
}
