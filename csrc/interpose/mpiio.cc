// MPI wrappers: MPI-IO's file calls (category mpiio), and MPI's start, end, waits and
// synchronising collectives (category mpi). Built without mpi.h and linked to no MPI: the
// wrappers are the MPI_ names, the real calls the PMPI_ ones, looked up at the first call, so a
// program without MPI never resolves one. Handles (MPI_File, MPI_Datatype, MPI_Comm, MPI_Info,
// MPI_Request) are register-width values passed through unread: a pointer in Open MPI, an int
// in MPICH and its derivatives (Intel MPI, Cray MPICH, MVAPICH), whose calls read the low half.
// The few constants the tracer needs differ between the two ABIs (Abi below).
//
// A call's record: the file (named at MPI_File_open), `size` the bytes asked for (count times
// the datatype's size), `bytes` those moved (from the call's status; the asked ones for a
// non-blocking or split call's start), `offset` the absolute byte offset where the call names
// one (explicit offsets and the individual file pointer, through the file's view), `ret` the
// MPI error code. Collective or not, and blocking or not, is the call's name. The POSIX calls
// the MPI library makes for a call land in the same thread's buffer inside its interval: the
// analyzer nests them under it. The wrappers answer to the PMPI_ names too (the end of this
// file), which Fortran's bindings call.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <type_traits>

#include "clock.h"
#include "interpose.h"
#include "mpi_clock.h"

using namespace iot;

namespace {

// Inside a recorded MPI call on this thread: the wrappers stand at the PMPI_ names too (Fortran
// bindings call those), so an MPI library that calls its own public names from inside a call
// would be recorded twice; such a call passes through.
__thread int t_in_mpi __attribute__((tls_model("initial-exec")));
__attribute__((always_inline)) inline bool mpi_rec() { return mpi_on() && !t_in_mpi; }

using H = uintptr_t;     // an MPI handle, unread
using Offset = int64_t;  // MPI_Offset: 64 bits in both ABIs

// The MPI library: where RTLD_NEXT finds it (linked by the program, or loaded RTLD_GLOBAL), else
// the loaded object that defines PMPI_Init, found once. A library loaded RTLD_LOCAL (Python's
// extension modules: mpi4py's MPI.*.so and the libmpi it needs) is out of RTLD_NEXT's reach, yet
// its callers reach these wrappers through the global scope: without it every call would fail.
// One MPI library per process (two cannot be initialised together).
void* g_mpi_lib = nullptr;  // dlopen's handle of that object (its own scope), or null

// The loaded objects' names, gathered by dl_iterate_phdr (which holds the loader's lock: the
// dlopen that looks into each comes after it).
struct Loaded {
  const char* name[512];
  int n = 0;
};
int gather(struct dl_phdr_info* info, size_t, void* arg) {
  auto* l = static_cast<Loaded*>(arg);
  if (info->dlpi_name && *info->dlpi_name && l->n < 512) l->name[l->n++] = info->dlpi_name;
  return 0;
}

// In this library? (its PMPI_ names are its wrappers). By address, so that a program without MPI
// looks up no MPI symbol, not even this library's own.
bool ours(void* f) {
  Dl_info a, b;
  return dladdr(f, &a) && dladdr(reinterpret_cast<void*>(&ours), &b) && a.dli_fbase == b.dli_fbase;
}

void* mpi_sym(const char* name) {
  if (void* f = dlsym(RTLD_NEXT, name)) return f;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;  // once, at a first call: never hot
  pthread_mutex_lock(&mu);
  if (!g_mpi_lib) {
    static Loaded loaded;  // 4 KiB: not on the caller's stack
    loaded.n = 0;
    dl_iterate_phdr(gather, &loaded);
    for (int i = 0; i < loaded.n && !g_mpi_lib; i++) {
      void* h = dlopen(loaded.name[i], RTLD_LAZY | RTLD_NOLOAD);
      void* f = h ? dlsym(h, "PMPI_Init") : nullptr;
      if (f && !ours(f))  // not this library: its PMPI_Init is its own wrapper
        g_mpi_lib = h;    // kept open: the functions found in it are cached
      else if (h)
        dlclose(h);
    }
  }
  pthread_mutex_unlock(&mu);
  return g_mpi_lib ? dlsym(g_mpi_lib, name) : nullptr;
}

// The constants of the MPI library's ABI: Open MPI's are addresses of its objects, MPICH's
// are fixed numbers (mpi.h of both).
struct Abi {
  bool known = false;
  H comm_world = 0, byte = 0;
  uintptr_t status_ignore = 0;  // MPI_STATUS_IGNORE
};
Abi g_abi;

const Abi& abi() {
  if (__builtin_expect(!g_abi.known, 0)) {
    Abi a;
    void* w = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (!w && (g_mpi_lib || mpi_sym("PMPI_Init"))) w = dlsym(g_mpi_lib, "ompi_mpi_comm_world");
    if (w) {  // Open MPI
      a.comm_world = H(w);
      void* b = dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
      a.byte = H(b ? b : dlsym(g_mpi_lib, "ompi_mpi_byte"));
      a.status_ignore = 0;
    } else {  // the MPICH ABI
      a.comm_world = 0x44000000;
      a.byte = 0x4c00010d;
      a.status_ignore = 1;
    }
    a.known = true;
    g_abi = a;
  }
  return g_abi;
}

// The real call: PMPI_<name> of the MPI library. A program that calls an MPI_ name with no MPI
// library loaded (a library probing for MPI with dlsym finds these wrappers) gets MPI_ERR_OTHER
// back, not a jump to NULL.
int no_mpi(...) { return 15; }  // MPI_ERR_OTHER in both ABIs
template <class F>
F pmpi(F& slot, const char* name) {
  if (__builtin_expect(slot == nullptr, 0)) {
    void* f = mpi_sym(name);
    slot = f ? reinterpret_cast<F>(f) : reinterpret_cast<F>(&no_mpi);
  }
  return slot;
}
#define PMPI_FN(name, ...)             \
  using name##_fn = __VA_ARGS__;       \
  name##_fn p_##name##_slot = nullptr; \
  inline name##_fn p_##name() { return pmpi(p_##name##_slot, "P" #name); }

PMPI_FN(MPI_Type_size, int (*)(H, int*))
PMPI_FN(MPI_Get_count, int (*)(const void*, H, int*))
PMPI_FN(MPI_Comm_rank, int (*)(H, int*))
PMPI_FN(MPI_Comm_size, int (*)(H, int*))
PMPI_FN(MPI_File_get_byte_offset, int (*)(H, Offset, Offset*))
PMPI_FN(MPI_File_get_position, int (*)(H, Offset*))

// MPI files by handle: the file's name, interned at MPI_File_open. Open addressing over a
// fixed table (a job opens few MPI files at once); a slot is claimed with one CAS and freed
// to a tombstone at close; readers take no lock. A slot's handle, name and view flag share a
// cache line: a data call looks its file up once.
constexpr uint32_t kFiles = 1024;
constexpr H kFree = 0, kTomb = 1, kBusy = 2;
struct alignas(32) FileSlot {
  std::atomic<H> fh;
  Str* name;
  // The file's view is still the one MPI_File_open gives (displacement 0, etype and filetype
  // MPI_BYTE): an offset in etypes is then its byte offset, with no query of the library
  // (MPI_File_get_byte_offset was a third of a recorded write's cost). Any MPI_File_set_view
  // clears it, recorded or not.
  std::atomic<bool> plain;
};
FileSlot g_files[kFiles];

uint32_t slot_hash(H fh) { return uint32_t((uint64_t(fh) * 0x9E3779B97F4A7C15ull) >> 54); }

void file_add(H fh, Str* name) {
  if (fh <= kBusy) return;
  for (uint32_t i = slot_hash(fh), k = 0; k < kFiles; k++, i = (i + 1) % kFiles) {
    FileSlot& f = g_files[i];
    H cur = f.fh.load(std::memory_order_relaxed);
    if ((cur == kFree || cur == kTomb) &&
        f.fh.compare_exchange_strong(cur, kBusy, std::memory_order_acquire)) {
      f.name = name;
      f.plain.store(true, std::memory_order_relaxed);
      f.fh.store(fh, std::memory_order_release);
      return;
    }
  }
}
// The slot of a file, or null.
FileSlot* file_slot(H fh) {
  for (uint32_t i = slot_hash(fh), k = 0; k < kFiles; k++, i = (i + 1) % kFiles) {
    H cur = g_files[i].fh.load(std::memory_order_acquire);
    if (cur == fh) return &g_files[i];
    if (cur == kFree) return nullptr;
  }
  return nullptr;
}
Str* file_of(H fh) {
  FileSlot* f = file_slot(fh);
  return f ? f->name : nullptr;
}
void file_viewed(H fh) {
  if (FileSlot* f = file_slot(fh)) f->plain.store(false, std::memory_order_release);
}
void file_drop(H fh) {
  if (FileSlot* f = file_slot(fh)) f->fh.store(kTomb, std::memory_order_release);
}

// An MPI file name as the path it is: ROMIO's file system prefix ("ufs:", "lustre:") dropped.
Str* mpi_path(const char* name) {
  if (!name) return nullptr;
  const char* p = name;
  while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')) p++;
  if (*p == ':' && p > name && p - name <= 8) name = p + 1;
  return intern_path(name);
}

// Predefined datatypes neither go away nor change size, so theirs is kept: MPICH's builtin
// handles carry it (bits 8-15, mpi.h's MPI_INT 0x4c000405), Open MPI's are objects in the
// library's own data (derived ones are on the heap: those are asked each time, their handles
// being reused after MPI_Type_free). A size kept is one relaxed 64-bit word: (offset of the
// object in that data + 1) << 32 | size.
struct TypeData {
  std::atomic<int> state{0};  // 0 not looked for, 1 found, 2 not found, 3 being looked for
  uintptr_t lo = 0, hi = 0;   // the writable segment that holds ompi_mpi_byte
};
TypeData g_type_data;
std::atomic<uint64_t> g_type_size[64];

int find_type_data(struct dl_phdr_info* info, size_t, void* arg) {
  auto* d = static_cast<TypeData*>(arg);
  uintptr_t byte = abi().byte;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (byte >= lo && byte < hi) {
      d->lo = lo;
      d->hi = hi;
      return 1;
    }
  }
  return 0;
}

bool predefined_open_mpi(H type) {
  int st = g_type_data.state.load(std::memory_order_acquire);
  if (__builtin_expect(st == 0, 0)) {
    if (!g_type_data.state.compare_exchange_strong(st, 3, std::memory_order_acq_rel)) return false;
    TypeData d;  // looked for once, by the thread that set state 3 (the others ask meanwhile)
    bool found =
        abi().byte && dl_iterate_phdr(find_type_data, &d) == 1 && d.hi - d.lo < (uint64_t(1) << 32);
    g_type_data.lo = d.lo;
    g_type_data.hi = d.hi;
    g_type_data.state.store(found ? 1 : 2, std::memory_order_release);
    return false;
  }
  return st == 1 && type >= g_type_data.lo && type < g_type_data.hi;
}

int64_t bytes_of(int count, H type) {
  if (abi().status_ignore == 1) {  // the MPICH ABI: a builtin handle's size is in it
    uint32_t h = uint32_t(type);
    if ((h & 0xc0000000u) == 0x40000000u && ((h >> 8) & 0xff))
      return int64_t(count) * ((h >> 8) & 0xff);
  } else if (predefined_open_mpi(type)) {
    uint64_t key = uint64_t(type - g_type_data.lo) + 1;
    std::atomic<uint64_t>& slot = g_type_size[(key * 0x9E3779B97F4A7C15ull) >> 58];
    uint64_t kept = slot.load(std::memory_order_relaxed);
    if ((kept >> 32) == key) return int64_t(count) * int64_t(kept & 0xffffffffu);
    int s = 0;
    if (p_MPI_Type_size()(type, &s) != 0) return -1;
    if (s >= 0) slot.store(key << 32 | uint32_t(s), std::memory_order_relaxed);
    return int64_t(count) * s;
  }
  int s = 0;
  if (p_MPI_Type_size()(type, &s) != 0) return -1;
  return int64_t(count) * s;
}
// The bytes a completed call moved, by its status (-1: not known).
int64_t moved(const void* status) {
  int n = 0;
  if (p_MPI_Get_count()(status, abi().byte, &n) != 0 || n < 0) return -1;
  return n;
}
// The absolute byte offset of `off` etypes into the file's view (-1: not known).
int64_t byte_offset(H fh, Offset off, const FileSlot* f) {
  if (f && f->plain.load(std::memory_order_acquire)) return int64_t(off);
  Offset b = 0;
  return p_MPI_File_get_byte_offset()(fh, off, &b) == 0 ? int64_t(b) : -1;
}
int64_t byte_offset(H fh, Offset off) { return byte_offset(fh, off, file_slot(fh)); }
int64_t here(H fh, const FileSlot* f) {
  Offset pos = 0;
  return p_MPI_File_get_position()(fh, &pos) == 0 ? byte_offset(fh, pos, f) : -1;
}
int64_t here(H fh) { return here(fh, file_slot(fh)); }

// A status to hand the library when the caller ignores its own: the bytes moved are read from
// it. Large enough for either ABI's MPI_Status (Open MPI 24 bytes, MPICH 20).
struct Status {
  alignas(8) char b[64];
};
void* status_for(void* given, Status& mine) {
  return uintptr_t(given) == abi().status_ignore ? static_cast<void*>(&mine) : given;
}

template <class Call, class Fill>
int traced_mpi(CallId id, Call&& call, Fill&& fill) {
  if (!mpi_rec()) return call();
  // the CPU the MPI library uses (its work, its polling while it waits for other ranks): apart
  // from the rank's own, which readers compare across ranks (cpu-starved)
  bool outer = t_in_mpi == 0;
  int64_t cpu0 = outer ? thread_cpu_ns() : 0;
  ++t_in_mpi;  // an MPI call the library makes of its own inside this one passes through
  int ret = traced<int>(true, id, call, fill);
  --t_in_mpi;
  if (outer) {
    KeepErrno keep;
    add_mpi_cpu_ns(thread_cpu_ns() - cpu0);
  }
  return ret;
}

// A data call's record: file, bytes asked, bytes moved, offset (-1: none), the error code. A
// blocking write that succeeds moved what it asked (an MPI-IO write is not short; a read can
// end at the file's end): its status is not asked (MPI_Get_count, a third of its cost).
bool fill_xfer(IoLive& r, Str* f, int64_t asked, int64_t done, int64_t offset, int ret) {
  r.set_file(f);
  if (asked >= 0) r.set_size(asked);
  if (done >= 0) r.set_bytes(done);
  if (offset >= 0) r.set_offset(offset);
  r.set_ret(ret);
  return passes(f);
}

// Blocking calls: at an explicit offset, at the individual pointer, at the shared pointer.
template <class Real>
int xfer_at(CallId id, Real real, H fh, Offset off, int count, H type, void* st, bool write) {
  if (!mpi_rec() || t_guard) return real(fh, off, st);
  Status mine;
  void* s = status_for(st, mine);
  const FileSlot* f = file_slot(fh);
  int64_t at = byte_offset(fh, off, f);
  Str* name = f ? f->name : nullptr;
  return traced_mpi(
      id, [&] { return real(fh, off, s); },
      [&](IoLive& r, int ret, int) {
        int64_t asked = bytes_of(count, type);
        return fill_xfer(r, name, asked, ret == 0 ? (write ? asked : moved(s)) : 0, at, ret);
      });
}
template <class Real>
int xfer_here(CallId id, Real real, H fh, int count, H type, void* st, bool shared, bool write) {
  if (!mpi_rec() || t_guard) return real(st);
  Status mine;
  void* s = status_for(st, mine);
  const FileSlot* f = file_slot(fh);
  int64_t at = shared ? -1 : here(fh, f);
  Str* name = f ? f->name : nullptr;
  return traced_mpi(
      id, [&] { return real(s); },
      [&](IoLive& r, int ret, int) {
        int64_t asked = bytes_of(count, type);
        return fill_xfer(r, name, asked, ret == 0 ? (write ? asked : moved(s)) : 0, at, ret);
      });
}
// Starts of split and non-blocking calls: bytes asked (and so counted), not yet moved.
template <class Real>
int xfer_start(CallId id, Real real, H fh, int64_t at, int count, H type) {
  return traced_mpi(id, real, [&](IoLive& r, int ret, int) {
    int64_t n = bytes_of(count, type);
    return fill_xfer(r, file_of(fh), n, n, at, ret);
  });
}
// Ends of split calls: bytes moved by the status.
template <class Real>
int xfer_end(CallId id, Real real, H fh, void* st) {
  if (!mpi_rec() || t_guard) return real(st);
  Status mine;
  void* s = status_for(st, mine);
  return traced_mpi(
      id, [&] { return real(s); },
      [&](IoLive& r, int ret, int) {
        return fill_xfer(r, file_of(fh), -1, ret == 0 ? moved(s) : 0, -1, ret);
      });
}

template <class Real>
int on_file(CallId id, Real real, H fh, int64_t size = -1) {
  return traced_mpi(id, real, [&](IoLive& r, int ret, int) {
    Str* f = file_of(fh);
    r.set_file(f);
    if (size >= 0) r.set_size(size);
    r.set_ret(ret);
    return passes(f);
  });
}
template <class Real>
int mpi_call(CallId id, Real real, int64_t bytes = -1) {
  return traced_mpi(id, real, [&](IoLive& r, int ret, int) {
    if (bytes >= 0) r.set_bytes(bytes);
    r.set_ret(ret);
    return g_trace_unnamed;
  });
}

PMPI_FN(MPI_Init, int (*)(int*, char***))
PMPI_FN(MPI_Init_thread, int (*)(int*, char***, int, int*))
PMPI_FN(MPI_Finalize, int (*)())
PMPI_FN(MPI_Barrier, int (*)(H))
PMPI_FN(MPI_Bcast, int (*)(void*, int, H, int, H))
PMPI_FN(MPI_Reduce, int (*)(const void*, void*, int, H, H, int, H))
PMPI_FN(MPI_Allreduce, int (*)(const void*, void*, int, H, H, H))
PMPI_FN(MPI_Gather, int (*)(const void*, int, H, void*, int, H, int, H))
PMPI_FN(MPI_Allgather, int (*)(const void*, int, H, void*, int, H, H))
PMPI_FN(MPI_Scatter, int (*)(const void*, int, H, void*, int, H, int, H))
PMPI_FN(MPI_Alltoall, int (*)(const void*, int, H, void*, int, H, H))
PMPI_FN(MPI_Wait, int (*)(void*, void*))
PMPI_FN(MPI_Waitall, int (*)(int, void*, void*))

PMPI_FN(MPI_File_open, int (*)(H, const char*, int, H, H*))
PMPI_FN(MPI_File_close, int (*)(H*))
PMPI_FN(MPI_File_delete, int (*)(const char*, H))
PMPI_FN(MPI_File_sync, int (*)(H))
PMPI_FN(MPI_File_set_size, int (*)(H, Offset))
PMPI_FN(MPI_File_preallocate, int (*)(H, Offset))
PMPI_FN(MPI_File_get_size, int (*)(H, Offset*))
PMPI_FN(MPI_File_set_view, int (*)(H, Offset, H, H, const char*, H))
PMPI_FN(MPI_File_seek, int (*)(H, Offset, int))
PMPI_FN(MPI_File_seek_shared, int (*)(H, Offset, int))

// The rank's clock measured against rank 0's (mpi_clock.cc), at the end of MPI_Init and the
// start of MPI_Finalize: inside their events, as the program waits for it there.
void align_clock(const char* at) {
  const Abi& a = abi();
  mpi_clock_align(MpiAbi{a.comm_world, a.byte, a.status_ignore, mpi_sym}, at);
}

// MPI is up: the process's rank in MPI_COMM_WORLD and the world's size said, its clock aligned.
void started(const char* at) {
  int rank = -1, size = -1;
  const Abi& a = abi();
  if (p_MPI_Comm_rank()(a.comm_world, &rank) == 0 && p_MPI_Comm_size()(a.comm_world, &size) == 0)
    announce_mpi(rank, size);
  align_clock(at);
  host_cpu_wait_start();  // the rank's run: its end tells how short of CPUs the host was
}

}  // namespace

// --- MPI: start, end, synchronising collectives, waits ------------------------------------------

IOT_EXPORT int MPI_Init(int* argc, char*** argv) {
  return mpi_call(C_MPI_Init, [&] {
    int ret = p_MPI_Init()(argc, argv);
    if (ret == 0) started("MPI_Init");
    return ret;
  });
}
IOT_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return mpi_call(C_MPI_Init_thread, [&] {
    int ret = p_MPI_Init_thread()(argc, argv, required, provided);
    if (ret == 0) started("MPI_Init_thread");
    return ret;
  });
}
IOT_EXPORT int MPI_Finalize() {
  return mpi_call(C_MPI_Finalize, [&] {
    host_cpu_wait_stop();
    align_clock("MPI_Finalize");
    return p_MPI_Finalize()();
  });
}
IOT_EXPORT int MPI_Barrier(H comm) {
  return mpi_call(C_MPI_Barrier, [&] { return p_MPI_Barrier()(comm); });
}
IOT_EXPORT int MPI_Bcast(void* buf, int count, H type, int root, H comm) {
  return mpi_call(C_MPI_Bcast, [&] { return p_MPI_Bcast()(buf, count, type, root, comm); });
}
IOT_EXPORT int MPI_Reduce(const void* s, void* r, int count, H type, H op, int root, H comm) {
  return mpi_call(C_MPI_Reduce, [&] { return p_MPI_Reduce()(s, r, count, type, op, root, comm); });
}
IOT_EXPORT int MPI_Allreduce(const void* s, void* r, int count, H type, H op, H comm) {
  return mpi_call(C_MPI_Allreduce, [&] { return p_MPI_Allreduce()(s, r, count, type, op, comm); });
}
IOT_EXPORT int MPI_Gather(const void* s, int sc, H st, void* r, int rc, H rt, int root, H comm) {
  return mpi_call(C_MPI_Gather, [&] { return p_MPI_Gather()(s, sc, st, r, rc, rt, root, comm); });
}
IOT_EXPORT int MPI_Allgather(const void* s, int sc, H st, void* r, int rc, H rt, H comm) {
  return mpi_call(C_MPI_Allgather, [&] { return p_MPI_Allgather()(s, sc, st, r, rc, rt, comm); });
}
IOT_EXPORT int MPI_Scatter(const void* s, int sc, H st, void* r, int rc, H rt, int root, H comm) {
  return mpi_call(C_MPI_Scatter, [&] { return p_MPI_Scatter()(s, sc, st, r, rc, rt, root, comm); });
}
IOT_EXPORT int MPI_Alltoall(const void* s, int sc, H st, void* r, int rc, H rt, H comm) {
  return mpi_call(C_MPI_Alltoall, [&] { return p_MPI_Alltoall()(s, sc, st, r, rc, rt, comm); });
}
IOT_EXPORT int MPI_Wait(void* req, void* status) {
  return mpi_call(C_MPI_Wait, [&] { return p_MPI_Wait()(req, status); });
}
IOT_EXPORT int MPI_Waitall(int n, void* reqs, void* statuses) {
  return mpi_call(C_MPI_Waitall, [&] { return p_MPI_Waitall()(n, reqs, statuses); });
}

// --- MPI-IO: files ------------------------------------------------------------------------------

IOT_EXPORT int MPI_File_open(H comm, const char* name, int amode, H info, H* fh) {
  if (!mpi_rec() || t_guard) return p_MPI_File_open()(comm, name, amode, info, fh);
  Str* f;
  {
    Guard g;  // the name's resolution is the tracer's work
    f = mpi_path(name);
  }
  return traced_mpi(
      C_MPI_File_open, [&] { return p_MPI_File_open()(comm, name, amode, info, fh); },
      [&](IoLive& r, int ret, int) {
        if (ret == 0) file_add(*fh, f);
        r.set_file(f);
        r.set_flags(amode);
        r.set_ret(ret);
        return passes(f);
      });
}
IOT_EXPORT int MPI_File_close(H* fh) {
  H was = fh ? *fh : 0;
  return traced_mpi(
      C_MPI_File_close, [&] { return p_MPI_File_close()(fh); },
      [&](IoLive& r, int ret, int) {
        Str* f = file_of(was);
        if (ret == 0) file_drop(was);
        r.set_file(f);
        r.set_ret(ret);
        return passes(f);
      });
}
IOT_EXPORT int MPI_File_delete(const char* name, H info) {
  if (!mpi_rec() || t_guard) return p_MPI_File_delete()(name, info);
  Str* f;
  {
    Guard g;
    f = mpi_path(name);
  }
  return traced_mpi(
      C_MPI_File_delete, [&] { return p_MPI_File_delete()(name, info); },
      [&](IoLive& r, int ret, int) {
        r.set_file(f);
        r.set_ret(ret);
        return passes(f);
      });
}
IOT_EXPORT int MPI_File_sync(H fh) {
  return on_file(
      C_MPI_File_sync, [&] { return p_MPI_File_sync()(fh); }, fh);
}
IOT_EXPORT int MPI_File_set_size(H fh, Offset size) {
  return on_file(
      C_MPI_File_set_size, [&] { return p_MPI_File_set_size()(fh, size); }, fh, size);
}
IOT_EXPORT int MPI_File_preallocate(H fh, Offset size) {
  return on_file(
      C_MPI_File_preallocate, [&] { return p_MPI_File_preallocate()(fh, size); }, fh, size);
}
IOT_EXPORT int MPI_File_get_size(H fh, Offset* size) {
  return on_file(
      C_MPI_File_get_size, [&] { return p_MPI_File_get_size()(fh, size); }, fh);
}
IOT_EXPORT int MPI_File_set_view(H fh, Offset disp, H etype, H ftype, const char* rep, H info) {
  file_viewed(fh);  // before the call: a reader in another thread never takes the new view as plain
  return on_file(
      C_MPI_File_set_view, [&] { return p_MPI_File_set_view()(fh, disp, etype, ftype, rep, info); },
      fh);
}
IOT_EXPORT int MPI_File_seek(H fh, Offset off, int whence) {
  return on_file(
      C_MPI_File_seek, [&] { return p_MPI_File_seek()(fh, off, whence); }, fh);
}
IOT_EXPORT int MPI_File_seek_shared(H fh, Offset off, int whence) {
  return on_file(
      C_MPI_File_seek_shared, [&] { return p_MPI_File_seek_shared()(fh, off, whence); }, fh);
}

// --- MPI-IO: data -------------------------------------------------------------------------------

// Explicit offsets: MPI_File_read_at(fh, offset, buf, count, datatype, status), and the rest.
#define MPI_AT(fn, bufT)                                                                         \
  PMPI_FN(fn, int (*)(H, Offset, bufT, int, H, void*))                                           \
  IOT_EXPORT int fn(H fh, Offset off, bufT buf, int count, H type, void* st) {                   \
    return xfer_at(                                                                              \
        C_##fn, [&](H f, Offset o, void* s) { return p_##fn()(f, o, buf, count, type, s); }, fh, \
        off, count, type, st, std::is_same<bufT, const void*>::value);                           \
  }
MPI_AT(MPI_File_read_at, void*)
MPI_AT(MPI_File_read_at_all, void*)
MPI_AT(MPI_File_write_at, const void*)
MPI_AT(MPI_File_write_at_all, const void*)

// The individual (`shared` false) and the shared file pointer: fn(fh, buf, count, type, status).
#define MPI_HERE(fn, bufT, shared)                                                               \
  PMPI_FN(fn, int (*)(H, bufT, int, H, void*))                                                   \
  IOT_EXPORT int fn(H fh, bufT buf, int count, H type, void* st) {                               \
    return xfer_here(                                                                            \
        C_##fn, [&](void* s) { return p_##fn()(fh, buf, count, type, s); }, fh, count, type, st, \
        shared, std::is_same<bufT, const void*>::value);                                         \
  }
MPI_HERE(MPI_File_read, void*, false)
MPI_HERE(MPI_File_read_all, void*, false)
MPI_HERE(MPI_File_write, const void*, false)
MPI_HERE(MPI_File_write_all, const void*, false)
MPI_HERE(MPI_File_read_shared, void*, true)
MPI_HERE(MPI_File_write_shared, const void*, true)
MPI_HERE(MPI_File_read_ordered, void*, true)
MPI_HERE(MPI_File_write_ordered, const void*, true)

// Split collectives: fn_begin(fh, [offset,] buf, count, type), fn_end(fh, buf, status).
#define MPI_AT_BEGIN(fn, bufT)                                                             \
  PMPI_FN(fn, int (*)(H, Offset, bufT, int, H))                                            \
  IOT_EXPORT int fn(H fh, Offset off, bufT buf, int count, H type) {                       \
    int64_t at = mpi_rec() && !t_guard ? byte_offset(fh, off) : -1;                        \
    return xfer_start(                                                                     \
        C_##fn, [&] { return p_##fn()(fh, off, buf, count, type); }, fh, at, count, type); \
  }
#define MPI_HERE_BEGIN(fn, bufT, shared)                                              \
  PMPI_FN(fn, int (*)(H, bufT, int, H))                                               \
  IOT_EXPORT int fn(H fh, bufT buf, int count, H type) {                              \
    int64_t at = mpi_rec() && !t_guard && !shared ? here(fh) : -1;                    \
    return xfer_start(                                                                \
        C_##fn, [&] { return p_##fn()(fh, buf, count, type); }, fh, at, count, type); \
  }
#define MPI_END(fn, bufT)                                               \
  PMPI_FN(fn, int (*)(H, bufT, void*))                                  \
  IOT_EXPORT int fn(H fh, bufT buf, void* st) {                         \
    return xfer_end(                                                    \
        C_##fn, [&](void* s) { return p_##fn()(fh, buf, s); }, fh, st); \
  }
MPI_AT_BEGIN(MPI_File_read_at_all_begin, void*)
MPI_AT_BEGIN(MPI_File_write_at_all_begin, const void*)
MPI_HERE_BEGIN(MPI_File_read_all_begin, void*, false)
MPI_HERE_BEGIN(MPI_File_write_all_begin, const void*, false)
MPI_HERE_BEGIN(MPI_File_read_ordered_begin, void*, true)
MPI_HERE_BEGIN(MPI_File_write_ordered_begin, const void*, true)
MPI_END(MPI_File_read_at_all_end, void*)
MPI_END(MPI_File_write_at_all_end, const void*)
MPI_END(MPI_File_read_all_end, void*)
MPI_END(MPI_File_write_all_end, const void*)
MPI_END(MPI_File_read_ordered_end, void*)
MPI_END(MPI_File_write_ordered_end, const void*)

// Non-blocking: fn(fh, [offset,] buf, count, type, request); completed by MPI_Wait/Waitall.
#define MPI_IAT(fn, bufT)                                                                       \
  PMPI_FN(fn, int (*)(H, Offset, bufT, int, H, void*))                                          \
  IOT_EXPORT int fn(H fh, Offset off, bufT buf, int count, H type, void* req) {                 \
    int64_t at = mpi_rec() && !t_guard ? byte_offset(fh, off) : -1;                             \
    return xfer_start(                                                                          \
        C_##fn, [&] { return p_##fn()(fh, off, buf, count, type, req); }, fh, at, count, type); \
  }
#define MPI_IHERE(fn, bufT, shared)                                                        \
  PMPI_FN(fn, int (*)(H, bufT, int, H, void*))                                             \
  IOT_EXPORT int fn(H fh, bufT buf, int count, H type, void* req) {                        \
    int64_t at = mpi_rec() && !t_guard && !shared ? here(fh) : -1;                         \
    return xfer_start(                                                                     \
        C_##fn, [&] { return p_##fn()(fh, buf, count, type, req); }, fh, at, count, type); \
  }
MPI_IAT(MPI_File_iread_at, void*)
MPI_IAT(MPI_File_iwrite_at, const void*)
MPI_IAT(MPI_File_iread_at_all, void*)
MPI_IAT(MPI_File_iwrite_at_all, const void*)
MPI_IHERE(MPI_File_iread, void*, false)
MPI_IHERE(MPI_File_iwrite, const void*, false)
MPI_IHERE(MPI_File_iread_all, void*, false)
MPI_IHERE(MPI_File_iwrite_all, const void*, false)
MPI_IHERE(MPI_File_iread_shared, void*, true)
MPI_IHERE(MPI_File_iwrite_shared, const void*, true)

// --- the PMPI_ names
// ------------------------------------------------------------------------------

// Each wrapper answers to the PMPI_ name as well (as Darshan's preload does): Open MPI's Fortran
// bindings (mpif.h, use mpi, use mpi_f08) call PMPI_File_write_at and the rest, not the MPI_
// names, so a Fortran program's MPI calls land here too. The real call is still the MPI
// library's PMPI_ function, looked up past this library (RTLD_NEXT); a profiling tool that calls
// PMPI_ names from its own MPI_ wrappers has its calls recorded once, here.
#define IOT_PMPI(name) \
  __asm__(".globl P" #name "\n\t.type P" #name ", @function\n\t.set P" #name ", " #name);
IOT_PMPI(MPI_Init)
IOT_PMPI(MPI_Init_thread)
IOT_PMPI(MPI_Finalize)
IOT_PMPI(MPI_Barrier)
IOT_PMPI(MPI_Bcast)
IOT_PMPI(MPI_Reduce)
IOT_PMPI(MPI_Allreduce)
IOT_PMPI(MPI_Gather)
IOT_PMPI(MPI_Allgather)
IOT_PMPI(MPI_Scatter)
IOT_PMPI(MPI_Alltoall)
IOT_PMPI(MPI_Wait)
IOT_PMPI(MPI_Waitall)
IOT_PMPI(MPI_File_open)
IOT_PMPI(MPI_File_close)
IOT_PMPI(MPI_File_delete)
IOT_PMPI(MPI_File_sync)
IOT_PMPI(MPI_File_set_size)
IOT_PMPI(MPI_File_preallocate)
IOT_PMPI(MPI_File_get_size)
IOT_PMPI(MPI_File_set_view)
IOT_PMPI(MPI_File_seek)
IOT_PMPI(MPI_File_seek_shared)
IOT_PMPI(MPI_File_read_at)
IOT_PMPI(MPI_File_read_at_all)
IOT_PMPI(MPI_File_write_at)
IOT_PMPI(MPI_File_write_at_all)
IOT_PMPI(MPI_File_read)
IOT_PMPI(MPI_File_read_all)
IOT_PMPI(MPI_File_write)
IOT_PMPI(MPI_File_write_all)
IOT_PMPI(MPI_File_read_shared)
IOT_PMPI(MPI_File_write_shared)
IOT_PMPI(MPI_File_read_ordered)
IOT_PMPI(MPI_File_write_ordered)
IOT_PMPI(MPI_File_read_at_all_begin)
IOT_PMPI(MPI_File_write_at_all_begin)
IOT_PMPI(MPI_File_read_all_begin)
IOT_PMPI(MPI_File_write_all_begin)
IOT_PMPI(MPI_File_read_ordered_begin)
IOT_PMPI(MPI_File_write_ordered_begin)
IOT_PMPI(MPI_File_read_at_all_end)
IOT_PMPI(MPI_File_write_at_all_end)
IOT_PMPI(MPI_File_read_all_end)
IOT_PMPI(MPI_File_write_all_end)
IOT_PMPI(MPI_File_read_ordered_end)
IOT_PMPI(MPI_File_write_ordered_end)
IOT_PMPI(MPI_File_iread_at)
IOT_PMPI(MPI_File_iwrite_at)
IOT_PMPI(MPI_File_iread_at_all)
IOT_PMPI(MPI_File_iwrite_at_all)
IOT_PMPI(MPI_File_iread)
IOT_PMPI(MPI_File_iwrite)
IOT_PMPI(MPI_File_iread_all)
IOT_PMPI(MPI_File_iwrite_all)
IOT_PMPI(MPI_File_iread_shared)
IOT_PMPI(MPI_File_iwrite_shared)
