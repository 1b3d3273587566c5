/* Process life cycles under the tracer: proc MODE DIR [...]
 *   threads  8 threads, thread i writes (i+1) x 100 bytes to DIR/t<i>; with argv[3] = MS,
 *            each thread then lingers MS milliseconds before it ends
 *   fork     the parent and a fork child each write a file; the child ends in _exit(3)
 *   wait     write 5 x 10 bytes to DIR/k, flush the trace (iotrace_flush when preloaded),
 *            print "ready", then sleep until killed
 *   segv     write DIR/s, then a NULL store (SIGSEGV, default action)
 *   exec     write DIR/before, then execv(argv[3] = a copy of this program, "after")
 *   after    write DIR/after (the exec'd image)
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

static void write_file(const char* rel, int times, int size) {
  static char buf[4096];
  memset(buf, 'p', sizeof buf);
  int fd = open(P(rel), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  for (int i = 0; i < times; i++) write(fd, buf, size);
  close(fd);
}

static int g_linger_ms;

static void* worker(void* arg) {
  long i = (long)arg;
  char rel[32];
  snprintf(rel, sizeof rel, "t%ld", i);
  write_file(rel, (int)i + 1, 100);
  if (g_linger_ms) usleep(g_linger_ms * 1000);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argv[1];
  snprintf(g_dir, sizeof g_dir, "%s", argv[2]);
  if (!strcmp(mode, "threads")) {
    g_linger_ms = argc > 3 ? atoi(argv[3]) : 0;
    pthread_t th[8];
    for (long i = 0; i < 8; i++) pthread_create(&th[i], NULL, worker, (void*)i);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  } else if (!strcmp(mode, "fork")) {
    write_file("parent", 1, 10);
    pid_t pid = fork();
    if (pid == 0) {
      write_file("child", 2, 20);
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    say(1, "child %d %d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    write_file("parent2", 1, 30);
  } else if (!strcmp(mode, "wait")) {
    write_file("k", 5, 10);
    void (*flush)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "iotrace_flush");
    if (flush) flush();  // its records in the trace file too, not only in the live file
    say(1, "ready\n");
    for (;;) pause();
  } else if (!strcmp(mode, "segv")) {
    write_file("s", 3, 7);
    *(volatile int*)0 = 1;
  } else if (!strcmp(mode, "exec")) {
    write_file("before", 1, 11);
    char* args[] = {argv[3], "after", argv[2], NULL};
    execv(argv[3], args);
    say(1, "exec failed %d\n", errno);
    return 1;
  } else if (!strcmp(mode, "after")) {
    write_file("after", 2, 12);
  }
  return 0;
}
