// stdio wrappers. glibc's stdio reaches the kernel through internal calls the POSIX wrappers
// never see, so stdio is recorded at this level: one event per stdio call.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "interpose.h"

using namespace iot;

namespace {
REAL_FN(fopen, FILE* (*)(const char*, const char*))
REAL_FN(fopen64, FILE* (*)(const char*, const char*))
REAL_FN(fdopen, FILE* (*)(int, const char*))
REAL_FN(freopen, FILE* (*)(const char*, const char*, FILE*))
REAL_FN(freopen64, FILE* (*)(const char*, const char*, FILE*))
REAL_FN(fclose, int (*)(FILE*))
REAL_FN(fread, size_t (*)(void*, size_t, size_t, FILE*))
REAL_FN(fwrite, size_t (*)(const void*, size_t, size_t, FILE*))
REAL_FN(fgets, char* (*)(char*, int, FILE*))
REAL_FN(fputs, int (*)(const char*, FILE*))
REAL_FN(fseek, int (*)(FILE*, long, int))
REAL_FN(fseeko, int (*)(FILE*, off_t, int))
REAL_FN(fseeko64, int (*)(FILE*, off64_t, int))
REAL_FN(ftell, long (*)(FILE*))
REAL_FN(ftello, off_t (*)(FILE*))
REAL_FN(ftello64, off64_t (*)(FILE*))
REAL_FN(rewind, void (*)(FILE*))
REAL_FN(fflush, int (*)(FILE*))
REAL_FN(getline, ssize_t (*)(char**, size_t*, FILE*))
REAL_FN(getdelim, ssize_t (*)(char**, size_t*, int, FILE*))
REAL_FN(vfprintf, int (*)(FILE*, const char*, va_list))
REAL_FN(vprintf, int (*)(const char*, va_list))
REAL_FN(__vfprintf_chk, int (*)(FILE*, int, const char*, va_list))
REAL_FN(__vprintf_chk, int (*)(int, const char*, va_list))
REAL_FN(vdprintf, int (*)(int, const char*, va_list))
REAL_FN(fputc, int (*)(int, FILE*))
REAL_FN(putc, int (*)(int, FILE*))
REAL_FN(putchar, int (*)(int))
REAL_FN(fputc_unlocked, int (*)(int, FILE*))
REAL_FN(putc_unlocked, int (*)(int, FILE*))
REAL_FN(putchar_unlocked, int (*)(int))
REAL_FN(puts, int (*)(const char*))
REAL_FN(fputs_unlocked, int (*)(const char*, FILE*))
REAL_FN(fwrite_unlocked, size_t (*)(const void*, size_t, size_t, FILE*))
REAL_FN(fgetc, int (*)(FILE*))
REAL_FN(getc, int (*)(FILE*))
REAL_FN(getchar, int (*)(void))
REAL_FN(fgetc_unlocked, int (*)(FILE*))
REAL_FN(getc_unlocked, int (*)(FILE*))
REAL_FN(getchar_unlocked, int (*)(void))
REAL_FN(ungetc, int (*)(int, FILE*))
REAL_FN(fgets_unlocked, char* (*)(char*, int, FILE*))
REAL_FN(fread_unlocked, size_t (*)(void*, size_t, size_t, FILE*))
REAL_FN(vfscanf, int (*)(FILE*, const char*, va_list))
REAL_FN(vscanf, int (*)(const char*, va_list))
REAL_FN(__isoc99_vfscanf, int (*)(FILE*, const char*, va_list))
REAL_FN(__isoc99_vscanf, int (*)(const char*, va_list))

int fd_of(FILE* fp) { return fp ? fileno_unlocked(fp) : -1; }
bool appending(const char* mode) { return mode && mode[0] == 'a'; }

// A call on a stream; `extra(rec, file, ret)` adds the call's args. A stream without an fd
// (fmemopen, open_memstream) moves memory, not I/O: not recorded.
template <class R, class Call, class Extra>
R on_stream(CallId id, FILE* fp, Call&& call, Extra&& extra) {
  const int fd = stdio_on() && !t_guard ? fd_of(fp) : -1;
  const bool on = fd >= 0;
  OpenFile* f = on ? fd_get(fd) : nullptr;  // the file the call acts on
  return traced<R>(on, id, call, [&](IoLive& r, R ret, int err) {
    Str* p = fd_path_of(f);
    if (!passes(p)) return false;
    r.set_file(p);
    r.set_fd(fd);
    extra(r, f, ret, err);
    return true;
  });
}

template <class Call>
FILE* do_fopen(CallId id, const char* path, const char* mode, Call&& call) {
  return traced<FILE*>(stdio_on(), id, call, [&](IoLive& r, FILE* fp, int err) {
    Str* p = intern_path(path);
    if (fp) fd_open(fd_of(fp), p, appending(mode) ? -1 : 0);
    if (!passes(p)) return false;
    r.set_file(p);
    r.set_ret(fp != nullptr);
    if (fp)
      r.set_fd(fd_of(fp));
    else
      r.set_errno(err);
    return true;
  });
}

// The stream position after a seek: computed where the arguments tell it, asked otherwise.
void after_seek(OpenFile* f, FILE* fp, int64_t off, int whence, int ret) {
  if (ret != 0 || !f) return;
  if (whence == SEEK_SET)
    fd_seek(f, off);
  else if (whence == SEEK_CUR && f->offset.load(std::memory_order_relaxed) >= 0)
    fd_seek(f, f->offset.load(std::memory_order_relaxed) + off);
  else
    fd_seek(f, int64_t(real_ftello()(fp)));
}
}  // namespace

IOT_EXPORT FILE* fopen(const char* path, const char* mode) {
  return do_fopen(C_fopen, path, mode, [&] { return real_fopen()(path, mode); });
}
IOT_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return do_fopen(C_fopen64, path, mode, [&] { return real_fopen64()(path, mode); });
}
IOT_EXPORT FILE* fdopen(int fd, const char* mode) {
  return traced<FILE*>(
      stdio_on(), C_fdopen, [&] { return real_fdopen()(fd, mode); },
      [&](IoLive& r, FILE* fp, int err) {
        Str* p = fd_path(fd);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        r.set_ret(fp != nullptr);
        if (!fp) r.set_errno(err);
        return true;
      });
}
#define FREOPEN(fn, id)                                                    \
  IOT_EXPORT FILE* fn(const char* path, const char* mode, FILE* old) {     \
    int oldfd = fd_of(old);                                                \
    const bool on = stdio_on() && !t_guard;                                \
    OpenFile* gone = on && path ? fd_take(oldfd) : nullptr;                \
    return traced<FILE*>(                                                  \
        on, id, [&] { return real_##fn()(path, mode, old); },              \
        [&](IoLive& r, FILE* fp, int err) {                                \
          Str* p = path ? intern_path(path) : fd_path(oldfd);              \
          fd_drop(gone);                                                   \
          if (fp && path) fd_open(fd_of(fp), p, appending(mode) ? -1 : 0); \
          if (!passes(p)) return false;                                    \
          r.set_file(p);                                                   \
          r.set_ret(fp != nullptr);                                        \
          if (!fp) r.set_errno(err);                                       \
          return true;                                                     \
        });                                                                \
  }
FREOPEN(freopen, C_freopen)
FREOPEN(freopen64, C_freopen64)

IOT_EXPORT int fclose(FILE* fp) {
  int fd = fd_of(fp);
  const bool on = stdio_on() && !t_guard;
  OpenFile* gone = on ? fd_take(fd) : nullptr;  // the stream is gone whatever fclose returns
  Str* p = fd_path_of(gone);
  return traced<int>(
      on, C_fclose, [&] { return real_fclose()(fp); },
      [&](IoLive& r, int ret, int err) {
        fd_drop(gone);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        set_result(r, ret, err);
        return true;
      });
}

// fread/fwrite move whole items: `bytes` is what moved; a short count is an error only when the
// stream says so (fread also stops short at the end of the file).
static auto items_xfer(FILE* fp, size_t size, size_t n) {
  return [=](IoLive& r, OpenFile* f, size_t ret, int err) {
    int64_t bytes = int64_t(ret * size);
    r.set_size(int64_t(size * n));
    r.set_pos(fd_advance(f, bytes));
    r.set_ret(int64_t(ret));
    r.set_bytes(bytes);
    if (ret < n && ferror_unlocked(fp)) r.set_errno(err);
  };
}

// fputs and kin write a string of `len` bytes (EOF on error); fgets and kin read a line into
// a buffer of `n` (NULL at the end or on error).
static auto string_xfer(int64_t len) {
  return [len](IoLive& r, OpenFile* f, int ret, int err) {
    int64_t bytes = ret >= 0 ? len : 0;
    r.set_size(len);
    r.set_pos(fd_advance(f, bytes));
    r.set_ret(ret);
    r.set_bytes(bytes);
    if (ret == EOF) r.set_errno(err);
  };
}
static auto line_xfer(FILE* fp, int n) {
  return [fp, n](IoLive& r, OpenFile* f, char* ret, int err) {
    int64_t bytes = ret ? int64_t(strlen(ret)) : 0;
    r.set_size(n);
    r.set_pos(fd_advance(f, bytes));
    r.set_ret(ret != nullptr);
    r.set_bytes(bytes);
    if (!ret && ferror_unlocked(fp)) r.set_errno(err);
  };
}

IOT_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(
      C_fread, fp, [&] { return real_fread()(buf, size, n, fp); }, items_xfer(fp, size, n));
}
IOT_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(
      C_fwrite, fp, [&] { return real_fwrite()(buf, size, n, fp); }, items_xfer(fp, size, n));
}
IOT_EXPORT char* fgets(char* s, int n, FILE* fp) {
  return on_stream<char*>(
      C_fgets, fp, [&] { return real_fgets()(s, n, fp); }, line_xfer(fp, n));
}
IOT_EXPORT int fputs(const char* s, FILE* fp) {
  return on_stream<int>(
      C_fputs, fp, [&] { return real_fputs()(s, fp); }, string_xfer(int64_t(strlen(s))));
}
#define FSEEK(fn, id, offT)                                   \
  IOT_EXPORT int fn(FILE* fp, offT off, int whence) {         \
    return on_stream<int>(                                    \
        id, fp, [&] { return real_##fn()(fp, off, whence); }, \
        [&](IoLive& r, OpenFile* f, int ret, int err) {       \
          r.set_offset(int64_t(off));                         \
          r.set_flags(whence);                                \
          set_result(r, ret, err);                            \
          after_seek(f, fp, int64_t(off), whence, ret);       \
        });                                                   \
  }
FSEEK(fseek, C_fseek, long)
FSEEK(fseeko, C_fseeko, off_t)
FSEEK(fseeko64, C_fseeko64, off64_t)
#define FTELL(fn, id, offT)                              \
  IOT_EXPORT offT fn(FILE* fp) {                         \
    return on_stream<offT>(                              \
        id, fp, [&] { return real_##fn()(fp); },         \
        [&](IoLive& r, OpenFile* f, offT ret, int err) { \
          set_result(r, ret, err);                       \
          if (ret >= 0) fd_seek(f, int64_t(ret));        \
        });                                              \
  }
FTELL(ftell, C_ftell, long)
FTELL(ftello, C_ftello, off_t)
FTELL(ftello64, C_ftello64, off64_t)

IOT_EXPORT void rewind(FILE* fp) {
  on_stream<int>(
      C_rewind, fp,
      [&] {
        real_rewind()(fp);
        return 0;
      },
      [&](IoLive& r, OpenFile* f, int, int) {
        fd_seek(f, 0);
        r.set_offset(0);
      });
}
IOT_EXPORT int fflush(FILE* fp) {
  if (!fp) {  // flush of every stream: no one file
    return traced<int>(
        stdio_on(), C_fflush, [&] { return real_fflush()(fp); },
        [&](IoLive& r, int ret, int err) {
          if (!passes(nullptr)) return false;
          set_result(r, ret, err);
          return true;
        });
  }
  return on_stream<int>(
      C_fflush, fp, [&] { return real_fflush()(fp); },
      [&](IoLive& r, OpenFile*, int ret, int err) { set_result(r, ret, err); });
}
IOT_EXPORT ssize_t getline(char** line, size_t* n, FILE* fp) {
  return on_stream<ssize_t>(
      C_getline, fp, [&] { return real_getline()(line, n, fp); },
      [&](IoLive& r, OpenFile* f, ssize_t ret, int err) {
        r.set_pos(fd_advance(f, ret));
        r.set_ret(ret);
        if (ret < 0 && ferror_unlocked(fp)) r.set_errno(err);
      });
}
IOT_EXPORT ssize_t getdelim(char** line, size_t* n, int delim, FILE* fp) {
  return on_stream<ssize_t>(
      C_getdelim, fp, [&] { return real_getdelim()(line, n, delim, fp); },
      [&](IoLive& r, OpenFile* f, ssize_t ret, int err) {
        r.set_pos(fd_advance(f, ret));
        r.set_ret(ret);
        if (ret < 0 && ferror_unlocked(fp)) r.set_errno(err);
      });
}

// --- formatted and character I/O --------------------------------------------------------------
// They move bytes through the same buffers as fwrite and fread: one event per call, with the
// bytes moved (`bytes`) and the stream position before them (`offset`).

namespace {
// A call that returns the bytes it wrote, negative on error (the printf family).
auto printed = [](IoLive& r, OpenFile* f, int ret, int err) {
  int64_t bytes = ret > 0 ? ret : 0;
  r.set_pos(fd_advance(f, bytes));
  r.set_ret(ret);
  r.set_bytes(bytes);
  if (ret < 0) r.set_errno(err);
};
// A call that moves one character, EOF at the end or on error (fputc, fgetc...).
auto one_char(FILE* fp) {
  return [fp](IoLive& r, OpenFile* f, int ret, int err) {
    int64_t bytes = ret != EOF;
    r.set_pos(fd_advance(f, bytes));
    r.set_ret(ret);
    r.set_bytes(bytes);
    if (ret == EOF && ferror_unlocked(fp)) r.set_errno(err);
  };
}

// What the scanf family consumed: the stream's read pointer moved inside its buffer; when the
// buffer was refilled meanwhile, the position tells (seekable files), else the rest of the old
// buffer plus what was read of the new one (one refill: a token longer than the buffer, 4 KiB
// and more, is undercounted on pipes).
struct ReadMark {
  char *ptr, *end, *base;
  explicit ReadMark(FILE* fp)
      : ptr(fp->_IO_read_ptr), end(fp->_IO_read_end), base(fp->_IO_read_base) {}
};
int64_t consumed(FILE* fp, const ReadMark& m, OpenFile* f) {
  if (fp->_IO_read_base == m.base && fp->_IO_read_end == m.end && fp->_IO_read_ptr >= m.ptr)
    return fp->_IO_read_ptr - m.ptr;
  int64_t before = f ? f->offset.load(std::memory_order_relaxed) : -1;
  if (before >= 0) {
    off_t now = real_ftello()(fp);
    if (now >= before) return now - before;
  }
  return (m.end - m.ptr) + (fp->_IO_read_ptr - fp->_IO_read_base);
}

// fscanf and kin: the items matched (EOF at the end or on error) and the bytes consumed.
template <class Call>
int scanned(CallId id, FILE* fp, Call&& call) {
  ReadMark mark(fp);
  OpenFile* seen = nullptr;
  return on_stream<int>(
      id, fp, [&] { return call(); },
      [&](IoLive& r, OpenFile* f, int ret, int err) {
        seen = f;
        int64_t bytes = consumed(fp, mark, seen);
        r.set_pos(fd_advance(f, bytes));
        r.set_ret(ret);
        r.set_bytes(bytes);
        if (ret == EOF && ferror_unlocked(fp)) r.set_errno(err);
      });
}
}  // namespace

#define PRINTF(fn, vfn, id)                                          \
  IOT_EXPORT int fn(FILE* fp, const char* fmt, ...) {                \
    va_list ap;                                                      \
    va_start(ap, fmt);                                               \
    int r = on_stream<int>(                                          \
        id, fp, [&] { return real_##vfn()(fp, fmt, ap); }, printed); \
    va_end(ap);                                                      \
    return r;                                                        \
  }
PRINTF(fprintf, vfprintf, C_fprintf)
IOT_EXPORT int vfprintf(FILE* fp, const char* fmt, va_list ap) {
  return on_stream<int>(
      C_vfprintf, fp, [&] { return real_vfprintf()(fp, fmt, ap); }, printed);
}
IOT_EXPORT int printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = on_stream<int>(
      C_printf, stdout, [&] { return real_vprintf()(fmt, ap); }, printed);
  va_end(ap);
  return r;
}
IOT_EXPORT int vprintf(const char* fmt, va_list ap) {
  return on_stream<int>(
      C_vprintf, stdout, [&] { return real_vprintf()(fmt, ap); }, printed);
}
// _FORTIFY_SOURCE's names (what -O2 -D_FORTIFY_SOURCE builds call).
IOT_EXPORT int __fprintf_chk(FILE* fp, int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = on_stream<int>(
      C___fprintf_chk, fp, [&] { return real___vfprintf_chk()(fp, flag, fmt, ap); }, printed);
  va_end(ap);
  return r;
}
IOT_EXPORT int __vfprintf_chk(FILE* fp, int flag, const char* fmt, va_list ap) {
  return on_stream<int>(
      C___vfprintf_chk, fp, [&] { return real___vfprintf_chk()(fp, flag, fmt, ap); }, printed);
}
IOT_EXPORT int __printf_chk(int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = on_stream<int>(
      C___printf_chk, stdout, [&] { return real___vprintf_chk()(flag, fmt, ap); }, printed);
  va_end(ap);
  return r;
}
IOT_EXPORT int __vprintf_chk(int flag, const char* fmt, va_list ap) {
  return on_stream<int>(
      C___vprintf_chk, stdout, [&] { return real___vprintf_chk()(flag, fmt, ap); }, printed);
}
// dprintf writes to an fd, past any stream: its position is the fd's.
static int do_dprintf(CallId id, int fd, const char* fmt, va_list ap) {
  const bool on = stdio_on() && !t_guard;
  OpenFile* f = on ? fd_get(fd) : nullptr;
  return traced<int>(
      on, id, [&] { return real_vdprintf()(fd, fmt, ap); },
      [&](IoLive& r, int ret, int err) {
        Str* p = fd_path_of(f);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        printed(r, f, ret, err);
        return true;
      });
}
IOT_EXPORT int dprintf(int fd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = do_dprintf(C_dprintf, fd, fmt, ap);
  va_end(ap);
  return r;
}
IOT_EXPORT int vdprintf(int fd, const char* fmt, va_list ap) {
  return do_dprintf(C_vdprintf, fd, fmt, ap);
}

#define PUTC(fn, id)                                               \
  IOT_EXPORT int fn(int c, FILE* fp) {                             \
    return on_stream<int>(                                         \
        id, fp, [&] { return real_##fn()(c, fp); }, one_char(fp)); \
  }
PUTC(fputc, C_fputc)
PUTC(putc, C_putc)
PUTC(fputc_unlocked, C_fputc_unlocked)
PUTC(putc_unlocked, C_putc_unlocked)
IOT_EXPORT int putchar(int c) {
  return on_stream<int>(
      C_putchar, stdout, [&] { return real_putchar()(c); }, one_char(stdout));
}
IOT_EXPORT int putchar_unlocked(int c) {
  return on_stream<int>(
      C_putchar_unlocked, stdout, [&] { return real_putchar_unlocked()(c); }, one_char(stdout));
}
IOT_EXPORT int puts(const char* s) {
  return on_stream<int>(
      C_puts, stdout, [&] { return real_puts()(s); },
      string_xfer(int64_t(strlen(s)) + 1));  // and the newline
}
IOT_EXPORT int fputs_unlocked(const char* s, FILE* fp) {
  return on_stream<int>(
      C_fputs_unlocked, fp, [&] { return real_fputs_unlocked()(s, fp); },
      string_xfer(int64_t(strlen(s))));
}
IOT_EXPORT size_t fwrite_unlocked(const void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(
      C_fwrite_unlocked, fp, [&] { return real_fwrite_unlocked()(buf, size, n, fp); },
      items_xfer(fp, size, n));
}

#define GETC(fn, id)                                            \
  IOT_EXPORT int fn(FILE* fp) {                                 \
    return on_stream<int>(                                      \
        id, fp, [&] { return real_##fn()(fp); }, one_char(fp)); \
  }
GETC(fgetc, C_fgetc)
GETC(getc, C_getc)
GETC(fgetc_unlocked, C_fgetc_unlocked)
GETC(getc_unlocked, C_getc_unlocked)
IOT_EXPORT int getchar(void) {
  return on_stream<int>(
      C_getchar, stdin, [&] { return real_getchar()(); }, one_char(stdin));
}
IOT_EXPORT int getchar_unlocked(void) {
  return on_stream<int>(
      C_getchar_unlocked, stdin, [&] { return real_getchar_unlocked()(); }, one_char(stdin));
}
// ungetc pushes a character back: the stream's position goes back by one.
IOT_EXPORT int ungetc(int c, FILE* fp) {
  return on_stream<int>(
      C_ungetc, fp, [&] { return real_ungetc()(c, fp); },
      [&](IoLive& r, OpenFile* f, int ret, int) {
        r.set_ret(ret);
        int64_t pos = f ? f->offset.load(std::memory_order_relaxed) : -1;
        if (ret != EOF && pos > 0) fd_seek(f, pos - 1);
        r.set_pos(ret != EOF && pos > 0 ? pos - 1 : pos);
      });
}
IOT_EXPORT char* fgets_unlocked(char* s, int n, FILE* fp) {
  return on_stream<char*>(
      C_fgets_unlocked, fp, [&] { return real_fgets_unlocked()(s, n, fp); }, line_xfer(fp, n));
}
IOT_EXPORT size_t fread_unlocked(void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(
      C_fread_unlocked, fp, [&] { return real_fread_unlocked()(buf, size, n, fp); },
      items_xfer(fp, size, n));
}

// In C++ <stdio.h> renames fscanf & co. to their __isoc99_ forms: each wrapper is defined
// under a name of ours and given the exported one with an asm label.
#define SCANF(fn, vfn, id)                                              \
  IOT_EXPORT int iot_##fn(FILE* fp, const char* fmt, ...) __asm__(#fn); \
  IOT_EXPORT int iot_##fn(FILE* fp, const char* fmt, ...) {             \
    va_list ap;                                                         \
    va_start(ap, fmt);                                                  \
    int r = scanned(id, fp, [&] { return real_##vfn()(fp, fmt, ap); }); \
    va_end(ap);                                                         \
    return r;                                                           \
  }
#define VSCANF(fn, id)                                                         \
  IOT_EXPORT int iot_##fn(FILE* fp, const char* fmt, va_list ap) __asm__(#fn); \
  IOT_EXPORT int iot_##fn(FILE* fp, const char* fmt, va_list ap) {             \
    return scanned(id, fp, [&] { return real_##fn()(fp, fmt, ap); });          \
  }
#define SCANF_STDIN(fn, vfn, id)                                       \
  IOT_EXPORT int iot_##fn(const char* fmt, ...) __asm__(#fn);          \
  IOT_EXPORT int iot_##fn(const char* fmt, ...) {                      \
    va_list ap;                                                        \
    va_start(ap, fmt);                                                 \
    int r = scanned(id, stdin, [&] { return real_##vfn()(fmt, ap); }); \
    va_end(ap);                                                        \
    return r;                                                          \
  }
#define VSCANF_STDIN(fn, id)                                         \
  IOT_EXPORT int iot_##fn(const char* fmt, va_list ap) __asm__(#fn); \
  IOT_EXPORT int iot_##fn(const char* fmt, va_list ap) {             \
    return scanned(id, stdin, [&] { return real_##fn()(fmt, ap); }); \
  }
SCANF(fscanf, vfscanf, C_fscanf)
VSCANF(vfscanf, C_vfscanf)
SCANF_STDIN(scanf, vscanf, C_scanf)
VSCANF_STDIN(vscanf, C_vscanf)
SCANF(__isoc99_fscanf, __isoc99_vfscanf, C___isoc99_fscanf)
VSCANF(__isoc99_vfscanf, C___isoc99_vfscanf)
SCANF_STDIN(__isoc99_scanf, __isoc99_vscanf, C___isoc99_scanf)
VSCANF_STDIN(__isoc99_vscanf, C___isoc99_vscanf)
