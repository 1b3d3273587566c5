/* Long command lines and environments reach the next program whole (tests/test_parity.py).
 *   parity_exec execv N     execv of this program with N arguments in all (argv[0] included)
 *   parity_exec execl       execl of this program with 5001 arguments (the variadic form)
 *   parity_exec execve N    execve of this program with N more environment variables
 *                           (PARITY_V<i>=), the environment it has kept
 *   parity_exec count ...   prints its argc and how many PARITY_V variables it has */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define C10 "count", "count", "count", "count", "count", "count", "count", "count", "count", "count"
#define C100 C10, C10, C10, C10, C10, C10, C10, C10, C10, C10
#define C1000 C100, C100, C100, C100, C100, C100, C100, C100, C100, C100

extern char** environ;

static int count(int argc) {
  int vars = 0;
  for (char** e = environ; *e; e++)
    if (!strncmp(*e, "PARITY_V", 8)) vars++;
  printf("argc %d vars %d\n", argc, vars);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* self = argv[0]; /* run by its path */
  if (strcmp(argv[1], "count") == 0) return count(argc);
  if (strcmp(argv[1], "execl") == 0) {
    execl(self, argv[0], C1000, C1000, C1000, C1000, C1000, (char*)NULL);
    return 3;
  }
  if (argc < 3) return 2;
  int n = atoi(argv[2]);
  if (strcmp(argv[1], "execv") == 0) {
    char** args = calloc((size_t)n + 1, sizeof *args);
    if (!args) return 4;
    args[0] = argv[0];
    for (int i = 1; i < n; i++) args[i] = "count";
    execv(self, args);
    return 3;
  }
  if (strcmp(argv[1], "execve") == 0) {
    int kept = 0;
    while (environ[kept]) kept++;
    char** env = calloc((size_t)(kept + n) + 1, sizeof *env);
    if (!env) return 4;
    memcpy(env, environ, (size_t)kept * sizeof *env);
    for (int i = 0; i < n; i++) {
      char var[32];
      snprintf(var, sizeof var, "PARITY_V%d=", i);
      env[kept + i] = strdup(var);
    }
    char* args[] = {argv[0], "count", NULL};
    execve(self, args, env);
    return 3;
  }
  return 2;
}
