/* A child made by clone(CLONE_VM | CLONE_VFORK) on a stack of its own (tests/test_parity.py):
 *   parity_clone DIR
 * The child opens DIR/child, dup2s it to 10, closes both and _exits 7; the parent, resumed,
 * writes DIR/parent and prints the child's status and both pids. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_path[4096];

static int child(void* arg) {
  (void)arg;
  int fd = open(g_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) _exit(3);
  if (dup2(fd, 10) != 10) _exit(4);
  close(fd);
  close(10);
  _exit(7);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  snprintf(g_path, sizeof g_path, "%s/child", argv[1]);
  size_t size = 256 << 10;
  char* stack = malloc(size);
  if (!stack) return 3;
  pid_t pid = clone(child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  if (pid < 0) return 4;
  int st;
  if (waitpid(pid, &st, 0) != pid) return 5;
  char path[4096];
  snprintf(path, sizeof path, "%s/parent", argv[1]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "parent", 6) != 6 || close(fd) != 0) return 6;
  printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  printf("pids %d %d\n", (int)getpid(), (int)pid);
  return 0;
}
