// The trace file of this process: text in, compressed frames out, written with raw syscalls
// (so the tracer's own I/O is never traced). zstd: one independent frame per write; gzip: one
// member, a full flush per write; none: the text as it is.
//
// The writer thread has an fd table of its own (writer.cc), so an fd is good only in the table
// that opened it: the writer keeps one open (O_APPEND); any other thread (exit, _exit, exec,
// signal flushes) opens the file by path, appends and closes. The program never sees an fd of
// ours. Callers serialise writes (the drain lock).
#pragma once
#include <limits.h>
#include <stddef.h>
#include <zlib.h>
#include <zstd.h>

#include "config.h"

namespace iot {

class Sink {
 public:
  // Create DIR/<name>-<host>-<pid>[-n].pfw[.zst|.gz], or .iotc.zst for the compact form
  // (never overwriting). false on failure.
  bool open(const char* dir, const char* name, const char* host, int pid, Compression c, int level,
            bool compact);
  bool is_open() const { return open_; }
  // Write whole lines; after this returns they are in the file (as one frame / flush point).
  void write(const char* text, size_t n);
  // Finish the stream (gzip trailer) and close.
  void close();
  // Forget the file without touching it (fork child: the parent's file is not ours).
  void abandon();
  const char* path() const { return path_; }

  // The calling thread is the writer (its fd, in its own table, may be kept open).
  static void set_writer_thread();

 private:
  void write_raw(const char* p, size_t n);
  bool open_ = false;
  unsigned file_gen_ = 0;  // which file the writer's kept fd belongs to
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
