/* An attacker's move on a trace folder the user owns (tests/test_faults.py):
 *   swap_trace DATA TRACEDIR VICTIM
 * writes DATA/a, waits until its own trace file exists in TRACEDIR (not its live file), moves
 * it away and puts a symlink to VICTIM in its place, then writes DATA/b and exits: the tracer's
 * later frames must not land in VICTIM. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void put(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) write(fd, "data", 4), close(fd);
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  put(argv[1], "a");
  char mine[64];
  snprintf(mine, sizeof mine, "-%d.", (int)getpid());
  for (int tries = 0; tries < 500; tries++) { /* 5 s at most */
    DIR* d = opendir(argv[2]);
    struct dirent* e;
    while (d && (e = readdir(d)))
      if (strstr(e->d_name, mine) && !strstr(e->d_name, ".live")) {
        char path[4096], moved[4200];
        snprintf(path, sizeof path, "%s/%s", argv[2], e->d_name);
        snprintf(moved, sizeof moved, "%s.moved", path);
        closedir(d);
        if (rename(path, moved) != 0 || symlink(argv[3], path) != 0) return 4;
        put(argv[1], "b");
        return 0;
      }
    if (d) closedir(d);
    usleep(10000);
  }
  return 5;
}
