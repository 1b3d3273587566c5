/* What the C test programs print for each call: "label ret errno", one line, unbuffered,
 * with say() (a raw write syscall: not traced, so the programs' reports stay out of the
 * events the tests count). errno is set to 777 before the call, so a successful call that
 * leaves errno alone prints 777: the tracer must not change errno either way. */
#pragma once
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((format(printf, 2, 3))) static void say(int fd, const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  int e = errno;
  if (n > 0) syscall(SYS_write, fd, buf, (size_t)(n < (int)sizeof buf ? n : (int)sizeof buf - 1));
  errno = e;
}

#define CALL(label, expr)                                              \
  ({                                                                   \
    errno = 777;                                                       \
    long _r = (long)(expr);                                            \
    int _e = errno;                                                    \
    say(1, "%s %ld %d\n", label, _r, _e);                              \
    _r;                                                                \
  })

/* path under the folder given as argv[1]; each thread has its own buffers (shared ones let
   two threads starting at once build their paths in the same buffer) */
static char g_dir[2048];
static const char* P(const char* rel) {
  static __thread char bufs[8][4096];
  static __thread int i;
  char* b = bufs[i++ & 7];
  snprintf(b, 4096, "%s/%s", g_dir, rel);
  return b;
}

/* the same for calls returning a pointer: ret printed as 1 (non-NULL) or 0 (NULL) */
#define CALLP(label, expr)                                             \
  ({                                                                   \
    errno = 777;                                                       \
    void* _p = (void*)(expr);                                          \
    int _e = errno;                                                    \
    say(1, "%s %d %d\n", label, _p != NULL, _e);                       \
    _p;                                                                \
  })
