// Binary records in the per-thread buffers. The hot path only copies a fixed-size struct; the
// writer thread turns records into JSON text (encoder.cc), off the traced thread.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "intern.h"

namespace iot {

// Calls by their number in calls.def (stable across versions: the compact form stores it).
enum CallId : uint16_t {
#define CALL(num, id, cat, family) C_##id = num,
#include "calls.def"
#undef CALL
};

// The call table: name, category and family by number; numbers without a call have NULLs.
constexpr uint16_t kCallNumbers[] = {
#define CALL(num, id, cat, family) num,
#include "calls.def"
#undef CALL
};
constexpr int call_count() {
  int n = 0;
  for (uint16_t c : kCallNumbers) n = c + 1 > n ? c + 1 : n;
  return n;
}
constexpr int C_COUNT = call_count();  // one past the highest number
struct CallTable {
  const char* name[C_COUNT];
  const char* cat[C_COUNT];
  const char* family[C_COUNT];
  bool unique = true;  // no number given twice
  constexpr CallTable() : name(), cat(), family() {
#define CALL(num, id, cat_, family_) \
  unique = unique && !name[num];     \
  name[num] = #id;                   \
  cat[num] = #cat_;                  \
  family[num] = #family_;
#include "calls.def"
#undef CALL
  }
};
constexpr CallTable kCalls;
static_assert(kCalls.unique, "calls.def gives a number to two calls");

enum RecKind : uint16_t {
  R_IO = 1,    // an intercepted call: IoRec
  R_SPAN = 2,  // a Python/C API complete event: SpanRec + args text
  R_MARK = 3,  // metadata (M), instant (i) or counter (C) event: MarkRec + args text
  R_STR = 4,   // live file only: the string an address named (StrRec + its bytes); no event
};

struct RecHeader {
  uint32_t size;  // whole record, 8-byte aligned
  uint16_t kind;
  uint16_t call;  // CallId for R_IO
};

// Which optional args an IoRec carries (bit per field, in output order).
enum IoField : uint32_t {
  F_FHASH = 1u << 0,
  F_FHASH2 = 1u << 1,
  F_FD = 1u << 2,
  F_FD2 = 1u << 3,
  F_SIZE = 1u << 4,
  F_OFFSET = 1u << 5,
  F_RET = 1u << 6,
  F_BYTES = 1u << 7,
  F_ERRNO = 1u << 8,
  F_FLAGS = 1u << 9,
  F_MODE = 1u << 10,
};

// An I/O call's values, whole: what the encoders and decoders of the trace file take (a live
// record is turned into one when it is read, io_from_live).
struct IoRec {
  RecHeader h;
  uint32_t fields;
  int32_t err;
  int64_t start, dur;
  Str* file;
  int64_t fd, size, offset, ret;
  Str* file2;
  int64_t fd2, bytes, flags, mode;
};

// An I/O call as the hot path writes it into the live file (version 3): 56 bytes for what most
// calls set, so that a thread's first 4 KiB chunk holds an open, 64 reads and a close (a pool's
// thread then touches one new page of the live file, not two). fd, errno, the duration and the
// size in 32 bits; a duration or a size that does not fit sets F_WIDE and goes whole into the
// long part, which a record carries only when one of kLongFields is set (h.size says which).
constexpr uint32_t F_WIDE = 1u << 15;      // live records only: dur or size in wide_dur/wide_size
constexpr uint32_t kWide32 = 0xffffffffu;  // dur or size: the value is in the long part
struct IoLive {
  RecHeader h;
  uint16_t fields;
  uint16_t err;
  int32_t fd;
  int64_t start;
  Str* file;
  int64_t offset, ret;
  uint32_t dur, size;
  // kLongFields: in the record only when one of them is set.
  Str* file2;
  int64_t fd2, bytes, flags, mode;
  int64_t wide_dur, wide_size;

  void init(CallId id, int64_t t0, int64_t t1) {
    h.size = sizeof(IoLive);
    h.kind = R_IO;
    h.call = id;
    fields = 0;
    start = t0;
    uint64_t d = uint64_t(t1 - t0);
    if (__builtin_expect(d < kWide32, 1)) {
      dur = uint32_t(d);
    } else {
      dur = kWide32;
      wide_dur = int64_t(d);
      fields |= F_WIDE;
    }
  }
  void set_file(Str* f) {
    if (f) {
      file = f;
      fields |= F_FHASH;
    }
  }
  void set_file2(Str* f) {
    if (f) {
      file2 = f;
      fields |= F_FHASH2;
    }
  }
  void set_fd(int v) {
    fd = v;
    fields |= F_FD;
  }
  void set_fd2(int64_t v) {
    fd2 = v;
    fields |= F_FD2;
  }
  void set_size(int64_t v) {
    if (__builtin_expect(uint64_t(v) < kWide32, 1)) {
      size = uint32_t(v);
    } else {
      size = kWide32;
      wide_size = v;
      fields |= F_WIDE;
    }
    fields |= F_SIZE;
  }
  void set_offset(int64_t v) {
    offset = v;
    fields |= F_OFFSET;
  }  // an explicit argument
  void set_pos(int64_t v) {
    if (v >= 0) set_offset(v);
  }  // a tracked position, -1: unknown
  void set_ret(int64_t v) {
    ret = v;
    fields |= F_RET;
  }
  void set_bytes(int64_t v) {
    bytes = v;
    fields |= F_BYTES;
  }
  void set_errno(int e) {
    err = uint16_t(e > 0 && e < 0xffff ? e : 0xffff);
    fields |= F_ERRNO;
  }
  void set_flags(int64_t v) {
    flags = v;
    fields |= F_FLAGS;
  }
  void set_mode(int64_t v) {
    mode = v;
    fields |= F_MODE;
  }
  // The bytes to commit: the short form unless a field past it is set.
  uint32_t packed_size() const;
};
constexpr uint32_t kLongFields = F_FHASH2 | F_FD2 | F_BYTES | F_FLAGS | F_MODE | F_WIDE;
constexpr uint32_t kShortIoLive = offsetof(IoLive, file2);
static_assert(kShortIoLive == 56 && sizeof(IoLive) == 112,
              "IoLive's layout is part of the live file");
inline uint32_t IoLive::packed_size() const {
  return (fields & kLongFields) ? uint32_t(sizeof(IoLive)) : kShortIoLive;
}
// Is a record of `size` bytes big enough for the fields it says it carries?
inline bool io_live_whole(const IoLive* r, uint32_t size) {
  return size >= kShortIoLive && (size >= sizeof(IoLive) || !(r->fields & kLongFields));
}
// A live record's values, whole (the caller has checked it with io_live_whole).
inline void io_from_live(const IoLive& l, IoRec* r) {
  const bool wide = l.fields & F_WIDE, long_form = l.fields & kLongFields;
  r->h = l.h;
  r->h.size = sizeof(IoRec);
  r->fields = l.fields & ~F_WIDE;
  r->err = l.err;
  r->start = l.start;
  r->dur = wide && l.dur == kWide32 ? l.wide_dur : int64_t(l.dur);
  r->file = l.file;
  r->fd = l.fd;
  r->size = wide && l.size == kWide32 ? l.wide_size : int64_t(l.size);
  r->offset = l.offset;
  r->ret = l.ret;
  r->file2 = long_form ? l.file2 : nullptr;
  r->fd2 = long_form ? l.fd2 : 0;
  r->bytes = long_form ? l.bytes : 0;
  r->flags = long_form ? l.flags : 0;
  r->mode = long_form ? l.mode : 0;
}
// The other way (an older live file's records, recover.cc): whole values into the live layout.
inline void io_to_live(const IoRec& r, IoLive* l) {
  l->init(CallId(r.h.call), 0, r.dur);
  l->start = r.start;
  l->fields |= uint16_t(r.fields & ~F_SIZE);
  if (r.fields & F_SIZE) l->set_size(r.size);
  l->err = uint16_t(r.err > 0 && r.err < 0xffff ? r.err : 0xffff);
  l->fd = int32_t(r.fd);
  l->file = r.file;
  l->offset = r.offset;
  l->ret = r.ret;
  l->file2 = r.file2;
  l->fd2 = r.fd2;
  l->bytes = r.bytes;
  l->flags = r.flags;
  l->mode = r.mode;
  l->h.size = l->packed_size();
}

struct SpanRec {
  RecHeader h;
  uint32_t args_len;
  int32_t tid;  // 0: the recording thread; else a virtual thread (an asyncio task)
  int64_t start, dur;
  Str* name;
  Str* cat;
  // followed by args_len bytes of a JSON object body
};

struct MarkRec {
  RecHeader h;
  uint32_t args_len;
  char ph;  // 'M', 'i' or 'C'
  char pad[3];
  int32_t tid;  // 0: the recording thread
  int32_t pad2;
  int64_t ts;  // ignored for 'M'
  Str* name;
  Str* cat;  // may be NULL
  // followed by args_len bytes of a JSON object body
};

// What a record's string pointer (file, name, cat) held: written once per string and live file
// (Str::live_gen) after the record that first names it, so that a live file read by another
// process can name every file and event of its records (live.h).
struct StrRec {
  RecHeader h;
  uint32_t len;
  uint32_t pad;
  uint64_t addr;  // the Str's address in the process
  uint64_t hash;  // its fhash
  // followed by len bytes and a NUL
};

inline uint32_t rec_align(uint32_t n) { return (n + 7u) & ~7u; }

}  // namespace iot
