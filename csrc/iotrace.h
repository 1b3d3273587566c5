/* iotrace C API: the in-process core shared by the LD_PRELOAD interposer, the Python module
 * and any C/C++ program that wants its own regions (docs/c-api.md: linking, each call, an
 * example). Stable C ABI. Every call but iotrace_init may be made from any thread; all are
 * cheap when tracing is off. Only the clocks, iotrace_intern, iotrace_untraced_begin/end,
 * iotrace_active and iotrace_interposing may be called in a signal handler. */
#ifndef IOTRACE_H
#define IOTRACE_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* The trace format (docs/trace-format.md); the iotrace_process event carries it. */
#define IOTRACE_FORMAT_VERSION 7

/* Start the core if it is not running: the non-NULL, non-empty overrides are set as
 * IOTRACE_DIR / IOTRACE_NAME (children inherit them), then IOTRACE_* are read. Returns 0 when
 * recording, -1 when not (IOTRACE_ENABLE=0, no trace file could be made, or after finalize).
 * Preloaded, or linked (-liotrace) with IOTRACE_ENABLE=1 in the environment, the core started
 * before main: it returns 0 and the overrides are ignored. Linked, the program's own calls
 * are recorded from then on, as a preloaded program's are. Call it early, before other
 * threads: it may setenv. */
int iotrace_init(const char* out_dir, const char* name);
/* Is the core recording? Are the program's POSIX and stdio calls recorded (preloaded, or
 * linked and recording; not when loaded by dlopen, as the Python module loads it)? */
int iotrace_active(void);
int iotrace_interposing(void);
/* Pause (1) or resume (0) the recording of intercepted calls in every thread of the process
 * (Python/C API events go on). */
void iotrace_pause(int paused);
/* Calls of this thread only pass through unrecorded between begin and end (nestable): the
 * tracer's own look at a file (the size of a checkpoint) is not the program's I/O. */
void iotrace_untraced_begin(void);
void iotrace_untraced_end(void);
/* The core's clock: the unit of the *_ticks arguments below (TSC ticks where the kernel keeps
 * time with the TSC, else ns); the writer maps it to CLOCK_MONOTONIC ns. Before the core
 * starts it reads ns: take ticks while iotrace_active(). */
int64_t iotrace_now(void);
/* CLOCK_MONOTONIC in ns: the clock of the `ts` the trace files show. */
int64_t iotrace_now_ns(void);

/* Interned string handle: names and categories are interned once (the `len` bytes of `s`
 * copied; the same bytes give the same handle), recorded as a pointer, valid for the life of
 * the process. Works before the core starts; NULL only when out of memory. */
typedef const struct iotrace_str* iotrace_str_t;
iotrace_str_t iotrace_intern(const char* s, uint32_t len);

/* A complete event: start and duration in iotrace_now() ticks, not ns (these parameters were
 * named start_ns/dur_ns/ts_ns before; the values they take are the same); `args_json` is the
 * body of a JSON object (`"k":1,"s":"x"`, copied, not checked) or NULL. Nothing is recorded
 * when name or cat is NULL. */
void iotrace_complete(iotrace_str_t name, iotrace_str_t cat, int64_t start_ticks, int64_t dur_ticks,
                      const char* args_json, uint32_t args_len);
/* The same on a virtual thread `tid` (asyncio tasks get their own track); 0: this thread. */
void iotrace_complete_on(int32_t tid, iotrace_str_t name, iotrace_str_t cat, int64_t start_ticks,
                         int64_t dur_ticks, const char* args_json, uint32_t args_len);
/* An instant event (cat may be NULL) and a counter event (args_json: `"rss":123,"cpu":4.5`),
 * at iotrace_now() ticks. */
void iotrace_instant(iotrace_str_t name, iotrace_str_t cat, int64_t ts_ticks, const char* args_json,
                     uint32_t args_len);
void iotrace_counter(iotrace_str_t name, int64_t ts_ticks, const char* args_json,
                     uint32_t args_len);
/* Name of the calling thread, or of virtual thread `tid` (thread_name metadata). */
void iotrace_thread_name(const char* name, uint32_t len);
void iotrace_thread_name_of(int32_t tid, const char* name, uint32_t len);
/* Role, traced parent and worker number of this process, for the iotrace_process metadata event
 * (NULL / 0 / -1: unchanged). Before the core starts they go into that event; after, into an
 * iotrace_process_info event that readers apply to it (the Python layer calls it at import in
 * spawned workers). */
void iotrace_set_process_info(const char* role, int64_t parent_pid, int64_t worker_id);
/* The rank and world size a framework gave this process (torch.distributed's): kept for the
 * files it opens next, and said now in an iotrace_process_info event (dist_rank, dist_size). */
void iotrace_set_dist_rank(int64_t rank, int64_t size);
/* This process's job clock, ns: CLOCK_MONOTONIC plus its wall_ns - mono_ns (what readers put
 * its events on before a measured offset). */
int64_t iotrace_job_clock_ns(void);
/* A measurement of this process's job clock against rank 0's, taken at `at` (e.g.
 * "torch.distributed") when CLOCK_MONOTONIC read `mono_ns`: an iotrace_clock event, which readers
 * apply (docs/trace-format.md, the job clock). Rank 0 says offset 0. */
void iotrace_clock_measured(const char* at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns);
/* Write everything recorded so far to the trace file (waits 10 s at most). */
void iotrace_flush(void);
/* Finish the trace file (end marker, `]`); events after it are dropped, and iotrace_init
 * cannot start another. Exit does it by itself. */
void iotrace_finalize(void);
/* The same, naming why in the end marker (e.g. "_exit"). */
void iotrace_finalize_as(const char* reason);
/* Path of the trace file of this process ("" when tracing never started). */
const char* iotrace_trace_path(void);
/* Events recorded, written, dropped so far in this process (NULL: not wanted). */
void iotrace_stats(uint64_t* recorded, uint64_t* written, uint64_t* dropped);

/* Render one frame of a compact trace (`.iotc.zst`: the decompressed content of one zstd frame)
 * as the JSON event lines the JSON form would have written. Returns a malloc'd buffer (free it)
 * of *out_len bytes; *damaged is set when the frame is damaged: the buffer then holds the lines
 * before the damage. Returns NULL (and *out_len 0) when `data` does not start with the compact
 * magic "IOTC" (a frame cut inside its header does, and is damaged). */
char* iotrace_compact_to_json(const void* data, size_t len, size_t* out_len, int* damaged);

#ifdef __cplusplus
}
#endif
#endif
