#include "sysmem.h"

#include <atomic>
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

namespace {
constexpr size_t kPage = 4096;
size_t page_round(size_t n) { return (n + kPage - 1) & ~(kPage - 1); }

// Raw syscalls: libc's mmap is one of the interposed names, and errno stays the program's.
void* raw_mmap(size_t n) {
  long r =
      syscall(SYS_mmap, nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return (r < 0 && r > -4096) ? nullptr : reinterpret_cast<void*>(r);
}
}  // namespace

void* sys_map(size_t n) {
  if (n == 0) return nullptr;
  int saved = errno;
  void* p = raw_mmap(page_round(n));
  errno = saved;
  return p;
}

void sys_unmap(void* p, size_t n) {
  if (!p) return;
  int saved = errno;
  syscall(SYS_munmap, p, page_round(n));
  errno = saved;
}

void* sys_remap(void* p, size_t old_n, size_t new_n) {
  if (!p) return sys_map(new_n);
  int saved = errno;
  long r = syscall(SYS_mremap, p, page_round(old_n), page_round(new_n), MREMAP_MAYMOVE);
  errno = saved;
  return (r < 0 && r > -4096) ? nullptr : reinterpret_cast<void*>(r);
}

void* sys_alloc(size_t n) {
  auto* h = static_cast<size_t*>(sys_map(n + 16));
  if (!h) return nullptr;
  h[0] = n + 16;
  return h + 2;
}

void sys_free(void* p) {
  if (!p) return;
  size_t* h = static_cast<size_t*>(p) - 2;
  sys_unmap(h, h[0]);
}

namespace {
struct Chunk {
  std::atomic<size_t> used;
  size_t cap;
};
constexpr size_t kChunkBytes = 1 << 20;
std::atomic<Chunk*> g_chunk{nullptr};
}  // namespace

void* arena_alloc(size_t n) {
  n = (n + 15) & ~size_t(15);
  for (;;) {
    Chunk* c = g_chunk.load(std::memory_order_acquire);
    if (c) {
      size_t at = c->used.fetch_add(n, std::memory_order_relaxed);
      if (at + n <= c->cap) return reinterpret_cast<char*>(c) + at;
    }
    // Full (or none yet): a new chunk; a racing thread's chunk wins and ours goes back.
    size_t bytes = n + 64 > kChunkBytes ? page_round(n + 64) : kChunkBytes;
    auto* fresh = static_cast<Chunk*>(sys_map(bytes));
    if (!fresh) return nullptr;
    fresh->used.store(64, std::memory_order_relaxed);  // the header, rounded to keep alignment
    fresh->cap = bytes;
    if (!g_chunk.compare_exchange_strong(c, fresh, std::memory_order_acq_rel))
      sys_unmap(fresh, bytes);
  }
}

}  // namespace iot
