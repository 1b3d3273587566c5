#include "region.h"

#include <array>
#include <atomic>
#include <utility>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "message.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace iot {

namespace {
constexpr uint64_t kPage = 4096;
constexpr int kMinClass = 12;  // 4 KiB: a thread's first chunk; most threads need no more
constexpr int kMaxClass = 31;
constexpr uint64_t kMaxSpare = 4 << 20;  // the most the writer has ready ahead
// The part mapped at start (small processes' all, and a first pool's chunks: 128 threads' first
// pages). Its pages are written with zeros before threads touch them: a written page costs
// ~0.7 us (a large folio's pwrite; a thread's first touch then maps it whole), where one
// populated on a thread costs 3.5-5 us and holds the mmap lock that the pool's own thread starts
// wait on: a pool of 128 threads' part 1.18-1.27 -> 1.08-1.17 of untraced (threads_bench).
constexpr uint64_t kFirstSegment = 512 << 10;
// Of it, what is written at start: the header's page and a few threads' first chunks; the rest
// as carving reaches it, 64 KiB then doubling (zero_last). A process of one or a few threads
// writes, and at its end frees, 32 KiB of zeros, not 512 (each written page costs it ~2 us in
// all: its write, its page, and freeing it at the end).
constexpr uint64_t kFirstZeros = 32 << 10;
constexpr uint64_t kLeastFirst = 64 << 10;  // where a small disk or file size limit leaves less

uint64_t page_up(uint64_t n) { return (n + kPage - 1) & ~(kPage - 1); }
int class_of(uint64_t bytes) {
  int c = kMinClass;
  while (c < kMaxClass && (uint64_t(1) << c) < bytes) c++;
  return c;
}

bool failed(long r) { return r < 0 && r > -4096; }

struct Mapping {
  char* addr;
  uint64_t size;
  uint64_t end_off;  // the file offset just past it
};

// The next segment, made ready by the writer before a thread needs it (make_spare): mapped and
// its pages written, but not in the header until a thread carves past the last segment.
struct Spare {
  char* addr = nullptr;
  uint64_t off = 0, size = 0;
};

struct Region {
  live::Header* h = nullptr;
  Mapping map[live::kMaxSegments] = {};  // [0]: header, header lines and segment 0
  int n_maps = 0;
  char* seg_addr[live::kMaxSegments] = {};
  uint64_t seg_used = 0;  // bytes carved of the last segment
  live::Chunk* free_list[kMaxClass + 1] = {};
  uint64_t in_use = 0, chunk_bytes = 0, max = 0;
  uint64_t file_size = 0;  // the size set at creation: segments stay within it
  uint64_t next_off = 0;   // where the next segment goes in the file (past the spare's range)
  Spare spare;
  bool making_spare = false;  // the writer is writing the spare's range, unlocked
  uint64_t dev = 0, ino = 0;
  char path[PATH_MAX] = "";
  char exec_entry[PATH_MAX + 32] = "";
  uint32_t gen = 0;
  bool anon = false;  // no live file could be had: memory of our own (nothing survives us)
  // Blocks of the file are had chunk by chunk as they are handed out (MADV_POPULATE_WRITE,
  // Linux 5.14), so a thread that records little makes the file no bigger than what it
  // touches; without it (older kernels) segment by segment (fallocate through the path).
  int per_chunk = -1;                       // -1: not known yet
  bool seg_ready[live::kMaxSegments] = {};  // the segment's blocks are there already
  uint64_t seg_populated = 0;               // bytes of the last segment whose blocks are had
  bool populating = false;                  // a thread is having the next blocks, unlocked
  // Bytes of the last segment written with zeros so far (zero_last); its rest is a hole no
  // thread has. Segments are had by such writes while they work (zero_writes), else chunk by
  // chunk through the mapping (chunk_ready).
  uint64_t zeroed = 0;
  bool zero_writes = true;
  bool zero_fallocate = false;  // a write may not have its blocks: fallocate them first
  // Ranges given back (a populate that failed on a full disk: MADV_REMOVE), counted: a
  // populate ahead that ran meanwhile may have had blocks there that are gone now, so it
  // does not move the frontier past them (populate_ahead).
  uint32_t removals = 0;
  // Bytes carved in the current window of kWindowNs and in the one before: how fast threads
  // take new chunks now (ahead_step).
  uint64_t carved_now = 0, carved_before = 0;
  int64_t window_from = 0;
  std::atomic<uint64_t> half_free{~uint64_t(0)};  // half the free bytes of its disk, lately
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
} g;

// The live file by path, checked to be the one made (a file swapped in meanwhile is never
// touched). A short-lived fd: only where the mapping alone cannot do (old kernels).
long reopen() {
  long fd = syscall(SYS_openat, AT_FDCWD, g.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st;
  if (syscall(SYS_fstat, fd, &st) != 0 || uint64_t(st.st_dev) != g.dev ||
      uint64_t(st.st_ino) != g.ino) {
    syscall(SYS_close, fd);
    return -1;
  }
  return fd;
}

// One page of zeros, repeated: the copy reads a page that stays in the cache, faulted in once (a
// 64 KiB source took 16 faults as each process started). The iovecs are constant: no stack.
alignas(4096) char g_zero_page[kPage];
template <size_t... I>
constexpr std::array<struct iovec, sizeof...(I)> zero_iovecs(std::index_sequence<I...>) {
  return {{(void(I), iovec{g_zero_page, kPage})...}};
}
constexpr std::array<struct iovec, 256> kZeroIov = zero_iovecs(std::make_index_sequence<256>());

// Zeros written over `size` bytes of the file at `off`: a write has a range's pages and blocks
// at once, 1.4 us a page here, where a populate or a first touch of a shared mapping costs
// 3.5-5 us a page (the file system is asked page by page) and, through madvise, holds the mmap
// lock that the program's thread starts queue behind. Only ever on a range nobody has carved.
bool write_zeros(long fd, uint64_t off, uint64_t size) {
  for (uint64_t at = 0; at < size;) {
    uint64_t left = size - at;
    struct iovec tail = {g_zero_page, left < kPage ? left : kPage};
    uint64_t pages = left / kPage;
    long w =
        pages ? syscall(SYS_pwritev, fd, kZeroIov.data(),
                        long(pages < kZeroIov.size() ? pages : kZeroIov.size()), long(off + at), 0L)
              : syscall(SYS_pwritev, fd, &tail, 1L, long(off + at), 0L);
    if (w > 0)
      at += uint64_t(w);
    else if (w == 0 || errno != EINTR)
      return false;
  }
  return true;
}

// Local file systems whose writes have their blocks (a full disk refuses the write itself): there
// the zeros written at start need no fallocate before them, which had the same blocks a second
// time (a traced /bin/true on ext4: 5-6% of its time; nothing measurable on tmpfs). Elsewhere
// (NFS, parallel file systems, FUSE) a write may find the disk full only when its page goes
// back: the blocks first there.
bool write_reserves_blocks(const struct statfs& fs) {
  switch (uint64_t(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // XFS
    case 0x9123683E:  // Btrfs
    case 0x01021994:  // tmpfs
      return true;
    default:
      return false;
  }
}

// The last segment written with zeros up to `end` at least (doubling what is written, 256 KiB at
// most a step, within it), under the lock, before a chunk there is handed out; out of line, so
// that carve's frame on the program's stack stays small. Only ever past the carving: no thread
// has those pages. A written page costs ~1-2.5 us (ext4) where one populated through the mapping
// costs 3.5-5 us and holds the mmap lock that the program's thread starts and ends queue
// behind (a pool of 1024 threads carves 4 MiB). Where no fd can be had (fds used up, a seccomp
// filter, credentials dropped) or no room, the rest is had chunk by chunk through the mapping
// (chunk_ready), and so are the segments after it.
__attribute__((noinline, cold)) void zero_last(uint64_t end) {
  const uint32_t n = g.h->n_segments.load(std::memory_order_relaxed);
  const uint64_t seg = g.h->segment[n - 1].size;
  if (g.anon || g.zeroed >= seg || end <= g.zeroed) return;
  const uint64_t step = g.zeroed < (64 << 10)    ? (64 << 10)
                        : g.zeroed < (256 << 10) ? g.zeroed
                                                 : (256 << 10);
  uint64_t to = g.zeroed + step;
  if (to < end) to = page_up(end);
  if (to > seg) to = seg;
  const uint64_t off = g.h->segment[n - 1].offset + g.zeroed, size = to - g.zeroed;
  int saved = errno;
  // A file size limit lowered since the file was made: a write past it would send SIGXFSZ.
  struct rlimit fs;
  const bool within = getrlimit(RLIMIT_FSIZE, &fs) != 0 || fs.rlim_cur == RLIM_INFINITY ||
                      off + size <= fs.rlim_cur;
  long fd = within ? reopen() : -1;
  bool ok = fd >= 0 &&
            (!g.zero_fallocate || syscall(SYS_fallocate, fd, 0, long(off), long(size)) == 0) &&
            write_zeros(fd, off, size);
  if (fd >= 0) syscall(SYS_close, fd);
  errno = saved;
  if (ok) {
    g.zeroed = to;
  } else {
    g.zero_writes = false;
    g.seg_ready[n - 1] = false;
    g.seg_populated = g.zeroed;
    g.zeroed = seg;
  }
}

// Faults on the live file read nothing worth having (its pages are new): no read-around, which
// would fill a large window of the page cache for every first touch (2 ms of a short process's
// life on ext4).
void advise(char* addr, uint64_t size) {
  int saved = errno;
  syscall(SYS_madvise, addr, size, MADV_RANDOM);
  errno = saved;
}

// MADV_POPULATE_WRITE with the thread's signals held: a signal cuts it short (EINTR), and a
// program whose threads get signals every few hundred microseconds (profilers, runtimes that
// preempt with signals, timers) then had most of its chunks refused, and its events dropped;
// retried instead, the handlers' records piled up aside while the populate never finished.
// The signals wait for the populate (tens of microseconds for 64 KiB), as they wait for any
// system call that does not return early for them; a fatal one still ends it (retried, bounded).
bool populate_write(char* addr, uint64_t size) {
  uint64_t all = ~uint64_t(0), was = 0;
  bool held = syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &was, sizeof all) == 0;
  bool ok = false;
  for (int tries = 0; tries < 100 && !ok; tries++) {
    ok = syscall(SYS_madvise, addr, size, MADV_POPULATE_WRITE) == 0;
    if (!ok && errno != EINTR) break;
  }
  int err = errno;
  if (held) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &was, nullptr, sizeof was);
  errno = err;
  return ok;
}

// Blocks for a range of the live file, so that touching its pages never meets a full disk
// (which a shared mapping reports with SIGBUS). Asked through the mapping itself: no fd.
bool populate(char* addr, uint64_t size) {
  int saved = errno;
  bool ok = populate_write(addr, size);
  if (!ok && g.per_chunk < 0 && errno == EINVAL)
    g.per_chunk = 0;  // before Linux 5.14
  else if (g.per_chunk < 0 && ok)
    g.per_chunk = 1;
  if (!ok) syscall(SYS_madvise, addr, size, MADV_REMOVE);  // what it did get goes back
  errno = saved;
  return ok;
}

// The same for a whole segment, through a short-lived fd (older kernels only).
bool fallocate_segment(uint64_t off, uint64_t size) {
  int saved = errno;
  long fd = reopen();
  bool ok = fd >= 0 && syscall(SYS_fallocate, fd, 0, long(off), long(size)) == 0;
  if (fd >= 0) syscall(SYS_close, fd);
  errno = saved;
  return ok;
}

// The blocks of a spare chunk carved from the end of a segment, at `at` in it, under the lock
// (once per segment): false, none to be had. Had 64 KiB ahead.
bool chunk_ready(uint64_t at, uint64_t bytes) {
  uint32_t n = g.h->n_segments.load(std::memory_order_relaxed);
  if (g.anon || g.seg_ready[n - 1] || at + bytes <= g.seg_populated) return true;
  // From the frontier, or from `at` where fresh chunks were carved past it: those are in use
  // with blocks of their own (or left alone), and a populate that fails gives back all it
  // covered (MADV_REMOVE). Covering them, it took an in-use chunk's pages away on a full disk,
  // and its thread's next record met SIGBUS (seen once in CI, test_faults' disk-full gzip case).
  const uint64_t from = at > g.seg_populated ? at : g.seg_populated;
  uint64_t end = at + bytes;
  uint64_t ahead = g.seg_populated + (64 << 10);
  if (end < ahead) end = ahead;
  if (end > g.h->segment[n - 1].size) end = g.h->segment[n - 1].size;
  if (!populate(g.seg_addr[n - 1] + from, end - from)) {
    g.removals++;
    return false;
  }
  g.seg_populated = end;
  return true;
}

// A new segment of `size` bytes at `next_off`, mapped from the last page of the last mapping
// (mremap of a shared mapping with old size 0 maps the same file again, from that page on), so
// no fd is needed. Past a spare's range the new mapping spans that range too, unmapped at once.
__attribute__((noinline)) char* grow(uint64_t size) {
  live::Header* h = g.h;
  uint32_t n = h->n_segments.load(std::memory_order_relaxed);
  if (n >= uint32_t(live::kMaxSegments) || g.n_maps >= live::kMaxSegments) return nullptr;
  uint64_t off = g.next_off;
  if (off + size > g.file_size) return nullptr;
  const Mapping& m = g.map[g.n_maps - 1];
  const uint64_t skip = kPage + (off - m.end_off);  // the last page, and a spare's range
  long r = g.anon ? syscall(SYS_mmap, nullptr, size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L)
                  : syscall(SYS_mremap, m.addr + m.size - kPage, 0, skip + size, MREMAP_MAYMOVE);
  char* p = nullptr;
  if (g.anon) {
    if (failed(r)) return nullptr;
    p = reinterpret_cast<char*>(r);
  } else if (!failed(r)) {
    syscall(SYS_munmap, reinterpret_cast<char*>(r), skip);
    p = reinterpret_cast<char*>(r) + skip;
  } else {
    long fd = reopen();
    if (fd < 0) return nullptr;
    r = syscall(SYS_mmap, nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, long(off));
    syscall(SYS_close, fd);
    if (failed(r)) return nullptr;
    p = reinterpret_cast<char*>(r);
  }
  advise(p, size);
  // Its pages had by writes of zeros as carving reaches them (zero_last), while those work.
  bool ready = g.anon || g.zero_writes;
  // Else whether chunks can be made ready one by one: asked once, on this segment's first page.
  if (!ready && g.per_chunk < 0 && !populate(p, kPage) && g.per_chunk < 0) {
    syscall(SYS_munmap, p, size);  // a full disk already
    return nullptr;
  }
  if (!ready && g.per_chunk == 0) {
    if (!fallocate_segment(off, size)) {
      syscall(SYS_munmap, p, size);
      return nullptr;
    }
    ready = true;
  }
  g.map[g.n_maps++] = Mapping{p, size, off + size};
  g.next_off = off + size;
  g.seg_ready[n] = ready;
  g.seg_addr[n] = p;
  h->segment[n] = live::Segment{off, size};
  h->n_segments.store(n + 1, std::memory_order_release);
  g.seg_used = 0;
  g.seg_populated = g.per_chunk > 0 ? kPage : 0;  // the probe had the first page
  g.zeroed = g.zero_writes && !g.anon ? 0 : size;
  g.chunk_bytes += size;
  return p;
}

// The spare, when the writer has made one that holds `bytes`, as the next segment: its pages are
// there already (no populate, no first-touch cost for the threads that carve it).
bool take_spare(uint64_t bytes) {
  live::Header* h = g.h;
  uint32_t n = h->n_segments.load(std::memory_order_relaxed);
  if (!g.spare.addr || g.spare.size < bytes || n >= uint32_t(live::kMaxSegments) ||
      g.n_maps >= live::kMaxSegments)
    return false;
  const Spare s = g.spare;
  g.spare = Spare{};
  g.map[g.n_maps++] = Mapping{s.addr, s.size, s.off + s.size};
  g.seg_ready[n] = true;
  g.seg_addr[n] = s.addr;
  h->segment[n] = live::Segment{s.off, s.size};
  h->n_segments.store(n + 1, std::memory_order_release);
  g.seg_used = 0;
  g.seg_populated = g.zeroed = s.size;
  g.chunk_bytes += s.size;
  return true;
}

// A segment of at most half the free space of the live file's disk: the trace file must still
// find room for the frames that free the live file's chunks. On a disk that fills up, a live
// file that took the last blocks would keep every frame out (and its chunks, converted or not,
// would never be given back). The free space is looked up at start and by the writer between
// drains (region_prepare), never here: this runs on the program's stack.
uint64_t within_free_space(uint64_t want) {
  uint64_t half = g.half_free.load(std::memory_order_relaxed) & ~(kPage - 1);
  return want < half ? want : half;
}

void note_free_space(const struct statfs& fs) {
  g.half_free.store(uint64_t(fs.f_bavail) * uint64_t(fs.f_bsize) / 2, std::memory_order_relaxed);
}

void chunk_init(live::Chunk* c, int cls) {
  c->magic = live::kChunkMagic;
  c->size_class = uint32_t(cls);
  c->cap = uint32_t((uint64_t(1) << cls) - sizeof(live::Chunk));
}

// New chunks carved, counted in windows of 20 ms: how fast threads start recording now.
constexpr int64_t kWindowNs = 20 * 1000000;
void note_carved(uint64_t bytes) {
  const int64_t t = now_ns();
  if (t - g.window_from >= kWindowNs) {
    g.carved_before = t - g.window_from < 2 * kWindowNs ? g.carved_now : 0;
    g.carved_now = 0;
    g.window_from = t;
  }
  g.carved_now += bytes;
}

// Carve a chunk of class `cls` from the last segment; what is left of it when the chunk does
// not fit becomes free chunks, so nothing of the file is lost. A chunk past the blocks had so
// far comes back with `*fresh` set: its blocks are the taker's to have, after the lock is let
// go (region_take), since a populate holds it for microseconds per page, and on a loaded
// machine the holder is then often preempted with a thousand threads queued behind it.
__attribute__((noinline)) live::Chunk* carve(int cls, bool* fresh) {
  uint64_t bytes = uint64_t(1) << cls;
  note_carved(bytes);
  uint32_t n = g.h->n_segments.load(std::memory_order_relaxed);
  uint64_t seg = g.h->segment[n - 1].size;
  if (g.seg_used + bytes > seg) {
    if (seg > g.zeroed) zero_last(seg);  // its rest becomes free chunks
    for (int c = cls - 1; c >= kMinClass; c--) {
      uint64_t b = uint64_t(1) << c;
      while (g.seg_used + b <= seg) {
        auto* f = reinterpret_cast<live::Chunk*>(g.seg_addr[n - 1] + g.seg_used);
        if (!chunk_ready(g.seg_used, b)) break;
        chunk_init(f, c);
        f->state.store(live::kFree, std::memory_order_relaxed);
        f->next = g.free_list[c];
        g.free_list[c] = f;
        g.seg_used += b;
      }
    }
    // The next segment doubles what there is (fewer, bigger mappings), within the cap, and
    // within half the room left on the disk; the writer's spare when it has one.
    if (!take_spare(bytes)) {
      uint64_t want = g.chunk_bytes;
      if (want < bytes) want = bytes;
      if (g.chunk_bytes + want > g.max) want = g.max > g.chunk_bytes ? g.max - g.chunk_bytes : 0;
      want = within_free_space(want);
      if (want < bytes || !grow(want)) return nullptr;
    }
  }
  n = g.h->n_segments.load(std::memory_order_relaxed);
  if (g.seg_used + bytes > g.zeroed) zero_last(g.seg_used + bytes);
  auto* c = reinterpret_cast<live::Chunk*>(g.seg_addr[n - 1] + g.seg_used);
  *fresh = !g.anon && !g.seg_ready[n - 1] && g.seg_used + bytes > g.seg_populated;
  g.seg_used += bytes;
  if (!*fresh) chunk_init(c, cls);
  return c;
}

live::Chunk* pop(int cls) {
  live::Chunk* c = g.free_list[cls];
  if (c) g.free_list[cls] = c->next;
  return c;
}

void unmap_all() {
  for (int i = 0; i < g.n_maps; i++) syscall(SYS_munmap, g.map[i].addr, g.map[i].size);
  if (g.spare.addr) syscall(SYS_munmap, g.spare.addr, g.spare.size);
  g.spare = Spare{};
  g.making_spare = false;
  g.n_maps = 0;
  g.h = nullptr;
}
}  // namespace

bool region_create(const RegionSetup& s) {
  KeepErrno keep;
  unmap_all();
  for (auto& f : g.free_list) f = nullptr;
  g.in_use = g.chunk_bytes = g.seg_used = 0;
  g.carved_now = g.carved_before = 0;  // a fork child's carving starts its own count
  g.window_from = 0;
  g.populating = false;
  g.max = s.max_bytes;
  g.gen++;
  if (snprintf(g.path, sizeof g.path, "%s%s", s.trace_path, live::kSuffix) >= int(sizeof g.path))
    return false;
  uint64_t head_bytes = page_up(live::kHeaderBytes + s.head_len);
  uint64_t first = kFirstSegment < g.max ? kFirstSegment : page_up(g.max);
  // Less where the room is short (a file size limit, a small disk): never under 64 KiB.
  const uint64_t least = first < kLeastFirst ? first : kLeastFirst;
  auto shrink_first = [&](uint64_t room) {
    room &= ~(kPage - 1);
    if (room < first) first = room > least ? room : least;
  };
  // Sparse room for every segment the cap allows (and for the rounding of their sizes), but
  // never past a file size limit: crossing it would send the program SIGXFSZ.
  uint64_t size = head_bytes + 2 * page_up(g.max) + first;
  struct rlimit fs;
  bool fits = true;
  if (getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && size > fs.rlim_cur) {
    size = fs.rlim_cur & ~(kPage - 1);
    if (size > head_bytes) shrink_first(size - head_bytes);
    fits = size >= head_bytes + first;
  }
  long fd = fits ? syscall(SYS_openat, AT_FDCWD, g.path,
                           O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)
                 : (errno = EFBIG, -1L);
  struct stat st;
  struct statfs sfs;
  bool reserves = false;
  if (fd >= 0 && syscall(SYS_fstatfs, fd, &sfs) == 0) {
    note_free_space(sfs);
    // On a small disk (under 16 MiB free) the trace file's frames need the room: 64 KiB.
    shrink_first(within_free_space(16 * kFirstSegment) < 16 * kFirstSegment ? least : first);
    reserves = write_reserves_blocks(sfs);
  }
  const uint64_t zeros = first < kFirstZeros ? first : kFirstZeros;
  bool ok = fd >= 0 && syscall(SYS_fstat, fd, &st) == 0 &&
            syscall(SYS_ftruncate, fd, long(size)) == 0 &&
            (reserves || syscall(SYS_fallocate, fd, 0, 0L, long(head_bytes + zeros)) == 0) &&
            write_zeros(fd, 0, head_bytes + zeros);  // its pages too: the first threads' chunks
  int err = errno;
  long m = ok ? syscall(SYS_mmap, nullptr, head_bytes + first, PROT_READ | PROT_WRITE, MAP_SHARED,
                        fd, 0L)
              : -EIO;
  if (fd >= 0) syscall(SYS_close, fd);
  g.anon = !ok || failed(m);
  if (g.anon) {
    // No room for the live file (a full or tiny disk, a file system without fallocate): the
    // process is traced all the same, from memory of its own, as a process whose records die
    // with it. (Said once; docs/limits.md.)
    if (fd >= 0) syscall(SYS_unlink, g.path);
    g.path[0] = 0;
    m = syscall(SYS_mmap, nullptr, head_bytes + first, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    if (failed(m)) return false;
    g.dev = g.ino = 0;
    const char* why = strerrordesc_np(err);
    say_once(kMsgNoLive, "no live file beside ", s.trace_path, " (", why ? why : "error",
             "): this process's last events die with it if a signal ends it");
  } else {
    g.dev = st.st_dev;
    g.ino = st.st_ino;
  }
  snprintf(g.exec_entry, sizeof g.exec_entry, "IOTRACE_EXEC_LIVE=%s", g.path);
  g.file_size = size;
  char* base = reinterpret_cast<char*>(m);
  advise(base, head_bytes + first);
  g.map[0] = Mapping{base, head_bytes + first, head_bytes + first};
  g.next_off = head_bytes + first;
  g.n_maps = 1;
  auto* h = reinterpret_cast<live::Header*>(base);
  memcpy(h->magic, live::kMagic, sizeof h->magic);
  h->version = live::kVersion;
  h->header_bytes = uint32_t(head_bytes);
  h->pid = s.pid;
  h->flags = g_tsc ? uint32_t(live::kTscTicks) : 0u;
  snprintf(h->host, sizeof h->host, "%s", s.host);
  snprintf(h->trace_name, sizeof h->trace_name, "%s", s.trace_name);
  h->compact = s.compact;
  h->compression = s.compression;
  h->level = s.level;
  h->res_ns = s.res_ns;
  h->head_offset = live::kHeaderBytes;
  h->head_len = uint32_t(s.head_len);
  memcpy(base + live::kHeaderBytes, s.head, s.head_len);
  h->tick0 = now_ticks();
  h->ns0 = now_ns();
  h->segment[0] = live::Segment{head_bytes, first};
  g.seg_ready[0] = true;  // its blocks had with the file, by the zeros (or memory of our own)
  g.zeroed = g.anon ? first : zeros;
  g.zero_writes = !g.anon;
  g.zero_fallocate = !reserves;
  for (int i = 1; i < live::kMaxSegments; i++) g.seg_ready[i] = false;
  g.seg_addr[0] = base + head_bytes;
  g.chunk_bytes = first;
  h->n_segments.store(1, std::memory_order_release);
  g.h = h;
  return true;
}

live::Header* region() { return g.h; }
const char* region_path() { return g.path; }
const char* exec_live_entry() { return g.h && !g.anon ? g.exec_entry : nullptr; }
uint32_t region_generation() { return g.gen; }
uint64_t region_in_use() { return g.in_use; }
uint64_t region_max() { return g.max; }

// The blocks past the frontier, had by the thread that took a chunk near it, after it let the
// lock go: a thousand threads starting at once then seldom wait on the lock while one of them
// is in the kernel for 64 KiB of the file (a chunk carved past the frontier meanwhile gets its
// own blocks, also after the lock, carve).
struct Ahead {
  char* addr = nullptr;
  uint64_t from = 0, to = 0;
  uint32_t seg = 0, gen = 0;
  uint32_t removals = 0;  // g.removals when it began
};

// How far ahead of the carving the blocks are had on the program's threads: what was carved
// in the last 20 ms (two windows, halved), from 64 KiB to 1 MiB. A few threads that record
// little keep a small live file; a thousand threads that each take their first chunks at once
// find them ready, where at 64 KiB a step most of them carved past the frontier while one
// thread was having the next step, had their own blocks, and queued on the mmap lock behind
// the program's own thread starts (a traced pool of 1024 threads: about 250 of its 2048
// chunks, many waiting milliseconds). Not the chunks in use (a quarter of them, before):
// at the end of such a pool they are 4 MiB of ended threads' records, and the main thread's
// one record after the joins had 1 MiB populated, 3.8 ms on ext4.
uint64_t ahead_step() {
  const bool recent = now_ns() - g.window_from < 2 * kWindowNs;
  uint64_t q = recent ? page_up((g.carved_before + g.carved_now) / 2) : 0;
  return q < (64 << 10) ? (64 << 10) : q > (1 << 20) ? (1 << 20) : q;
}

// `keep` bytes ready past the carving, had `step` bytes at a time.
__attribute__((noinline)) Ahead ahead_wanted(uint64_t keep, uint64_t step) {
  Ahead a;
  if (!g.h) return a;
  uint32_t n = g.h->n_segments.load(std::memory_order_relaxed);
  uint64_t seg = g.h->segment[n - 1].size;
  // From the frontier, or from the carving where takers have gone past it (each had its own).
  uint64_t from = g.seg_populated > g.seg_used ? g.seg_populated : g.seg_used;
  if (g.anon || g.per_chunk <= 0 || g.seg_ready[n - 1] || g.populating || from >= seg ||
      from - g.seg_used >= keep)
    return a;
  g.populating = true;
  a.addr = g.seg_addr[n - 1] + from;
  a.from = from;
  a.to = from + step < seg ? from + step : seg;
  a.seg = n - 1;
  a.gen = g.gen;
  a.removals = g.removals;
  return a;
}

__attribute__((noinline)) void populate_ahead(const Ahead& a) {
  int saved = errno;
  // Not populate(): a failure gives nothing back (chunks may have been carved in the range
  // meanwhile, each with its blocks); the frontier just stays where it is.
  bool ok = populate_write(a.addr, a.to - a.from);
  errno = saved;
  pthread_mutex_lock(&g.mu);
  if (g.gen == a.gen) {
    // Not past blocks given back meanwhile: a carve whose populate failed on a full disk
    // (chunk_ready) gives back its range, which this populate may have had first, and a
    // chunk carved there later, below the frontier, would be written without blocks (the
    // program killed by SIGBUS: seen in test_faults' disk-full JSON case, 1 run in 20).
    if (ok && g.h->n_segments.load(std::memory_order_relaxed) == a.seg + 1 &&
        g.removals == a.removals && g.seg_populated < a.to)
      g.seg_populated = a.to;
    g.populating = false;
  }
  pthread_mutex_unlock(&g.mu);
}

namespace {
// `size` bytes of the live file at `off` written with zeros and mapped, through an fd of the
// writer's (its own fd table). NULL: no room (what was had is given back).
char* map_zeros(uint64_t off, uint64_t size) {
  long fd = reopen();
  if (fd < 0) return nullptr;
  long m = write_zeros(fd, off, size)
               ? syscall(SYS_mmap, nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, long(off))
               : -ENOSPC;
  if (failed(m))
    syscall(SYS_fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, long(off), long(size));
  syscall(SYS_close, fd);
  if (failed(m)) return nullptr;
  advise(reinterpret_cast<char*>(m), size);
  return reinterpret_cast<char*>(m);
}

// The writer, once the last segment is half carved: the next one ready whole before a thread
// carves past it (a pool of a thousand threads starting at once otherwise has most of its
// chunks' pages, two a thread, populated on its own threads). Its range is reserved first
// (next_off moves past it), so no segment a thread maps meanwhile overlaps the zeros written.
// Whatever the kernel offers for populating (per_chunk): the writes have the blocks either way.
void make_spare() {
  uint64_t off = 0, size = 0;
  struct rlimit fs;  // lowered since the file was made: a write past it would be refused
  const uint64_t fs_max =
      getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY ? fs.rlim_cur : ~0ULL;
  pthread_mutex_lock(&g.mu);
  const uint32_t gen = g.gen;
  live::Header* h = g.h;
  if (h && !g.anon && !g.spare.addr && !g.making_spare &&
      !h->closed.load(std::memory_order_relaxed)) {
    uint32_t n = h->n_segments.load(std::memory_order_relaxed);
    if (n < uint32_t(live::kMaxSegments) && g.seg_used >= h->segment[n - 1].size / 2) {
      // What the next segment would double to, up to 4 MiB: a process that stops carving
      // (its chunks come back from the writer) leaves its spare unused, 1.4 ms of writes.
      size = g.chunk_bytes < kMaxSpare ? g.chunk_bytes : kMaxSpare;
      if (g.chunk_bytes + size > g.max) size = g.max > g.chunk_bytes ? g.max - g.chunk_bytes : 0;
      size = within_free_space(size) & ~(kPage - 1);
      off = g.next_off;
      if (size >= (64 << 10) && off + size <= g.file_size && off + size <= fs_max) {
        g.next_off = off + size;
        g.making_spare = true;
      } else {
        size = 0;
      }
    }
  }
  pthread_mutex_unlock(&g.mu);
  if (!size) return;
  char* p = map_zeros(off, size);
  pthread_mutex_lock(&g.mu);
  if (g.gen == gen) {
    g.making_spare = false;
    if (p)
      g.spare = Spare{p, off, size};
    else if (g.next_off == off + size)
      g.next_off = off;  // nothing was placed past it meanwhile: the range is had again
  } else if (p) {
    syscall(SYS_munmap, p, size);  // a new live file was made meanwhile
  }
  pthread_mutex_unlock(&g.mu);
}
}  // namespace

void region_prepare(uint64_t bytes) {
  struct statfs fs;
  if (g.h && !g.anon && syscall(SYS_statfs, g.path, &fs) == 0) note_free_space(fs);
  pthread_mutex_lock(&g.mu);
  Ahead ahead = ahead_wanted(bytes, bytes);
  pthread_mutex_unlock(&g.mu);
  if (ahead.addr) populate_ahead(ahead);
  make_spare();
}

live::Chunk* region_take(uint32_t need, uint32_t want, int tid, bool ahead_too) {
  if (!g.h) return nullptr;
  int need_cls = class_of(sizeof(live::Chunk) + need), cls = class_of(want);
  if (cls < need_cls) cls = need_cls;
  live::Chunk* c = nullptr;
  bool fresh = false;
  pthread_mutex_lock(&g.mu);
  // The size wanted, fresh if it must be; else any bigger free one; else a smaller one that
  // still holds the record (the cap is near: threads get less than they wanted).
  c = pop(cls);
  for (int k = cls + 1; !c && k <= kMaxClass; k++) c = pop(k);
  if (!c && g.in_use + (uint64_t(1) << cls) <= g.max) c = carve(cls, &fresh);
  for (int k = cls - 1; !c && k >= need_cls; k--) c = pop(k);
  // (a fresh chunk's header is written once its blocks are had: its class is the one asked)
  const uint64_t bytes = c ? uint64_t(1) << (fresh ? cls : int(c->size_class)) : 0;
  g.in_use += bytes;
  const uint64_t step = ahead_too ? ahead_step() : 0;
  Ahead ahead = c && step ? ahead_wanted(step, step) : Ahead{};
  pthread_mutex_unlock(&g.mu);
  if (ahead.addr) populate_ahead(ahead);
  if (!c) return nullptr;
  if (fresh) {
    if (!populate(reinterpret_cast<char*>(c), bytes)) {
      // No blocks for it (a full disk): the chunk is never handed out (its range is left
      // alone, as carving only goes forward), and the event is dropped, counted.
      pthread_mutex_lock(&g.mu);
      g.in_use -= bytes;
      g.removals++;
      pthread_mutex_unlock(&g.mu);
      return nullptr;
    }
    chunk_init(c, cls);
  }
  c->committed.store(0, std::memory_order_relaxed);
  c->durable = c->pending = c->encoded = 0;
  c->tid = tid;
  c->next = nullptr;
  c->seq = g.h->chunk_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  c->tick = now_ticks();
  c->ns = now_ns();
  c->name[0] = 0;
  c->state.store(live::kOpen, std::memory_order_release);
  return c;
}

bool region_give(live::Chunk* c, bool try_only) {
  if (try_only ? pthread_mutex_trylock(&g.mu) != 0 : pthread_mutex_lock(&g.mu) != 0) return false;
  c->state.store(live::kFree, std::memory_order_release);
  c->committed.store(0, std::memory_order_relaxed);
  c->next = g.free_list[c->size_class];
  g.free_list[c->size_class] = c;
  g.in_use -= uint64_t(1) << c->size_class;
  pthread_mutex_unlock(&g.mu);
  return true;
}

void region_end(const char* reason, int tid, int64_t ns) {
  live::Header* h = g.h;
  if (!h || h->ended.load(std::memory_order_relaxed)) return;
  size_t n = strnlen(reason, sizeof h->end_reason - 1);
  memcpy(h->end_reason, reason, n);
  h->end_reason[n] = 0;
  h->end_tid = tid;
  h->end_ns = ns;
  h->ended.store(1, std::memory_order_release);
}

void region_chown(unsigned uid) {
  if (!g.h || g.anon) return;
  long fd = reopen();
  if (fd < 0) return;
  syscall(SYS_fchown, fd, uid, -1);
  syscall(SYS_close, fd);
}

bool region_rebase(const char* root) {
  if (!g.h || g.anon) return true;
  size_t n = strlen(root);
  if (strncmp(g.path, root, n) != 0 || g.path[n] != '/') return false;
  memmove(g.path, g.path + n, strlen(g.path + n) + 1);
  snprintf(g.exec_entry, sizeof g.exec_entry, "IOTRACE_EXEC_LIVE=%s", g.path);
  return true;
}

void region_retarget(const char* trace_name) {
  live::Header* h = g.h;
  if (!h) return;
  snprintf(h->trace_name, sizeof h->trace_name, "%s", trace_name);
  h->file_events = h->file_lost = h->file_unsaid = h->file_drops_said = 0;
  h->lost_errno = 0;
  h->dropped.store(0, std::memory_order_relaxed);  // the new image's own, as its end counts them
  h->pending_from = h->pending_size = 0;
  h->end_reason[0] = 0;
  h->ended.store(0, std::memory_order_relaxed);
  h->closed.store(0, std::memory_order_release);
}

void region_remove() {
  if (!g.h) return;
  KeepErrno keep;
  g.h->closed.store(1, std::memory_order_release);
  if (g.anon) return;
  // Only the file made at start: after a chroot or a rename the path may name another.
  long fd = syscall(SYS_openat, AT_FDCWD, g.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    struct stat st;
    bool same = syscall(SYS_fstat, fd, &st) == 0 && uint64_t(st.st_dev) == g.dev &&
                uint64_t(st.st_ino) == g.ino;
    syscall(SYS_close, fd);
    if (same) syscall(SYS_unlinkat, AT_FDCWD, g.path, 0);
  }
  // The mapping stays: threads still recording while the process exits write into it.
}

void region_lock() { pthread_mutex_lock(&g.mu); }
void region_unlock() { pthread_mutex_unlock(&g.mu); }
void region_reinit_lock() { pthread_mutex_init(&g.mu, nullptr); }

}  // namespace iot
