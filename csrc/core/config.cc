#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sysmem.h"

extern char** environ;

namespace iot {

Config g_config;

bool config_false(const char* v) {
  return strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "off") == 0 ||
         strcasecmp(v, "no") == 0;
}

static bool env_bool(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  return !config_false(v);
}

static long env_long(const char* name, long dflt, long lo, long hi) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  char* end;
  long x = strtol(v, &end, 10);
  if (*end == 'k' || *end == 'K')
    x <<= 10;
  else if (*end == 'm' || *end == 'M')
    x <<= 20;
  else if (*end == 'g' || *end == 'G')
    x <<= 30;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return x;
}

// ns per unit for a resolution name ("ns", "10ns", "100ns", "us"), or 0 if unknown.
static int parse_resolution(const char* s) {
  if (!s) return 0;
  static const struct {
    const char* name;
    int ns;
  } kNames[] = {{"ns", 1}, {"1ns", 1}, {"10ns", 10}, {"100ns", 100}, {"us", 1000}, {"1us", 1000}};
  for (const auto& n : kNames)
    if (strcmp(s, n.name) == 0) return n.ns;
  return 0;
}

void config_set_prefixes(Config& c, bool include, const char* value) {
  char** list = include ? c.include : c.exclude;
  int& n = include ? c.n_include : c.n_exclude;
  for (int i = 0; i < n; i++) free(list[i]);
  n = 0;
  if (!value) return;
  const char* p = value;
  while (*p && n < Config::kMaxPrefixes) {
    const char* e = strchr(p, ':');
    size_t len = e ? size_t(e - p) : strlen(p);
    while (len > 1 && p[len - 1] == '/') len--;  // "/data/" and "/data" mean the same
    if (len) list[n++] = strndup(p, len);
    if (!e) break;
    p = e + 1;
  }
}

// `a` then `b` as one string that lives as long as the process, off the heap (the exec wrappers
// read it in vfork children); NULL when out of memory.
static const char* keep(const char* a, const char* b = "") {
  size_t na = strlen(a), nb = strlen(b);
  auto* s = static_cast<char*>(arena_alloc(na + nb + 1));
  if (!s) return nullptr;
  memcpy(s, a, na);
  memcpy(s + na, b, nb + 1);
  return s;
}

bool same_var(const char* e, const char* n) {
  while (*e && *e == *n && *e != '=') e++, n++;
  return *e == '=' && *n == '=';
}

// What an exec'd child needs to be traced like this process, taken once at start: the
// IOTRACE_* variables it started with, IOTRACE_DIR as the absolute folder made above (from
// c.dir, not environ: bash's own setenv keeps it among its shell variables), the relative
// IOTRACE_DIR it was given (`given`: a child env that still has it gets the absolute one), and
// this library's path for LD_PRELOAD. ROLE, PARENT_PID and EXEC_LIVE describe this process
// only (an EXEC_LIVE kept here would tell every later image to remove a file long gone, not
// the live file of the image before it).
static void keep_for_children(Config& c, const char* given) {
  c.n_inherited = 0;
  c.dir_entry = c.dir_given = c.preload = c.lib_base = nullptr;
  if ((c.dir_entry = keep("IOTRACE_DIR=", c.dir))) c.inherited[c.n_inherited++] = c.dir_entry;
  if (given && c.dir[0] == '/' && c.dir_entry) c.dir_given = keep("IOTRACE_DIR=", given);
  for (char** e = environ; e && *e && c.n_inherited < Config::kMaxInherited; e++) {
    if (strncmp(*e, "IOTRACE_", 8) || !strchr(*e, '=') || same_var(*e, "IOTRACE_ROLE=") ||
        same_var(*e, "IOTRACE_PARENT_PID=") || same_var(*e, "IOTRACE_EXEC_LIVE="))
      continue;
    bool dup = false;  // IOTRACE_DIR, or a name seen before (getenv sees only the first)
    for (int i = 0; i < c.n_inherited && !dup; i++) dup = same_var(*e, c.inherited[i]);
    if (const char* k = dup ? nullptr : keep(*e)) c.inherited[c.n_inherited++] = k;
  }
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&config_from_env), &info) && info.dli_fname &&
      *info.dli_fname) {
    const char* lib = info.dli_fname;
    char cwd[4096], abs[4096 + 16];
    if (lib[0] != '/' && syscall(SYS_getcwd, cwd, sizeof cwd) > 0 &&
        snprintf(abs, sizeof abs, "%s/%s", cwd, lib) < int(sizeof abs))
      lib = abs;
    c.preload = keep("LD_PRELOAD=", lib);
    if (c.preload)
      c.lib_base = strrchr(c.preload, '/') ? strrchr(c.preload, '/') + 1 : c.preload + 11;
  }
}

void config_from_env(Config& c) {
  c.enable = env_bool("IOTRACE_ENABLE", true);
  const char* given = getenv("IOTRACE_DIR");
  if (given && given[0] == '/') given = nullptr;
  if (given) given = keep(given);  // setenv below may free it
  if (const char* d = getenv("IOTRACE_DIR"); d && *d) {
    strncpy(c.dir, d, sizeof c.dir - 1);
  }
  if (c.dir[0] != '/') {
    // Made absolute once, here, and passed on: a program that chdirs, and its exec'd
    // children, would otherwise scatter traces over every folder they run in.
    char cwd[sizeof c.dir], abs[sizeof c.dir];
    const char* rel = c.dir;
    while (rel[0] == '.' && rel[1] == '/') rel += 2;
    if (strcmp(rel, ".") == 0) rel = "";
    if (syscall(SYS_getcwd, cwd, sizeof cwd) > 0 &&
        snprintf(abs, sizeof abs, "%s%s%s", cwd, strcmp(cwd, "/") && *rel ? "/" : "", rel) <
            int(sizeof abs)) {
      memcpy(c.dir, abs, sizeof abs);
      // Not in a disabled process: its environment stays the one it was given (its children
      // are disabled too, and get the absolute folder with their other variables at exec).
      if (c.enable) setenv("IOTRACE_DIR", c.dir, 1);
    }
  }
  if (const char* n = getenv("IOTRACE_NAME"); n && *n) strncpy(c.name, n, sizeof c.name - 1);
  config_set_prefixes(c, true, getenv("IOTRACE_INCLUDE"));
  config_set_prefixes(c, false, getenv("IOTRACE_EXCLUDE"));
  c.trace_libs = env_bool("IOTRACE_TRACE_LIBS", false);
  if (const char* z = getenv("IOTRACE_COMPRESSION"); z && *z) {
    if (strcmp(z, "gzip") == 0 || strcmp(z, "gz") == 0)
      c.compression = Compression::gzip;
    else if (strcmp(z, "none") == 0)
      c.compression = Compression::none;
    else
      c.compression = Compression::zstd;
  }
  // The form follows the compression unless named: asking for gzip or no compression asks
  // for text that gunzip or cat alone turns into JSON.
  c.compact = c.compression == Compression::zstd;
  if (const char* f = getenv("IOTRACE_FORMAT"); f && *f) {
    if (strcmp(f, "compact") == 0)
      c.compact = true;
    else if (strcmp(f, "json") == 0)
      c.compact = false;
  }
  if (c.compact) c.compression = Compression::zstd;  // its frames are what make it readable
  c.level =
      int(env_long("IOTRACE_COMPRESSION_LEVEL", c.compression == Compression::gzip ? 6 : 1, 1, 19));
  c.buffer_size = size_t(env_long("IOTRACE_BUFFER_SIZE", 1 << 20, 64 << 10, 256 << 20));
  c.max_buffered = size_t(env_long("IOTRACE_MAX_BUFFERED", 64 << 20, 1 << 20, 1L << 34));
  c.flush_ms = int(env_long("IOTRACE_FLUSH_INTERVAL_MS", 1000, 10, 3600 * 1000));
  if (int r = parse_resolution(getenv("IOTRACE_RESOLUTION")); r) c.res_ns = r;
  c.posix = env_bool("IOTRACE_POSIX", true);
  c.stdio = env_bool("IOTRACE_STDIO", true);
  c.mpi = env_bool("IOTRACE_MPI", true);
  c.hdf5 = env_bool("IOTRACE_HDF5", true);
  if (const char* k = getenv("IOTRACE_CLOCK_SKEW_NS"); k && *k)
    c.clock_skew_ns = strtoll(k, nullptr, 10);
  c.inherit = env_bool("IOTRACE_INHERIT", true);
  keep_for_children(c, given);
}

}  // namespace iot
