// The metadata events (`ph` "M") of the trace format, each written here and nowhere else
// (docs/trace-format.md, "Metadata events"). Each appends whole lines ending in ",\n" (the end
// marker in "]\n"); the callers decide where the lines go.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "encoder.h"

namespace iot {

// What the iotrace_process line says of a process.
struct ProcessMeta {
  int64_t pid = 0, ppid = 0, parent_pid = 0, worker_id = -1;
  int64_t mpi_rank = -1, mpi_size = -1;    // in MPI_COMM_WORLD, once MPI_Init returned
  int64_t dist_rank = -1, dist_size = -1;  // torch.distributed's, once init_process_group returned
  const char* host = "";
  const char* exe = "";
  const char* name = "";     // process_name
  const char* cmdline = "";  // /proc/self/cmdline: arguments, NUL-separated
  size_t cmdline_len = 0;
  const char* cwd = "";  // the working folder when the file opened: Python imports from it
  int64_t wall_ns = 0, mono_ns = 0, resolution_ns = 1;
  const char* role = "main";
  const char* const* rank_vars = nullptr;  // names and values, in pairs
  int n_rank_vars = 0;
  const char* compression = "zstd";
  bool compact = true;
};

// iotrace_process, then process_name.
void meta_process(Out& o, const ProcessMeta& p);
// The args body (the object's inside, as records carry it) of iotrace_process_info: the fields that
// changed (NULL / <= 0 / < 0: not).
void meta_process_info_args(Out& o, const char* role, int64_t parent_pid, int64_t worker_id);
// ... and of the one that says the process's MPI rank and world size (`mpi_rank`, `mpi_size`),
// or those torch.distributed gave (`dist_rank`, `dist_size`: `prefix` "dist").
void meta_mpi_args(Out& o, int64_t rank, int64_t size, const char* prefix = "mpi");
// ... and of iotrace_clock: a measurement of the process's job clock against rank 0's.
void meta_clock_args(Out& o, const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns);
// thread_name, whole line; and its args body (for records that carry only the args).
void meta_thread_name(Out& o, int64_t pid, int64_t tid, const char* name, size_t len);
void meta_thread_name_args(Out& o, const char* name, size_t len);
// FH: a file's path and the hash events name it by.
void meta_fh(Out& o, int64_t pid, int64_t tid, const char* path, size_t len, uint64_t hash);
// iotrace_lost: events that are not in the file, and why.
void meta_lost(Out& o, int64_t pid, uint64_t events, const char* reason);
// iotrace_end: the last line of a cleanly closed file, with the closing "]" (a CPU figure < 0:
// left out).
void meta_end(Out& o, int64_t pid, int64_t tid, int64_t mono_ns, uint64_t events,
              const char* reason, uint64_t lost, uint64_t dropped, int64_t cpu_ns = -1,
              int64_t mpi_cpu_ns = -1, int64_t host_cpu_wait_us = -1, int64_t cpu_wait_ns = -1);

}  // namespace iot
