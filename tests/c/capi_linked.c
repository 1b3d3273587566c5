/* A program linked with -liotrace (not preloaded), using the C API: tests/test_capi.py runs it
 * with and without IOTRACE_ENABLE and pins what its trace holds.
 *
 *   capi_linked DIR env [spawn]   tracing as the environment says; spawn: `cat DIR/out` after
 *   capi_linked DIR init [spawn]  iotrace_init(NULL, "capi") first
 *   capi_linked DIR late [spawn]  iotrace_init(DIR/elsewhere, "other") first, which comes too
 *                                 late when IOTRACE_ENABLE started the tracer before main
 *
 * It writes DIR/out: open, 3 writes of 100 bytes, close, inside a region "save"; then a region
 * "step" of about 20 ms, a counter, an instant and a region on a virtual thread. Its report
 * lines go out by raw syscalls (report.h's say), outside the events. */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include "iotrace.h"
#include "report.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  say(1, "start active=%d interposing=%d\n", iotrace_active(), iotrace_interposing());
  if (!strcmp(argv[2], "init")) {
    int rc = iotrace_init(NULL, "capi");
    say(1, "init %d active=%d interposing=%d\n", rc, iotrace_active(), iotrace_interposing());
  } else if (!strcmp(argv[2], "late")) {
    int rc = iotrace_init(P("elsewhere"), "other");
    const char* dir = getenv("IOTRACE_DIR");
    const char* name = getenv("IOTRACE_NAME");
    say(1, "late %d %s %s\n", rc, dir ? dir : "-", name ? name : "-");
  }
  iotrace_str_t cat = iotrace_intern("capi", 4);

  int64_t save0 = iotrace_now();
  char buf[100];
  memset(buf, 'x', sizeof buf);
  int fd = open(P("out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  for (int i = 0; i < 3; i++)
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return 4;
  close(fd);
  iotrace_complete(iotrace_intern("save", 4), cat, save0, iotrace_now() - save0,
                   "\"file\":\"out\",\"bytes\":300", 24);

  /* A region of a known length: its ticks, and CLOCK_MONOTONIC ns around them. */
  int64_t ns0 = iotrace_now_ns();
  int64_t t0 = iotrace_now();
  struct timespec nap = {0, 20 * 1000 * 1000};
  nanosleep(&nap, NULL);
  int64_t t1 = iotrace_now();
  int64_t ns1 = iotrace_now_ns();
  iotrace_complete(iotrace_intern("step", 4), cat, t0, t1 - t0, "\"n\":1", 5);
  say(1, "step %lld %lld\n", (long long)ns0, (long long)ns1);

  iotrace_counter(iotrace_intern("progress", 8), iotrace_now(), "\"bytes\":300", 11);
  iotrace_instant(iotrace_intern("saved", 5), cat, iotrace_now(), NULL, 0);
  iotrace_thread_name_of(1 << 23, "worker-v", 8);
  int64_t v0 = iotrace_now();
  iotrace_complete_on(1 << 23, iotrace_intern("task", 4), cat, v0, iotrace_now() - v0, NULL, 0);

  uint64_t recorded, written, dropped;
  iotrace_stats(&recorded, &written, &dropped);
  say(1, "stats %llu %llu\n", (unsigned long long)recorded, (unsigned long long)dropped);
  say(1, "path %s\n", iotrace_trace_path());

  if (argc > 3 && !strcmp(argv[3], "spawn")) {
    char* cargv[] = {"cat", (char*)P("out"), NULL};
    int devnull = open("/dev/null", O_WRONLY);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, devnull, 1);
    pid_t pid;
    if (posix_spawnp(&pid, "cat", &fa, NULL, cargv, environ) != 0) return 5;
    int status;
    waitpid(pid, &status, 0);
    say(1, "child %d %d\n", (int)pid, status);
  }
  return 0;
}
