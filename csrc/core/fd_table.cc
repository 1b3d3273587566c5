#include "fd_table.h"

#include "buffer.h"
#include "scratch.h"
#include "sysmem.h"

#include <fcntl.h>
#include <limits.h>
#include <new>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

namespace {
constexpr int kChunkBits = 12;
constexpr int kChunk = 1 << kChunkBits;
constexpr int kTop = 1 << 18;  // kTop * kChunk = 2^30 = the kernel's nr_open ceiling

struct Entry {
  std::atomic<OpenFile*> file;
};

std::atomic<Entry*>* g_top = nullptr;

// Open files are recycled through a per-thread free list: no lock, and memory stays valid for
// a racing reader (a program that closes an fd while another thread uses it).
__thread OpenFile* t_free __attribute__((tls_model("initial-exec"))) = nullptr;

OpenFile* new_open_file(Str* path, int64_t offset) {
  // A signal handler's call (t_nested) may have interrupted this very list's update: it
  // leaves the list alone and takes fresh memory.
  OpenFile* f = t_nested ? nullptr : t_free;
  if (f) {
    t_free = f->free_next;
  } else {
    f = static_cast<OpenFile*>(arena_alloc(sizeof(OpenFile)));
    if (!f) return nullptr;
    new (&f->offset) std::atomic<int64_t>(0);
    new (&f->refs) std::atomic<int32_t>(0);
  }
  f->path = path;
  f->offset.store(offset, std::memory_order_relaxed);
  f->refs.store(1, std::memory_order_relaxed);
  f->free_next = nullptr;
  return f;
}

void release(OpenFile* f) {
  if (f && f->refs.fetch_sub(1, std::memory_order_acq_rel) == 1 && !t_nested) {
    f->free_next = t_free;
    t_free = f;
  }
}

__attribute__((always_inline)) inline Entry* entry(int fd, bool create) {
  if (fd < 0 || fd >= kTop * kChunk || !g_top) return nullptr;
  std::atomic<Entry*>& slot = g_top[fd >> kChunkBits];
  Entry* c = slot.load(std::memory_order_acquire);
  if (!c) {
    if (!create) return nullptr;
    Entry* fresh = static_cast<Entry*>(sys_map(kChunk * sizeof(Entry)));
    if (!fresh) return nullptr;
    if (slot.compare_exchange_strong(c, fresh, std::memory_order_acq_rel))
      c = fresh;
    else
      sys_unmap(fresh, kChunk * sizeof(Entry));
  }
  return &c[fd & (kChunk - 1)];
}

void install(int fd, OpenFile* f) {
  Entry* e = entry(fd, true);
  if (!e) {
    release(f);
    return;
  }
  release(e->file.exchange(f, std::memory_order_acq_rel));
}

// "/proc/self/fd/N" into `out` (at least 25 bytes). Not snprintf: it is not async-signal-safe
// and takes kilobytes of stack.
void fd_link(char* out, int fd) {
  static const char kPrefix[] = "/proc/self/fd/";
  memcpy(out, kPrefix, sizeof kPrefix - 1);
  char* p = out + sizeof kPrefix - 1;
  unsigned v = unsigned(fd);
  for (unsigned d = v; d >= 10; d /= 10) p++;  // the last digit's place
  p[1] = 0;
  do *p-- = char('0' + v % 10);
  while ((v /= 10) != 0);
}

// An fd we did not see opened (inherited, or opened before the tracer started): ask the
// kernel once for its name and position. The link and its target go in scratch memory, not on
// the stack (a signal handler's alternate stack may be 8 KiB). Not inlined: fd_get, on every
// call's path, keeps a small frame.
__attribute__((noinline)) OpenFile* learn(int fd) {
  if (fd < 0) return nullptr;
  // A signal handler's calls meanwhile wait aside, in the thread's state: made first if this
  // is the thread's first call (not inside the tracer's work, nor a handler that interrupted
  // it: only get's own mark is on).
  if (!t_state && !t_guard && t_busy == 1) {
    --t_busy;
    thread_state_create();
    ++t_busy;
  }
  KeepErrno keep;  // lseek on a pipe fails with ESPIPE: not the program's business
  Str* path;
  {
    constexpr size_t kLink = 32;
    Scratch buf(kLink + PATH_MAX);
    if (!buf) return nullptr;
    char* link = buf.get();
    char* target = link + kLink;
    fd_link(link, fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, target, PATH_MAX - 1);
    if (n <= 0) return nullptr;
    path = intern_abs_path(target, uint32_t(n));
  }
  long pos = syscall(SYS_lseek, fd, 0L, SEEK_CUR);
  long fl = syscall(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0 && (fl & O_APPEND)) pos = -1;
  OpenFile* f = new_open_file(path, pos < 0 ? -1 : pos);
  install(fd, f);
  return f;
}
}  // namespace

void fd_table_init() {
  if (!g_top)
    g_top = static_cast<std::atomic<Entry*>*>(sys_map(kTop * sizeof(std::atomic<Entry*>)));
}

namespace {
__attribute__((always_inline)) inline OpenFile* get(int fd) {
  Entry* e = entry(fd, false);
  OpenFile* f = e ? e->file.load(std::memory_order_acquire) : nullptr;
  if (f) return f;
  // The tracer's own work, which a signal handler's calls must not disturb (they are recorded
  // aside, and appended when the call's own record is: no Busy here, one frame less).
  ++t_busy;
  f = learn(fd);
  --t_busy;
  return f;
}
}  // namespace

OpenFile* fd_get(int fd) { return get(fd); }

// Not through fd_get: one frame less on the way to learning an unknown folder (openat).
Str* fd_path(int fd) { return fd_path_of(get(fd)); }

void fd_open(int fd, Str* path, int64_t offset) {
  if (fd >= 0) install(fd, new_open_file(path, offset));
}

void fd_dup(int oldfd, int newfd) {
  if (newfd < 0 || oldfd == newfd) return;
  OpenFile* f = fd_get(oldfd);
  if (!f) return fd_close(newfd);
  f->refs.fetch_add(1, std::memory_order_relaxed);
  install(newfd, f);
}

void fd_close(int fd) {
  Entry* e = entry(fd, false);
  if (e) release(e->file.exchange(nullptr, std::memory_order_acq_rel));
}

void fd_close_range(unsigned first, unsigned last) {
  if (!g_top) return;
  const unsigned top = kTop * unsigned(kChunk) - 1;
  if (last > top) last = top;
  for (unsigned fd = first; fd <= last;) {
    Entry* c = g_top[fd >> kChunkBits].load(std::memory_order_acquire);
    unsigned chunk_end = (fd | (kChunk - 1));
    if (chunk_end > last) chunk_end = last;
    if (c)
      for (unsigned i = fd; i <= chunk_end; i++)
        release(c[i & (kChunk - 1)].file.exchange(nullptr, std::memory_order_acq_rel));
    if (chunk_end == top) break;
    fd = chunk_end + 1;
  }
}

OpenFile* fd_take(int fd) {
  if (!get(fd)) return nullptr;
  Entry* e = entry(fd, false);
  return e ? e->file.exchange(nullptr, std::memory_order_acq_rel) : nullptr;
}

void fd_drop(OpenFile* f) { release(f); }

}  // namespace iot
