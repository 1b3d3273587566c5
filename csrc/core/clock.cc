#include "clock.h"

#include <fcntl.h>
#include <string.h>
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

bool kernel_uses_tsc() {
  char buf[32] = "";
  long fd = syscall(SYS_openat, AT_FDCWD,
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                    O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}
}  // namespace

void clock_init() {
  g_tsc = kernel_uses_tsc();
  if (g_tsc) read_pair(&g_anchor_tick, &g_anchor_ns);
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
