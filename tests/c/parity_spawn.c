/* posix_spawn of a child (tests/test_parity.py):
 *   parity_spawn DIR          spawns `parity_spawn child DIR` with its stdout opened on DIR/out
 *                             (a file action), waits, prints the child's status
 *   parity_spawn child DIR    writes DIR/child, prints its argc to stdout, exits 3 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  char path[4096];
  if (strcmp(argv[1], "child") == 0 && argc > 2) {
    snprintf(path, sizeof path, "%s/child", argv[2]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "child", 5) != 5 || close(fd) != 0) return 4;
    printf("child argc %d\n", argc);
    return 3;
  }
  snprintf(path, sizeof path, "%s/out", argv[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char* args[] = {argv[0], "child", argv[1], NULL};
  pid_t pid;
  int r = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0) {
    printf("posix_spawn %d\n", r);
    return 5;
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) return 6;
  printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}
