/* Formatted and character stdio under argv[1] (tests/test_stdio.py pins every event):
 * fprintf/fputc/putc/fputs_unlocked/... write f.txt, fgetc/getc/ungetc/fscanf/... read it
 * back; printf/puts/putchar go to stdout, dprintf to fd 1; scanf reads stdin. */
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "report.h"

static int my_vfprintf(FILE* f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = vfprintf(f, fmt, ap);
  va_end(ap);
  return r;
}

static int my_vfscanf(FILE* f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = vfscanf(f, fmt, ap);
  va_end(ap);
  return r;
}

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  FILE* f = CALLP("fopen", fopen(P("f.txt"), "w"));
  CALL("fprintf", fprintf(f, "n=%d %s\n", 42, "abc"));        /* 9 bytes at 0 */
  CALL("vfprintf", my_vfprintf(f, "%05d|", 7));               /* 6 at 9 */
  CALL("fputc", fputc('x', f));                               /* 1 at 15 */
  CALL("putc", putc('y', f));                                 /* 1 at 16 */
  CALL("fputc_unlocked", fputc_unlocked('\n', f));            /* 1 at 17 */
  CALL("fputs_unlocked", fputs_unlocked("12 3.5 word\n", f)); /* 12 at 18 */
  CALL("fwrite_unlocked", fwrite_unlocked("zzzz", 2, 2, f));  /* 4 at 30 */
  CALL("fclose", fclose(f));                                  /* 34 bytes */

  f = CALLP("fopen", fopen(P("f.txt"), "r"));
  CALL("fgetc", fgetc(f));                 /* 'n' at 0 */
  CALL("getc", getc(f));                   /* '=' at 1 */
  CALL("ungetc", ungetc('=', f));          /* back to 1 */
  CALL("getc_unlocked", getc_unlocked(f)); /* '=' at 1 */
  int a = 0;
  char w[16];
  CALL("fscanf", fscanf(f, "%d", &a));       /* "42" at 2: 2 bytes */
  CALL("vfscanf", my_vfscanf(f, "%15s", w)); /* " abc" at 4: 4 bytes */
  char line[64];
  CALLP("fgets_unlocked", fgets_unlocked(line, sizeof line, f)); /* "\n" at 8 */
  CALL("fread_unlocked", fread_unlocked(line, 1, 6, f));         /* "00007|" at 9 */
  CALL("fgetc_unlocked", fgetc_unlocked(f));                     /* 'x' at 15 */
  double d = 0;
  CALL("fscanf", fscanf(f, "%*c %d %lf %15s", &a, &d, w)); /* "y\n12 3.5 word" at 16: 13 */
  CALL("fgetc", fgetc(f));                                 /* '\n' at 29 */
  CALL("fread", fread(line, 1, 64, f));                    /* "zzzz" at 30: 4 */
  CALL("fgetc", fgetc(f));                                 /* EOF at 34 */
  CALL("fclose", fclose(f));

  CALL("printf", printf("%s-%d\n", "out", 1)); /* 6 bytes to stdout */
  CALL("puts", puts("line"));                  /* 5 */
  CALL("putchar", putchar('!'));               /* 1 */
  CALL("fflush", fflush(stdout));
  CALL("dprintf", dprintf(1, "\n%d\n", 123)); /* 5 to fd 1 */
  int b = 0;
  CALL("scanf", scanf("%d", &b)); /* "77" from stdin */
  CALL("getchar", getchar());     /* '\n' */
  CALL("getchar", getchar());     /* EOF */
  return 0;
}
