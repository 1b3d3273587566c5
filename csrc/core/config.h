// Configuration, resolved once at start from IOTRACE_* variables into one struct. The hot
// path reads only flags of it. Every variable is documented in docs/configuration.md.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace iot {

enum class Compression { zstd, gzip, none };

struct Config {
  bool enable = true;    // IOTRACE_ENABLE
  char dir[1024] = ".";  // IOTRACE_DIR
  char name[256] = "";   // IOTRACE_NAME (default: executable basename)
  // IOTRACE_INCLUDE / IOTRACE_EXCLUDE: ':'-separated path prefixes.
  static constexpr int kMaxPrefixes = 64;
  char* include[kMaxPrefixes] = {};
  int n_include = 0;
  char* exclude[kMaxPrefixes] = {};
  int n_exclude = 0;
  bool trace_libs = false;  // IOTRACE_TRACE_LIBS: also shared libraries and .pyc files
  // IOTRACE_FORMAT: compact (default with zstd) writes columns instead of JSON text in each
  // zstd frame (compact.h): 3-10x smaller and a third of the writer's CPU, rendered back to
  // the same JSON lines by `iotrace cat` and the readers. json writes the lines themselves,
  // the default with IOTRACE_COMPRESSION=gzip|none (compact frames are zstd's).
  bool compact = true;
  Compression compression = Compression::zstd;  // IOTRACE_COMPRESSION (compact: always zstd)
  int level = 1;  // IOTRACE_COMPRESSION_LEVEL (zstd 1: smallest and fastest on traces)
  size_t buffer_size = 1 << 20;    // IOTRACE_BUFFER_SIZE: bytes per thread buffer
  size_t max_buffered = 64 << 20;  // IOTRACE_MAX_BUFFERED: bytes in flight before writers wait
  int flush_ms = 1000;             // IOTRACE_FLUSH_INTERVAL_MS
  // IOTRACE_RESOLUTION: ns per unit of the written times (1, 10, 100 or 1000). Coarser times
  // compress better: the trace's bytes are mostly the digits zstd cannot predict.
  int res_ns = 1;
  bool posix = true;  // IOTRACE_POSIX: record POSIX calls
  bool stdio = true;  // IOTRACE_STDIO: record stdio calls
  bool mpi = true;    // IOTRACE_MPI: record MPI's file calls, start, end, waits and collectives
  bool hdf5 = true;   // IOTRACE_HDF5: record HDF5's file, dataset, group and attribute calls
  // IOTRACE_CLOCK_SKEW_NS (for tests): added to the wall clock this process records (its
  // iotrace_process wall_ns, so its job clock), as if its host's clock were that far off.
  int64_t clock_skew_ns = 0;
  // IOTRACE_INHERIT: an exec'd or spawned child whose environment lacks LD_PRELOAD or the
  // IOTRACE_* settings of this process gets them back (interpose/process.cc), so `env -i` and
  // subprocess's env={} children stay traced. 0: the child runs with what it was given.
  bool inherit = true;

  // What the exec wrappers put back, taken at start (the program may change its environ
  // later; exec may come after vfork, when the heap is the parent's: so never malloc'd).
  static constexpr int kMaxInherited = 64;
  const char* inherited[kMaxInherited] = {};  // "IOTRACE_X=v" but ROLE, PARENT_PID
  int n_inherited = 0;
  const char* dir_entry = nullptr;  // "IOTRACE_DIR=<absolute dir>", one of `inherited`
  const char* dir_given = nullptr;  // "IOTRACE_DIR=<relative value>" it started with, if any
  const char* preload = nullptr;    // "LD_PRELOAD=<absolute path of this library>"
  const char* lib_base = nullptr;   // its file name, inside `preload`
};

// Parse the environment into `c` (defaults for unset variables).
void config_from_env(Config& c);
// Is a boolean setting's value one of the words that turn it off (0, false, off, no)? Also
// for the exec wrappers, which read a child's IOTRACE_ENABLE as the child will.
bool config_false(const char* value);
// Do environment entries `e` and `n` ("NAME=value") set the same variable?
bool same_var(const char* e, const char* n);
// Replace the include or exclude list by a ':'-separated string.
void config_set_prefixes(Config& c, bool include, const char* value);

extern Config g_config;

}  // namespace iot
