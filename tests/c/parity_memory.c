/* Address space limits (tests/test_parity.py).
 *   parity_memory exhaust DIR MIB  RLIMIT_AS of MIB MiB; malloc until it fails (1 MiB blocks,
 *                                  then 4 KiB ones), then write DIR/after and exit 0: a
 *                                  program that handles running out of memory
 *   parity_memory measure MIB      RLIMIT_AS of MIB MiB; prints how many KiB could still be
 *                                  mapped (1 MiB mappings, then 4 KiB ones) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int limit_as(long mib) {
  struct rlimit r = {(rlim_t)mib << 20, (rlim_t)mib << 20};
  return setrlimit(RLIMIT_AS, &r);
}

static int exhaust(const char* dir) {
  long blocks = 0, pages = 0;
  while (malloc(1 << 20)) blocks++;
  while (malloc(4000)) pages++;
  char path[4096];
  snprintf(path, sizeof path, "%s/after", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  if (write(fd, "after", 5) != 5) return 4;
  if (close(fd) != 0) return 5;
  printf("exhausted\n");
  return 0;
}

static void* g_maps[1 << 16];
static size_t g_sizes[1 << 16];

/* Maps blocks of `size` while it can; returns the KiB mapped. */
static long map_all(size_t size, int* n) {
  long kib = 0;
  void* p;
  while (*n < (int)(sizeof g_maps / sizeof *g_maps) &&
         (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) !=
             MAP_FAILED) {
    g_maps[*n] = p;
    g_sizes[(*n)++] = size;
    kib += (long)(size >> 10);
  }
  return kib;
}

/* Everything is unmapped again before printing: the program ends with room to spare. */
static int measure(void) {
  int n = 0;
  long kib = map_all(1 << 20, &n);
  kib += map_all(4096, &n);
  while (n > 0) n--, munmap(g_maps[n], g_sizes[n]);
  printf("%ld\n", kib);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (strcmp(argv[1], "exhaust") == 0 && argc > 3) {
    if (limit_as(atol(argv[3])) != 0) return 6;
    return exhaust(argv[2]);
  }
  if (strcmp(argv[1], "measure") == 0) {
    if (limit_as(atol(argv[2])) != 0) return 6;
    return measure();
  }
  return 2;
}
