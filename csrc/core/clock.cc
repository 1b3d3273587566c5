#include "clock.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

bool g_tsc = false;

namespace {
int64_t g_anchor_tick = 0, g_anchor_ns = 0;  // the calibration point at start
double g_slope = 1.0;
bool g_have_slope = false;
constexpr int64_t kMinBaselineNs = 50000;

// A simultaneous (ticks, ns) pair: the TSC read on both sides of the clock, the closest of a
// few tries (a preemption between the reads would spoil one).
void read_pair(int64_t* tick, int64_t* ns) {
  int64_t best = INT64_MAX;
  for (int i = 0; i < 5; i++) {
    int64_t a = int64_t(__rdtsc());
    int64_t n = now_ns();
    int64_t b = int64_t(__rdtsc());
    if (b - a < best) {
      best = b - a;
      *tick = a + (b - a) / 2;
      *ns = n;
    }
  }
}

// A small file of /sys or /proc, read whole into buf and ended with a NUL: its length, or -1.
long read_small(const char* path, char* buf, size_t size) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long n = syscall(SYS_read, fd, buf, size - 1);
  syscall(SYS_close, fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

// The decimal number at t, -1 when none starts there.
int64_t decimal_at(const char* t) {
  if (!t || *t < '0' || *t > '9') return -1;
  int64_t v = 0;
  for (; *t >= '0' && *t <= '9'; t++) v = v * 10 + (*t - '0');
  return v;
}

bool kernel_uses_tsc() {
  char buf[32];
  long n = read_small("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf,
                      sizeof buf);
  return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}
}  // namespace

void clock_init() {
  g_tsc = kernel_uses_tsc();
  if (g_tsc) read_pair(&g_anchor_tick, &g_anchor_ns);
}

namespace {
int64_t g_cpu_base_ns = 0;
int64_t g_cpu_wait_base_ns = 0;
int64_t g_host_wait_base_us = -1, g_host_wait_us = -1;
std::atomic<int64_t> g_mpi_cpu_ns{-1};

int64_t process_cpu_ns() {
  struct rusage u;
  if (syscall(SYS_getrusage, RUSAGE_SELF, &u) != 0) return -1;
  return rusage_cpu_ns(u);
}

// A main thread's run-queue delay (ns): /proc/<pid>/schedstat is "<on cpu> <waited> <slices>".
int64_t run_delay_ns(const char* path = "/proc/self/schedstat") {
  char buf[96];
  if (read_small(path, buf, sizeof buf) <= 0) return -1;
  const char* t = strchr(buf, ' ');
  return decimal_at(t ? t + 1 : nullptr);
}

// The "some" line's total= (µs), -1 where the kernel has no PSI.
int64_t host_cpu_wait_us() {
  char buf[128];
  if (read_small("/proc/pressure/cpu", buf, sizeof buf) <= 0) return -1;
  if (char* nl = strchr(buf, '\n')) *nl = 0;  // the first line: "some avg10=... total=N"
  const char* t = strncmp(buf, "some ", 5) == 0 ? strstr(buf, "total=") : nullptr;
  return decimal_at(t ? t + 6 : nullptr);
}
}  // namespace

void cpu_mark_start(bool forked) {
  g_cpu_base_ns = forked ? 0 : process_cpu_ns();
  g_cpu_wait_base_ns = forked ? 0 : run_delay_ns();  // (fork zeroes the child's sched_info)
  g_host_wait_base_us = g_host_wait_us = -1;         // a fork child is no rank of its own
  g_mpi_cpu_ns.store(-1, std::memory_order_relaxed);
}

void add_mpi_cpu_ns(int64_t ns) {
  int64_t v = g_mpi_cpu_ns.load(std::memory_order_relaxed);
  while (!g_mpi_cpu_ns.compare_exchange_weak(v, (v < 0 ? 0 : v) + (ns > 0 ? ns : 0),
                                             std::memory_order_relaxed)) {
  }
}

int64_t mpi_cpu_ns() { return g_mpi_cpu_ns.load(std::memory_order_relaxed); }

int64_t cpu_since_start_ns() {
  int64_t now = process_cpu_ns();
  return now < 0 || g_cpu_base_ns < 0 ? -1 : now > g_cpu_base_ns ? now - g_cpu_base_ns : 0;
}

int64_t cpu_wait_since_start_ns() {
  int64_t now = run_delay_ns();
  if (now < 0 || g_cpu_wait_base_ns < 0) return -1;
  return now > g_cpu_wait_base_ns ? now - g_cpu_wait_base_ns : 0;
}

int64_t cpu_wait_of_ns(int pid) {
  char path[48];
  snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
  return run_delay_ns(path);
}

void host_cpu_wait_start() {
  g_host_wait_base_us = host_cpu_wait_us();
  g_host_wait_us = -1;
}

void host_cpu_wait_stop() {
  if (g_host_wait_base_us < 0) return;
  int64_t now = host_cpu_wait_us();
  g_host_wait_us = now < g_host_wait_base_us ? -1 : now - g_host_wait_base_us;
  g_host_wait_base_us = -1;
}

int64_t host_cpu_wait_of_run_us() {
  host_cpu_wait_stop();
  return g_host_wait_us;
}

ClockMap clock_calibrate() {
  ClockMap m;
  if (!g_tsc) return m;  // ticks are ns already
  int64_t tick, ns;
  read_pair(&tick, &ns);
  // The slope of the chord from the start anchor to now: its error is the pair jitter (~10 ns)
  // over a baseline that only grows, so conversions made at different drains agree to ~10 ns
  // (spans that straddle a drain stay nested) and each drain's events, near the chord's end,
  // follow CLOCK_MONOTONIC even if NTP slews it. A process that drains within 50 µs of its
  // start (a short one, at exit) waits for that baseline, once.
  while (!g_have_slope && ns - g_anchor_ns < kMinBaselineNs) read_pair(&tick, &ns);
  if (ns - g_anchor_ns >= kMinBaselineNs && tick > g_anchor_tick) {
    g_slope = double(ns - g_anchor_ns) / double(tick - g_anchor_tick);
    g_have_slope = true;
  }
  m.tick0 = g_anchor_tick;
  m.ns0 = g_anchor_ns;
  m.ns_per_tick = g_slope;
  return m;
}

}  // namespace iot
