/* The workload of the golden traces (tests/make_golden.py; see tests/golden/README.md).
 *
 * A fixed, small set of calls on files under argv[1] (default /tmp/iotrace-golden-data, a
 * fixed path so that the file names in the traces are stable):
 *   main thread  open, 4 x write, 2 x pread, lseek, 2 x read, fstat, close  (posix.bin)
 *                fopen, 3 x fwrite, fprintf, fclose, fopen, 2 x fread, fclose (stdio.txt)
 *                (fprintf is traced from format version 4 on; DFTracer 2.2 does not trace it.
 *                No fputc: DFTracer traces it with ret = the character, not a byte count)
 *   2nd thread   open, 3 x write, close                                       (thread.bin)
 *   fork         the parent opens fork.bin; the child does one write and _exit(0)s;
 *                the parent waits and closes it
 *   C API        3 iotrace_complete spans ("epoch"/"train" with args "epoch":N, and one
 *                "checkpoint"/"ckpt"), one iotrace_instant, one iotrace_counter
 *
 * The C API is looked up with dlsym(RTLD_DEFAULT, ...) so that the program also runs
 * without the tracer (e.g. under DFTracer): then those events are simply not made.
 * Build: cc -O0 -fno-builtin -D_GNU_SOURCE -pthread workload.c -o workload -ldl
 * (-O0, -fno-builtin and no _FORTIFY_SOURCE: the plain symbols are called, read rather than
 * __read_chk, fprintf rather than what the compiler could turn it into). */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef const void* str_t;
static str_t (*p_intern)(const char*, uint32_t);
static int64_t (*p_now)(void);
static void (*p_complete)(str_t, str_t, int64_t, int64_t, const char*, uint32_t);
static void (*p_instant)(str_t, str_t, int64_t, const char*, uint32_t);
static void (*p_counter)(str_t, int64_t, const char*, uint32_t);

static int have_capi(void) { return p_intern && p_now && p_complete && p_instant && p_counter; }
static str_t S(const char* s) { return p_intern(s, (uint32_t)strlen(s)); }
static int64_t now(void) { return have_capi() ? p_now() : 0; }

static void span(const char* name, const char* cat, int64_t start, const char* args) {
  if (have_capi())
    p_complete(S(name), S(cat), start, p_now() - start, args, args ? (uint32_t)strlen(args) : 0);
}

static char g_dir[1024];
static char* P(const char* rel) {
  static char bufs[4][2048];
  static int i;
  char* b = bufs[i++ & 3];
  snprintf(b, sizeof bufs[0], "%s/%s", g_dir, rel);
  return b;
}

static void* thread_main(void* arg) {
  (void)arg;
  char path[2048];
  snprintf(path, sizeof path, "%s/thread.bin", g_dir);
  char buf[300];
  memset(buf, 't', sizeof buf);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return (void*)1;
  for (int i = 0; i < 3; i++)
    if (write(fd, buf, 100 + 100 * i) < 0) return (void*)1;
  close(fd);
  return NULL;
}

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argc > 1 ? argv[1] : "/tmp/iotrace-golden-data");
  *(void**)&p_intern = dlsym(RTLD_DEFAULT, "iotrace_intern");
  *(void**)&p_now = dlsym(RTLD_DEFAULT, "iotrace_now");
  *(void**)&p_complete = dlsym(RTLD_DEFAULT, "iotrace_complete");
  *(void**)&p_instant = dlsym(RTLD_DEFAULT, "iotrace_instant");
  *(void**)&p_counter = dlsym(RTLD_DEFAULT, "iotrace_counter");

  static char buf[4096];
  memset(buf, 'g', sizeof buf);
  struct stat st;
  int rc = 0;

  /* epoch 1: POSIX calls */
  int64_t t0 = now();
  int fd = open(P("posix.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) return 2;
  for (int i = 0; i < 4; i++)
    if (write(fd, buf, 4096) != 4096) rc = 3;
  if (pread(fd, buf, 1024, 0) != 1024) rc = 3;
  if (pread(fd, buf, 1024, 8192) != 1024) rc = 3;
  if (lseek(fd, 2048, SEEK_SET) != 2048) rc = 3;
  for (int i = 0; i < 2; i++)
    if (read(fd, buf, 512) != 512) rc = 3;
  if (fstat(fd, &st) != 0) rc = 3;
  close(fd);
  span("epoch", "train", t0, "\"epoch\":1");

  /* epoch 2: stdio calls and a second thread */
  t0 = now();
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, NULL) != 0) return 4;
  FILE* f = fopen(P("stdio.txt"), "w");
  if (!f) return 2;
  for (int i = 0; i < 3; i++)
    if (fwrite(buf, 1, 100, f) != 100) rc = 3;
  if (fprintf(f, "step %d\n", 7) != 7) rc = 3; /* a call new in format version 4 */
  fclose(f);
  f = fopen(P("stdio.txt"), "r");
  if (!f) return 2;
  for (int i = 0; i < 2; i++)
    if (fread(buf, 1, 120, f) != 120) rc = 3;
  fclose(f);
  void* tr = NULL;
  pthread_join(th, &tr);
  if (tr) rc = 5;
  span("epoch", "train", t0, "\"epoch\":2");
  if (have_capi()) {
    const char* a = "\"epoch\":2";
    p_instant(S("epoch_end"), S("train"), p_now(), a, (uint32_t)strlen(a));
  }

  /* a fork: the child writes once and _exits */
  int64_t t1 = now();
  fd = open(P("fork.bin"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return 2;
  pid_t child = fork();
  if (child == 0) {
    ssize_t n = write(fd, buf, 64);
    _exit(n == 64 ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    rc = 6;
  close(fd);
  span("checkpoint", "ckpt", t1, "\"step\":3,\"tag\":\"fork\"");
  if (have_capi()) {
    const char* a = "\"files\":4,\"bytes\":17355"; /* 16384 + 307 + 600 + 64 */
    p_counter(S("progress"), p_now(), a, (uint32_t)strlen(a));
  }
  return rc;
}
