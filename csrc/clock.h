// The one clock of every event: CLOCK_MONOTONIC through the vDSO (no syscall), in ns.
#pragma once
#include <stdint.h>
#include <time.h>

namespace iot {
inline int64_t now_ns() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
inline int64_t wall_ns() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
}  // namespace iot
