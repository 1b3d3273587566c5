#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

namespace {
__thread bool t_writer __attribute__((tls_model("initial-exec"))) = false;
int g_writer_fd = -1;          // open in the writer's table only
unsigned g_writer_fd_gen = 0;  // the file it was opened for

long open_append(const char* path) {
  return syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CLOEXEC);
}
}  // namespace

void Sink::set_writer_thread() { t_writer = true; }

static void mkdirs(const char* dir) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", dir);
  for (char* s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      syscall(SYS_mkdirat, AT_FDCWD, p, 0777);
      *s = '/';
    }
  syscall(SYS_mkdirat, AT_FDCWD, p, 0777);
}

bool Sink::open(const char* dir, const char* name, const char* host, int pid, Compression c,
                int level, bool compact) {
  comp_ = c;
  level_ = level;
  const char* ext = compact ? ".iotc.zst"
                    : c == Compression::zstd ? ".pfw.zst"
                    : c == Compression::gzip ? ".pfw.gz" : ".pfw";
  mkdirs(dir);
  for (int n = 0; n < 1000; n++) {
    if (n == 0) snprintf(path_, sizeof path_, "%s/%s-%s-%d%s", dir, name, host, pid, ext);
    else snprintf(path_, sizeof path_, "%s/%s-%s-%d-%d%s", dir, name, host, pid, n, ext);
    long fd = syscall(SYS_openat, AT_FDCWD, path_, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      syscall(SYS_close, fd);  // created; every write opens it for appending (see sink.h)
      open_ = true;
      file_gen_++;
      break;
    }
    if (errno != EEXIST) break;
  }
  if (!open_) {
    path_[0] = 0;
    return false;
  }
  if (c == Compression::gzip) {
    memset(&zs_, 0, sizeof zs_);
    zs_live_ = deflateInit2(&zs_, level_, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  return true;
}

void Sink::write_raw(const char* p, size_t n) {
  long fd;
  if (t_writer) {  // the writer keeps its fd, reopened when the file changed
    if (g_writer_fd >= 0 && g_writer_fd_gen != file_gen_) {
      syscall(SYS_close, g_writer_fd);
      g_writer_fd = -1;
    }
    if (g_writer_fd < 0) {
      g_writer_fd = int(open_append(path_));
      g_writer_fd_gen = file_gen_;
    }
    fd = g_writer_fd;
  } else {
    fd = open_append(path_);
  }
  if (fd < 0) return;
  while (n > 0) {
    long w = syscall(SYS_write, fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      break;  // disk full or similar: the tracer never breaks the program
    }
    p += w;
    n -= size_t(w);
  }
  if (!t_writer) syscall(SYS_close, fd);
}

void Sink::write(const char* text, size_t n) {
  if (!open_ || n == 0) return;
  int saved = errno;
  if (comp_ == Compression::none) {
    write_raw(text, n);
  } else if (comp_ == Compression::zstd) {
    if (!zc_) {
      zc_ = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(zc_, ZSTD_c_compressionLevel, level_);
      // A content checksum per frame (4 bytes): a damaged frame is reported by every zstd
      // reader instead of decoding to wrong lines (in the compact form a flipped time gap
      // would shift every later time of its frame).
      ZSTD_CCtx_setParameter(zc_, ZSTD_c_checksumFlag, 1);
    }
    size_t need = ZSTD_compressBound(n);
    if (need > ccap_) {
      cbuf_ = static_cast<char*>(realloc(cbuf_, need));
      ccap_ = need;
    }
    size_t r = ZSTD_compress2(zc_, cbuf_, ccap_, text, n);
    if (!ZSTD_isError(r)) write_raw(cbuf_, r);
  } else if (zs_live_) {
    size_t need = deflateBound(&zs_, uLong(n)) + 64;
    if (need > ccap_) {
      cbuf_ = static_cast<char*>(realloc(cbuf_, need));
      ccap_ = need;
    }
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text));
    zs_.avail_in = uInt(n);
    zs_.next_out = reinterpret_cast<Bytef*>(cbuf_);
    zs_.avail_out = uInt(ccap_);
    deflate(&zs_, Z_FULL_FLUSH);  // byte-aligned: everything so far inflates even if cut here
    write_raw(cbuf_, ccap_ - zs_.avail_out);
  }
  errno = saved;
}

void Sink::close() {
  if (!open_) return;
  if (comp_ == Compression::gzip && zs_live_) {
    char out[256];
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    int r;
    do {
      zs_.next_out = reinterpret_cast<Bytef*>(out);
      zs_.avail_out = sizeof out;
      r = deflate(&zs_, Z_FINISH);
      write_raw(out, sizeof out - zs_.avail_out);
    } while (r == Z_OK);
    deflateEnd(&zs_);
    zs_live_ = false;
  }
  open_ = false;  // the writer's kept fd, if any, is closed when it next writes (file_gen_)
}

void Sink::abandon() {
  // In a fork child: the parent's writer fd is in the parent writer's table, not here.
  g_writer_fd = -1;
  open_ = false;
  zs_live_ = false;  // the parent's deflate state: leak it rather than touch it
  zc_ = nullptr;
  cbuf_ = nullptr;
  ccap_ = 0;
  path_[0] = 0;
}

}  // namespace iot
