/* Programs that die in ways the tracer must not change (tests/test_faults.py):
 *   fault_die DIR double-free      writes DIR/before (3 bytes), then frees a chunk twice:
 *                                  glibc aborts inside free(), with the arena locked
 *                                  (the writer thread makes the process multi-threaded)
 *   fault_die DIR malloc-churn     writes DIR/before, prints "ready", then three threads
 *                                  malloc and free chunks past the tcache (arena locked)
 *                                  until a signal ends the process
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_before(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/before", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abc", 3) != 3 || close(fd) != 0) exit(3);
}

static void* churn(void* arg) {
  unsigned seed = (unsigned)(size_t)arg;
  void* keep[64] = {0};
  for (;;) {
    int i = rand_r(&seed) % 64;
    free(keep[i]);
    keep[i] = malloc(2048 + rand_r(&seed) % 8192);
    memset(keep[i], 1, 16);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  write_before(argv[1]);
  if (strcmp(argv[2], "double-free") == 0) {
    void* p = malloc(4000);
    void* q = malloc(4000); /* keeps p from merging with the top chunk */
    free(p);
    free(p);
    free(q);
    return 0;
  }
  if (strcmp(argv[2], "malloc-churn") == 0) {
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], NULL, churn, (void*)(i + 1));
    dprintf(1, "ready\n");
    churn((void*)99);
  }
  return 2;
}
