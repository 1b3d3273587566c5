/* How much of a signal handler's alternate stack a call takes (tests/test_stack.py).
 *   stack_use ALT_BYTES DIR INHERITED_FD [cold] CASE...
 * DIR holds the file f, the folder sub and is where files are made; INHERITED_FD is an fd
 * open for reading that the program got from its parent (the tracer has not seen it opened).
 * For each CASE: its call runs once on the normal stack (first-use costs out of the way:
 * lazy binding, the tracer's thread state; not with `cold`), then inside a SIGUSR1 handler
 * on an alternate stack of ALT_BYTES filled with a pattern; the depth used is the distance
 * from the top of that stack to the lowest word whose pattern was overwritten. It includes
 * the kernel's signal frame (1-3 KiB of register state), the same traced and untraced.
 * Prints "CASE DEPTH" per case; exits non-zero when a call fails. A handler that overflows
 * the stack runs into a guard page below it and dies of SIGSEGV. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PATTERN 0x5aa5c33c9669f00fULL

static const char* g_dir;
static char g_file[4096], g_new[4096], g_dotdot[4096], g_out[4096], g_w[4096];
static int g_inherited, g_known_r, g_known_w, g_dirfd, g_fd, g_warm, g_failed;
static char g_buf[64];
static struct stat g_st;

static void check(int ok, const char* what) {
  if (!ok) g_failed = 1, fprintf(stderr, "%s failed\n", what);
}

/* An fd the tracer never saw made (as after exec or from a raw syscall): it has to learn it. */
static int raw_open(const char* path, int flags) {
  return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0644);
}

static void do_open(void) { check((g_fd = open(g_file, O_RDONLY)) >= 0, "open"); }
static void do_creat(void) {
  check((g_fd = open(g_new, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0, "creat");
}
static void do_open_dotdot(void) { check((g_fd = open(g_dotdot, O_RDONLY)) >= 0, "open ../"); }
static void do_open_relative(void) { check((g_fd = open("f", O_RDONLY)) >= 0, "open relative"); }
static void do_openat(void) { check((g_fd = openat(g_dirfd, "f", O_RDONLY)) >= 0, "openat"); }
static void do_read(void) { check(read(g_known_r, g_buf, 4) == 4, "read"); }
static void do_write(void) { check(write(g_known_w, "x", 1) == 1, "write"); }
static void do_pread(void) { check(pread(g_known_r, g_buf, 4, 0) == 4, "pread"); }
static void do_read_unknown(void) { check(read(g_fd, g_buf, 4) == 4, "read of an unknown fd"); }
static void do_close(void) { check(close(g_fd) == 0, "close"), g_fd = -1; }
static void do_stat(void) { check(stat(g_file, &g_st) == 0, "stat"); }
static void do_chdir(void) { check(chdir(g_dir) == 0, "chdir"); }
static void do_stdio(void) {
  FILE* f = fopen(g_out, "w");
  check(f != NULL, "fopen");
  if (!f) return;
  check(fprintf(f, "%d %s %.3f\n", 42, "stack", 2.5) > 0, "fprintf");
  check(fclose(f) == 0, "fclose");
}
static void do_dir(void) {
  DIR* d = opendir(g_dir);
  check(d != NULL, "opendir");
  if (!d) return;
  int n = 0;
  while (readdir(d)) n++;
  check(n >= 3, "readdir");
  check(closedir(d) == 0, "closedir");
}

static void no_prep(void) {}
/* With close(): a traced close makes the tracer forget the fd, so that the next raw fd of the
 * same number is unknown to it again. */
static void close_fd(void) {
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
}
static void prep_known_fd(void) { check((g_fd = open(g_file, O_RDONLY)) >= 0, "open (prep)"); }
static void prep_raw_fd(void) { check((g_fd = raw_open(g_file, O_RDONLY)) >= 0, "raw open"); }
static void prep_raw_dir(void) {
  check((g_dirfd = raw_open(g_dir, O_RDONLY | O_DIRECTORY)) >= 0, "raw open of the folder");
}
static void done_raw_dir(void) {
  close_fd();
  close(g_dirfd);
  g_dirfd = -1;
}
/* The inherited fd can be unknown only once: the warm-up learns another fd, made raw. */
static void prep_inherited(void) {
  if (g_warm)
    prep_raw_fd();
  else
    g_fd = g_inherited;
}
static void done_inherited(void) {
  if (g_warm) close_fd();
  g_fd = -1;
}
static void prep_known_dir(void) {
  if (g_dirfd < 0) check((g_dirfd = open(g_dir, O_RDONLY | O_DIRECTORY)) >= 0, "open (dir)");
}

struct Case {
  const char* name;
  void (*prep)(void);  /* on the normal stack, before */
  void (*act)(void);   /* in the handler: the call measured */
  void (*after)(void); /* on the normal stack, after */
};

static const struct Case kCases[] = {
    {"open", no_prep, do_open, close_fd},
    {"open_creat", no_prep, do_creat, close_fd},
    {"open_dotdot", no_prep, do_open_dotdot, close_fd},
    {"open_relative", no_prep, do_open_relative, close_fd},
    {"openat", prep_known_dir, do_openat, close_fd},
    {"openat_unknown_dir", prep_raw_dir, do_openat, done_raw_dir},
    {"read", no_prep, do_read, no_prep},
    {"write", no_prep, do_write, no_prep},
    {"pread", no_prep, do_pread, no_prep},
    {"close", prep_known_fd, do_close, no_prep},
    {"close_unknown", prep_raw_fd, do_close, no_prep},
    {"stat", no_prep, do_stat, no_prep},
    {"chdir", no_prep, do_chdir, no_prep},
    {"stdio", no_prep, do_stdio, no_prep},
    {"dir", no_prep, do_dir, no_prep},
    {"read_unknown_fd", prep_raw_fd, do_read_unknown, close_fd},
    {"read_inherited_fd", prep_inherited, do_read_unknown, done_inherited},
};

static const struct Case* g_case;
static char* g_alt;
static size_t g_alt_size;
static volatile int g_on_alt;

static void on_usr1(int sig) {
  char here;
  (void)sig;
  g_on_alt = &here >= g_alt && &here < g_alt + g_alt_size;
  g_case->act();
}

static size_t measure(const struct Case* c) {
  uint64_t* w = (uint64_t*)g_alt;
  size_t n = g_alt_size / 8;
  for (size_t i = 0; i < n; i++) w[i] = PATTERN;
  g_case = c;
  g_on_alt = 0;
  raise(SIGUSR1);
  if (!g_on_alt) check(0, "running on the alternate stack");
  size_t i = 0;
  while (i < n && w[i] == PATTERN) i++;
  return g_alt_size - i * 8;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_alt_size = (size_t)atol(argv[1]);
  g_dir = argv[2];
  g_inherited = atoi(argv[3]);
  int first = 4, cold = argc > 4 && strcmp(argv[4], "cold") == 0;
  if (cold) first++;
  snprintf(g_file, sizeof g_file, "%s/f", g_dir);
  snprintf(g_new, sizeof g_new, "%s/new", g_dir);
  snprintf(g_dotdot, sizeof g_dotdot, "%s/sub/../f", g_dir);
  snprintf(g_out, sizeof g_out, "%s/out", g_dir);
  snprintf(g_w, sizeof g_w, "%s/w", g_dir);
  g_fd = g_dirfd = -1;

  /* The stack, with an inaccessible page below it: an overflow faults rather than writes. */
  long page = sysconf(_SC_PAGESIZE);
  char* m =
      mmap(NULL, g_alt_size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) return 3;
  g_alt = m + page;
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = g_alt;
  ss.ss_size = g_alt_size;
  if (sigaltstack(&ss, NULL) != 0) return 4;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_usr1;
  a.sa_flags = SA_ONSTACK;
  sigemptyset(&a.sa_mask);
  if (sigaction(SIGUSR1, &a, NULL) != 0) return 5;

  /* Known fds: the program opened them (traced: the tracer saw it). */
  g_known_r = open(g_file, O_RDONLY);
  g_known_w = open(g_w, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (g_known_r < 0 || g_known_w < 0) return 6;
  if (chdir(g_dir) != 0) return 7; /* relative paths resolve against DIR */

  for (int k = first; k < argc; k++) {
    const struct Case* c = NULL;
    for (size_t j = 0; j < sizeof kCases / sizeof kCases[0]; j++)
      if (strcmp(kCases[j].name, argv[k]) == 0) c = &kCases[j];
    if (!c) return fprintf(stderr, "unknown case %s\n", argv[k]), 8;
    if (!cold) {
      g_warm = 1;
      c->prep();
      c->act();
      c->after();
      g_warm = 0;
    }
    c->prep();
    size_t depth = measure(c);
    c->after();
    printf("%s %zu\n", c->name, depth);
    fflush(stdout);
  }
  return g_failed ? 9 : 0;
}
