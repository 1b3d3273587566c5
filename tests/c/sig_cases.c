/* Signal dispositions and deaths that must be the same traced and untraced
 * (tests/test_faults.py). DIR/a is written before the signal, DIR/h by the handler.
 *   sig_cases report              each signal's disposition (D default, I ignore, H handler)
 *                                 and whether it is blocked
 *   sig_cases kill DIR SIG        raise(SIG) with its default action
 *   sig_cases resethand DIR SIG   a handler with SA_RESETHAND that writes DIR/h and raises
 *                                 SIG again (a crash reporter)
 *   sig_cases dfl-reraise DIR SIG a handler that writes DIR/h, sets SIG_DFL and raises again
 *   sig_cases abort-returns DIR   a SIGABRT handler that writes DIR/h and returns; abort()
 *   sig_cases query               what sigaction and signal report before and after a
 *                                 SA_RESETHAND handler runs, and after signal() calls
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* g_dir;
static int g_sig;

static void put(const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (write(fd, "data", 4) != 4) _exit(9);
    close(fd);
  }
}

static void on_reraise(int sig) {
  put("h");
  raise(sig);
}
static void on_dfl_reraise(int sig) {
  put("h");
  signal(sig, SIG_DFL);
  raise(sig);
}
static void on_return(int sig) {
  (void)sig;
  put("h");
}
static void on_nothing(int sig) { (void)sig; }

static char disp(int sig) {
  struct sigaction a;
  if (sigaction(sig, NULL, &a) != 0) return '?';
  return a.sa_handler == SIG_DFL ? 'D' : a.sa_handler == SIG_IGN ? 'I' : 'H';
}

static void describe(const char* label, int sig) {
  struct sigaction a;
  sigaction(sig, NULL, &a);
  printf("%s %s flags=%s%s%s\n", label,
         a.sa_handler == SIG_DFL      ? "DFL"
         : a.sa_handler == SIG_IGN    ? "IGN"
         : a.sa_handler == on_nothing ? "on_nothing"
                                      : "other",
         (a.sa_flags & SA_RESETHAND) ? "RESETHAND," : "",
         (a.sa_flags & SA_NODEFER) ? "NODEFER," : "", (a.sa_flags & SA_SIGINFO) ? "SIGINFO," : "");
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (!strcmp(mode, "report")) {
    sigset_t blocked;
    sigprocmask(SIG_BLOCK, NULL, &blocked);
    for (int sig = 1; sig < 65; sig++) {
      if (sig == 32 || sig == 33) continue; /* glibc's own */
      printf("%d %c%s\n", sig, disp(sig), sigismember(&blocked, sig) ? " blocked" : "");
    }
    return 0;
  }
  if (!strcmp(mode, "query")) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_nothing;
    a.sa_flags = SA_RESETHAND;
    describe("start", SIGUSR1);
    sigaction(SIGUSR1, &a, NULL);
    describe("installed", SIGUSR1);
    raise(SIGUSR1);
    describe("after-delivery", SIGUSR1);
    sighandler_t prev = signal(SIGUSR1, on_nothing);
    printf("signal-returned %s\n", prev == SIG_DFL ? "DFL" : "other");
    prev = signal(SIGUSR1, SIG_DFL);
    printf("signal-returned %s\n", prev == on_nothing ? "on_nothing" : "other");
    describe("end", SIGUSR1);
    fflush(stdout);
    return 0;
  }
  if (argc < 3) return 2;
  g_dir = argv[2];
  g_sig = argc > 3 ? atoi(argv[3]) : SIGABRT;
  if (!strcmp(mode, "resethand")) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_reraise;
    a.sa_flags = SA_RESETHAND;
    sigaction(g_sig, &a, NULL);
  } else if (!strcmp(mode, "dfl-reraise")) {
    signal(g_sig, on_dfl_reraise);
  } else if (!strcmp(mode, "abort-returns")) {
    signal(SIGABRT, on_return);
    put("a");
    abort();
  } else if (strcmp(mode, "kill")) {
    return 2;
  }
  put("a");
  raise(g_sig);
  return 0; /* not reached */
}
