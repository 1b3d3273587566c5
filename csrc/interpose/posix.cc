// POSIX file I/O wrappers. Each: the real function, then what to record (see interpose.h).
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interpose.h"
#include "mmap_table.h"

using namespace iot;

namespace iot {
__thread IoLive t_spare __attribute__((tls_model("initial-exec")));
}  // namespace iot

extern "C" {
int __xstat(int, const char*, struct stat*);
int __lxstat(int, const char*, struct stat*);
int __fxstat(int, int, struct stat*);
int __fxstatat(int, int, const char*, struct stat*, int);
int __xstat64(int, const char*, struct stat64*);
int __lxstat64(int, const char*, struct stat64*);
int __fxstat64(int, int, struct stat64*);
int __fxstatat64(int, int, const char*, struct stat64*, int);
int __open_2(const char*, int);
int __open64_2(const char*, int);
int __openat_2(int, const char*, int);
int __openat64_2(int, const char*, int);
}

namespace {

int64_t iov_total(const struct iovec* iov, int n) {
  int64_t t = 0;
  for (int i = 0; i < n && iov; i++) t += int64_t(iov[i].iov_len);
  return t;
}

bool has_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

// open/openat/creat and kin: remember the fd's file, record the open.
template <class Call>
int do_open(CallId id, int dirfd, const char* path, int flags, mode_t mode, Call&& call) {
  return traced<int>(posix_on(), id, call, [&](IoLive& r, int ret, int err) {
    Str* p = intern_path_at(dirfd, path);
    if (ret >= 0) fd_open(ret, p, (flags & O_APPEND) ? -1 : 0);
    if (!passes(p)) return false;
    r.set_file(p);
    set_result(r, ret, err);
    r.set_flags(flags);
    if (has_mode(flags)) r.set_mode(mode);
    return true;
  });
}

// A call on an fd: read, write, fsync, fstat...; `extra` adds the call's own args.
template <class R, class Call, class Extra>
R on_fd(CallId id, int fd, Call&& call, Extra&& extra) {
  const bool on = posix_on() && !t_guard;
  OpenFile* f = on ? fd_get(fd) : nullptr;  // the file the call acts on
  return traced<R>(on, id, call, [&](IoLive& r, R ret, int err) {
    Str* p = fd_path_of(f);
    if (!passes(p)) return false;
    r.set_file(p);
    r.set_fd(fd);
    extra(r, f, ret);
    set_result(r, ret, err);
    return true;
  });
}
auto no_extra = [](IoLive&, OpenFile*, auto) {};

// A call on a path: stat, access, mkdir, unlink...
template <class R, class Call, class Extra>
R on_path(CallId id, int dirfd, const char* path, Call&& call, Extra&& extra) {
  return traced<R>(posix_on(), id, call, [&](IoLive& r, R ret, int err) {
    Str* p = intern_path_at(dirfd, path);
    if (!passes(p)) return false;
    r.set_file(p);
    extra(r, ret);
    set_result(r, ret, err);
    return true;
  });
}
auto no_path_extra = [](IoLive&, auto) {};

// Two paths: rename, link, symlink.
template <class Call>
int on_two_paths(CallId id, int dfd1, const char* p1, int dfd2, const char* p2, Call&& call) {
  return traced<int>(posix_on(), id, call, [&](IoLive& r, int ret, int err) {
    Str* a = intern_path_at(dfd1, p1);
    Str* b = intern_path_at(dfd2, p2);
    if (!passes(a) && !passes(b)) return false;
    r.set_file(a);
    r.set_file2(b);
    set_result(r, ret, err);
    return true;
  });
}

// Sequential transfer: the offset is the fd position before the call, then advances.
auto seq_xfer(int64_t size) {
  return [size](IoLive& r, OpenFile* f, auto ret) {
    r.set_size(size);
    r.set_pos(fd_advance(f, int64_t(ret)));
  };
}
auto pos_xfer(int64_t size, int64_t off) {
  return [size, off](IoLive& r, OpenFile*, auto) {
    r.set_size(size);
    r.set_offset(off);
  };
}

REAL_FN(open, int (*)(const char*, int, ...))
REAL_FN(open64, int (*)(const char*, int, ...))
REAL_FN(openat, int (*)(int, const char*, int, ...))
REAL_FN(openat64, int (*)(int, const char*, int, ...))
REAL_FN(creat, int (*)(const char*, mode_t))
REAL_FN(creat64, int (*)(const char*, mode_t))
REAL_FN(__open_2, int (*)(const char*, int))
REAL_FN(__open64_2, int (*)(const char*, int))
REAL_FN(__openat_2, int (*)(int, const char*, int))
REAL_FN(__openat64_2, int (*)(int, const char*, int))
REAL_FN(close, int (*)(int))
REAL_FN(close_range, int (*)(unsigned, unsigned, int))
REAL_FN(closefrom, void (*)(int))
REAL_FN(pipe, int (*)(int*))
REAL_FN(pipe2, int (*)(int*, int))
REAL_FN(socket, int (*)(int, int, int))
REAL_FN(socketpair, int (*)(int, int, int, int*))
REAL_FN(accept, int (*)(int, struct sockaddr*, socklen_t*))
REAL_FN(accept4, int (*)(int, struct sockaddr*, socklen_t*, int))
REAL_FN(memfd_create, int (*)(const char*, unsigned))
REAL_FN(eventfd, int (*)(unsigned, int))
REAL_FN(epoll_create1, int (*)(int))
REAL_FN(read, ssize_t (*)(int, void*, size_t))
REAL_FN(write, ssize_t (*)(int, const void*, size_t))
REAL_FN(pread, ssize_t (*)(int, void*, size_t, off_t))
REAL_FN(pwrite, ssize_t (*)(int, const void*, size_t, off_t))
REAL_FN(pread64, ssize_t (*)(int, void*, size_t, off64_t))
REAL_FN(pwrite64, ssize_t (*)(int, const void*, size_t, off64_t))
REAL_FN(readv, ssize_t (*)(int, const struct iovec*, int))
REAL_FN(writev, ssize_t (*)(int, const struct iovec*, int))
REAL_FN(preadv, ssize_t (*)(int, const struct iovec*, int, off_t))
REAL_FN(pwritev, ssize_t (*)(int, const struct iovec*, int, off_t))
REAL_FN(preadv64, ssize_t (*)(int, const struct iovec*, int, off64_t))
REAL_FN(pwritev64, ssize_t (*)(int, const struct iovec*, int, off64_t))
REAL_FN(preadv2, ssize_t (*)(int, const struct iovec*, int, off_t, int))
REAL_FN(pwritev2, ssize_t (*)(int, const struct iovec*, int, off_t, int))
REAL_FN(lseek, off_t (*)(int, off_t, int))
REAL_FN(lseek64, off64_t (*)(int, off64_t, int))
REAL_FN(fsync, int (*)(int))
REAL_FN(fdatasync, int (*)(int))
REAL_FN(ftruncate, int (*)(int, off_t))
REAL_FN(ftruncate64, int (*)(int, off64_t))
REAL_FN(truncate, int (*)(const char*, off_t))
REAL_FN(stat, int (*)(const char*, struct stat*))
REAL_FN(lstat, int (*)(const char*, struct stat*))
REAL_FN(fstat, int (*)(int, struct stat*))
REAL_FN(fstatat, int (*)(int, const char*, struct stat*, int))
REAL_FN(stat64, int (*)(const char*, struct stat64*))
REAL_FN(lstat64, int (*)(const char*, struct stat64*))
REAL_FN(fstat64, int (*)(int, struct stat64*))
REAL_FN(fstatat64, int (*)(int, const char*, struct stat64*, int))
REAL_FN(statx, int (*)(int, const char*, int, unsigned, struct statx*))
REAL_FN(__xstat, int (*)(int, const char*, struct stat*))
REAL_FN(__lxstat, int (*)(int, const char*, struct stat*))
REAL_FN(__fxstat, int (*)(int, int, struct stat*))
REAL_FN(__fxstatat, int (*)(int, int, const char*, struct stat*, int))
REAL_FN(__xstat64, int (*)(int, const char*, struct stat64*))
REAL_FN(__lxstat64, int (*)(int, const char*, struct stat64*))
REAL_FN(__fxstat64, int (*)(int, int, struct stat64*))
REAL_FN(__fxstatat64, int (*)(int, int, const char*, struct stat64*, int))
REAL_FN(access, int (*)(const char*, int))
REAL_FN(faccessat, int (*)(int, const char*, int, int))
REAL_FN(mkdir, int (*)(const char*, mode_t))
REAL_FN(mkdirat, int (*)(int, const char*, mode_t))
REAL_FN(rmdir, int (*)(const char*))
REAL_FN(unlink, int (*)(const char*))
REAL_FN(unlinkat, int (*)(int, const char*, int))
REAL_FN(rename, int (*)(const char*, const char*))
REAL_FN(renameat, int (*)(int, const char*, int, const char*))
REAL_FN(renameat2, int (*)(int, const char*, int, const char*, unsigned))
REAL_FN(link, int (*)(const char*, const char*))
REAL_FN(symlink, int (*)(const char*, const char*))
REAL_FN(chdir, int (*)(const char*))
REAL_FN(fchdir, int (*)(int))
REAL_FN(opendir, DIR* (*)(const char*))
REAL_FN(fdopendir, DIR* (*)(int))
REAL_FN(readdir, struct dirent* (*)(DIR*))
REAL_FN(readdir64, struct dirent64* (*)(DIR*))
REAL_FN(closedir, int (*)(DIR*))
REAL_FN(mmap, void* (*)(void*, size_t, int, int, int, off_t))
REAL_FN(mmap64, void* (*)(void*, size_t, int, int, int, off64_t))
REAL_FN(munmap, int (*)(void*, size_t))
REAL_FN(msync, int (*)(void*, size_t, int))
REAL_FN(dup, int (*)(int))
REAL_FN(dup2, int (*)(int, int))
REAL_FN(dup3, int (*)(int, int, int))
REAL_FN(fcntl, int (*)(int, int, ...))
REAL_FN(fcntl64, int (*)(int, int, ...))
REAL_FN(copy_file_range, ssize_t (*)(int, off64_t*, int, off64_t*, size_t, unsigned))
REAL_FN(sendfile, ssize_t (*)(int, int, off_t*, size_t))
REAL_FN(sendfile64, ssize_t (*)(int, int, off64_t*, size_t))
REAL_FN(fallocate, int (*)(int, int, off_t, off_t))
REAL_FN(fallocate64, int (*)(int, int, off64_t, off64_t))
REAL_FN(posix_fallocate, int (*)(int, off_t, off_t))
REAL_FN(posix_fallocate64, int (*)(int, off64_t, off64_t))

mode_t va_mode(int flags, va_list ap) { return has_mode(flags) ? mode_t(va_arg(ap, int)) : 0; }

}  // namespace

// --- open / close ------------------------------------------------------------------------------

#define OPEN_WRAPPER(fn, id)                                        \
  IOT_EXPORT int fn(const char* path, int flags, ...) {             \
    va_list ap;                                                     \
    va_start(ap, flags);                                            \
    mode_t mode = va_mode(flags, ap);                               \
    va_end(ap);                                                     \
    return do_open(id, AT_FDCWD, path, flags, mode,                 \
                   [&] { return real_##fn()(path, flags, mode); }); \
  }
OPEN_WRAPPER(open, C_open)
OPEN_WRAPPER(open64, C_open64)

#define OPENAT_WRAPPER(fn, id)                                             \
  IOT_EXPORT int fn(int dirfd, const char* path, int flags, ...) {         \
    va_list ap;                                                            \
    va_start(ap, flags);                                                   \
    mode_t mode = va_mode(flags, ap);                                      \
    va_end(ap);                                                            \
    return do_open(id, dirfd, path, flags, mode,                           \
                   [&] { return real_##fn()(dirfd, path, flags, mode); }); \
  }
OPENAT_WRAPPER(openat, C_openat)
OPENAT_WRAPPER(openat64, C_openat64)

IOT_EXPORT int creat(const char* path, mode_t mode) {
  int flags = O_CREAT | O_WRONLY | O_TRUNC;
  return do_open(C_creat, AT_FDCWD, path, flags, mode, [&] { return real_creat()(path, mode); });
}
IOT_EXPORT int creat64(const char* path, mode_t mode) {
  int flags = O_CREAT | O_WRONLY | O_TRUNC;
  return do_open(C_creat64, AT_FDCWD, path, flags, mode,
                 [&] { return real_creat64()(path, mode); });
}
IOT_EXPORT int __open_2(const char* path, int flags) {
  return do_open(C___open_2, AT_FDCWD, path, flags, 0,
                 [&] { return real___open_2()(path, flags); });
}
IOT_EXPORT int __open64_2(const char* path, int flags) {
  return do_open(C___open64_2, AT_FDCWD, path, flags, 0,
                 [&] { return real___open64_2()(path, flags); });
}
IOT_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return do_open(C___openat_2, dirfd, path, flags, 0,
                 [&] { return real___openat_2()(dirfd, path, flags); });
}
IOT_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return do_open(C___openat64_2, dirfd, path, flags, 0,
                 [&] { return real___openat64_2()(dirfd, path, flags); });
}

IOT_EXPORT int close(int fd) {
  const bool on = posix_on() && !t_guard;
  OpenFile* gone = on ? fd_take(fd) : nullptr;  // the fd is gone even on EINTR/EIO
  Str* p = fd_path_of(gone);
  return traced<int>(
      on, C_close, [&] { return real_close()(fd); },
      [&](IoLive& r, int ret, int err) {
        fd_drop(gone);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        set_result(r, ret, err);
        return true;
      });
}

// close_range and closefrom close fds the table would otherwise keep: a pipe or socket that
// gets one of their numbers later would be named after the old file. Forgotten before the
// call, as close does (fd_take): after it, a number in the range may be another thread's new fd.
IOT_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  const bool on = posix_on() && !t_guard;
  if (on && !(flags & CLOSE_RANGE_CLOEXEC))  // CLOEXEC only marks them for exec
    fd_close_range(first, last);
  return traced<int>(
      on, C_close_range, [&] { return real_close_range()(first, last, flags); },
      [&](IoLive& r, int ret, int err) {
        if (!passes(nullptr)) return false;
        r.set_fd(first);
        r.set_fd2(last);
        r.set_flags(flags);
        set_result(r, ret, err);
        return true;
      });
}
IOT_EXPORT void closefrom(int low) {
  const bool on = posix_on() && !t_guard;
  if (on && low >= 0) fd_close_range(unsigned(low), ~0U);
  traced<int>(
      on, C_closefrom,
      [&] {
        real_closefrom()(low);
        return 0;
      },
      [&](IoLive& r, int, int) {
        if (!passes(nullptr)) return false;
        r.set_fd(low);
        return true;
      });
}

// Calls that make fds without naming a file: not recorded (docs/limits.md), but the numbers
// they return are forgotten, so a number closed behind the tracer's back (a raw close
// syscall) is learned afresh as the pipe or socket it now is.
#define FD_MAKER(fn, params, args)                                                                 \
  IOT_EXPORT int fn params {                                                                       \
    int fd = real_##fn() args;                                                                     \
    if (fd >= 0 && g_recording.load(std::memory_order_relaxed) && !in_vfork_child()) fd_close(fd); \
    return fd;                                                                                     \
  }
FD_MAKER(socket, (int domain, int type, int proto), (domain, type, proto))
FD_MAKER(accept, (int s, struct sockaddr* a, socklen_t* n), (s, a, n))
FD_MAKER(accept4, (int s, struct sockaddr* a, socklen_t* n, int fl), (s, a, n, fl))
FD_MAKER(memfd_create, (const char* name, unsigned fl), (name, fl))
FD_MAKER(eventfd, (unsigned v, int fl), (v, fl))
FD_MAKER(epoll_create1, (int fl), (fl))
#define FD_PAIR_MAKER(fn, params, args)                                               \
  IOT_EXPORT int fn params {                                                          \
    int r = real_##fn() args;                                                         \
    if (r == 0 && g_recording.load(std::memory_order_relaxed) && !in_vfork_child()) { \
      fd_close(fds[0]);                                                               \
      fd_close(fds[1]);                                                               \
    }                                                                                 \
    return r;                                                                         \
  }
FD_PAIR_MAKER(pipe, (int fds[2]), (fds))
FD_PAIR_MAKER(pipe2, (int fds[2], int fl), (fds, fl))
FD_PAIR_MAKER(socketpair, (int d, int t, int p, int fds[2]), (d, t, p, fds))

// --- data transfer -----------------------------------------------------------------------------

IOT_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  if (!posix_on() || t_guard) return real_read()(fd, buf, n);  // before any closure is built
  return on_fd<ssize_t>(
      C_read, fd, [&] { return real_read()(fd, buf, n); }, seq_xfer(int64_t(n)));
}
IOT_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  if (!posix_on() || t_guard) return real_write()(fd, buf, n);  // before any closure is built
  return on_fd<ssize_t>(
      C_write, fd, [&] { return real_write()(fd, buf, n); }, seq_xfer(int64_t(n)));
}
#define PXFER(fn, id, bufT, offT)                                                                  \
  IOT_EXPORT ssize_t fn(int fd, bufT buf, size_t n, offT off) {                                    \
    if (!posix_on() || t_guard) return real_##fn()(fd, buf, n, off); /* before any closure */      \
    return on_fd<ssize_t>(                                                                         \
        id, fd, [&] { return real_##fn()(fd, buf, n, off); }, pos_xfer(int64_t(n), int64_t(off))); \
  }
PXFER(pread, C_pread, void*, off_t)
PXFER(pwrite, C_pwrite, const void*, off_t)
PXFER(pread64, C_pread64, void*, off64_t)
PXFER(pwrite64, C_pwrite64, const void*, off64_t)

IOT_EXPORT ssize_t readv(int fd, const struct iovec* iov, int n) {
  return on_fd<ssize_t>(
      C_readv, fd, [&] { return real_readv()(fd, iov, n); }, seq_xfer(iov_total(iov, n)));
}
IOT_EXPORT ssize_t writev(int fd, const struct iovec* iov, int n) {
  return on_fd<ssize_t>(
      C_writev, fd, [&] { return real_writev()(fd, iov, n); }, seq_xfer(iov_total(iov, n)));
}
#define PVXFER(fn, id, offT)                                                \
  IOT_EXPORT ssize_t fn(int fd, const struct iovec* iov, int n, offT off) { \
    return on_fd<ssize_t>(                                                  \
        id, fd, [&] { return real_##fn()(fd, iov, n, off); },               \
        pos_xfer(iov_total(iov, n), int64_t(off)));                         \
  }
PVXFER(preadv, C_preadv, off_t)
PVXFER(pwritev, C_pwritev, off_t)
PVXFER(preadv64, C_preadv64, off64_t)
PVXFER(pwritev64, C_pwritev64, off64_t)
#define PV2XFER(fn, id)                                                                 \
  IOT_EXPORT ssize_t fn(int fd, const struct iovec* iov, int n, off_t off, int flags) { \
    int64_t total = iov_total(iov, n);                                                  \
    return on_fd<ssize_t>(                                                              \
        id, fd, [&] { return real_##fn()(fd, iov, n, off, flags); },                    \
        [&](IoLive& r, OpenFile* f, ssize_t ret) {                                      \
          r.set_size(total);                                                            \
          if (off == -1)                                                                \
            r.set_pos(fd_advance(f, ret));                                              \
          else                                                                          \
            r.set_offset(int64_t(off));                                                 \
          r.set_flags(flags);                                                           \
        });                                                                             \
  }
PV2XFER(preadv2, C_preadv2)
PV2XFER(pwritev2, C_pwritev2)

#define LSEEK(fn, id, offT)                                                     \
  IOT_EXPORT offT fn(int fd, offT off, int whence) {                            \
    return on_fd<offT>(                                                         \
        id, fd, [&] { return real_##fn()(fd, off, whence); },                   \
        [&](IoLive& r, OpenFile* f, offT ret) {                                 \
          /* the request only when it is not the result (SEEK_SET): the  */     \
          /* same number twice costs ~0.6 bytes an event compressed       */    \
          if (int64_t(ret) != int64_t(off)) r.set_offset(int64_t(off));         \
          r.set_flags(whence);                                                  \
          if (ret >= 0 && f && f->offset.load(std::memory_order_relaxed) >= -1) \
            fd_seek(f, int64_t(ret));                                           \
        });                                                                     \
  }
LSEEK(lseek, C_lseek, off_t)
LSEEK(lseek64, C_lseek64, off64_t)

IOT_EXPORT int fsync(int fd) {
  return on_fd<int>(
      C_fsync, fd, [&] { return real_fsync()(fd); }, no_extra);
}
IOT_EXPORT int fdatasync(int fd) {
  return on_fd<int>(
      C_fdatasync, fd, [&] { return real_fdatasync()(fd); }, no_extra);
}
IOT_EXPORT int ftruncate(int fd, off_t len) {
  return on_fd<int>(
      C_ftruncate, fd, [&] { return real_ftruncate()(fd, len); },
      [&](IoLive& r, OpenFile*, int) { r.set_size(len); });
}
IOT_EXPORT int ftruncate64(int fd, off64_t len) {
  return on_fd<int>(
      C_ftruncate64, fd, [&] { return real_ftruncate64()(fd, len); },
      [&](IoLive& r, OpenFile*, int) { r.set_size(len); });
}
IOT_EXPORT int truncate(const char* path, off_t len) {
  return on_path<int>(
      C_truncate, AT_FDCWD, path, [&] { return real_truncate()(path, len); },
      [&](IoLive& r, int) { r.set_size(len); });
}

// --- metadata ----------------------------------------------------------------------------------

#define STAT_PATH(fn, id, statT)                                                   \
  IOT_EXPORT int fn(const char* path, statT* st) {                                 \
    return on_path<int>(                                                           \
        id, AT_FDCWD, path, [&] { return real_##fn()(path, st); }, no_path_extra); \
  }
STAT_PATH(stat, C_stat, struct stat)
STAT_PATH(lstat, C_lstat, struct stat)
STAT_PATH(stat64, C_stat64, struct stat64)
STAT_PATH(lstat64, C_lstat64, struct stat64)

#define STAT_FD(fn, id, statT)                                  \
  IOT_EXPORT int fn(int fd, statT* st) {                        \
    return on_fd<int>(                                          \
        id, fd, [&] { return real_##fn()(fd, st); }, no_extra); \
  }
STAT_FD(fstat, C_fstat, struct stat)
STAT_FD(fstat64, C_fstat64, struct stat64)

// fstatat/statx with AT_EMPTY_PATH and "" act on the fd itself.
template <class Call>
int at_call(CallId id, int dirfd, const char* path, int flags, Call&& call) {
  if (path && !path[0] && (flags & AT_EMPTY_PATH))
    return on_fd<int>(id, dirfd, call, [&](IoLive& r, OpenFile*, int) { r.set_flags(flags); });
  return on_path<int>(id, dirfd, path, call, [&](IoLive& r, int) { r.set_flags(flags); });
}
IOT_EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return at_call(C_fstatat, dirfd, path, flags,
                 [&] { return real_fstatat()(dirfd, path, st, flags); });
}
IOT_EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  return at_call(C_fstatat64, dirfd, path, flags,
                 [&] { return real_fstatat64()(dirfd, path, st, flags); });
}
IOT_EXPORT int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* st) {
  return at_call(C_statx, dirfd, path, flags,
                 [&] { return real_statx()(dirfd, path, flags, mask, st); });
}

// The pre-2.33 glibc names that old binaries still call.
#define XSTAT_PATH(fn, id, statT)                                                       \
  IOT_EXPORT int fn(int ver, const char* path, statT* st) {                             \
    return on_path<int>(                                                                \
        id, AT_FDCWD, path, [&] { return real_##fn()(ver, path, st); }, no_path_extra); \
  }
XSTAT_PATH(__xstat, C___xstat, struct stat)
XSTAT_PATH(__lxstat, C___lxstat, struct stat)
XSTAT_PATH(__xstat64, C___xstat64, struct stat64)
XSTAT_PATH(__lxstat64, C___lxstat64, struct stat64)
IOT_EXPORT int __fxstat(int ver, int fd, struct stat* st) {
  return on_fd<int>(
      C___fxstat, fd, [&] { return real___fxstat()(ver, fd, st); }, no_extra);
}
IOT_EXPORT int __fxstat64(int ver, int fd, struct stat64* st) {
  return on_fd<int>(
      C___fxstat64, fd, [&] { return real___fxstat64()(ver, fd, st); }, no_extra);
}
IOT_EXPORT int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags) {
  return at_call(C___fxstatat, dirfd, path, flags,
                 [&] { return real___fxstatat()(ver, dirfd, path, st, flags); });
}
IOT_EXPORT int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags) {
  return at_call(C___fxstatat64, dirfd, path, flags,
                 [&] { return real___fxstatat64()(ver, dirfd, path, st, flags); });
}

IOT_EXPORT int access(const char* path, int mode) {
  return on_path<int>(
      C_access, AT_FDCWD, path, [&] { return real_access()(path, mode); },
      [&](IoLive& r, int) { r.set_mode(mode); });
}
IOT_EXPORT int faccessat(int dirfd, const char* path, int mode, int flags) {
  return on_path<int>(
      C_faccessat, dirfd, path, [&] { return real_faccessat()(dirfd, path, mode, flags); },
      [&](IoLive& r, int) {
        r.set_mode(mode);
        r.set_flags(flags);
      });
}
IOT_EXPORT int mkdir(const char* path, mode_t mode) {
  return on_path<int>(
      C_mkdir, AT_FDCWD, path, [&] { return real_mkdir()(path, mode); },
      [&](IoLive& r, int) { r.set_mode(mode); });
}
IOT_EXPORT int mkdirat(int dirfd, const char* path, mode_t mode) {
  return on_path<int>(
      C_mkdirat, dirfd, path, [&] { return real_mkdirat()(dirfd, path, mode); },
      [&](IoLive& r, int) { r.set_mode(mode); });
}
IOT_EXPORT int rmdir(const char* path) {
  return on_path<int>(
      C_rmdir, AT_FDCWD, path, [&] { return real_rmdir()(path); }, no_path_extra);
}
IOT_EXPORT int unlink(const char* path) {
  return on_path<int>(
      C_unlink, AT_FDCWD, path, [&] { return real_unlink()(path); }, no_path_extra);
}
IOT_EXPORT int unlinkat(int dirfd, const char* path, int flags) {
  return on_path<int>(
      C_unlinkat, dirfd, path, [&] { return real_unlinkat()(dirfd, path, flags); },
      [&](IoLive& r, int) { r.set_flags(flags); });
}
IOT_EXPORT int rename(const char* a, const char* b) {
  return on_two_paths(C_rename, AT_FDCWD, a, AT_FDCWD, b, [&] { return real_rename()(a, b); });
}
IOT_EXPORT int renameat(int da, const char* a, int db, const char* b) {
  return on_two_paths(C_renameat, da, a, db, b, [&] { return real_renameat()(da, a, db, b); });
}
IOT_EXPORT int renameat2(int da, const char* a, int db, const char* b, unsigned flags) {
  return on_two_paths(C_renameat2, da, a, db, b,
                      [&] { return real_renameat2()(da, a, db, b, flags); });
}
IOT_EXPORT int link(const char* a, const char* b) {
  return on_two_paths(C_link, AT_FDCWD, b, AT_FDCWD, a, [&] { return real_link()(a, b); });
}
IOT_EXPORT int symlink(const char* target, const char* linkpath) {
  return on_two_paths(C_symlink, AT_FDCWD, linkpath, AT_FDCWD, target,
                      [&] { return real_symlink()(target, linkpath); });
}
IOT_EXPORT int chdir(const char* path) {
  return on_path<int>(
      C_chdir, AT_FDCWD, path, [&] { return real_chdir()(path); },
      [&](IoLive&, int ret) {
        if (ret == 0) cwd_refresh();
      });
}
IOT_EXPORT int fchdir(int fd) {
  int r = on_fd<int>(
      C_fchdir, fd, [&] { return real_fchdir()(fd); }, no_extra);
  if (r == 0 && g_recording.load(std::memory_order_relaxed)) {
    int e = errno;
    cwd_refresh();
    errno = e;
  }
  return r;
}

// --- directories -------------------------------------------------------------------------------

IOT_EXPORT DIR* opendir(const char* path) {
  return traced<DIR*>(
      posix_on(), C_opendir, [&] { return real_opendir()(path); },
      [&](IoLive& r, DIR* d, int err) {
        Str* p = intern_path(path);
        if (d) fd_open(dirfd(d), p, 0);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_ret(d != nullptr);
        if (!d) r.set_errno(err);
        return true;
      });
}
IOT_EXPORT DIR* fdopendir(int fd) {
  return traced<DIR*>(
      posix_on(), C_fdopendir, [&] { return real_fdopendir()(fd); },
      [&](IoLive& r, DIR* d, int err) {
        Str* p = fd_path(fd);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        r.set_ret(d != nullptr);
        if (!d) r.set_errno(err);
        return true;
      });
}
// readdir returns NULL both at the end and on error; only errno tells them apart.
template <class Ent, class Call>
Ent* do_readdir(CallId id, DIR* d, Call&& call) {
  int before = errno;
  errno = 0;
  Ent* e = traced<Ent*>(posix_on(), id, call, [&](IoLive& r, Ent* ent, int err) {
    int fd = d ? dirfd(d) : -1;
    Str* p = fd_path(fd);
    if (!passes(p)) return false;
    r.set_file(p);
    r.set_fd(fd);
    r.set_ret(ent != nullptr);
    if (!ent && err) r.set_errno(err);
    return true;
  });
  if (errno == 0) errno = before;
  return e;
}
IOT_EXPORT struct dirent* readdir(DIR* d) {
  return do_readdir<struct dirent>(C_readdir, d, [&] { return real_readdir()(d); });
}
IOT_EXPORT struct dirent64* readdir64(DIR* d) {
  return do_readdir<struct dirent64>(C_readdir64, d, [&] { return real_readdir64()(d); });
}
IOT_EXPORT int closedir(DIR* d) {
  int fd = d ? dirfd(d) : -1;
  const bool on = posix_on() && !t_guard;
  OpenFile* gone = on ? fd_take(fd) : nullptr;
  Str* p = fd_path_of(gone);
  return traced<int>(
      on, C_closedir, [&] { return real_closedir()(d); },
      [&](IoLive& r, int ret, int err) {
        fd_drop(gone);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_fd(fd);
        set_result(r, ret, err);
        return true;
      });
}

// --- memory maps -------------------------------------------------------------------------------

// Anonymous maps are memory, not I/O: only file maps are recorded (and remembered, so that
// their munmap/msync can be named).
#define MMAP(fn, id, offT)                                                                    \
  IOT_EXPORT void* fn(void* addr, size_t len, int prot, int flags, int fd, offT off) {        \
    bool file = !(flags & MAP_ANONYMOUS) && fd >= 0;                                          \
    return traced<void*>(                                                                     \
        posix_on() && file, id, [&] { return real_##fn()(addr, len, prot, flags, fd, off); }, \
        [&](IoLive& r, void* ret, int err) {                                                  \
          Str* p = fd_path(fd);                                                               \
          if (ret != MAP_FAILED) mmap_remember(ret, p);                                       \
          if (!passes(p)) return false;                                                       \
          r.set_file(p);                                                                      \
          r.set_fd(fd);                                                                       \
          r.set_size(int64_t(len));                                                           \
          r.set_offset(int64_t(off));                                                         \
          r.set_flags(prot);                                                                  \
          r.set_ret(ret != MAP_FAILED);                                                       \
          if (ret == MAP_FAILED) r.set_errno(err);                                            \
          return true;                                                                        \
        });                                                                                   \
  }
MMAP(mmap, C_mmap, off_t)
MMAP(mmap64, C_mmap64, off64_t)

IOT_EXPORT int munmap(void* addr, size_t len) {
  bool file = posix_on() && mmap_known(addr);
  return traced<int>(
      file, C_munmap, [&] { return real_munmap()(addr, len); },
      [&](IoLive& r, int ret, int err) {
        Str* p = ret == 0 ? mmap_forget(addr) : mmap_lookup(addr);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_size(int64_t(len));
        set_result(r, ret, err);
        return true;
      });
}
IOT_EXPORT int msync(void* addr, size_t len, int flags) {
  bool file = posix_on() && mmap_known(addr);
  return traced<int>(
      file, C_msync, [&] { return real_msync()(addr, len, flags); },
      [&](IoLive& r, int ret, int err) {
        Str* p = mmap_lookup(addr);
        if (!passes(p)) return false;
        r.set_file(p);
        r.set_size(int64_t(len));
        r.set_flags(flags);
        set_result(r, ret, err);
        return true;
      });
}

// --- fd plumbing -------------------------------------------------------------------------------

IOT_EXPORT int dup(int fd) {
  return on_fd<int>(
      C_dup, fd, [&] { return real_dup()(fd); },
      [&](IoLive& r, OpenFile*, int ret) {
        if (ret >= 0) {
          fd_dup(fd, ret);
          r.set_fd2(ret);
        }
      });
}
IOT_EXPORT int dup2(int fd, int fd2) {
  return on_fd<int>(
      C_dup2, fd, [&] { return real_dup2()(fd, fd2); },
      [&](IoLive& r, OpenFile*, int ret) {
        if (ret >= 0) fd_dup(fd, fd2);
        r.set_fd2(fd2);
      });
}
IOT_EXPORT int dup3(int fd, int fd2, int flags) {
  return on_fd<int>(
      C_dup3, fd, [&] { return real_dup3()(fd, fd2, flags); },
      [&](IoLive& r, OpenFile*, int ret) {
        if (ret >= 0) fd_dup(fd, fd2);
        r.set_fd2(fd2);
        r.set_flags(flags);
      });
}
// fcntl's third argument is an int or a pointer depending on cmd; both travel in one register.
#define FCNTL(fn, id)                                      \
  IOT_EXPORT int fn(int fd, int cmd, ...) {                \
    va_list ap;                                            \
    va_start(ap, cmd);                                     \
    void* arg = va_arg(ap, void*);                         \
    va_end(ap);                                            \
    return on_fd<int>(                                     \
        id, fd, [&] { return real_##fn()(fd, cmd, arg); }, \
        [&](IoLive& r, OpenFile*, int ret) {               \
          r.set_flags(cmd);                                \
          if (ret < 0) return;                             \
          if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {  \
            fd_dup(fd, ret);                               \
            r.set_fd2(ret);                                \
          }                                                \
        });                                                \
  }
FCNTL(fcntl, C_fcntl)
FCNTL(fcntl64, C_fcntl64)

// --- kernel-side copies ------------------------------------------------------------------------

IOT_EXPORT ssize_t copy_file_range(int in, off64_t* in_off, int out, off64_t* out_off, size_t n,
                                   unsigned flags) {
  int64_t start = in_off ? *in_off : -1;
  const bool on = posix_on() && !t_guard;
  OpenFile* fi = on ? fd_get(in) : nullptr;
  OpenFile* fo = on ? fd_get(out) : nullptr;
  return traced<ssize_t>(
      on, C_copy_file_range,
      [&] { return real_copy_file_range()(in, in_off, out, out_off, n, flags); },
      [&](IoLive& r, ssize_t ret, int err) {
        Str* a = fd_path_of(fi);
        Str* b = fd_path_of(fo);
        if (!passes(a) && !passes(b)) return false;
        r.set_file(a);
        r.set_file2(b);
        r.set_fd(in);
        r.set_fd2(out);
        r.set_size(int64_t(n));
        if (start >= 0)
          r.set_offset(start);
        else
          r.set_pos(fd_advance(fi, ret));
        if (!out_off) fd_advance(fo, ret);
        set_result(r, ret, err);
        return true;
      });
}
#define SENDFILE(fn, id, offT)                                  \
  IOT_EXPORT ssize_t fn(int out, int in, offT* off, size_t n) { \
    int64_t start = off ? int64_t(*off) : -1;                   \
    const bool on = posix_on() && !t_guard;                     \
    OpenFile* fi = on ? fd_get(in) : nullptr;                   \
    OpenFile* fo = on ? fd_get(out) : nullptr;                  \
    return traced<ssize_t>(                                     \
        on, id, [&] { return real_##fn()(out, in, off, n); },   \
        [&](IoLive& r, ssize_t ret, int err) {                  \
          Str* a = fd_path_of(fi);                              \
          Str* b = fd_path_of(fo);                              \
          if (!passes(a) && !passes(b)) return false;           \
          r.set_file(a);                                        \
          r.set_file2(b);                                       \
          r.set_fd(in);                                         \
          r.set_fd2(out);                                       \
          r.set_size(int64_t(n));                               \
          if (start >= 0)                                       \
            r.set_offset(start);                                \
          else                                                  \
            r.set_pos(fd_advance(fi, ret));                     \
          fd_advance(fo, ret);                                  \
          set_result(r, ret, err);                              \
          return true;                                          \
        });                                                     \
  }
SENDFILE(sendfile, C_sendfile, off_t)
SENDFILE(sendfile64, C_sendfile64, off64_t)

#define FALLOCATE(fn, id, offT)                                  \
  IOT_EXPORT int fn(int fd, int mode, offT off, offT len) {      \
    return on_fd<int>(                                           \
        id, fd, [&] { return real_##fn()(fd, mode, off, len); }, \
        [&](IoLive& r, OpenFile*, int) {                         \
          r.set_size(int64_t(len));                              \
          r.set_offset(int64_t(off));                            \
          r.set_flags(mode);                                     \
        });                                                      \
  }
FALLOCATE(fallocate, C_fallocate, off_t)
FALLOCATE(fallocate64, C_fallocate64, off64_t)

// posix_fallocate returns the error number instead of setting errno.
#define POSIX_FALLOCATE(fn, id, offT)                              \
  IOT_EXPORT int fn(int fd, offT off, offT len) {                  \
    return traced<int>(                                            \
        posix_on(), id, [&] { return real_##fn()(fd, off, len); }, \
        [&](IoLive& r, int ret, int) {                             \
          Str* p = fd_path(fd);                                    \
          if (!passes(p)) return false;                            \
          r.set_file(p);                                           \
          r.set_fd(fd);                                            \
          r.set_size(int64_t(len));                                \
          r.set_offset(int64_t(off));                              \
          r.set_ret(ret);                                          \
          if (ret) r.set_errno(ret);                               \
          return true;                                             \
        });                                                        \
  }
POSIX_FALLOCATE(posix_fallocate, C_posix_fallocate, off_t)
POSIX_FALLOCATE(posix_fallocate64, C_posix_fallocate64, off64_t)
