/* Per-process limits the program has to itself (tests/test_parity.py).
 *   parity_limits keys             creates pthread keys until it cannot: prints how many
 *   parity_limits threads UID N    RLIMIT_NPROC of N, then (when root) becomes UID: creates
 *                                  threads until it cannot; prints how many and the error */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int keys(void) {
  pthread_key_t k;
  int n = 0, r;
  while ((r = pthread_key_create(&k, NULL)) == 0) n++;
  printf("keys %d error %d\n", n, r);
  return 0;
}

static int g_hold[2];

static void* held(void* arg) {
  (void)arg;
  char c;
  while (read(g_hold[0], &c, 1) < 0 && errno == EINTR) continue;
  return NULL;
}

static int threads(int uid, int limit) {
  struct rlimit r = {(rlim_t)limit, (rlim_t)limit};
  if (setrlimit(RLIMIT_NPROC, &r) != 0) return 3;
  if (getuid() == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)
      return 4;
  }
  if (pipe(g_hold) != 0) return 5;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  pthread_t th[256];
  int n = 0, err = 0;
  while (n < 256 && (err = pthread_create(&th[n], &attr, held, NULL)) == 0) n++;
  close(g_hold[1]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  printf("threads %d error %d\n", n, err);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "keys") == 0) return keys();
  if (strcmp(argv[1], "threads") == 0 && argc > 3) return threads(atoi(argv[2]), atoi(argv[3]));
  return 2;
}
