// stdio wrappers. glibc's stdio reaches the kernel through internal calls the POSIX wrappers
// never see, so stdio is recorded at this level: one event per stdio call.
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

int fd_of(FILE* fp) { return fp ? fileno_unlocked(fp) : -1; }
bool appending(const char* mode) { return mode && mode[0] == 'a'; }

// A call on a stream; `extra(rec, file, ret)` adds the call's args.
template <class R, class Call, class Extra>
R on_stream(CallId id, FILE* fp, Call&& call, Extra&& extra) {
  const bool on = stdio_on() && !t_guard;
  const int fd = on ? fd_of(fp) : -1;
  OpenFile* f = on ? fd_get(fd) : nullptr;  // the file the call acts on
  return traced<R>(on, id, call, [&](IoRec& r, R ret, int err) {
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
  return traced<FILE*>(stdio_on(), id, call, [&](IoRec& r, FILE* fp, int err) {
    Str* p = intern_path(path);
    if (fp) fd_open(fd_of(fp), p, appending(mode) ? -1 : 0);
    if (!passes(p)) return false;
    r.set_file(p);
    r.set_ret(fp != nullptr);
    if (fp) r.set_fd(fd_of(fp));
    else r.set_errno(err);
    return true;
  });
}

// The stream position after a seek: computed where the arguments tell it, asked otherwise.
void after_seek(OpenFile* f, FILE* fp, int64_t off, int whence, int ret) {
  if (ret != 0 || !f) return;
  if (whence == SEEK_SET) fd_seek(f, off);
  else if (whence == SEEK_CUR && f->offset.load(std::memory_order_relaxed) >= 0)
    fd_seek(f, f->offset.load(std::memory_order_relaxed) + off);
  else fd_seek(f, int64_t(real_ftello()(fp)));
}
}  // namespace

IOT_EXPORT FILE* fopen(const char* path, const char* mode) {
  return do_fopen(C_fopen, path, mode, [&] { return real_fopen()(path, mode); });
}
IOT_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return do_fopen(C_fopen64, path, mode, [&] { return real_fopen64()(path, mode); });
}
IOT_EXPORT FILE* fdopen(int fd, const char* mode) {
  return traced<FILE*>(stdio_on(), C_fdopen, [&] { return real_fdopen()(fd, mode); },
                       [&](IoRec& r, FILE* fp, int err) {
                         Str* p = fd_path(fd);
                         if (!passes(p)) return false;
                         r.set_file(p);
                         r.set_fd(fd);
                         r.set_ret(fp != nullptr);
                         if (!fp) r.set_errno(err);
                         return true;
                       });
}
#define FREOPEN(fn, id)                                                                         \
  IOT_EXPORT FILE* fn(const char* path, const char* mode, FILE* old) {                          \
    int oldfd = fd_of(old);                                                                     \
    OpenFile* seen = fd_peek(oldfd);                                                            \
    return traced<FILE*>(stdio_on(), id, [&] { return real_##fn()(path, mode, old); },          \
                         [&](IoRec& r, FILE* fp, int err) {                                     \
                           Str* p = path ? intern_path(path) : fd_path(oldfd);                  \
                           if (path) fd_closed(oldfd, seen);                                    \
                           if (fp && path) fd_open(fd_of(fp), p, appending(mode) ? -1 : 0); \
                           if (!passes(p)) return false;                                        \
                           r.set_file(p);                                                       \
                           r.set_ret(fp != nullptr);                                            \
                           if (!fp) r.set_errno(err);                                           \
                           return true;                                                         \
                         });                                                                    \
  }
FREOPEN(freopen, C_freopen)
FREOPEN(freopen64, C_freopen64)

IOT_EXPORT int fclose(FILE* fp) {
  int fd = fd_of(fp);
  OpenFile* seen = fd_before_close(fd, stdio_on() && !t_guard);  // named while still open
  Str* p = fd_path_of(seen);
  return traced<int>(stdio_on(), C_fclose, [&] { return real_fclose()(fp); },
                     [&](IoRec& r, int ret, int err) {
                       fd_closed(fd, seen);  // the stream is gone whatever fclose returned
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
  return [=](IoRec& r, OpenFile* f, size_t ret, int err) {
    int64_t bytes = int64_t(ret * size);
    r.set_size(int64_t(size * n));
    r.set_pos(fd_advance(f, bytes));
    r.set_ret(int64_t(ret));
    r.set_bytes(bytes);
    if (ret < n && ferror_unlocked(fp)) r.set_errno(err);
  };
}

IOT_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(C_fread, fp, [&] { return real_fread()(buf, size, n, fp); },
                           items_xfer(fp, size, n));
}
IOT_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* fp) {
  return on_stream<size_t>(C_fwrite, fp, [&] { return real_fwrite()(buf, size, n, fp); },
                           items_xfer(fp, size, n));
}
IOT_EXPORT char* fgets(char* s, int n, FILE* fp) {
  return on_stream<char*>(C_fgets, fp, [&] { return real_fgets()(s, n, fp); },
                          [&](IoRec& r, OpenFile* f, char* ret, int err) {
                            int64_t bytes = ret ? int64_t(strlen(ret)) : 0;
                            r.set_size(n);
                            r.set_pos(fd_advance(f, bytes));
                            r.set_ret(ret != nullptr);
                            r.set_bytes(bytes);
                            if (!ret && ferror_unlocked(fp)) r.set_errno(err);
                          });
}
IOT_EXPORT int fputs(const char* s, FILE* fp) {
  return on_stream<int>(C_fputs, fp, [&] { return real_fputs()(s, fp); },
                        [&](IoRec& r, OpenFile* f, int ret, int err) {
                          int64_t len = int64_t(strlen(s));
                          int64_t bytes = ret >= 0 ? len : 0;
                          r.set_size(len);
                          r.set_pos(fd_advance(f, bytes));
                          r.set_ret(ret);
                          r.set_bytes(bytes);
                          if (ret == EOF) r.set_errno(err);
                        });
}
#define FSEEK(fn, id, offT)                                                                     \
  IOT_EXPORT int fn(FILE* fp, offT off, int whence) {                                           \
    return on_stream<int>(id, fp, [&] { return real_##fn()(fp, off, whence); },                 \
                          [&](IoRec& r, OpenFile* f, int ret, int err) {                        \
                            r.set_offset(int64_t(off));                                         \
                            r.set_flags(whence);                                                \
                            set_result(r, ret, err);                                            \
                            after_seek(f, fp, int64_t(off), whence, ret);                       \
                          });                                                                   \
  }
FSEEK(fseek, C_fseek, long)
FSEEK(fseeko, C_fseeko, off_t)
FSEEK(fseeko64, C_fseeko64, off64_t)
#define FTELL(fn, id, offT)                                                                     \
  IOT_EXPORT offT fn(FILE* fp) {                                                                \
    return on_stream<offT>(id, fp, [&] { return real_##fn()(fp); },                             \
                           [&](IoRec& r, OpenFile* f, offT ret, int err) {                      \
                             set_result(r, ret, err);                                           \
                             if (ret >= 0) fd_seek(f, int64_t(ret));                            \
                           });                                                                  \
  }
FTELL(ftell, C_ftell, long)
FTELL(ftello, C_ftello, off_t)
FTELL(ftello64, C_ftello64, off64_t)

IOT_EXPORT void rewind(FILE* fp) {
  on_stream<int>(C_rewind, fp, [&] { real_rewind()(fp); return 0; },
                 [&](IoRec& r, OpenFile* f, int, int) { fd_seek(f, 0); r.set_offset(0); });
}
IOT_EXPORT int fflush(FILE* fp) {
  if (!fp) {  // flush of every stream: no one file
    return traced<int>(stdio_on(), C_fflush, [&] { return real_fflush()(fp); },
                       [&](IoRec& r, int ret, int err) {
                         if (!passes(nullptr)) return false;
                         set_result(r, ret, err);
                         return true;
                       });
  }
  return on_stream<int>(C_fflush, fp, [&] { return real_fflush()(fp); },
                        [&](IoRec& r, OpenFile*, int ret, int err) { set_result(r, ret, err); });
}
IOT_EXPORT ssize_t getline(char** line, size_t* n, FILE* fp) {
  return on_stream<ssize_t>(C_getline, fp, [&] { return real_getline()(line, n, fp); },
                            [&](IoRec& r, OpenFile* f, ssize_t ret, int err) {
                              r.set_pos(fd_advance(f, ret));
                              r.set_ret(ret);
                              if (ret < 0 && ferror_unlocked(fp)) r.set_errno(err);
                            });
}
IOT_EXPORT ssize_t getdelim(char** line, size_t* n, int delim, FILE* fp) {
  return on_stream<ssize_t>(C_getdelim, fp, [&] { return real_getdelim()(line, n, delim, fp); },
                            [&](IoRec& r, OpenFile* f, ssize_t ret, int err) {
                              r.set_pos(fd_advance(f, ret));
                              r.set_ret(ret);
                              if (ret < 0 && ferror_unlocked(fp)) r.set_errno(err);
                            });
}
