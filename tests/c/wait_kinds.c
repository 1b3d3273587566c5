/* The waits a traced parent makes on one child (waitpid(pid), wait4(pid)), which the tracer
 * peeks at first (waitid with WNOWAIT) to read a killed child's wait for a CPU: each must
 * return what it returns untraced. Prints one line per case: its result, errno and status. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_alarm(int sig) { (void)sig; }

static pid_t child_sleeping(void) {
  pid_t p = fork();
  if (p == 0) {
    pause();
    _exit(3);
  }
  return p;
}

static void nap(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(void) {
  int st = 0;
  /* a running child, WNOHANG: 0, nothing reaped */
  pid_t a = child_sleeping();
  pid_t r = waitpid(a, &st, WNOHANG);
  printf("nohang-running %d\n", r == 0 ? 0 : -1);
  /* stopped, with WUNTRACED: its stop; then continued, with WCONTINUED: that */
  kill(a, SIGSTOP);
  r = waitpid(a, &st, WUNTRACED);
  printf("stopped %d %d %d\n", r == a, WIFSTOPPED(st), WIFSTOPPED(st) ? WSTOPSIG(st) : 0);
  kill(a, SIGCONT);
  r = waitpid(a, &st, WCONTINUED);
  printf("continued %d %d\n", r == a, WIFCONTINUED(st));
  /* a wait cut short by a signal whose handler has no SA_RESTART: EINTR, the child left */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  alarm(1);
  errno = 0;
  r = waitpid(a, &st, 0);
  printf("interrupted %d %s\n", (int)r, strerror(errno));
  /* killed: the signal, through wait4 with a rusage */
  kill(a, SIGTERM);
  struct rusage ru;
  r = wait4(a, &st, 0, &ru);
  printf("killed %d %d %d\n", r == a, WIFSIGNALED(st), WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  /* exited: its status; then no such child */
  pid_t b = fork();
  if (b == 0) _exit(7);
  nap(50);
  r = waitpid(b, &st, 0);
  printf("exited %d %d %d\n", r == b, WIFEXITED(st), WEXITSTATUS(st));
  errno = 0;
  r = waitpid(b, &st, 0);
  printf("gone %d %s\n", (int)r, strerror(errno));
  /* NULL status */
  pid_t c = fork();
  if (c == 0) _exit(0);
  printf("null-status %d\n", waitpid(c, NULL, 0) == c);
  return 0;
}
