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

// The fields most calls set come first: a record that sets none of kLongFields is committed
// without them (kShortIoRec bytes, h.size says which), 72 bytes instead of 112, so a thread's
// chunks, the live file's pages and what the writer reads shrink by a third.
struct IoRec {
  RecHeader h;
  uint32_t fields;
  int32_t err;
  int64_t start, dur;
  Str* file;
  int64_t fd, size, offset, ret;
  // kLongFields: in the record only when one of them is set.
  Str* file2;
  int64_t fd2, bytes, flags, mode;

  void init(CallId id, int64_t t0, int64_t t1) {
    h.size = sizeof(IoRec);
    h.kind = R_IO;
    h.call = id;
    fields = 0;
    start = t0;
    dur = t1 - t0;
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
  void set_fd(int64_t v) {
    fd = v;
    fields |= F_FD;
  }
  void set_fd2(int64_t v) {
    fd2 = v;
    fields |= F_FD2;
  }
  void set_size(int64_t v) {
    size = v;
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
    err = e;
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
constexpr uint32_t kLongFields = F_FHASH2 | F_FD2 | F_BYTES | F_FLAGS | F_MODE;
constexpr uint32_t kShortIoRec = offsetof(IoRec, file2);
static_assert(kShortIoRec == 72 && sizeof(IoRec) == 112, "IoRec's layout is part of the live file");
inline uint32_t IoRec::packed_size() const {
  return (fields & kLongFields) ? uint32_t(sizeof(IoRec)) : kShortIoRec;
}
// Is a record of `size` bytes big enough for the fields it says it carries?
inline bool io_rec_whole(const IoRec* r, uint32_t size) {
  return size >= kShortIoRec && (size >= sizeof(IoRec) || !(r->fields & kLongFields));
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
