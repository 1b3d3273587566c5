#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: zstd's memory from our allocator
#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sysmem.h"

namespace iot {

namespace {
__thread bool t_writer __attribute__((tls_model("initial-exec"))) = false;

// Bytes kept allocated past the end of the file (fallocate, KEEP_SIZE) once its file system is
// short of space: when the disk fills up, the record saying how many events were lost, and the
// end marker, still fit. Only the last frame may use them (write(..., last)): a frame after
// which the reserve cannot be renewed is taken back out.
constexpr long kTailReserve = 16 << 10;
// Free space above which no reserve is kept. Giving the reserve back costs a process's end a
// truncate that frees blocks, 0.1-0.7 ms on a file system mounted with `discard`; a disk with
// this much room left is checked again (fstatfs, about a microsecond) at each frame.
constexpr uint64_t kReserveBelow = uint64_t(1) << 30;

void* z_alloc(void*, uInt items, uInt size) { return sys_alloc(size_t(items) * size); }
void z_free(void*, void* p) { sys_free(p); }
void* zstd_alloc(void*, size_t n) { return sys_alloc(n); }
void zstd_free(void*, void* p) { sys_free(p); }

// A gzip member's header (RFC 1952): deflate, no name, no time, Unix.
size_t gzip_header(char* p) {
  static const unsigned char h[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  memcpy(p, h, sizeof h);
  return sizeof h;
}

void mkdirs(const char* dir) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", dir);
  for (char* s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      syscall(SYS_mkdirat, AT_FDCWD, p, 0755);
      *s = '/';
    }
  syscall(SYS_mkdirat, AT_FDCWD, p, 0755);
}
}  // namespace

void Sink::set_writer_thread(bool own_table) { t_writer = own_table; }

const char* trace_suffix(bool compact, Compression c) {
  return compact                  ? ".iotc.zst"
         : c == Compression::zstd ? ".pfw.zst"
         : c == Compression::gzip ? ".pfw.gz"
                                  : ".pfw";
}

bool Sink::create(const char* dir, const char* name, const char* host, int pid, const char* suffix,
                  TraceFileId* out) {
  long fd = -1;
  bool made_dirs = false;  // only when the folder is missing: most processes find it there
  for (int n = 0; n < 1000; n++) {
    if (n == 0)
      snprintf(out->path, sizeof out->path, "%s/%s-%s-%d%s", dir, name, host, pid, suffix);
    else
      snprintf(out->path, sizeof out->path, "%s/%s-%s-%d-%d%s", dir, name, host, pid, n, suffix);
    // O_EXCL never follows a symlink and never opens a file someone else made.
    fd = syscall(SYS_openat, AT_FDCWD, out->path,
                 O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && !made_dirs) {
      mkdirs(dir);
      made_dirs = true;
      n--;
      continue;
    }
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    out->path[0] = 0;
    return false;
  }
  struct stat st;
  syscall(SYS_fstat, fd, &st);
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  syscall(SYS_close, fd);
  return true;
}

void Sink::attach(const TraceFileId& file, uint64_t size, Compression c, int level) {
  id_ = file;
  comp_ = c;
  level_ = level;
  size_ = size;
  err_ = 0;
  fd_ = -1;
  open_ = true;
  reserved_ = size > 0;  // another writer's reserve may be there
  if (c == Compression::gzip) {
    memset(&zs_, 0, sizeof zs_);
    zs_.zalloc = z_alloc;
    zs_.zfree = z_free;
    // Raw deflate, with the gzip header and trailer written here: the trailer's CRC and length
    // then cover only the frames that reached the file, and a file that lost frames still
    // reads to its end with every gzip reader.
    zs_live_ = deflateInit2(&zs_, level_, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    crc_ = uint32_t(crc32(0, nullptr, 0));
    isize_ = 0;
    if (size > 0) resume_gzip();
  }
}

// A gzip file written in part by another writer (a process that died): its trailer, written
// at the end, must cover the text already in it, so that text is inflated once here to count
// it. Its frames end in full flushes, so new deflate blocks simply follow.
void Sink::resume_gzip() {
  long fd = syscall(SYS_openat, AT_FDCWD, id_.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  z_stream in{};
  in.zalloc = z_alloc;
  in.zfree = z_free;
  constexpr size_t kIn = 64 << 10, kOut = 256 << 10;
  char* ibuf = static_cast<char*>(sys_map(kIn));
  char* obuf = static_cast<char*>(sys_map(kOut));
  if (ibuf && obuf && inflateInit2(&in, -15) == Z_OK) {
    int r = Z_OK;
    for (uint64_t off = 10; off < size_ && r == Z_OK;) {
      long got = syscall(SYS_pread64, fd, ibuf, kIn, long(off));
      if (got <= 0) break;
      off += uint64_t(got);
      in.next_in = reinterpret_cast<Bytef*>(ibuf);
      in.avail_in = uInt(got);
      do {
        in.next_out = reinterpret_cast<Bytef*>(obuf);
        in.avail_out = uInt(kOut);
        r = inflate(&in, Z_NO_FLUSH);
        size_t made = kOut - in.avail_out;
        crc_ = uint32_t(crc32(crc_, reinterpret_cast<const Bytef*>(obuf), uInt(made)));
        isize_ += uint32_t(made);
      } while (r == Z_OK && in.avail_out == 0);
      if (r == Z_BUF_ERROR) r = Z_OK;  // it wants more input
    }
    inflateEnd(&in);
  }
  sys_unmap(ibuf, kIn);
  sys_unmap(obuf, kOut);
  syscall(SYS_close, fd);
}

void Sink::release_buffers() {
  if (zws_)
    sys_unmap(zws_, zws_bytes_);
  else if (zc_)
    ZSTD_freeCCtx(zc_);
  zc_ = nullptr;
  zws_ = nullptr;
  if (cbuf_) sys_unmap(cbuf_, ccap_);
  cbuf_ = nullptr;
  ccap_ = 0;
}

void Sink::set_path(const char* p) { snprintf(id_.path, sizeof id_.path, "%s", p); }

void Sink::release_fd() {
  if (fd_ >= 0) syscall(SYS_close, fd_);
  fd_ = -1;
}

int Sink::file_fd() {
  if (fd_ >= 0) return fd_;
  long fd = syscall(SYS_openat, AT_FDCWD, id_.path,
                    O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) errno = ESTALE;  // a symlink where the file was: never followed
    return -1;
  }
  struct stat st;
  if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_dev) != id_.dev ||
      uint64_t(st.st_ino) != id_.ino) {
    syscall(SYS_close, fd);
    errno = ESTALE;  // not the file we created: never written through
    return -1;
  }
  if (t_writer) fd_ = int(fd);  // in the writer's own table: kept while it runs
  return int(fd);
}

void Sink::done_with(int fd) {
  if (fd >= 0 && fd != fd_) syscall(SYS_close, fd);
}

bool Sink::reserve_tail(int fd, uint64_t from) {
  struct statfs fs;
  if (!reserved_ && syscall(SYS_fstatfs, fd, &fs) == 0 &&
      uint64_t(fs.f_bavail) * uint64_t(fs.f_bsize) >= kReserveBelow)
    return true;
  reserved_ = true;
  if (syscall(SYS_fallocate, fd, 1 /* FALLOC_FL_KEEP_SIZE */, long(from), kTailReserve) == 0)
    return true;
  // Only a full disk or quota counts: a file system without fallocate has no reserve to keep.
  return errno != ENOSPC && errno != EDQUOT;
}

bool Sink::write_raw(const char* p, size_t n, bool last, const WriteHook* hook) {
  int fd = file_fd();
  if (fd < 0) {
    err_ = errno;
    return false;
  }
  if (hook) hook->fn(hook->arg, size_, size_ + n);
  int err = 0;
  for (size_t left = n; left > 0;) {
    long w = syscall(SYS_write, fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    left -= size_t(w);
  }
  // Appends use the reserve up: renew it (one cheap call per frame). A frame after which it
  // cannot be renewed ate into the room kept for the end: unless it is the end, it goes too.
  if (!err && !reserve_tail(fd, size_ + n) && !last) err = errno;
  if (err) {
    // Disk full or similar: the tracer never breaks the program. Cut the frame off, so the file
    // stays a run of whole frames, and take the space back for the tail reserve.
    syscall(SYS_ftruncate, fd, long(size_));
    reserve_tail(fd, size_);
  } else {
    size_ += n;
  }
  err_ = err;
  done_with(fd);
  return !err;
}

// One workspace for every frame, of the most the level can need, its pages touched as they are
// used: zstd sizes its tables to each frame, and a context that allocates its own frees and
// remakes its workspace whenever a frame outgrows the last (a process's second frame, bigger
// than its header: 80-100 us of mmap, first touches and table set-up, against 15-20 us; a
// 64 KiB frame after small ones: 0.9 ms, where compressing it takes 0.07). Where that much
// address space is refused (RLIMIT_AS), a context that allocates as it goes.
ZSTD_CCtx* Sink::make_cctx() {
  const size_t bytes = ZSTD_estimateCCtxSize(level_);
  void* ws = sys_map(bytes);
  ZSTD_CCtx* c = ws ? ZSTD_initStaticCCtx(ws, bytes) : nullptr;
  if (c) {
    zws_ = ws;
    zws_bytes_ = bytes;
  } else {
    if (ws) sys_unmap(ws, bytes);
    c = ZSTD_createCCtx_advanced(ZSTD_customMem{zstd_alloc, zstd_free, nullptr});
    if (!c) return nullptr;
  }
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level_);
  // A content checksum per frame (4 bytes): a damaged frame is reported by every zstd reader
  // instead of decoding to wrong lines (in the compact form a flipped time gap would shift
  // every later time of its frame).
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  return c;
}

bool Sink::write(const char* text, size_t n, bool last, const WriteHook* hook) {
  if (!open_ || n == 0) return open_;
  int saved = errno;
  bool ok = false;
  if (comp_ == Compression::none) {
    ok = write_raw(text, n, last, hook);
  } else if (comp_ == Compression::zstd) {
    if (!zc_) zc_ = make_cctx();
    size_t need = ZSTD_compressBound(n);
    if (need > ccap_) {
      char* b = static_cast<char*>(cbuf_ ? sys_remap(cbuf_, ccap_, need) : sys_map(need));
      if (b) cbuf_ = b, ccap_ = need;
    }
    size_t r = zc_ && need <= ccap_ ? ZSTD_compress2(zc_, cbuf_, ccap_, text, n) : size_t(-1);
    if (!ZSTD_isError(r))
      ok = write_raw(cbuf_, r, last, hook);
    else
      err_ = ENOMEM;
  } else if (zs_live_) {
    size_t need = deflateBound(&zs_, uLong(n)) + 64;
    if (need > ccap_) {
      char* b = static_cast<char*>(cbuf_ ? sys_remap(cbuf_, ccap_, need) : sys_map(need));
      if (b) cbuf_ = b, ccap_ = need;
    }
    if (need <= ccap_) {
      size_t head = size_ == 0 ? gzip_header(cbuf_) : 0;  // with the first frame that is kept
      zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text));
      zs_.avail_in = uInt(n);
      zs_.next_out = reinterpret_cast<Bytef*>(cbuf_ + head);
      zs_.avail_out = uInt(ccap_ - head);
      // Full flush: byte-aligned and the window reset, so the stream still inflates from here
      // on when a flush before it was lost.
      deflate(&zs_, Z_FULL_FLUSH);
      ok = write_raw(cbuf_, ccap_ - zs_.avail_out, last, hook);
      if (ok) {
        crc_ = uint32_t(crc32(crc_, reinterpret_cast<const Bytef*>(text), uInt(n)));
        isize_ += uint32_t(n);  // mod 2^32, as gzip says
      }
    } else {
      err_ = ENOMEM;
    }
  }
  errno = saved;
  return ok;
}

void Sink::close() {
  if (!open_) return;
  if (comp_ == Compression::gzip && zs_live_) {
    // The final (empty) block and the trailer, in one write: a few bytes after a full flush.
    char out[256];
    size_t head = size_ == 0 ? gzip_header(out) : 0;
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    zs_.next_out = reinterpret_cast<Bytef*>(out + head);
    zs_.avail_out = uInt(sizeof out - head - 8);
    if (deflate(&zs_, Z_FINISH) == Z_STREAM_END) {
      size_t n = sizeof out - 8 - zs_.avail_out;
      for (int i = 0; i < 4; i++) out[n + i] = char(crc_ >> (8 * i));
      for (int i = 0; i < 4; i++) out[n + 4 + i] = char(isize_ >> (8 * i));
      write_raw(out, n + 8, true);
    }
    deflateEnd(&zs_);
    zs_live_ = false;
  }
  // Give the tail reserve back: the file ends where its last frame does.
  if (reserved_) {
    int fd = file_fd();
    if (fd >= 0) syscall(SYS_ftruncate, fd, long(size_));
    done_with(fd);
  }
  if (fd_ >= 0) syscall(SYS_close, fd_);
  fd_ = -1;
  open_ = false;
}

void Sink::abandon() {
  // In a fork child: the parent's kept fd is in the parent writer's table, not here.
  fd_ = -1;
  open_ = false;
  zs_live_ = false;  // the parent's deflate state: leak it rather than touch it
  zc_ = nullptr;
  zws_ = nullptr;
  cbuf_ = nullptr;
  ccap_ = 0;
  id_.path[0] = 0;
}

}  // namespace iot
