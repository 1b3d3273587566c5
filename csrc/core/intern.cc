#include "intern.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "buffer.h"
#include "config.h"
#include "fd_table.h"
#include "scratch.h"
#include "sysmem.h"

namespace iot {

bool g_trace_unnamed = true;

namespace {
constexpr uint32_t kBuckets = 1u << 18;  // chains grow without bound; this only sets their length

constexpr uint32_t kPageBuckets = 4096 / sizeof(void*);

struct Table {
  std::atomic<Str*>* heads = nullptr;
  // The pages of `heads` ever written. A page never written is not read either: a read would
  // map the zero page, and the insert that follows would replace it (a write-protect fault and
  // a TLB shootdown of every CPU the program runs on: 16 ms for 1024 threads opening a file
  // each); written first, it is one plain fault.
  std::atomic<uint64_t> written[kBuckets / kPageBuckets / 64] = {};
  void init() {
    if (!heads)
      heads = static_cast<std::atomic<Str*>*>(sys_map(kBuckets * sizeof(std::atomic<Str*>)));
  }
  bool page_written(uint32_t b) const {
    uint32_t page = b / kPageBuckets;
    return written[page / 64].load(std::memory_order_acquire) >> (page % 64) & 1;
  }
  void mark_written(uint32_t b) {
    uint32_t page = b / kPageBuckets;
    written[page / 64].fetch_or(uint64_t(1) << (page % 64), std::memory_order_release);
  }
};
Table g_names, g_paths;
std::atomic<Str*> g_cwd{nullptr};

// Inlined, as is_library: a path is interned on the program's stack (maybe a signal handler's
// small one), and each frame of the chain counts.
__attribute__((always_inline)) inline bool has_prefix(const char* s, uint32_t n, const char* p) {
  size_t pl = strlen(p);
  if (pl > n || memcmp(s, p, pl) != 0) return false;
  return pl == n || s[pl] == '/' || p[pl - 1] == '/';
}

__attribute__((always_inline)) inline bool ends_with(const char* s, uint32_t n, const char* suf) {
  size_t sl = strlen(suf);
  return sl <= n && memcmp(s + n - sl, suf, sl) == 0;
}

// Shared libraries (libfoo.so, libfoo.so.1.2) and Python bytecode: loading noise by default.
__attribute__((always_inline)) inline bool is_library(const char* s, uint32_t n) {
  if (ends_with(s, n, ".pyc") || ends_with(s, n, ".pyo") || ends_with(s, n, ".so")) return true;
  // The last ".so.", found by hand: glibc's memmem takes hundreds of bytes of stack (its
  // shift table), and a path is interned on the program's stack, maybe a handler's small one.
  const char* so = nullptr;
  for (uint32_t i = n; i >= 4 && !so; i--)
    if (memcmp(s + i - 4, ".so.", 4) == 0) so = s + i - 4;
  if (!so) return false;
  for (const char* p = so + 4; p < s + n; p++)
    if (!((*p >= '0' && *p <= '9') || *p == '.')) return false;
  return true;
}

bool path_traced(const char* s, uint32_t n) {
  const Config& c = g_config;
  if (n >= 5 && (has_prefix(s, n, "/proc") || has_prefix(s, n, "/sys") || has_prefix(s, n, "/dev")))
    return false;
  for (int i = 0; i < c.n_exclude; i++)
    if (has_prefix(s, n, c.exclude[i])) return false;
  if (!c.trace_libs && is_library(s, n)) return false;
  if (c.n_include == 0) return true;
  for (int i = 0; i < c.n_include; i++)
    if (has_prefix(s, n, c.include[i])) return true;
  return false;
}

// A new node for `s` at the head of its bucket (or the one a racing thread put there). Apart
// from intern, which tail-calls it: the two frames are not on the stack together.
// Six arguments, all in registers: a seventh on the stack would stop the tail call.
__attribute__((noinline)) Str* insert(Table& t, Str* first, uint64_t h, const char* s, uint32_t len,
                                      bool is_path) {
  uint32_t b = uint32_t(h & (kBuckets - 1));
  std::atomic<Str*>& head = t.heads[b];
  Str* node = static_cast<Str*>(arena_alloc(sizeof(Str) + len + 1));
  if (!node) return nullptr;
  node->hash = h;
  node->len = len;
  node->traced = is_path ? path_traced(s, len) : true;
  node->written_gen = 0;
  memcpy(node->str, s, len);
  node->str[len] = 0;
  for (;;) {
    node->next = first;
    if (head.compare_exchange_weak(first, node, std::memory_order_release,
                                   std::memory_order_acquire)) {
      if (!t.page_written(b)) t.mark_written(b);
      return node;
    }
    // Someone inserted meanwhile: it may be our string.
    for (Str* n = first; n && n != node->next; n = n->next)
      if (n->hash == h && n->len == len && memcmp(n->str, s, len) == 0)
        return n;  // ours stays unused in the arena: a rare race, a few bytes
  }
}

Str* intern(Table& t, const char* s, uint32_t len, bool is_path) {
  t.init();
  uint64_t h = fnv1a(s, len);
  uint32_t b = uint32_t(h & (kBuckets - 1));
  std::atomic<Str*>& head = t.heads[b];
  // An unwritten page's buckets are empty (a racing insert is met by insert's CAS).
  Str* first = t.page_written(b) ? head.load(std::memory_order_acquire) : nullptr;
  for (Str* n = first; n; n = n->next)
    if (n->hash == h && n->len == len && memcmp(n->str, s, len) == 0) return n;
  return insert(t, first, h, s, len, is_path);
}

// Lexical normalisation of an absolute path in place: "//", "/./", "/x/../" collapse.
uint32_t normalize(char* p, uint32_t n) {
  uint32_t w = 0;
  for (uint32_t r = 0; r < n;) {
    while (r < n && p[r] == '/') r++;
    uint32_t s = r;
    while (r < n && p[r] != '/') r++;
    uint32_t len = r - s;
    if (len == 0 || (len == 1 && p[s] == '.')) continue;
    if (len == 2 && p[s] == '.' && p[s + 1] == '.') {
      while (w > 0 && p[w - 1] != '/') w--;
      if (w > 0) w--;
      continue;
    }
    p[w++] = '/';
    memmove(p + w, p + s, len);
    w += len;
  }
  if (w == 0) p[w++] = '/';
  p[w] = 0;
  return w;
}

// Would normalize() leave this absolute path as it is? ("/", or "/"-separated names with no
// empty, "." or ".." one): the common case, interned with no copy.
bool is_normal(const char* p, uint32_t n) {
  if (n == 0 || p[0] != '/') return false;
  if (n == 1) return true;
  if (p[n - 1] == '/') return false;
  for (uint32_t s = 1; s <= n;) {
    uint32_t e = s;
    while (e < n && p[e] != '/') e++;
    uint32_t len = e - s;
    if (len == 0 || (p[s] == '.' && (len == 1 || (len == 2 && p[s + 1] == '.')))) return false;
    s = e + 1;
  }
  return true;
}
}  // namespace

Str* intern_name(const char* s, uint32_t len) { return intern(g_names, s, len, false); }

Str* intern_abs_path(const char* s, uint32_t len) { return intern(g_paths, s, len, true); }

// The buffers of these two are scratch memory, not the stack: a wrapper may run on a signal
// handler's small alternate stack.
void cwd_refresh() {
  KeepErrno keep;
  Scratch buf(PATH_MAX);
  if (!buf) return;
  long n = syscall(SYS_getcwd, buf.get(), PATH_MAX);
  if (n > 0)
    g_cwd.store(intern_abs_path(buf.get(), uint32_t(strlen(buf.get()))), std::memory_order_release);
}

namespace {
// `path` (of `pl` bytes) resolved against the folder `base` (none: `path` is absolute) and
// normalised, in scratch memory: a slot of the pool, or pages of its own for a folder that is
// already longer than PATH_MAX. Not inlined: intern_path_at's frame stays small while it
// learns the folder.
__attribute__((noinline)) Str* resolve(const Str* base, const char* path, uint32_t pl) {
  const uint32_t bl = base ? base->len : 0;
  Scratch buf(size_t(bl) + 1 + pl + 1);        // the folder, "/", the path, normalize()'s NUL
  if (!buf) return intern_abs_path(path, pl);  // no memory: as given, unresolved
  char* b = buf.get();
  uint32_t n = 0;
  if (base) {
    memcpy(b, base->str, bl);
    n = bl;
    b[n++] = '/';
  }
  memcpy(b + n, path, pl);
  n += pl;
  n = normalize(b, n);
  return intern_abs_path(b, n);
}
}  // namespace

Str* intern_path_at(int dirfd, const char* path) {
  if (!path) return nullptr;
  uint32_t pl = uint32_t(strnlen(path, PATH_MAX));
  // The folder first: learning it (an unknown dirfd, the cwd) takes scratch of its own.
  Str* base = nullptr;
  if (path[0] != '/') {
    if (dirfd == AT_FDCWD) {
      base = g_cwd.load(std::memory_order_acquire);
      if (!base) {
        cwd_refresh();
        base = g_cwd.load(std::memory_order_acquire);
      }
    } else {
      base = fd_path(dirfd);
    }
    if (base && base->str[0] != '/') base = nullptr;
  }
  // Nothing to resolve or normalise (a relative path with no folder is kept as given): no copy.
  if (!base && (path[0] != '/' || is_normal(path, pl))) return intern_abs_path(path, pl);
  return resolve(base, path, pl);
}

void intern_refilter() {
  g_trace_unnamed = g_config.n_include == 0;
  if (!g_paths.heads) return;
  for (uint32_t b = 0; b < kBuckets; b++)
    if (g_paths.page_written(b))
      for (Str* n = g_paths.heads[b].load(std::memory_order_acquire); n; n = n->next)
        n->traced = path_traced(n->str, n->len);
}

}  // namespace iot
