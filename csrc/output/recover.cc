#include "recover.h"

#include <errno.h>
#include <fcntl.h>
#include <new>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "converter.h"
#include "intern.h"
#include "live.h"
#include "record.h"
#include "sysmem.h"

namespace iot {

namespace {
bool failed(long r) { return r < 0 && r > -4096; }

// The live file, mapped privately (a recovery never writes into it).
struct LiveMap {
  char* base = nullptr;
  uint64_t size = 0;
  const live::Header* h = nullptr;
  ~LiveMap() {
    if (base) syscall(SYS_munmap, base, size);
  }
};

bool map_live(const char* path, LiveMap* m, RecoverResult* out) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    out->error = errno;
    out->why = "cannot open the live file";
    return false;
  }
  struct stat st;
  long r = syscall(SYS_fstat, fd, &st) == 0 && st.st_size >= long(live::kHeaderBytes)
               ? syscall(SYS_mmap, nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0L)
               : -EINVAL;
  syscall(SYS_close, fd);
  if (failed(r)) {
    out->error = EINVAL;
    out->why = "not a live file (too short)";
    return false;
  }
  m->base = reinterpret_cast<char*>(r);
  m->size = uint64_t(st.st_size);
  m->h = reinterpret_cast<const live::Header*>(m->base);
  const live::Header* h = m->h;
  if (memcmp(h->magic, live::kMagic, sizeof h->magic) != 0) {
    out->error = EINVAL;
    out->why = "not a live file (no magic)";
    return false;
  }
  if (h->version < live::kOldestVersion || h->version > live::kVersion) {
    out->error = EPROTO;
    out->why = "a live file of another version";
    return false;
  }
  uint32_t n = h->n_segments.load(std::memory_order_relaxed);
  bool sane = h->header_bytes >= live::kHeaderBytes && h->header_bytes <= m->size &&
              uint64_t(h->head_offset) + h->head_len <= h->header_bytes &&
              n <= uint32_t(live::kMaxSegments);
  for (uint32_t i = 0; sane && i < n; i++)
    sane = h->segment[i].offset + h->segment[i].size <= m->size;
  if (!sane) {
    out->error = EINVAL;
    out->why = "a damaged live file (its header does not add up)";
    return false;
  }
  out->pid = h->pid;
  snprintf(out->host, sizeof out->host, "%.*s", int(sizeof h->host), h->host);
  out->ended = h->ended.load(std::memory_order_relaxed) != 0;
  out->closed = h->closed.load(std::memory_order_relaxed) != 0;
  if (out->ended) snprintf(out->end_reason, sizeof out->end_reason, "%.*s", 31, h->end_reason);
  out->dropped = h->dropped.load(std::memory_order_relaxed);
  const char* slash = strrchr(path, '/');
  int dir_len = slash ? int(slash - path) : 1;
  snprintf(out->trace_path, sizeof out->trace_path, "%.*s/%.*s", dir_len, slash ? path : ".",
           int(sizeof h->trace_name), h->trace_name);
  return true;
}

// Every chunk of the file that holds records, in place.
struct Chunks {
  live::Chunk** at = nullptr;
  size_t n = 0, cap = 0;
  ~Chunks() { sys_unmap(at, cap * sizeof *at); }
  bool add(live::Chunk* c) {
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 1024;
      void* p =
          at ? sys_remap(at, cap * sizeof *at, ncap * sizeof *at) : sys_map(ncap * sizeof *at);
      if (!p) return false;
      at = static_cast<live::Chunk**>(p);
      cap = ncap;
    }
    at[n++] = c;
    return true;
  }
};

void collect(const LiveMap& m, Chunks* cs) {
  const live::Header* h = m.h;
  uint32_t n = h->n_segments.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    char* p = m.base + h->segment[i].offset;
    char* end = p + h->segment[i].size;
    while (p + sizeof(live::Chunk) <= end) {
      auto* c = reinterpret_cast<live::Chunk*>(p);
      if (c->magic != live::kChunkMagic || c->size_class < 10 || c->size_class > 40) break;
      uint64_t bytes = uint64_t(1) << c->size_class;
      if (bytes > uint64_t(end - p)) break;
      uint32_t state = c->state.load(std::memory_order_relaxed);
      uint32_t committed = c->committed.load(std::memory_order_relaxed);
      if (state != live::kFree && committed <= c->cap && committed > 0) cs->add(c);
      p += bytes;
    }
  }
  // Each thread's chunks in the order it took them (a thread's records stay in order).
  for (size_t i = 1; i < cs->n; i++) {
    live::Chunk* c = cs->at[i];
    size_t j = i;
    for (; j > 0 && (cs->at[j - 1]->tid > c->tid ||
                     (cs->at[j - 1]->tid == c->tid && cs->at[j - 1]->seq > c->seq));
         j--)
      cs->at[j] = cs->at[j - 1];
    cs->at[j] = c;
  }
}

// The strings the records name, by the address they had in the process (R_STR records).
class Strings {
 public:
  ~Strings() {
    sys_unmap(slots_, cap_ * sizeof *slots_);
    for (Block* b = blocks_; b;) {
      Block* next = b->next;
      sys_unmap(b, b->size);
      b = next;
    }
  }
  void add(const StrRec* r) {
    if (find(r->addr)) return;
    if ((n_ + 1) * 2 > cap_ && !grow()) return;
    Str* s = static_cast<Str*>(alloc(sizeof(Str) + r->len + 1));
    if (!s) return;
    s->hash = r->hash;
    s->len = r->len;
    s->traced = true;
    s->written_gen = 0;
    memcpy(s->str, r + 1, r->len);
    s->str[r->len] = 0;
    put(r->addr, s);
  }
  Str* find(uint64_t addr) const {
    if (!cap_) return nullptr;
    for (size_t i = hash(addr) & (cap_ - 1);; i = (i + 1) & (cap_ - 1)) {
      if (!slots_[i].key) return nullptr;
      if (slots_[i].key == addr) return slots_[i].s;
    }
  }
  // A string no R_STR record names (it went with a chunk whose records were all written):
  // the event keeps its place, its file is named as unknown.
  Str* unknown() {
    if (!unknown_) {
      static const char kName[] = "(unknown: its name was not in the live file)";
      unknown_ = static_cast<Str*>(alloc(sizeof(Str) + sizeof kName));
      if (unknown_) {
        unknown_->len = sizeof kName - 1;
        memcpy(unknown_->str, kName, sizeof kName);
        unknown_->hash = fnv1a(kName, unknown_->len);
        unknown_->traced = true;
      }
    }
    return unknown_;
  }

 private:
  struct Slot {
    uint64_t key;
    Str* s;
  };
  struct Block {
    Block* next;
    size_t size, used;
  };
  static size_t hash(uint64_t a) { return size_t((a >> 3) * 0x9E3779B97F4A7C15ull >> 20); }
  void put(uint64_t addr, Str* s) {
    size_t i = hash(addr) & (cap_ - 1);
    while (slots_[i].key) i = (i + 1) & (cap_ - 1);
    slots_[i] = Slot{addr, s};
    n_++;
  }
  bool grow() {
    size_t ncap = cap_ ? 2 * cap_ : 4096;
    auto* fresh = static_cast<Slot*>(sys_map(ncap * sizeof(Slot)));
    if (!fresh) return false;
    Slot* old = slots_;
    size_t ocap = cap_;
    slots_ = fresh;
    cap_ = ncap;
    n_ = 0;
    for (size_t i = 0; i < ocap; i++)
      if (old[i].key) put(old[i].key, old[i].s);
    sys_unmap(old, ocap * sizeof(Slot));
    return true;
  }
  void* alloc(size_t n) {
    n = (n + 15) & ~size_t(15);
    if (!blocks_ || blocks_->used + n > blocks_->size) {
      size_t size = n + 64 > (1 << 20) ? n + 64 : (1 << 20);
      auto* b = static_cast<Block*>(sys_map(size));
      if (!b) return nullptr;
      b->next = blocks_;
      b->size = size;
      b->used = 64;
      blocks_ = b;
    }
    void* p = reinterpret_cast<char*>(blocks_) + blocks_->used;
    blocks_->used += n;
    return p;
  }
  Slot* slots_ = nullptr;
  size_t cap_ = 0, n_ = 0;
  Block* blocks_ = nullptr;
  Str* unknown_ = nullptr;
};

// Records between two offsets of a chunk, whole ones only.
template <class F>
void each_record(const live::Chunk* c, uint32_t from, uint32_t to, F&& f) {
  for (uint32_t at = from; at < to;) {
    auto* r = reinterpret_cast<const RecHeader*>(c->data() + at);
    if (r->size < sizeof(RecHeader) || r->size > to - at || (r->size & 7)) return;
    f(r);
    at += r->size;
  }
}

// Ticks → CLOCK_MONOTONIC ns: the chord through the clock pairs the process left (its start's
// and each chunk's), the longest one. On the same host the TSC is the same one: a pair taken
// now makes the longest chord of all.
ClockMap clock_of(const live::Header* h, const Chunks& cs, bool same_host) {
  ClockMap m;
  if (!(h->flags & live::kTscTicks)) return m;  // ticks are ns already
  m.tick0 = h->tick0;
  m.ns0 = h->ns0;
  int64_t best_tick = 0, best_ns = 0;
  for (size_t i = 0; i < cs.n; i++)
    if (cs.at[i]->ns - h->ns0 > best_ns - h->ns0)
      best_tick = cs.at[i]->tick, best_ns = cs.at[i]->ns;
  if (same_host) {
    struct timespec t;
    int64_t a = int64_t(__rdtsc());
    clock_gettime(CLOCK_MONOTONIC, &t);
    best_tick = a;
    best_ns = int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
  }
  if (best_ns - h->ns0 > 1000 && best_tick > h->tick0)
    m.ns_per_tick = double(best_ns - h->ns0) / double(best_tick - h->tick0);
  return m;
}

bool same_host_as(const char* host) {
  struct utsname u;
  if (uname(&u) != 0) return false;
  char mine[256];
  snprintf(mine, sizeof mine, "%s", u.nodename);
  if (char* dot = strchr(mine, '.')) *dot = 0;
  return strcmp(mine, host) == 0;
}

// An R_IO record as version 1 of the live file laid it out: always whole, the two files first.
struct IoRecV1 {
  RecHeader h;
  uint32_t fields;
  int32_t err;
  int64_t start, dur;
  Str* file;
  Str* file2;
  int64_t fd, fd2, size, offset, ret, bytes, flags, mode;
};
static_assert(sizeof(IoRecV1) == 112, "version 1's R_IO record");

// Version 2's R_IO record is IoRec's layout (record.h), 72 bytes unless one of these is set.
constexpr uint32_t kShortV2 = offsetof(IoRec, file2);
constexpr uint32_t kLongFieldsV2 = F_FHASH2 | F_FD2 | F_BYTES | F_FLAGS | F_MODE;
static_assert(kShortV2 == 72 && sizeof(IoRec) == 112, "version 2's R_IO record");

// An R_IO record of an older version, whole. false: too short for what it says it holds.
bool io_from_old(const RecHeader* r, uint32_t version, IoRec* io) {
  memset(io, 0, sizeof *io);
  if (version == 1) {
    if (r->size < sizeof(IoRecV1)) return false;
    IoRecV1 v;
    memcpy(&v, r, sizeof v);
    io->h = v.h;
    io->fields = v.fields;
    io->err = v.err;
    io->start = v.start;
    io->dur = v.dur;
    io->file = v.file;
    io->file2 = v.file2;
    io->fd = v.fd;
    io->fd2 = v.fd2;
    io->size = v.size;
    io->offset = v.offset;
    io->ret = v.ret;
    io->bytes = v.bytes;
    io->flags = v.flags;
    io->mode = v.mode;
    return true;
  }
  if (r->size < kShortV2) return false;
  memcpy(io, r, kShortV2);
  if (!(io->fields & kLongFieldsV2)) return true;
  if (r->size < sizeof(IoRec)) return false;
  memcpy(io, r, sizeof(IoRec));
  return true;
}

// A copy of a record with its string addresses made this process's Str pointers; a record of
// an older layout (`version` of the live file) in this one's.
const RecHeader* translate(const RecHeader* r, uint32_t version, Out& scratch, Strings& strs) {
  scratch.n = 0;
  if (version < 3 && r->kind == R_IO) {
    IoRec old;
    if (!io_from_old(r, version, &old)) return nullptr;
    IoLive io;
    io_to_live(old, &io);
    scratch.put(reinterpret_cast<const char*>(&io), io.h.size);
  } else {
    scratch.put(reinterpret_cast<const char*>(r), r->size);
  }
  if (!scratch.p) return nullptr;
  auto look = [&](Str* p) -> Str* {
    if (!p) return nullptr;
    Str* s = strs.find(reinterpret_cast<uint64_t>(p));
    return s ? s : strs.unknown();
  };
  auto* h = reinterpret_cast<RecHeader*>(scratch.p);
  if (h->kind == R_IO && io_live_whole(reinterpret_cast<const IoLive*>(h), h->size)) {
    auto* io = reinterpret_cast<IoLive*>(h);
    if (io->fields & F_FHASH) io->file = look(io->file);
    if (io->fields & F_FHASH2) io->file2 = look(io->file2);
    if (((io->fields & F_FHASH) && !io->file) || ((io->fields & F_FHASH2) && !io->file2))
      return nullptr;
  } else if (h->kind == R_SPAN && r->size >= sizeof(SpanRec)) {
    auto* sp = reinterpret_cast<SpanRec*>(h);
    sp->name = look(sp->name);
    sp->cat = look(sp->cat);
    if (!sp->name || !sp->cat || sizeof(SpanRec) + sp->args_len > r->size) return nullptr;
  } else if (h->kind == R_MARK && r->size >= sizeof(MarkRec)) {
    auto* mk = reinterpret_cast<MarkRec*>(h);
    mk->name = look(mk->name);
    mk->cat = mk->cat ? look(mk->cat) : nullptr;
    if (!mk->name || sizeof(MarkRec) + mk->args_len > r->size) return nullptr;
  } else {
    return nullptr;
  }
  return h;
}

// When the process said nothing of its end: the end of its last event.
int64_t last_event_ns(const Chunks& cs, uint32_t version, const ClockMap& clk) {
  int64_t last = 0;
  for (size_t i = 0; i < cs.n; i++) {
    const live::Chunk* c = cs.at[i];
    if (c->tid == 0) continue;
    each_record(c, 0, c->committed.load(std::memory_order_relaxed), [&](const RecHeader* r) {
      int64_t t = 0;
      IoRec io;
      if (r->kind == R_IO && version < 3) {
        if (io_from_old(r, version, &io)) t = clk.ns(io.start) + clk.dur(io.dur);
      } else if (r->kind == R_IO && io_live_whole(reinterpret_cast<const IoLive*>(r), r->size)) {
        io_from_live(*reinterpret_cast<const IoLive*>(r), &io);
        t = clk.ns(io.start) + clk.dur(io.dur);
      } else if (r->kind == R_SPAN) {
        auto* sp = reinterpret_cast<const SpanRec*>(r);
        t = clk.ns(sp->start) + clk.dur(sp->dur);
      }
      if (t > last) last = t;
    });
  }
  return last;
}

bool unlink_live(const char* path) { return syscall(SYS_unlinkat, AT_FDCWD, path, 0) == 0; }
}  // namespace

bool live_inspect(const char* live_path, RecoverResult* out) {
  LiveMap m;
  return map_live(live_path, &m, out);
}

bool live_owner_alive(const char* live_path) {
  RecoverResult info;
  LiveMap m;
  if (!map_live(live_path, &m, &info)) return false;
  if (!same_host_as(info.host)) return false;
  if (syscall(SYS_kill, info.pid, 0) != 0 && errno != EPERM) return false;
  // The pid is taken: by this process, or by a later one that got the number again. The
  // process started before its live file was made; a later one started after.
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", info.pid);
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return true;
  buf[n] = 0;
  const char* p = strrchr(buf, ')');  // the name may hold spaces: fields count from its end
  if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) return false;  // a zombie: it has ended
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  if (!p) return true;
  long long start_ticks = atoll(p + 1);
  long hz = sysconf(_SC_CLK_TCK);
  int64_t start_ns = int64_t(start_ticks) * (1000000000 / (hz > 0 ? hz : 100));
  // /proc's start time is CLOCK_BOOTTIME; the file's is CLOCK_MONOTONIC (equal but for
  // suspends): a second of slack.
  return start_ns <= m.h->ns0 + 1000000000;
}

void live_remove_if_closed(const char* live_path, int pid) {
  RecoverResult info;
  LiveMap m;
  if (map_live(live_path, &m, &info) && info.pid == pid && info.closed) unlink_live(live_path);
}

bool live_finish(const char* live_path, const char* reason, RecoverResult* out, int64_t cpu_ns,
                 int64_t cpu_wait_ns) {
  LiveMap m;
  if (!map_live(live_path, &m, out)) return false;
  const live::Header* h = m.h;
  if (out->closed) {
    unlink_live(live_path);
    return true;
  }
  // The trace file, as the process left it: whole frames, perhaps one more cut short.
  long fd = syscall(SYS_openat, AT_FDCWD, out->trace_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || syscall(SYS_fstat, fd, &st) != 0) {
    out->error = fd < 0 ? errno : EIO;
    out->why = "cannot open the trace file beside it";
    if (fd >= 0) syscall(SYS_close, fd);
    return false;
  }
  uint64_t size = uint64_t(st.st_size);
  uint64_t pending = __atomic_load_n(&h->pending_size, __ATOMIC_ACQUIRE);
  bool pending_in = pending && size == pending;
  if (pending && !pending_in && size > h->pending_from) {
    syscall(SYS_ftruncate, fd, long(h->pending_from));  // a frame cut off as it was written
    size = h->pending_from;
  }
  TraceFileId id;
  snprintf(id.path, sizeof id.path, "%s", out->trace_path);
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  syscall(SYS_close, fd);

  Chunks cs;
  collect(m, &cs);
  Strings strs;
  for (size_t i = 0; i < cs.n; i++)
    each_record(cs.at[i], 0, cs.at[i]->committed.load(std::memory_order_relaxed),
                [&](const RecHeader* r) {
                  if (r->kind == R_STR && r->size >= sizeof(StrRec) &&
                      sizeof(StrRec) + reinterpret_cast<const StrRec*>(r)->len < r->size)
                    strs.add(reinterpret_cast<const StrRec*>(r));
                });
  bool same_host = same_host_as(out->host);
  ClockMap clk = clock_of(h, cs, same_host);

  void* mem = sys_map(sizeof(Converter));
  if (!mem) {
    out->error = ENOMEM;
    out->why = "no memory";
    return false;
  }
  auto* conv = new (mem) Converter();
  conv->setup(ConverterSetup{h->pid, h->compact != 0, Compression(h->compression), int(h->level),
                             int(h->res_ns ? h->res_ns : 1)});
  conv->attach(id, size, m.base + h->head_offset, h->head_len);
  // The losses the file has told; with the pending frame in, it told all but the drops after it.
  conv->resume_counts(pending_in ? h->pending_events : h->file_events,
                      pending_in ? h->pending_lost : h->file_lost, pending_in ? 0 : h->file_unsaid,
                      pending_in ? h->pending_drops_said : h->file_drops_said, h->lost_errno);
  conv->set_dropped(out->dropped);
  Out scratch;
  int named_tid = -1;
  for (size_t i = 0; i < cs.n; i++) {
    const live::Chunk* c = cs.at[i];
    if (c->tid == 0) continue;  // the writer's own strings
    uint32_t from = pending_in ? c->pending : c->durable;
    uint32_t to = c->committed.load(std::memory_order_relaxed);
    if (from >= to) continue;
    if (c->tid != named_tid) {
      // The thread's name as its last chunk knew it.
      const char* name = c->name;
      for (size_t j = i + 1; j < cs.n && cs.at[j]->tid == c->tid; j++)
        if (cs.at[j]->name[0]) name = cs.at[j]->name;
      size_t len = strnlen(name, sizeof c->name);
      if (len) conv->thread_name(c->tid, name, len);
      named_tid = c->tid;
    }
    each_record(c, from, to, [&](const RecHeader* r) {
      if (r->kind == R_STR) return;
      if (const RecHeader* t = translate(r, h->version, scratch, strs))
        out->events += uint64_t(conv->record(t, c->tid, clk));
    });
  }
  bool ended = out->ended;
  const char* why = ended ? out->end_reason : reason ? reason : "killed";
  int64_t end_ns = ended ? h->end_ns : last_event_ns(cs, h->version, clk);
  conv->end(why, ended ? h->end_tid : h->pid, end_ns ? end_ns : h->ns0, cpu_ns, -1, -1,
            cpu_wait_ns);
  bool ok = conv->lost() == 0 || conv->file_events() > 0;
  scratch.release();
  conv->release();
  conv->~Converter();
  sys_unmap(mem, sizeof(Converter));
  if (!ok) {
    out->error = EIO;
    out->why = "the trace file could not be written";
    return false;
  }
  unlink_live(live_path);
  return true;
}

}  // namespace iot
