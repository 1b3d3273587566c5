/* argv[3] threads, each doing argv[2] preads of argv[1] (sizes and offsets vary) between two
 * CLOCK_MONOTONIC readings; at the end prints "tid before after" (ns) per call, in call order
 * per thread (tests/test_compact.py: times decode exactly). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CALLS 100000
#define MAX_THREADS 8

static const char* g_path;
static int g_n;
static long long g_t[MAX_THREADS][2 * MAX_CALLS];
static int g_tid[MAX_THREADS];

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void* run(void* arg) {
  long k = (long)arg;
  static __thread char buf[8192];
  g_tid[k] = (int)syscall(SYS_gettid);
  int fd = open(g_path, O_RDONLY);
  if (fd < 0) exit(1);
  for (int i = 0; i < g_n; i++) {
    g_t[k][2 * i] = now_ns();
    pread(fd, buf, 1 + (i * 97 + k) % 8192, (i * 4099L + k) % 65536);
    g_t[k][2 * i + 1] = now_ns();
  }
  close(fd);
  return NULL;
}

int main(int argc, char** argv) {
  g_path = argv[1];
  g_n = atoi(argv[2]);
  int threads = atoi(argv[3]);
  if (g_n > MAX_CALLS || threads > MAX_THREADS) return 2;
  pthread_t th[MAX_THREADS];
  for (long k = 0; k < threads; k++) pthread_create(&th[k], NULL, run, (void*)k);
  for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
  for (int k = 0; k < threads; k++)
    for (int i = 0; i < g_n; i++)
      printf("%d %lld %lld\n", g_tid[k], g_t[k][2 * i], g_t[k][2 * i + 1]);
  return 0;
}
