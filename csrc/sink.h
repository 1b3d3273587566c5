// The trace file of this process: text in, compressed frames out, written with raw syscalls
// (so the tracer's own I/O is never traced). zstd: one independent frame per write; gzip: one
// member, a full flush per write; none: the text as it is.
#pragma once
#include <limits.h>
#include <stddef.h>
#include <zlib.h>
#include <zstd.h>

#include "config.h"

namespace iot {

class Sink {
 public:
  // Create DIR/<name>-<host>-<pid>[-n].pfw[.zst|.gz] (never overwriting). false on failure.
  bool open(const char* dir, const char* name, const char* host, int pid, Compression c, int level);
  bool is_open() const { return fd_ >= 0; }
  // Write whole lines; after this returns they are in the file (as one frame / flush point).
  void write(const char* text, size_t n);
  // Finish the stream (gzip trailer) and close.
  void close();
  // Forget the file without touching it (fork child: the parent's file is not ours).
  void abandon();
  const char* path() const { return path_; }

 private:
  void write_raw(const char* p, size_t n);
  int fd_ = -1;
  Compression comp_ = Compression::zstd;
  int level_ = 3;
  ZSTD_CCtx* zc_ = nullptr;
  z_stream zs_{};
  bool zs_live_ = false;
  char* cbuf_ = nullptr;
  size_t ccap_ = 0;
  char path_[PATH_MAX] = "";
};

}  // namespace iot
