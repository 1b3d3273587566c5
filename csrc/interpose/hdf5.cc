// HDF5 wrappers (category hdf5): files, datasets, groups, attributes and objects of HDF5's C
// API. Built without hdf5.h and linked to no HDF5: hid_t is int64_t (HDF5 1.10 and later),
// herr_t int, hsize_t uint64_t, enums int. A program without HDF5 never calls these names, so
// nothing is looked up.
//
// Which HDF5 a call goes to: the one its caller would have reached without the tracer. A
// program linked to HDF5 finds it after this library (dlsym RTLD_NEXT); but a Python extension
// (h5py, netCDF4, tables) brings its own copy, loaded RTLD_LOCAL where RTLD_NEXT cannot see it,
// and two of them may be in one process. So each calling object (its text segment, found once
// by dladdr) is mapped to the HDF5 in its own scope of libraries, and that library answers; a
// thread remembers its last caller, so a call costs two compares for it. A call the HDF5
// library makes to its own public names (through its PLT, in a build without direct binding)
// passes through unrecorded: the program called HDF5 once.
//
// A call's record: `fhash` the HDF5 file (the name given to H5Fcreate/H5Fopen; for an object,
// the file it is in), `fhash2` the object's name in the file (a dataset's or group's path, an
// attribute's as the path of its object then its name: /grid/data/units), `size`/`bytes` the
// bytes a read or write moved (the selection's elements times the memory type's size), `flags`
// the MPI-IO transfer mode a dataset transfer asked for (0 independent, 1 collective) and `mode`
// what a collective one did (H5Pget_mpio_actual_io_mode), `ret` the return value. A dataset's
// file and name are asked of HDF5 once, when it is created or opened, and kept by id (ObjInfo);
// the bytes of a transfer are asked of HDF5 at each call (its selection), after the call, off
// its interval. The MPI-IO and POSIX calls HDF5 makes for a call land inside its interval on the
// same thread: the analyzer nests them under it.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <atomic>

#include "interpose.h"
#include "scratch.h"

using namespace iot;

namespace {

using hid = int64_t;     // hid_t
using herr = int;        // herr_t
using hsize = uint64_t;  // hsize_t

// --- the HDF5 functions: those wrapped, then those the tracer asks ------------------------------
#define HDF5_FUNCTIONS(X)                                                               \
  X(H5Fcreate, hid (*)(const char*, unsigned, hid, hid))                                \
  X(H5Fopen, hid (*)(const char*, unsigned, hid))                                       \
  X(H5Fclose, herr (*)(hid))                                                            \
  X(H5Fflush, herr (*)(hid, int))                                                       \
  X(H5Dcreate2, hid (*)(hid, const char*, hid, hid, hid, hid, hid))                     \
  X(H5Dopen2, hid (*)(hid, const char*, hid))                                           \
  X(H5Dclose, herr (*)(hid))                                                            \
  X(H5Dread, herr (*)(hid, hid, hid, hid, hid, void*))                                  \
  X(H5Dwrite, herr (*)(hid, hid, hid, hid, hid, const void*))                           \
  X(H5Dread_chunk, herr (*)(hid, hid, const hsize*, uint32_t*, void*))                  \
  X(H5Dwrite_chunk, herr (*)(hid, hid, uint32_t, const hsize*, size_t, const void*))    \
  X(H5Dset_extent, herr (*)(hid, const hsize*))                                         \
  X(H5Gcreate2, hid (*)(hid, const char*, hid, hid, hid))                               \
  X(H5Gopen2, hid (*)(hid, const char*, hid))                                           \
  X(H5Gclose, herr (*)(hid))                                                            \
  X(H5Oopen, hid (*)(hid, const char*, hid))                                            \
  X(H5Oclose, herr (*)(hid))                                                            \
  X(H5Acreate2, hid (*)(hid, const char*, hid, hid, hid, hid))                          \
  X(H5Aopen, hid (*)(hid, const char*, hid))                                            \
  X(H5Aopen_by_name, hid (*)(hid, const char*, const char*, hid, hid))                  \
  X(H5Aread, herr (*)(hid, hid, void*))                                                 \
  X(H5Awrite, herr (*)(hid, hid, const void*))                                          \
  X(H5Aclose, herr (*)(hid))                                                            \
  X(H5Acreate_by_name, hid (*)(hid, const char*, const char*, hid, hid, hid, hid, hid)) \
  X(H5Idec_ref, int (*)(hid))                                                           \
  X(H5Fget_name, ssize_t (*)(hid, char*, size_t))                                       \
  X(H5Iget_name, ssize_t (*)(hid, char*, size_t))                                       \
  X(H5Aget_name, ssize_t (*)(hid, size_t, char*))                                       \
  X(H5Iis_valid, int (*)(hid))                                                          \
  X(H5Sget_select_npoints, int64_t (*)(hid))                                            \
  X(H5Sget_simple_extent_npoints, int64_t (*)(hid))                                     \
  X(H5Sclose, herr (*)(hid))                                                            \
  X(H5Tget_size, size_t (*)(hid))                                                       \
  X(H5Tclose, herr (*)(hid))                                                            \
  X(H5Dget_space, hid (*)(hid))                                                         \
  X(H5Dget_type, hid (*)(hid))                                                          \
  X(H5Aget_space, hid (*)(hid))                                                         \
  X(H5Dget_chunk_storage_size, herr (*)(hid, const hsize*, hsize*))                     \
  X(H5Pget_dxpl_mpio, herr (*)(hid, int*)) /* parallel HDF5 only */                     \
  X(H5Pget_mpio_actual_io_mode, herr (*)(hid, int*))

enum class Fn {
#define X(name, type) name,
  HDF5_FUNCTIONS(X)
#undef X
      kCount
};
constexpr const char* kFnNames[] = {
#define X(name, type) #name,
    HDF5_FUNCTIONS(X)
#undef X
};
template <Fn>
struct Sig;
#define X(name, type)    \
  template <>            \
  struct Sig<Fn::name> { \
    using type_ = type;  \
  };
HDF5_FUNCTIONS(X)
#undef X

// HDF5's predefined native types, which HDF5 locks (their size never changes): a transfer in
// one of them asks HDF5 nothing for its type's size. Their ids are the library's variables
// H5T_NATIVE_*_g, read at each call: a library closed and opened again gives them new ids.
struct Native {
  const char* symbol;
  int64_t size;
};
constexpr Native kNatives[] = {
    {"H5T_NATIVE_DOUBLE_g", sizeof(double)},
    {"H5T_NATIVE_FLOAT_g", sizeof(float)},
    {"H5T_NATIVE_INT_g", sizeof(int)},
    {"H5T_NATIVE_UINT_g", sizeof(int)},
    {"H5T_NATIVE_LONG_g", sizeof(long)},
    {"H5T_NATIVE_ULONG_g", sizeof(long)},
    {"H5T_NATIVE_LLONG_g", sizeof(long long)},
    {"H5T_NATIVE_ULLONG_g", sizeof(long long)},
    {"H5T_NATIVE_SHORT_g", sizeof(short)},
    {"H5T_NATIVE_USHORT_g", sizeof(short)},
    {"H5T_NATIVE_SCHAR_g", 1},
    {"H5T_NATIVE_UCHAR_g", 1},
};
constexpr size_t kNativeCount = sizeof(kNatives) / sizeof(kNatives[0]);

// One HDF5 library of the process, and its functions, each looked up at its first use.
char g_absent_tag;
void* const kAbsent = &g_absent_tag;  // looked up, not there (an older HDF5, a serial one)
struct Lib {
  const link_map* map = nullptr;
  void* handle = nullptr;  // dlopen's, RTLD_NOLOAD: its own definitions come first
  bool recorded = false;   // HDF5 1.10 or later: a 64-bit hid_t (1.8's calls pass through)
  mutable std::atomic<void*> fn[size_t(Fn::kCount)] = {};
  const int64_t* native[kNativeCount] = {};  // where its H5T_NATIVE_*_g are (lib_of)

  template <Fn f>
  typename Sig<f>::type_ get() const {
    void* p = fn[size_t(f)].load(std::memory_order_relaxed);
    if (__builtin_expect(p == nullptr, 0)) p = look_up(size_t(f));
    return p == kAbsent ? nullptr : reinterpret_cast<typename Sig<f>::type_>(p);
  }
  __attribute__((noinline)) void* look_up(size_t i) const {
    Guard g;
    void* p = dlsym(handle, kFnNames[i]);
    p = p ? p : kAbsent;
    fn[i].store(p, std::memory_order_relaxed);
    return p;
  }
};

// A calling object's text segment, the HDF5 that answers it, and whether it is that HDF5 itself.
struct Caller {
  uintptr_t lo = 0, hi = 0;
  Lib* lib = nullptr;
  bool internal = false;
};

constexpr int kLibs = 8, kCallers = 128;
Lib g_libs[kLibs];
Caller g_callers[kCallers];
std::atomic<int> g_nlibs{0}, g_ncallers{0};
__thread const Caller* t_caller __attribute__((tls_model("initial-exec")));  // this thread's last
__thread Caller t_own_caller __attribute__((tls_model("initial-exec")));     // the table was full

// The loaded segment that holds `pc` ([lo, hi)), or the page of it (code of no object: a JIT's).
void segment_of(uintptr_t pc, uintptr_t* lo, uintptr_t* hi) {
  struct Find {
    uintptr_t pc, lo, hi;
  } f{pc, pc & ~uintptr_t(4095), (pc & ~uintptr_t(4095)) + 4096};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        Find* f = static_cast<Find*>(arg);
        for (int i = 0; i < info->dlpi_phnum; i++) {
          const ElfW(Phdr)& p = info->dlpi_phdr[i];
          uintptr_t lo = info->dlpi_addr + p.p_vaddr;
          if (p.p_type == PT_LOAD && f->pc - lo < p.p_memsz) {
            f->lo = lo;
            f->hi = lo + p.p_memsz;
            return 1;
          }
        }
        return 0;
      },
      &f);
  *lo = f.lo;
  *hi = f.hi;
}

// The tables grow under this lock, held for the append alone: the loader's calls (dladdr,
// dlopen, dlsym) are made outside it, so a library's constructor that calls HDF5 while the
// loader's lock is held cannot meet a thread that holds this one and waits for the loader.
pthread_mutex_t g_grow_lock = PTHREAD_MUTEX_INITIALIZER;

// The HDF5 library that defines `h5open` (its H5open), registered once.
Lib* lib_of(void* h5open) {
  Dl_info info;
  link_map* map = nullptr;
  if (!h5open || !dladdr1(h5open, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map ||
      !map->l_name || !map->l_name[0])
    return nullptr;
  for (int i = 0, n = g_nlibs.load(std::memory_order_acquire); i < n; i++)
    if (g_libs[i].map == map) return &g_libs[i];
  void* handle = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);  // kept: its functions are cached
  if (!handle) return nullptr;
  unsigned major = 0, minor = 0, release = 0;
  auto version =
      reinterpret_cast<int (*)(unsigned*, unsigned*, unsigned*)>(dlsym(handle, "H5get_libversion"));
  bool recorded = version && version(&major, &minor, &release) >= 0 && (major > 1 || minor >= 10);
  const int64_t* native[kNativeCount];
  for (size_t i = 0; i < kNativeCount; i++) {
    // The variable the library itself reads: a program that names one has its own copy of it (a
    // copy relocation), which the library's references were bound to, as the loader binds them:
    // the process's global definitions first, then its own.
    void* v = dlsym(RTLD_DEFAULT, kNatives[i].symbol);
    native[i] = static_cast<const int64_t*>(v ? v : dlsym(handle, kNatives[i].symbol));
  }
  Lib* lib = nullptr;
  pthread_mutex_lock(&g_grow_lock);
  int n = g_nlibs.load(std::memory_order_relaxed);
  for (int i = 0; i < n && !lib; i++)
    if (g_libs[i].map == map) lib = &g_libs[i];
  if (!lib && n < kLibs) {
    lib = &g_libs[n];
    lib->map = map;
    lib->handle = handle;
    lib->recorded = recorded;
    memcpy(lib->native, native, sizeof native);
    g_nlibs.store(n + 1, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_grow_lock);
  return lib;
}

// Who called from `pc`: its object, and the HDF5 among that object's libraries (its own scope
// first, then the process's after this library); code of no object gets the first HDF5 seen.
__attribute__((noinline)) const Caller* place(uintptr_t pc) {
  Guard g;
  Caller c;
  segment_of(pc, &c.lo, &c.hi);
  Dl_info info;
  link_map* map = nullptr;
  void* h5open = nullptr;
  if (dladdr1(reinterpret_cast<void*>(pc), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) &&
      map && map->l_name && map->l_name[0])
    if (void* own = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD)) h5open = dlsym(own, "H5open");
  if (!h5open) h5open = dlsym(RTLD_NEXT, "H5open");
  c.lib = lib_of(h5open);
  if (!c.lib && g_nlibs.load(std::memory_order_acquire) > 0) c.lib = &g_libs[0];
  c.internal = c.lib && map && c.lib->map == map;

  const Caller* found = nullptr;
  pthread_mutex_lock(&g_grow_lock);
  int n = g_ncallers.load(std::memory_order_relaxed);
  for (int i = 0; i < n && !found; i++)  // placed meanwhile by another thread
    if (pc - g_callers[i].lo < g_callers[i].hi - g_callers[i].lo) found = &g_callers[i];
  if (!found && n < kCallers) {
    g_callers[n] = c;
    g_ncallers.store(n + 1, std::memory_order_release);
    found = &g_callers[n];
  }
  pthread_mutex_unlock(&g_grow_lock);
  if (!found) {  // the table is full: this thread keeps it alone
    t_own_caller = c;
    found = &t_own_caller;
  }
  return found;
}

__attribute__((always_inline)) inline const Caller* caller(uintptr_t pc) {
  const Caller* c = t_caller;
  if (__builtin_expect(c != nullptr && pc - c->lo < c->hi - c->lo, 1)) return c;
  int n = g_ncallers.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (pc - g_callers[i].lo < g_callers[i].hi - g_callers[i].lo) return t_caller = &g_callers[i];
  return t_caller = place(pc);
}

// A wrapper's view of its call: the real function, and whether the call is recorded.
struct Site {
  const Caller* c;
  explicit Site(void* return_address) : c(caller(uintptr_t(return_address))) {}
  template <Fn f>
  typename Sig<f>::type_ real() const {
    return c->lib ? c->lib->get<f>() : nullptr;
  }
  bool record() const { return !c->internal && c->lib->recorded && hdf5_on() && !t_guard; }
  const Lib& lib() const { return *c->lib; }
};
#define SITE Site(__builtin_return_address(0))

// --- objects by id: file, name, an attribute's elements ------------------------------------------

// What the tracer keeps of an HDF5 object (file, dataset, group, attribute).
struct ObjInfo {
  Str* file = nullptr;
  Str* name = nullptr;
  int64_t points = -1;  // an attribute's elements (its space never changes); -1: not known
};
// A direct-mapped cache of ObjInfo by library and id (two HDF5 copies give the same ids): an id
// whose slot another took is asked of HDF5 again. A slot is written under its sequence number
// (odd while written, one CAS to take it); readers take no lock and retry nothing: a slot
// changing under them is a miss. HDF5 (1.10 and later) never gives an id twice, so a slot left
// by an object closed without the tracer is only a waste.
constexpr uint32_t kObjs = 1024;
struct Obj {
  std::atomic<uint32_t> seq{0};
  std::atomic<hid> id{0};
  std::atomic<const Lib*> lib{nullptr};
  std::atomic<Str*> file{nullptr}, name{nullptr};
  std::atomic<int64_t> points{-1};
};
Obj g_objs[kObjs];

Obj& slot_of(const Lib& L, hid id) {
  uint64_t key = uint64_t(id) ^ (uint64_t(&L - g_libs) << 32);
  return g_objs[(key * 0x9E3779B97F4A7C15ull) >> 54];
}

bool obj_get(const Lib& L, hid id, ObjInfo* out) {
  Obj& o = slot_of(L, id);
  uint32_t s = o.seq.load(std::memory_order_acquire);
  if ((s & 1) || o.id.load(std::memory_order_relaxed) != id ||
      o.lib.load(std::memory_order_relaxed) != &L)
    return false;
  out->file = o.file.load(std::memory_order_relaxed);
  out->name = o.name.load(std::memory_order_relaxed);
  out->points = o.points.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return o.seq.load(std::memory_order_relaxed) == s;
}
void obj_set(const Lib& L, hid id, const ObjInfo& info, bool drop = false) {
  Obj& o = slot_of(L, id);
  uint32_t s = o.seq.load(std::memory_order_relaxed);
  if ((s & 1) ||
      (drop && (o.id.load(std::memory_order_relaxed) != id ||
                o.lib.load(std::memory_order_relaxed) != &L)) ||
      !o.seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire))
    return;  // another thread writes it: this one is not kept
  o.id.store(drop ? 0 : id, std::memory_order_relaxed);
  o.lib.store(&L, std::memory_order_relaxed);
  o.file.store(info.file, std::memory_order_relaxed);
  o.name.store(info.name, std::memory_order_relaxed);
  o.points.store(info.points, std::memory_order_relaxed);
  o.seq.store(s + 2, std::memory_order_release);
}
void obj_drop(const Lib& L, hid id) { obj_set(L, id, ObjInfo{}, true); }

// --- what the tracer asks HDF5 (on its own slow paths, guarded: nothing it does is recorded) -----

int64_t elements(const Lib& L, hid space) {  // of a dataspace's extent
  auto f = L.get<Fn::H5Sget_simple_extent_npoints>();
  return f ? f(space) : -1;
}
int64_t type_size(const Lib& L, hid type) {
  for (size_t i = 0; i < kNativeCount; i++)
    if (L.native[i] && *L.native[i] == type) return kNatives[i].size;
  auto f = L.get<Fn::H5Tget_size>();
  size_t n = f ? f(type) : 0;
  return n ? int64_t(n) : -1;
}
int64_t times(int64_t a, int64_t b) { return a >= 0 && b >= 0 ? a * b : -1; }

// The elements of a dataset's current extent.
int64_t dataset_elements(const Lib& L, hid dset) {
  auto get_space = L.get<Fn::H5Dget_space>();
  auto close = L.get<Fn::H5Sclose>();
  hid space = get_space && close ? get_space(dset) : -1;
  if (space < 0) return -1;
  int64_t n = elements(L, space);
  close(space);
  return n;
}
// The bytes of a whole dataset: its elements times its type's size.
int64_t dataset_bytes(const Lib& L, hid dset) {
  auto get_type = L.get<Fn::H5Dget_type>();
  auto close = L.get<Fn::H5Tclose>();
  hid type = get_type && close ? get_type(dset) : -1;
  if (type < 0) return -1;
  int64_t size = type_size(L, type);
  close(type);
  return times(dataset_elements(L, dset), size);
}

// The elements a transfer moves: the memory selection's, H5S_ALL (0) meaning the file
// selection's, both H5S_ALL the dataset's. H5S_BLOCK (1, HDF5 1.14) is the file selection's
// size; H5S_PLIST (2) names one held by the transfer property list: not known.
constexpr hid kAll = 0, kBlock = 1, kPlist = 2;
int64_t transfer_elements(const Lib& L, hid dset, hid mem, hid file) {
  if (mem == kPlist || file == kPlist) return -1;
  hid sel = mem != kAll && mem != kBlock ? mem : file;
  if (sel == kAll) return dataset_elements(L, dset);
  auto f = L.get<Fn::H5Sget_select_npoints>();
  return f ? f(sel) : -1;
}

// A name in a file's namespace: the path of `id` (H5Iget_name), then `rel` after a '/' unless it
// is absent or "." (an absolute `rel` stands alone), then `attr` after a '/'; interned.
Str* path_at(const Lib& L, hid id, const char* rel, const char* attr) {
  auto get_name = L.get<Fn::H5Iget_name>();
  Scratch buf;
  if (!get_name || !buf) return nullptr;
  char* b = buf.get();
  const size_t cap = kScratchBytes;
  size_t n = 0;
  auto append = [&](const char* part) {
    size_t k = strlen(part);
    if (n > 0 && b[n - 1] != '/' && n < cap) b[n++] = '/';
    if (n + k >= cap) return false;
    memcpy(b + n, part, k + 1);
    n += k;
    return true;
  };
  if (rel && rel[0] == '/') {
    if (!append(rel)) return nullptr;
  } else {
    ssize_t got = get_name(id, b, cap);
    if (got <= 0 || size_t(got) >= cap) return nullptr;  // anonymous, or longer than a path
    n = size_t(got);
    if (rel && strcmp(rel, ".") != 0 && !append(rel)) return nullptr;
  }
  if (attr && !append(attr)) return nullptr;
  return intern_name(b, uint32_t(n));
}
// The file `id` is in, by the name it was opened with.
Str* file_name(const Lib& L, hid id) {
  auto get = L.get<Fn::H5Fget_name>();
  Scratch buf;
  if (!get || !buf) return nullptr;
  ssize_t n = get(id, buf.get(), kScratchBytes);
  return n > 0 && size_t(n) < kScratchBytes ? intern_path(buf.get()) : nullptr;
}
Str* file_of(const Lib& L, hid loc) {
  ObjInfo o;
  return obj_get(L, loc, &o) && o.file ? o.file : file_name(L, loc);
}
// An attribute's name (H5Aget_name), into `buf`.
const char* attr_name(const Lib& L, hid attr, char* buf, size_t cap) {
  auto f = L.get<Fn::H5Aget_name>();
  ssize_t n = f ? f(attr, cap, buf) : -1;
  return n > 0 && size_t(n) < cap ? buf : nullptr;
}
int64_t attr_elements(const Lib& L, hid attr) {
  auto get_space = L.get<Fn::H5Aget_space>();
  auto close = L.get<Fn::H5Sclose>();
  hid space = get_space && close ? get_space(attr) : -1;
  if (space < 0) return -1;
  int64_t n = elements(L, space);
  close(space);
  return n;
}

// What an id is: a file (no name of its own in records), an object, an attribute.
enum class Kind { kFile, kObject, kAttr };

// What the tracer keeps of an id, learnt from the call that made or opened it at `loc`: its
// file (that of `loc`), its name (an object's as HDF5 says it; an attribute's as its object's
// path, `rel` from `loc`, then `attr`, its name), an attribute's elements.
ObjInfo learn(const Lib& L, hid id, hid loc, Kind kind, const char* rel = nullptr,
              const char* attr = nullptr, int64_t points = -1) {
  ObjInfo o;
  o.file = file_of(L, loc);
  if (kind == Kind::kObject) o.name = path_at(L, id, nullptr, nullptr);
  if (kind == Kind::kAttr) {
    o.name = path_at(L, loc, rel, attr);
    o.points = points < 0 ? attr_elements(L, id) : points;
  }
  obj_set(L, id, o);
  return o;
}
// The same for an id the tracer did not see made (opened by a call it does not wrap, or its
// slot taken since): asked of HDF5 now, and kept.
ObjInfo known(const Lib& L, hid id, Kind kind) {
  ObjInfo o;
  if (obj_get(L, id, &o)) return o;
  char name[256];  // an attribute's name (HDF5 keeps them short): a few hundred bytes of stack
  return learn(L, id, id, kind,
               kind == Kind::kAttr ? attr_name(L, id, name, sizeof name) : nullptr);
}
// Before a close: the id is gone after it. An id HDF5 does not know is not asked about (HDF5
// would print its error stack for the tracer's question).
ObjInfo closing(const Lib& L, hid id, Kind kind) {
  ObjInfo o;
  if (obj_get(L, id, &o)) return o;
  Guard g;
  auto valid = L.get<Fn::H5Iis_valid>();
  return valid && valid(id) > 0 ? known(L, id, kind) : o;
}

// The MPI-IO transfer mode a transfer property list asks for (0 independent, 1 collective; -1
// not parallel HDF5), and for a collective one what HDF5 did (H5D_mpio_actual_io_mode_t: 0 none
// collective, 1 chunk independent, 2 chunk collective, 3 mixed, 4 contiguous collective).
void transfer_mode(const Lib& L, hid dxpl, IoLive& r) {
  auto asked = L.get<Fn::H5Pget_dxpl_mpio>();
  if (!asked) return;
  int mode = 0;  // H5P_DEFAULT (0): independent
  if (dxpl != 0 && asked(dxpl, &mode) < 0) return;
  r.set_flags(mode);
  auto did = L.get<Fn::H5Pget_mpio_actual_io_mode>();
  int actual = 0;
  if (mode == 1 && did && did(dxpl, &actual) >= 0) r.set_mode(actual);
}

// --- records ---------------------------------------------------------------------------------

bool fill_obj(IoLive& r, const ObjInfo& o, int64_t ret) {
  r.set_file(o.file);
  r.set_file2(o.name);
  r.set_ret(ret);
  return passes(o.file);
}
// A transfer's record: its object, the bytes it moved (size: asked, bytes: moved; both only once
// it succeeded), the MPI-IO transfer mode.
bool fill_transfer(IoLive& r, const ObjInfo& o, int64_t bytes, herr ret) {
  if (bytes >= 0) {
    r.set_size(bytes);
    r.set_bytes(bytes);
  }
  return fill_obj(r, o, ret);
}

template <class Call, class Fill>
auto traced_h5(CallId id, Call&& call, Fill&& fill) {
  using R = decltype(call());
  return traced<R>(true, id, call, [&](IoLive& r, R ret, int) {
    Guard g;  // what the fill asks HDF5 is the tracer's
    return fill(r, ret);
  });
}

// Opening or making an object at `loc` by the name `rel` (an attribute: of the object `rel`,
// `attr` its name): file, name, kept for the calls on it. A failed one names what it tried (its
// file and the path asked). Made with a dataspace and a type (H5Dcreate2, H5Acreate2): `size`
// its bytes, their product.
template <class Call>
hid opened(const Site& s, CallId id, hid loc, Kind kind, Call&& call, const char* rel,
           const char* attr = nullptr, hid space = -1, hid type = -1) {
  return traced_h5(id, call, [&](IoLive& r, hid ret) {
    const Lib& L = s.lib();
    ObjInfo o;
    if (ret >= 0) {
      int64_t points = space >= 0 ? elements(L, space) : -1;
      if (type >= 0) {
        int64_t size = times(points, type_size(L, type));
        if (size >= 0) r.set_size(size);
      }
      o = learn(L, ret, loc, kind, rel, attr, points);
    } else if (auto valid = L.get<Fn::H5Iis_valid>(); valid && valid(loc) > 0) {
      o.file = file_of(L, loc);
      o.name = path_at(L, loc, rel, attr);
    }
    return fill_obj(r, o, ret);
  });
}
template <class Call>
herr closed(const Site& s, CallId id, hid obj, Kind kind, Call&& call) {
  ObjInfo o = closing(s.lib(), obj, kind);
  return traced_h5(id, call, [&](IoLive& r, herr ret) {
    if (ret >= 0) obj_drop(s.lib(), obj);
    return fill_obj(r, o, ret);
  });
}

Str* file_path(const char* name) {
  Guard g;
  return name ? intern_path(name) : nullptr;
}

}  // namespace

// --- files --------------------------------------------------------------------------------------

IOT_EXPORT hid H5Fcreate(const char* name, unsigned flags, hid fcpl, hid fapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Fcreate>();
  if (!real) return -1;
  if (!s.record()) return real(name, flags, fcpl, fapl);
  Str* f = file_path(name);
  return traced_h5(
      C_H5Fcreate, [&] { return real(name, flags, fcpl, fapl); },
      [&](IoLive& r, hid ret) {
        if (ret >= 0) obj_set(s.lib(), ret, ObjInfo{f, nullptr, -1});
        r.set_flags(flags);
        return fill_obj(r, ObjInfo{f, nullptr, -1}, ret);
      });
}
IOT_EXPORT hid H5Fopen(const char* name, unsigned flags, hid fapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Fopen>();
  if (!real) return -1;
  if (!s.record()) return real(name, flags, fapl);
  Str* f = file_path(name);
  return traced_h5(
      C_H5Fopen, [&] { return real(name, flags, fapl); },
      [&](IoLive& r, hid ret) {
        if (ret >= 0) obj_set(s.lib(), ret, ObjInfo{f, nullptr, -1});
        r.set_flags(flags);
        return fill_obj(r, ObjInfo{f, nullptr, -1}, ret);
      });
}
IOT_EXPORT herr H5Fclose(hid file) {
  Site s = SITE;
  auto real = s.real<Fn::H5Fclose>();
  if (!real) return -1;
  if (!s.record()) return real(file);
  return closed(s, C_H5Fclose, file, Kind::kFile, [&] { return real(file); });
}
IOT_EXPORT herr H5Fflush(hid obj, int scope) {
  Site s = SITE;
  auto real = s.real<Fn::H5Fflush>();
  if (!real) return -1;
  if (!s.record()) return real(obj, scope);
  return traced_h5(
      C_H5Fflush, [&] { return real(obj, scope); },
      [&](IoLive& r, herr ret) {
        Str* f = ret >= 0 ? file_of(s.lib(), obj) : nullptr;
        r.set_flags(scope);
        return fill_obj(r, ObjInfo{f, nullptr, -1}, ret);
      });
}

// --- datasets -----------------------------------------------------------------------------------

IOT_EXPORT hid H5Dcreate2(hid loc, const char* name, hid type, hid space, hid lcpl, hid dcpl,
                          hid dapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dcreate2>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, type, space, lcpl, dcpl, dapl);
  return opened(
      s, C_H5Dcreate2, loc, Kind::kObject,
      [&] { return real(loc, name, type, space, lcpl, dcpl, dapl); }, name, nullptr, space, type);
}
IOT_EXPORT hid H5Dopen2(hid loc, const char* name, hid dapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dopen2>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, dapl);
  return opened(
      s, C_H5Dopen2, loc, Kind::kObject, [&] { return real(loc, name, dapl); }, name);
}
IOT_EXPORT herr H5Dclose(hid dset) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dclose>();
  if (!real) return -1;
  if (!s.record()) return real(dset);
  return closed(s, C_H5Dclose, dset, Kind::kObject, [&] { return real(dset); });
}

// H5Dread(dataset, mem_type, mem_space, file_space, dxpl, buf), and H5Dwrite.
#define H5_TRANSFER(fn, bufT)                                                               \
  IOT_EXPORT herr fn(hid dset, hid mtype, hid mspace, hid fspace, hid dxpl, bufT buf) {     \
    Site s = SITE;                                                                          \
    auto real = s.real<Fn::fn>();                                                           \
    if (!real) return -1;                                                                   \
    if (!s.record()) return real(dset, mtype, mspace, fspace, dxpl, buf);                   \
    return traced_h5(                                                                       \
        C_##fn, [&] { return real(dset, mtype, mspace, fspace, dxpl, buf); },               \
        [&](IoLive& r, herr ret) {                                                          \
          const Lib& L = s.lib();                                                           \
          int64_t bytes = -1;                                                               \
          if (ret >= 0) {                                                                   \
            bytes = times(transfer_elements(L, dset, mspace, fspace), type_size(L, mtype)); \
            transfer_mode(L, dxpl, r);                                                      \
          }                                                                                 \
          return fill_transfer(r, known(L, dset, Kind::kObject), bytes, ret);               \
        });                                                                                 \
  }
H5_TRANSFER(H5Dread, void*)
H5_TRANSFER(H5Dwrite, const void*)

// Direct chunk I/O (HDF5 1.10.3): a chunk's stored bytes, filters and all.
IOT_EXPORT herr H5Dread_chunk(hid dset, hid dxpl, const hsize* offset, uint32_t* filters,
                              void* buf) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dread_chunk>();
  if (!real) return -1;
  if (!s.record()) return real(dset, dxpl, offset, filters, buf);
  return traced_h5(
      C_H5Dread_chunk, [&] { return real(dset, dxpl, offset, filters, buf); },
      [&](IoLive& r, herr ret) {
        const Lib& L = s.lib();
        hsize stored = 0;
        auto size_of = L.get<Fn::H5Dget_chunk_storage_size>();
        bool known_size = ret >= 0 && size_of && size_of(dset, offset, &stored) >= 0;
        return fill_transfer(r, known(L, dset, Kind::kObject), known_size ? int64_t(stored) : -1,
                             ret);
      });
}
IOT_EXPORT herr H5Dwrite_chunk(hid dset, hid dxpl, uint32_t filters, const hsize* offset,
                               size_t size, const void* buf) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dwrite_chunk>();
  if (!real) return -1;
  if (!s.record()) return real(dset, dxpl, filters, offset, size, buf);
  return traced_h5(
      C_H5Dwrite_chunk, [&] { return real(dset, dxpl, filters, offset, size, buf); },
      [&](IoLive& r, herr ret) {
        return fill_transfer(r, known(s.lib(), dset, Kind::kObject), ret >= 0 ? int64_t(size) : -1,
                             ret);
      });
}
IOT_EXPORT herr H5Dset_extent(hid dset, const hsize* dims) {
  Site s = SITE;
  auto real = s.real<Fn::H5Dset_extent>();
  if (!real) return -1;
  if (!s.record()) return real(dset, dims);
  return traced_h5(
      C_H5Dset_extent, [&] { return real(dset, dims); },
      [&](IoLive& r, herr ret) {
        const Lib& L = s.lib();
        if (ret >= 0) {
          int64_t size = dataset_bytes(L, dset);  // the new size, in bytes
          if (size >= 0) r.set_size(size);
        }
        return fill_obj(r, known(L, dset, Kind::kObject), ret);
      });
}

// --- groups and objects -------------------------------------------------------------------------

IOT_EXPORT hid H5Gcreate2(hid loc, const char* name, hid lcpl, hid gcpl, hid gapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Gcreate2>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, lcpl, gcpl, gapl);
  return opened(
      s, C_H5Gcreate2, loc, Kind::kObject, [&] { return real(loc, name, lcpl, gcpl, gapl); }, name);
}
IOT_EXPORT hid H5Gopen2(hid loc, const char* name, hid gapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Gopen2>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, gapl);
  return opened(
      s, C_H5Gopen2, loc, Kind::kObject, [&] { return real(loc, name, gapl); }, name);
}
IOT_EXPORT herr H5Gclose(hid group) {
  Site s = SITE;
  auto real = s.real<Fn::H5Gclose>();
  if (!real) return -1;
  if (!s.record()) return real(group);
  return closed(s, C_H5Gclose, group, Kind::kObject, [&] { return real(group); });
}
// Any object by name (h5py opens its datasets and groups so).
IOT_EXPORT hid H5Oopen(hid loc, const char* name, hid lapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Oopen>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, lapl);
  return opened(
      s, C_H5Oopen, loc, Kind::kObject, [&] { return real(loc, name, lapl); }, name);
}
IOT_EXPORT herr H5Oclose(hid obj) {
  Site s = SITE;
  auto real = s.real<Fn::H5Oclose>();
  if (!real) return -1;
  if (!s.record()) return real(obj);
  return closed(s, C_H5Oclose, obj, Kind::kObject, [&] { return real(obj); });
}

// --- attributes ---------------------------------------------------------------------------------

IOT_EXPORT hid H5Acreate2(hid loc, const char* name, hid type, hid space, hid acpl, hid aapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Acreate2>();
  if (!real) return -1;
  if (!s.record()) return real(loc, name, type, space, acpl, aapl);
  return opened(
      s, C_H5Acreate2, loc, Kind::kAttr, [&] { return real(loc, name, type, space, acpl, aapl); },
      ".", name, space, type);
}
IOT_EXPORT hid H5Acreate_by_name(hid loc, const char* obj, const char* name, hid type, hid space,
                                 hid acpl, hid aapl, hid lapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Acreate_by_name>();
  if (!real) return -1;
  if (!s.record()) return real(loc, obj, name, type, space, acpl, aapl, lapl);
  return opened(
      s, C_H5Acreate_by_name, loc, Kind::kAttr,
      [&] { return real(loc, obj, name, type, space, acpl, aapl, lapl); }, obj, name, space, type);
}
IOT_EXPORT hid H5Aopen(hid obj, const char* name, hid aapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Aopen>();
  if (!real) return -1;
  if (!s.record()) return real(obj, name, aapl);
  return opened(
      s, C_H5Aopen, obj, Kind::kAttr, [&] { return real(obj, name, aapl); }, ".", name);
}
IOT_EXPORT hid H5Aopen_by_name(hid loc, const char* obj, const char* name, hid aapl, hid lapl) {
  Site s = SITE;
  auto real = s.real<Fn::H5Aopen_by_name>();
  if (!real) return -1;
  if (!s.record()) return real(loc, obj, name, aapl, lapl);
  return opened(
      s, C_H5Aopen_by_name, loc, Kind::kAttr, [&] { return real(loc, obj, name, aapl, lapl); }, obj,
      name);
}
// H5Aread(attribute, mem_type, buf), and H5Awrite: the whole attribute.
#define H5_ATTR_TRANSFER(fn, bufT)                                              \
  IOT_EXPORT herr fn(hid attr, hid mtype, bufT buf) {                           \
    Site s = SITE;                                                              \
    auto real = s.real<Fn::fn>();                                               \
    if (!real) return -1;                                                       \
    if (!s.record()) return real(attr, mtype, buf);                             \
    return traced_h5(                                                           \
        C_##fn, [&] { return real(attr, mtype, buf); },                         \
        [&](IoLive& r, herr ret) {                                              \
          const Lib& L = s.lib();                                               \
          ObjInfo o = known(L, attr, Kind::kAttr);                              \
          int64_t bytes = ret >= 0 ? times(o.points, type_size(L, mtype)) : -1; \
          return fill_transfer(r, o, bytes, ret);                               \
        });                                                                     \
  }
H5_ATTR_TRANSFER(H5Aread, void*)
H5_ATTR_TRANSFER(H5Awrite, const void*)

IOT_EXPORT herr H5Aclose(hid attr) {
  Site s = SITE;
  auto real = s.real<Fn::H5Aclose>();
  if (!real) return -1;
  if (!s.record()) return real(attr);
  return closed(s, C_H5Aclose, attr, Kind::kAttr, [&] { return real(attr); });
}

// --- ids ----------------------------------------------------------------------------------------

// An id let go: h5py closes its files, datasets and attributes so, not with H5Fclose or H5Dclose;
// the last reference's going closes the object (a file's: its flush). Recorded for the ids the
// tracer knows (files, datasets, groups, attributes it saw made or opened): `ret` the references
// left, 0 when it closed. Property lists, dataspaces and types pass through.
IOT_EXPORT int H5Idec_ref(hid id) {
  Site s = SITE;
  auto real = s.real<Fn::H5Idec_ref>();
  if (!real) return -1;
  ObjInfo o;
  if (!s.record() || !obj_get(s.lib(), id, &o)) return real(id);
  return traced_h5(
      C_H5Idec_ref, [&] { return real(id); },
      [&](IoLive& r, int ret) {
        if (ret == 0) obj_drop(s.lib(), id);
        return fill_obj(r, o, ret);
      });
}
