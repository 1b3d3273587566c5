// Process lifecycle: start-up, the process metadata, fork, exec, exit and _exit. (A signal
// that ends the process runs no code of the tracer's: its records are in its live file.)
#pragma once
#include <stdint.h>

namespace iot {
// Start recording (idempotent). Returns false when tracing is disabled. `preloaded`: started by
// the LD_PRELOAD constructor (the interposer is live).
bool core_start(bool preloaded);
// Is the interposer live (this library preloaded and not disabled)?
extern bool g_interposing;
// iotrace_pause(): intercepted calls pass through unrecorded while set.
extern bool g_paused;
// Before exec replaces the image: write everything and close the file. If exec fails, the next
// flush opens a new file (-1 suffix): the closed one stays a complete JSON array.
void before_exec();
// exec returned: it failed, the process goes on in a new file.
void after_failed_exec();
// _exit/_Exit: flush and close; the process is about to vanish without atexit.
void before_exit_now(const char* reason);
// The last drain and the end of the trace, once per process, waiting `wait_ms` at most.
// Async-signal-safe; `reason` must stay valid (a literal or a static string).
void end_process(const char* reason, int64_t wait_ms);
void set_process_info(const char* role, int64_t parent_pid, int64_t worker_id);
void set_mpi_rank(int64_t rank, int64_t size);
void set_dist_rank(int64_t rank, int64_t size);  // torch.distributed's (capi.cc)
// The process's MPI rank and world size: kept for the files it opens next, and said now in an
// iotrace_process_info line (capi.cc).
void announce_mpi(int64_t rank, int64_t size);
// The base of this process's job clock: wall_ns - mono_ns of its iotrace_process line, the
// shift that puts its CLOCK_MONOTONIC times on wall time (readers add a measured offset).
int64_t job_clock_base();
// A measurement of this process's job clock against rank 0's (interpose/mpi_clock.cc), taken
// at `at` (a literal) when CLOCK_MONOTONIC read `mono_ns`: kept (a fork child says it again,
// on its own clock pair), and said now in an iotrace_clock line (capi.cc).
void set_clock(const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns);
void announce_clock(const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns);
}  // namespace iot
