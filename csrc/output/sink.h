// The trace file of this process: text in, compressed frames out, written with raw syscalls
// (so the tracer's own I/O is never traced). zstd: one independent frame per write; gzip: one
// member, a full flush per write (its header goes with the first frame kept); none: the text.
//
// The file is created when the process starts and closed at once. A writer thread with an fd
// table of its own (writer.cc) keeps an fd to it while it runs, so the program never sees an
// fd of ours; any other writing opens the file by path for the write with O_NOFOLLOW and
// checks that it is the file first created (device and inode): a file swapped for a symlink or
// another file is never written through. Callers serialise writes. No malloc anywhere here
// (sysmem.h).
#pragma once
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>
#include <zstd.h>

#include "config.h"

namespace iot {

// A trace file made by Sink::create: where it is and which file it is (a file found under that
// path later is written through only if it is this one).
struct TraceFileId {
  char path[PATH_MAX] = "";
  uint64_t dev = 0, ino = 0;
};

// The file name's end for a form: .iotc.zst (compact), .pfw.zst, .pfw.gz, .pfw.
const char* trace_suffix(bool compact, Compression c);

// Called just before a frame's bytes go to the file: the file's size before and after it.
struct WriteHook {
  void (*fn)(void* arg, uint64_t from, uint64_t to);
  void* arg;
};

class Sink {
 public:
  // Create DIR/<name>-<host>-<pid>[-n]<suffix> (never overwriting; folders made 0755 under the
  // umask, the file 0644), empty. false on failure,
  // errno set. The fd is closed again: writes open the file by path (or keep it on a writer
  // thread with an fd table of its own).
  static bool create(const char* dir, const char* name, const char* host, int pid,
                     const char* suffix, TraceFileId* out);
  // Write into a file made by create that holds `size` bytes of whole frames already.
  void attach(const TraceFileId& file, uint64_t size, Compression c, int level);
  bool is_open() const { return open_; }
  // Write whole lines; after this returns true they are in the file (as one frame / flush
  // point). false: not written (disk full, write error, file replaced); the file is cut back
  // to its last whole frame, so what it holds still reads, and error() says why. Only the
  // `last` frame (the end marker) may use the room kept for it when the disk is full.
  bool write(const char* text, size_t n, bool last = false, const WriteHook* hook = nullptr);
  // Finish the stream (gzip trailer) and close.
  void close();
  // Forget the file without touching it (fork child: the parent's file is not ours).
  void abandon();
  // The writer thread that kept the fd is ending (its fd table goes with it).
  void release_fd();
  // Free the compressor and its buffer (a sink used once).
  void release_buffers();
  const char* path() const { return id_.path; }
  void set_path(const char* p);            // the same file under another name (a chroot)
  uint64_t size() const { return size_; }  // bytes of whole frames in the file
  int error() const { return err_; }       // errno of the last failed write; ESTALE: replaced
  void set_error(int e) { err_ = e; }

  // The calling thread is the writer with an fd table of its own: the fd may be kept open.
  static void set_writer_thread(bool own_table);

 private:
  bool write_raw(const char* p, size_t n, bool last, const WriteHook* hook = nullptr);
  void resume_gzip();
  int file_fd();           // the kept fd, or one opened by path and checked (-1: none)
  void done_with(int fd);  // close it unless it is the kept one
  bool reserve_tail(int fd, uint64_t from);  // false: no room for it (ENOSPC, EDQUOT)
  bool reserved_ = false;  // blocks may be held past the end of the file: close gives them back
  bool open_ = false;
  int fd_ = -1;  // kept open in the writer's table (-1: not the writer's file)
  TraceFileId id_;
  uint64_t size_ = 0;
  int err_ = 0;
  Compression comp_ = Compression::zstd;
  int level_ = 3;
  ZSTD_CCtx* make_cctx();
  ZSTD_CCtx* zc_ = nullptr;
  void* zws_ = nullptr;  // zc_'s workspace when it is ours (a static context)
  size_t zws_bytes_ = 0;
  z_stream zs_{};
  bool zs_live_ = false;
  uint32_t crc_ = 0, isize_ = 0;  // gzip: of the text in the frames that reached the file
  char* cbuf_ = nullptr;
  size_t ccap_ = 0;
};

}  // namespace iot
