/* A pool of threads that record a few MiB at once, then wait to be killed: each of N threads
 * writes W single bytes to its own file (dir/tI), with write(), so the file's size and the
 * trace's offsets say what was done. Prints "ready" once every thread has joined. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char* g_dir;
static long g_writes;

static void* work(void* arg) {
  char path[4096];
  snprintf(path, sizeof path, "%s/t%ld", g_dir, (long)arg);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (long k = 0; k < g_writes; k++) write(fd, "y", 1);
  close(fd);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  g_dir = argv[1];
  long n = atol(argv[2]);
  g_writes = atol(argv[3]);
  pthread_t* t = calloc(n, sizeof *t);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 << 10);
  for (long i = 0; i < n; i++) pthread_create(&t[i], &a, work, (void*)i);
  for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("ready\n");
  fflush(stdout);
  pause();
  return 0;
}
