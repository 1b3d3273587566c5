// The trace file of this process: text in, compressed frames out, written with raw syscalls
// (so the tracer's own I/O is never traced). zstd: one independent frame per write; gzip: one
// member, a full flush per write (its header goes with the first frame kept); none: the text.
//
// The writer thread has an fd table of its own (writer.cc): it creates the file and keeps that
// fd, so the program never sees an fd of ours and the file is never looked up by path again.
// Only when no writer thread runs does another thread write, opening the file by path each
// time with O_NOFOLLOW and checking that it is the file first created (device and inode): a
// file swapped for a symlink or another file is never written through. Callers serialise
// writes (the drain lock). No malloc anywhere here (sysmem.h).
#pragma once
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>
#include <zstd.h>

#include "config.h"

namespace iot {

class Sink {
 public:
  // Create DIR/<name>-<host>-<pid>[-n].pfw[.zst|.gz], or .iotc.zst for the compact form
  // (never overwriting; folders made 0755 under the umask, the file 0644). false on failure,
  // errno set.
  bool open(const char* dir, const char* name, const char* host, int pid, Compression c, int level,
            bool compact);
  bool is_open() const { return open_; }
  // Write whole lines; after this returns true they are in the file (as one frame / flush
  // point). false: not written (disk full, write error, file replaced); the file is cut back
  // to its last whole frame, so what it holds still reads, and error() says why. Only the
  // `last` frame (the end marker) may use the room kept for it when the disk is full.
  bool write(const char* text, size_t n, bool last = false);
  // Finish the stream (gzip trailer) and close.
  void close();
  // Forget the file without touching it (fork child: the parent's file is not ours).
  void abandon();
  const char* path() const { return path_; }
  uint64_t size() const { return size_; }  // bytes of whole frames in the file
  int error() const { return err_; }       // errno of the last failed write; ESTALE: replaced

  // The calling thread is the writer (its fd, in its own table, may be kept open).
  static void set_writer_thread();

 private:
  bool write_raw(const char* p, size_t n, bool last);
  int file_fd();           // the kept fd, or one opened by path and checked (-1: none)
  void done_with(int fd);  // close it unless it is the kept one
  bool reserve_tail(int fd, uint64_t from);  // false: no room for it (ENOSPC, EDQUOT)
  bool open_ = false;
  int fd_ = -1;  // kept open in the writer's table (-1: not the writer's file)
  uint64_t dev_ = 0, ino_ = 0;
  uint64_t size_ = 0;
  int err_ = 0;
  Compression comp_ = Compression::zstd;
  int level_ = 3;
  ZSTD_CCtx* zc_ = nullptr;
  z_stream zs_{};
  bool zs_live_ = false;
  uint32_t crc_ = 0, isize_ = 0;  // gzip: of the text in the frames that reached the file
  char* cbuf_ = nullptr;
  size_t ccap_ = 0;
  char path_[PATH_MAX] = "";
};

}  // namespace iot
