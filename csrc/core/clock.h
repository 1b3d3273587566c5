// The clock of every event. On the hot path: the TSC (rdtsc, ~8 ns) where the kernel itself
// keeps time with it (clocksource "tsc": invariant and synchronised across CPUs), else
// CLOCK_MONOTONIC through the vDSO (~24 ns). Records hold these raw "ticks"; the writer maps
// them to CLOCK_MONOTONIC nanoseconds (clock.cc), so every event of every process still reads
// on one clock.
#pragma once
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>
#include <x86intrin.h>

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

extern bool g_tsc;
__attribute__((always_inline)) inline int64_t now_ticks() {
  return g_tsc ? int64_t(__rdtsc()) : now_ns();
}

// ticks → CLOCK_MONOTONIC ns for the events of one drain: the line through the calibration
// point taken at start and the one taken now (clock.cc says why).
struct ClockMap {
  int64_t tick0 = 0, ns0 = 0;
  double ns_per_tick = 1.0;
  int64_t ns(int64_t tick) const { return ns0 + int64_t(double(tick - tick0) * ns_per_tick); }
  int64_t dur(int64_t ticks) const { return int64_t(double(ticks) * ns_per_tick + 0.5); }
};

void clock_init();           // once per process, at start
ClockMap clock_calibrate();  // writer only: the map for what is drained now

// CPU time (user + system, every thread) the process used since cpu_mark_start(): at the start
// of each image (the kernel's count goes on across exec) and 0 again in a fork child (the kernel
// starts the child's at 0). -1 where getrusage fails.
// User and system time of a rusage, in ns (getrusage's, or wait4's for a child).
inline int64_t rusage_cpu_ns(const struct rusage& u) {
  return (int64_t(u.ru_utime.tv_sec) + u.ru_stime.tv_sec) * 1000000000 +
         (int64_t(u.ru_utime.tv_usec) + u.ru_stime.tv_usec) * 1000;
}
void cpu_mark_start(bool forked = false);
int64_t cpu_since_start_ns();
// The time the process's main thread spent runnable but waiting for a CPU since
// cpu_mark_start() (the run queue's delay: /proc/self/schedstat, Linux's sched_info): a worker
// on a host with more runnable tasks than CPUs waits there. -1 where the kernel keeps none.
// Read at the start of an image and at the end (a fork child's count starts at 0).
int64_t cpu_wait_since_start_ns();
// The same figure of another process (its whole life; a zombie's too, until it is reaped).
int64_t cpu_wait_of_ns(int pid);
// The calling thread's CPU time (a syscall: for the few calls that measure it, not per event).
inline int64_t thread_cpu_ns() {
  struct timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
// CPU time spent inside MPI calls (their library's work and its polling while it waits), summed
// over threads: what a rank computed itself is cpu_since_start_ns() less it. -1: no MPI call.
void add_mpi_cpu_ns(int64_t ns);
int64_t mpi_cpu_ns();
// The host's CPU pressure (Linux PSI, /proc/pressure/cpu "some": time in which at least one
// task waited for a CPU) over an MPI rank's run: read at MPI_Init's end and MPI_Finalize's
// start (or the end, without one). Read twice per rank, never in other processes.
void host_cpu_wait_start();
void host_cpu_wait_stop();
int64_t host_cpu_wait_of_run_us();  // -1: no run, or no PSI
}  // namespace iot
