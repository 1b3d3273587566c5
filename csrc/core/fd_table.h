// fd → open file table. Lock-free reads on the hot path; grows in chunks up to the kernel's
// own limit (2^30 fds). Entries of dup'ed fds share one OpenFile (and its offset), as the
// kernel shares the open file description. CLOEXEC needs no bookkeeping: exec replaces this
// table with the next image's empty one, the kernel closes the CLOEXEC fds, and the new image
// learns each surviving fd from /proc/self/fd the first time it is used.
#pragma once
#include <atomic>
#include <stdint.h>

#include "intern.h"

namespace iot {

struct OpenFile {
  Str* path;                    // interned absolute path (or "pipe:[N]", "socket:[N]")
  std::atomic<int64_t> offset;  // our copy of the file position; -1: unknown (pipe, append)
  std::atomic<int32_t> refs;    // fds sharing it
  OpenFile* free_next;
};

// The open file behind fd; learns unknown fds once via /proc/self/fd. NULL for invalid fds.
// Wrappers call it before the call itself: an unknown fd learned after a read would have a
// position that already counts the bytes of that read.
OpenFile* fd_get(int fd);
inline Str* fd_path_of(OpenFile* f) { return f ? f->path : nullptr; }
Str* fd_path(int fd);
// A new fd for `path` (open, creat, fopen, opendir...). offset -1 when unknown (O_APPEND).
void fd_open(int fd, Str* path, int64_t offset);
// newfd refers to the same open file as oldfd (dup, dup2, dup3, F_DUPFD).
void fd_dup(int oldfd, int newfd);
void fd_close(int fd);
// close_range, closefrom: every fd in [first, last] is closed.
void fd_close_range(unsigned first, unsigned last);
// Before a close: the fd's entry taken out of the table (learned first: an fd the tracer has
// not seen opened can only be named while it is open); its reference is now the caller's, who
// lets it go after the close (fd_drop). Taken before, not forgotten after: once the kernel has
// the number back, another thread may open it and install its own file, and an entry forgotten
// by comparing pointers could then be that thread's (its memory recycled from this one), whose
// name would change under it.
OpenFile* fd_take(int fd);
void fd_drop(OpenFile* f);
// Offset bookkeeping: position before a transfer of `n` bytes (-1 when unknown).
inline int64_t fd_advance(OpenFile* f, int64_t n) {
  if (!f || f->offset.load(std::memory_order_relaxed) < 0) return -1;
  return n > 0 ? f->offset.fetch_add(n, std::memory_order_relaxed)
               : f->offset.load(std::memory_order_relaxed);
}
inline void fd_seek(OpenFile* f, int64_t pos) {
  if (f) f->offset.store(pos, std::memory_order_relaxed);
}
// Forget everything (after fork the child keeps the fds but learns them anew lazily: cheap).
void fd_table_init();

}  // namespace iot
