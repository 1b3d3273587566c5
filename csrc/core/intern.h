// Interned strings: file paths and event names, each stored once per process in a lock-free
// table (lookups are plain loads, inserts a CAS) and recorded in events as a pointer. Nodes are
// never freed, so a pointer held by a record in flight stays valid.
#pragma once
#include <atomic>
#include <stdint.h>

struct iotrace_str {
  uint64_t hash;  // 64-bit FNV-1a of the bytes: the `fhash` of a path
  uint32_t len;
  bool traced;           // paths: passes the include/exclude filter
  uint32_t written_gen;  // writer-only: FH metadata written for this generation (file)
  uint32_t live_gen;     // an R_STR record of it is in the live file of this generation
  iotrace_str* next;     // bucket chain
  char str[];            // NUL-terminated
};

namespace iot {
using Str = iotrace_str;

inline uint64_t fnv1a(const char* s, uint32_t n) {
  uint64_t h = 14695981039346656037ull;
  for (uint32_t i = 0; i < n; i++) h = (h ^ uint8_t(s[i])) * 1099511628211ull;
  return h;
}

// Intern a name (no filtering).
Str* intern_name(const char* s, uint32_t len);
// Intern an absolute, normalised path and decide once whether it is traced.
Str* intern_abs_path(const char* s, uint32_t len);
// Resolve `path` against `dirfd` (AT_FDCWD: the cached cwd), normalise, intern. NULL path → NULL.
Str* intern_path_at(int dirfd, const char* path);
inline Str* intern_path(const char* path) { return intern_path_at(-100 /*AT_FDCWD*/, path); }

// The cached working directory, refreshed by chdir/fchdir wrappers.
void cwd_refresh();
// Re-evaluate the include/exclude decision of every interned path (after a config change).
void intern_refilter();
// Does an event that names no file pass the filter? (only when no include list is set)
extern bool g_trace_unnamed;
}  // namespace iot
