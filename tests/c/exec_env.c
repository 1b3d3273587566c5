/* Children and the environment they get: exec_env MODE ...
 *   show FILE            print argc, envc, the V_* count and the tracer's variables as this
 *                        process sees them, then open + read + close FILE (unless "-")
 *   (anything else)      as `show -`: the child of the long argument lists below
 *   execl|execle|execlp PROG   PROG with 5000 arguments after argv[0], by that execl form
 *   execv N PROG         PROG with N arguments after argv[0], by execv
 *   execve_env N PROG    PROG show -, by execve with this environment plus N variables V_<i>=
 *   clear PROG FILE      PROG show FILE, by execve with an empty environment
 *   vfork_clear PROG FILE   the same in a vfork child; the parent waits
 *   spawn|spawnp PROG FILE ENV   PROG show FILE by posix_spawn[p], ENV: inherit (environ),
 *                        null (envp NULL: glibc gives no environment), nopreload (environ
 *                        without LD_PRELOAD), empty
 * Reports go out with say() (a raw write: never an event). */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "report.h"

extern char** environ;

#define A10 "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"
#define A100 A10, A10, A10, A10, A10, A10, A10, A10, A10, A10
#define A1000 A100, A100, A100, A100, A100, A100, A100, A100, A100, A100
#define A5000 A1000, A1000, A1000, A1000, A1000

static void show(int argc, const char* file) {
  int envc = 0, nvar = 0;
  for (char** e = environ; *e; e++, envc++)
    if (!strncmp(*e, "V_", 2)) nvar++;
  say(1, "argc %d\nenvc %d\nnvar %d\n", argc, envc, nvar);
  static const char* const kVars[] = {"LD_PRELOAD", "IOTRACE_DIR", "IOTRACE_ROLE", "IOTRACE_ENABLE",
                                      "IOTRACE_INHERIT"};
  for (size_t i = 0; i < sizeof kVars / sizeof *kVars; i++) {
    const char* v = getenv(kVars[i]);
    say(1, "%s=%s\n", kVars[i], v ? v : "(unset)");
  }
  if (file && strcmp(file, "-")) {
    char buf[4096];
    int fd = open(file, O_RDONLY);
    if (read(fd, buf, sizeof buf) < 0) say(2, "read failed\n");
    close(fd);
  }
}

/* environ without LD_PRELOAD, or environ plus n variables V_<i>= (leaked: exec follows). */
static char** make_env(const char* mode, int n) {
  int envc = 0;
  while (environ[envc]) envc++;
  char** env = calloc((size_t)envc + (size_t)n + 1, sizeof(char*));
  int k = 0;
  for (int i = 0; i < envc; i++)
    if (strcmp(mode, "nopreload") || strncmp(environ[i], "LD_PRELOAD=", 11)) env[k++] = environ[i];
  for (int i = 0; i < n; i++) {
    char* v = malloc(16);
    snprintf(v, 16, "V_%d=", i);
    env[k++] = v;
  }
  return env;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "show";
  if (!strcmp(mode, "show")) {
    show(argc, argc > 2 ? argv[2] : "-");
  } else if (!strcmp(mode, "execl")) {
    execl(argv[2], argv[2], A5000, (char*)0);
  } else if (!strcmp(mode, "execle")) {
    execle(argv[2], argv[2], A5000, (char*)0, environ);
  } else if (!strcmp(mode, "execlp")) {
    execlp(argv[2], argv[2], A5000, (char*)0);
  } else if (!strcmp(mode, "execv")) {
    int n = atoi(argv[2]);
    char** args = calloc((size_t)n + 2, sizeof(char*));
    args[0] = argv[3];
    for (int i = 1; i <= n; i++) args[i] = "a";
    execv(argv[3], args);
  } else if (!strcmp(mode, "execve_env")) {
    char* args[] = {argv[3], "show", "-", NULL};
    execve(argv[3], args, make_env("add", atoi(argv[2])));
  } else if (!strcmp(mode, "clear")) {
    char* args[] = {argv[2], "show", argv[3], NULL};
    char* empty[] = {NULL};
    execve(argv[2], args, empty);
  } else if (!strcmp(mode, "vfork_clear")) {
    char* args[] = {argv[2], "show", argv[3], NULL};
    char* empty[] = {NULL};
    pid_t pid = vfork();
    if (pid == 0) {
      execve(argv[2], args, empty);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    say(1, "child %d %d\n", (int)pid, status);
    return status != 0;
  } else if (!strcmp(mode, "spawn") || !strcmp(mode, "spawnp")) {
    char* args[] = {argv[2], "show", argv[3], NULL};
    char* empty[] = {NULL};
    char** env = !strcmp(argv[4], "inherit")     ? environ
                 : !strcmp(argv[4], "null")      ? NULL
                 : !strcmp(argv[4], "nopreload") ? make_env("nopreload", 0)
                                                 : empty;
    pid_t pid = -1;
    int rc = mode[5] == 'p' ? posix_spawnp(&pid, argv[2], NULL, NULL, args, env)
                            : posix_spawn(&pid, argv[2], NULL, NULL, args, env);
    int status = 0;
    if (rc == 0) waitpid(pid, &status, 0);
    say(1, "spawned %d %d %d\n", rc, (int)pid, status);
    return rc != 0 || status != 0;
  } else {
    show(argc, "-");
    return 0;
  }
  if (strcmp(mode, "show")) {
    say(2, "exec failed: %s\n", strerror(errno));
    return 127;
  }
  return 0;
}
