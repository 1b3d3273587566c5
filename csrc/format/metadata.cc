#include "metadata.h"

#include <string.h>

#include "iotrace.h"  // IOTRACE_FORMAT_VERSION

namespace iot {
namespace {

void kv_str(Out& o, const char* k, const char* v) {
  o.ch('"');
  o.put(k);
  o.put("\":");
  o.json_str(v, strlen(v));
}

// `{"ph":"M","name":"NAME","pid":P,"tid":T,"args":{`
void open_meta(Out& o, const char* name, int64_t pid, int64_t tid) {
  o.put("{\"ph\":\"M\",\"name\":\"");
  o.put(name);
  o.put("\",\"pid\":");
  o.i64(pid);
  o.put(",\"tid\":");
  o.i64(tid);
  o.put(",\"args\":{");
}

}  // namespace

void meta_process(Out& o, const ProcessMeta& p) {
  open_meta(o, "iotrace_process", p.pid, p.pid);
  o.put("\"version\":");
  o.i64(IOTRACE_FORMAT_VERSION);
  o.ch(',');
  kv_str(o, "hostname", p.host);
  o.put(",\"pid\":");
  o.i64(p.pid);
  o.put(",\"ppid\":");
  o.i64(p.ppid);
  o.ch(',');
  kv_str(o, "exe", p.exe);
  o.put(",\"cmdline\":[");
  const char* sep = "";
  for (size_t s = 0; s < p.cmdline_len;) {
    size_t e = s;
    while (e < p.cmdline_len && p.cmdline[e]) e++;
    o.put(sep);
    o.json_str(p.cmdline + s, e - s);
    sep = ",";
    s = e + 1;
  }
  o.put("],");
  kv_str(o, "cwd", p.cwd);
  o.put(",\"wall_ns\":");
  o.i64(p.wall_ns);
  o.put(",\"mono_ns\":");
  o.i64(p.mono_ns);
  o.put(",\"resolution_ns\":");
  o.i64(p.resolution_ns);
  o.ch(',');
  kv_str(o, "role", p.role);
  if (p.parent_pid > 0) {
    o.put(",\"parent_pid\":");
    o.i64(p.parent_pid);
  }
  if (p.worker_id >= 0) {
    o.put(",\"worker_id\":");
    o.i64(p.worker_id);
  }
  if (p.mpi_rank >= 0) {
    o.ch(',');
    meta_mpi_args(o, p.mpi_rank, p.mpi_size);
  }
  if (p.dist_rank >= 0) {
    o.ch(',');
    meta_mpi_args(o, p.dist_rank, p.dist_size, "dist");
  }
  o.put(",\"ranks\":{");
  sep = "";
  for (int i = 0; i + 1 < 2 * p.n_rank_vars; i += 2) {
    o.put(sep);
    kv_str(o, p.rank_vars[i], p.rank_vars[i + 1]);
    sep = ",";
  }
  o.put("},");
  kv_str(o, "compression", p.compression);
  o.ch(',');
  kv_str(o, "form", p.compact ? "compact" : "json");
  o.put("}},\n");
  open_meta(o, "process_name", p.pid, p.pid);
  kv_str(o, "name", p.name);
  o.put("}},\n");
}

void meta_mpi_args(Out& o, int64_t rank, int64_t size, const char* prefix) {
  o.ch('"');
  o.put(prefix);
  o.put("_rank\":");
  o.i64(rank);
  o.put(",\"");
  o.put(prefix);
  o.put("_size\":");
  o.i64(size);
}

void meta_clock_args(Out& o, const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns) {
  kv_str(o, "at", at);
  o.put(",\"mono_ns\":");
  o.i64(mono_ns);
  o.put(",\"offset_ns\":");
  o.i64(offset_ns);
  o.put(",\"rtt_ns\":");
  o.i64(rtt_ns);
}

void meta_process_info_args(Out& o, const char* role, int64_t parent_pid, int64_t worker_id) {
  const char* sep = "";
  if (role) {
    kv_str(o, "role", role);
    sep = ",";
  }
  if (parent_pid > 0) {
    o.put(sep);
    o.put("\"parent_pid\":");
    o.i64(parent_pid);
    sep = ",";
  }
  if (worker_id >= 0) {
    o.put(sep);
    o.put("\"worker_id\":");
    o.i64(worker_id);
  }
}

void meta_thread_name_args(Out& o, const char* name, size_t len) {
  o.put("\"name\":");
  o.json_str(name, len);
}

void meta_thread_name(Out& o, int64_t pid, int64_t tid, const char* name, size_t len) {
  open_meta(o, "thread_name", pid, tid);
  o.put("\"name\":");
  o.json_str(name, len);
  o.put("}},\n");
}

void meta_fh(Out& o, int64_t pid, int64_t tid, const char* path, size_t len, uint64_t hash) {
  open_meta(o, "FH", pid, tid);
  o.put("\"name\":");
  o.json_str(path, len);
  o.put(",\"value\":\"");
  o.u64hex(hash);
  o.put("\"}},\n");
}

void meta_lost(Out& o, int64_t pid, uint64_t events, const char* reason) {
  open_meta(o, "iotrace_lost", pid, pid);
  o.put("\"events\":");
  o.i64(int64_t(events));
  o.ch(',');
  kv_str(o, "reason", reason);
  o.put("}},\n");
}

void meta_end(Out& o, int64_t pid, int64_t tid, int64_t mono_ns, uint64_t events,
              const char* reason, uint64_t lost, uint64_t dropped, int64_t cpu_ns,
              int64_t mpi_cpu_ns, int64_t host_cpu_wait_us, int64_t cpu_wait_ns) {
  open_meta(o, "iotrace_end", pid, tid);
  o.put("\"mono_ns\":");  // the process's end on its clock: readers' wall time, start to end
  o.i64(mono_ns);
  o.put(",\"events\":");
  o.i64(int64_t(events));
  o.ch(',');
  kv_str(o, "reason", reason);
  if (lost) {
    o.put(",\"lost\":");
    o.i64(int64_t(lost));
  }
  if (dropped) {
    o.put(",\"dropped\":");
    o.i64(int64_t(dropped));
  }
  if (cpu_ns >= 0) {  // against the wall time: how much of it the process had a CPU
    o.put(",\"cpu_ns\":");
    o.i64(cpu_ns);
  }
  if (cpu_wait_ns >= 0) {  // runnable, its main thread waited this long for a CPU
    o.put(",\"cpu_wait_ns\":");
    o.i64(cpu_wait_ns);
  }
  if (mpi_cpu_ns >= 0) {  // of cpu_ns, inside MPI calls: the rest is the rank's own
    o.put(",\"mpi_cpu_ns\":");
    o.i64(mpi_cpu_ns);
  }
  if (host_cpu_wait_us >= 0) {  // an MPI rank: how much of its run its host was short of CPUs
    o.put(",\"host_cpu_wait_us\":");
    o.i64(host_cpu_wait_us);
  }
  o.put("}}]\n");
}

}  // namespace iot
