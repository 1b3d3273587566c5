/* stdio calls on files under argv[1]; tests/test_stdio.py pins every event. */
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  char buf[256], line[128];
  char* lp = NULL;
  size_t n = 0;
  memset(buf, 'b', sizeof buf);

  FILE* f = CALLP("fopen", fopen(P("s.txt"), "w"));
  CALL("fputs", fputs("line one\n", f));
  CALL("fwrite", fwrite(buf, 10, 3, f));
  CALL("fputs", fputs("\nline three\n", f));
  CALL("ftell", ftell(f));
  CALL("fflush", fflush(f));
  CALL("fclose", fclose(f));

  f = CALLP("fopen", fopen(P("s.txt"), "r"));
  CALLP("fgets", fgets(line, 100, f));
  CALL("fread", fread(buf, 1, 30, f));
  CALL("getline", getline(&lp, &n, f));
  CALL("getline", getline(&lp, &n, f)); /* EOF: -1, no error */
  CALL("fseek", fseek(f, 4, SEEK_SET));
  CALL("fread", fread(buf, 4, 2, f));
  CALL("ftell", ftell(f));
  rewind(f);
  CALLP("fgets", fgets(line, 5, f));
  CALL("fseek", fseek(f, 0, SEEK_END));
  CALLP("fgets", fgets(line, 5, f));    /* EOF: NULL, no error */
  CALL("fread", fread(buf, 1, 10, f));  /* EOF: 0 items */
  CALL("fputs", fputs("x", f));         /* EBADF: read-only stream */
  CALL("fwrite", fwrite(buf, 1, 5, f)); /* EBADF */
  CALL("fclose", fclose(f));

  CALLP("fopen", fopen(P("missing"), "r")); /* ENOENT */
  f = CALLP("fopen", fopen(P("s.txt"), "a"));
  CALL("fputs", fputs("tail\n", f)); /* append: offset unknown */
  CALL("fclose", fclose(f));

  int fd = CALL("open", open(P("s.txt"), O_RDONLY));
  f = CALLP("fdopen", fdopen(fd, "r"));
  CALL("getdelim", getdelim(&lp, &n, ' ', f));
  CALL("fclose", fclose(f));
  free(lp);
  return 0;
}
