/* A daemon must not keep its caller waiting (tests/test_parity.py):  parity_daemon DIR SECS
 * Writes DIR/parent, then forks a child that starts a session, writes its pid file DIR/child,
 * takes 50 ms to start up, points fds 0-2 at /dev/null and sleeps SECS; the parent prints
 * the child's pid and exits at once. A caller that reads
 * the parent's stdout and stderr to their end (subprocess.run(capture_output=True), `$(...)`)
 * returns as soon as the parent exits: no process of the program holds the pipes any more. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/parent", argv[1]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "parent", 6) != 6 || close(fd) != 0) return 3;
  pid_t pid = fork();
  if (pid < 0) return 4;
  if (pid == 0) {
    setsid();
    snprintf(path, sizeof path, "%s/child", argv[1]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "child", 5) != 5 || close(fd) != 0) _exit(6);
    usleep(50000);
    int null = open("/dev/null", O_RDWR);
    if (null < 0) _exit(5);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2) close(null);
    sleep((unsigned)atoi(argv[2]));
    _exit(0);
  }
  printf("child %d\n", (int)pid);
  return 0;
}
