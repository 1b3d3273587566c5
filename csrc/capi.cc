// The C API of iotrace.h, on the same core as the interposer.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "clock.h"
#include "compact.h"
#include "config.h"
#include "intern.h"
#include "iotrace.h"
#include "lifecycle.h"
#include "metadata.h"
#include "record.h"
#include "writer.h"

#define IOT_API extern "C" __attribute__((visibility("default")))

using namespace iot;

namespace {
// One record with a payload of `args_len` bytes after the fixed part.
template <class Rec>
Rec* reserve_rec(uint32_t args_len, uint32_t* size, ThreadState** ts) {
  *size = rec_align(uint32_t(sizeof(Rec)) + args_len);
  return reinterpret_cast<Rec*>(reserve(*size, ts));
}

void mark_on(int32_t tid, char ph, iotrace_str_t name, iotrace_str_t cat, int64_t ts_ticks,
             const char* args, uint32_t len);
void mark(char ph, iotrace_str_t name, iotrace_str_t cat, int64_t ts_ticks, const char* args,
          uint32_t len) {
  mark_on(0, ph, name, cat, ts_ticks, args, len);
}
void mark_on(int32_t tid, char ph, iotrace_str_t name, iotrace_str_t cat, int64_t ts_ticks,
             const char* args, uint32_t len) {
  if (!g_recording.load(std::memory_order_relaxed) || !name) return;
  if (!args) len = 0;
  Busy busy;  // between reserve and commit a signal handler's calls are recorded aside
  uint32_t size;
  ThreadState* ts;
  MarkRec* r = reserve_rec<MarkRec>(len, &size, &ts);
  if (!r) return;
  r->h = RecHeader{size, R_MARK, 0};
  r->args_len = len;
  r->ph = ph;
  r->tid = tid;
  r->ts = ts_ticks;
  r->name = const_cast<Str*>(name);
  r->cat = const_cast<Str*>(cat);
  if (len) memcpy(r + 1, args, len);
  commit(ts, size);
  name_string(ts, name);
  name_string(ts, cat);
}
}  // namespace

IOT_API int iotrace_init(const char* out_dir, const char* name) {
  // Overrides must be in place before the core reads its configuration once. Once it has
  // (started before main, or by an earlier call), they come too late for this process, and
  // would only send its children's traces elsewhere.
  if (!g_recording.load() && !*trace_path()) {
    if (out_dir && *out_dir) setenv("IOTRACE_DIR", out_dir, 1);
    if (name && *name) setenv("IOTRACE_NAME", name, 1);
  }
  return core_start(false) ? 0 : -1;
}

IOT_API int iotrace_active(void) { return g_recording.load(std::memory_order_relaxed); }
IOT_API int iotrace_interposing(void) { return g_interposing; }
IOT_API void iotrace_pause(int paused) { g_paused = paused != 0; }
IOT_API void iotrace_untraced_begin(void) { ++t_guard; }  // the interposer's re-entrancy guard
IOT_API void iotrace_untraced_end(void) { --t_guard; }
IOT_API int64_t iotrace_now(void) { return now_ticks(); }
IOT_API int64_t iotrace_now_ns(void) { return now_ns(); }

IOT_API iotrace_str_t iotrace_intern(const char* s, uint32_t len) { return intern_name(s, len); }

IOT_API void iotrace_complete(iotrace_str_t name, iotrace_str_t cat, int64_t start_ticks,
                              int64_t dur_ticks, const char* args, uint32_t len) {
  iotrace_complete_on(0, name, cat, start_ticks, dur_ticks, args, len);
}

IOT_API void iotrace_complete_on(int32_t tid, iotrace_str_t name, iotrace_str_t cat,
                                 int64_t start_ticks, int64_t dur_ticks, const char* args,
                                 uint32_t len) {
  if (!g_recording.load(std::memory_order_relaxed) || !name || !cat) return;
  if (!args) len = 0;
  Busy busy;  // between reserve and commit a signal handler's calls are recorded aside
  uint32_t size;
  ThreadState* ts;
  SpanRec* r = reserve_rec<SpanRec>(len, &size, &ts);
  if (!r) return;
  r->h = RecHeader{size, R_SPAN, 0};
  r->args_len = len;
  r->tid = tid;
  r->start = start_ticks;
  r->dur = dur_ticks;
  r->name = const_cast<Str*>(name);
  r->cat = const_cast<Str*>(cat);
  if (len) memcpy(r + 1, args, len);
  commit(ts, size);
  name_string(ts, name);
  name_string(ts, cat);
}

IOT_API void iotrace_instant(iotrace_str_t name, iotrace_str_t cat, int64_t ts_ticks,
                             const char* args, uint32_t len) {
  mark('i', name, cat, ts_ticks, args, len);
}

IOT_API void iotrace_counter(iotrace_str_t name, int64_t ts_ticks, const char* args, uint32_t len) {
  mark('C', name, nullptr, ts_ticks, args, len);
}

IOT_API void iotrace_thread_name(const char* name, uint32_t len) {
  iotrace_thread_name_of(0, name, len);
}

IOT_API void iotrace_thread_name_of(int32_t tid, const char* name, uint32_t len) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  char buf[512];
  Out o(buf, sizeof buf);
  meta_thread_name_args(o, name, len);
  static Str* key = intern_name("thread_name", 11);
  mark_on(tid, 'M', key, nullptr, 0, o.p, uint32_t(o.n));
  o.release();
}

IOT_API void iotrace_set_process_info(const char* role, int64_t parent_pid, int64_t worker_id) {
  set_process_info(role, parent_pid, worker_id);
  // The file's iotrace_process line is out already (a spawned worker learns its role only
  // after importing torch): say the change in a line of its own, which readers apply.
  if (!g_recording.load(std::memory_order_relaxed) || !*trace_path()) return;
  char buf[256];
  Out o(buf, sizeof buf);
  meta_process_info_args(o, role, parent_pid, worker_id);
  static Str* key = intern_name("iotrace_process_info", 20);
  if (o.n) mark('M', key, nullptr, 0, o.p, uint32_t(o.n));
  o.release();
}

void iot::announce_mpi(int64_t rank, int64_t size) {
  set_mpi_rank(rank, size);
  if (!g_recording.load(std::memory_order_relaxed) || !*trace_path()) return;
  char buf[128];
  Out o(buf, sizeof buf);
  meta_mpi_args(o, rank, size);
  static Str* key = intern_name("iotrace_process_info", 20);
  mark('M', key, nullptr, 0, o.p, uint32_t(o.n));
  o.release();
}

IOT_API void iotrace_set_dist_rank(int64_t rank, int64_t size) {
  set_dist_rank(rank, size);
  if (!g_recording.load(std::memory_order_relaxed) || !*trace_path()) return;
  char buf[128];
  Out o(buf, sizeof buf);
  meta_mpi_args(o, rank, size, "dist");
  static Str* key = intern_name("iotrace_process_info", 20);
  mark('M', key, nullptr, 0, o.p, uint32_t(o.n));
  o.release();
}

IOT_API int64_t iotrace_job_clock_ns(void) { return now_ns() + job_clock_base(); }

IOT_API void iotrace_clock_measured(const char* at, int64_t mono_ns, int64_t offset_ns,
                                    int64_t rtt_ns) {
  static char kept[32];  // set_clock keeps the pointer (a fork child says it again)
  snprintf(kept, sizeof kept, "%s", at ? at : "");
  announce_clock(kept, mono_ns, offset_ns, rtt_ns);
}

void iot::announce_clock(const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns) {
  set_clock(at, mono_ns, offset_ns, rtt_ns);
  if (!g_recording.load(std::memory_order_relaxed) || !*trace_path()) return;
  char buf[160];
  Out o(buf, sizeof buf);
  meta_clock_args(o, at, mono_ns, offset_ns, rtt_ns);
  static Str* key = intern_name("iotrace_clock", 13);
  mark('M', key, nullptr, 0, o.p, uint32_t(o.n));
  o.release();
}

IOT_API void iotrace_flush(void) {
  if (g_recording.load()) flush_now(kExitWaitMs);
}

IOT_API void iotrace_finalize(void) { before_exit_now("finalize"); }
IOT_API void iotrace_finalize_as(const char* reason) { before_exit_now(reason); }

IOT_API const char* iotrace_trace_path(void) { return trace_path(); }

IOT_API void iotrace_stats(uint64_t* recorded, uint64_t* written, uint64_t* dropped) {
  if (recorded) *recorded = events_recorded();
  if (written) *written = events_written();
  if (dropped) *dropped = events_dropped();
}

IOT_API char* iotrace_compact_to_json(const void* data, size_t len, size_t* out_len, int* damaged) {
  *out_len = 0;
  *damaged = 0;
  const char* p = static_cast<const char*>(data);
  if (!iot::compact_is(p, len)) return nullptr;
  iot::Out out;
  out.reserve(len * 8);  // ~20x for I/O rows; grows when needed
  *damaged = !iot::compact_render(p, len, out);
  // The contract is a malloc'd buffer; Out's memory is mapped (sysmem.h).
  char* text = static_cast<char*>(malloc(out.n ? out.n : 1));
  if (text && out.n) memcpy(text, out.p, out.n);
  *out_len = text ? out.n : 0;
  out.release();
  return text;
}
