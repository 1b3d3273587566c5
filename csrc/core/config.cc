#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

Config g_config;

static bool env_bool(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  return !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "off") == 0 ||
           strcasecmp(v, "no") == 0);
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

void config_from_env(Config& c) {
  c.enable = env_bool("IOTRACE_ENABLE", true);
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
      setenv("IOTRACE_DIR", c.dir, 1);
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
  c.signals = env_bool("IOTRACE_SIGNALS", true);
}

}  // namespace iot
