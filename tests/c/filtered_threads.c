// Threads whose every call is filtered out: N threads open and read /proc/self/stat (never
// traced), then wait; the main thread reads argv[1] once (traced under IOTRACE_INCLUDE), prints
// "ready" and waits to be killed. The live file then shows which threads took a chunk.
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t g_done;

static void* work(void* arg) {
  char buf[256];
  int fd = open("/proc/self/stat", O_RDONLY);
  if (fd >= 0) {
    if (read(fd, buf, sizeof buf) < 0) perror("read");
    close(fd);
  }
  pthread_barrier_wait(&g_done);
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int n = atoi(argv[2]);
  pthread_barrier_init(&g_done, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0) return 3;
  }
  pthread_barrier_wait(&g_done);
  char buf[64];
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0 || read(fd, buf, sizeof buf) < 0) return 4;
  close(fd);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}
