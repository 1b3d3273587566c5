/* POSIX record locks between a parent and its child (tests/test_parity.py):
 *   parity_locks DIR
 * The parent write-locks DIR/locked and forks; the child finds the lock held (F_SETLK fails,
 * F_GETLK names the parent), the parent writes to the file and unlocks, and the child then
 * takes the lock. Every step prints "label ret errno" (report.h), in turn. */
#include <fcntl.h>
#include <sys/wait.h>

#include "report.h"

static struct flock whole(short type) {
  struct flock l;
  memset(&l, 0, sizeof l);
  l.l_type = type;
  l.l_whence = SEEK_SET;
  return l;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  int fd = CALL("open", open(P("locked"), O_RDWR | O_CREAT | O_TRUNC, 0644));
  struct flock wr = whole(F_WRLCK), un = whole(F_UNLCK);
  CALL("lock", fcntl(fd, F_SETLK, &wr));
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0) return 3;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    struct flock q = whole(F_WRLCK);
    CALL("child-trylock", fcntl(fd, F_SETLK, &wr));
    CALL("child-getlk", fcntl(fd, F_GETLK, &q));
    say(1, "holder parent=%d type-wr=%d\n", q.l_pid == parent, q.l_type == F_WRLCK);
    if (write(up[1], "1", 1) != 1 || read(down[0], &c, 1) != 1) _exit(4);
    CALL("child-lock", fcntl(fd, F_SETLK, &wr));
    CALL("child-write", pwrite(fd, "child", 5, 0));
    _exit(0);
  }
  if (pid < 0) return 4;
  char c;
  if (read(up[0], &c, 1) != 1) return 5;
  CALL("write", write(fd, "parent", 6));
  CALL("fsync", fsync(fd));
  CALL("unlock", fcntl(fd, F_SETLK, &un));
  if (write(down[1], "1", 1) != 1) return 6;
  int st;
  CALL("wait", waitpid(pid, &st, 0) == pid);
  say(1, "child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  CALL("close", close(fd));
  return 0;
}
