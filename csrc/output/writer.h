// The one writer of a process: a background thread that drains every thread's buffers into
// the trace file, on a full buffer and on a time bound, and on request: exit, _exit, exec and
// fatal signals ask it for a last drain and wait for it, never longer than they are told.
// Asking is async-signal-safe (atomics and futex calls); nothing on the writer's path
// allocates with malloc or waits for a lock a program thread can hold (sysmem.h).
#pragma once
#include <stdint.h>

#include "encoder.h"

namespace iot {

// How long a thread waits for the writer's drain, at most: a dying process (fatal signal)
// is never kept alive long by the tracer; exit and exec give a big backlog time to be written.
constexpr int64_t kSignalWaitMs = 500;
constexpr int64_t kExitWaitMs = 10000;

void writer_init();  // registry, the pthread key; once per process
// The trace file and the live file (live.h) of this process, made at start; false: it cannot
// be traced (said once).
bool writer_begin();
void writer_start();  // the background thread (again in a fork child)
// Drain everything recorded so far into the file, waiting `wait_ms` at most.
void flush_now(int64_t wait_ms);
// Drain, write the end marker and `]`, close the file. `final`: no file is opened again (exit);
// otherwise the next flush after writer_exec_failed() opens a new one (a failed exec).
void finish_file(const char* reason, bool final, int64_t wait_ms);
void writer_exec_failed();
// Fork: hold the locks across fork; the child drops the parent's buffers and file.
void writer_prepare_fork();
void writer_parent_after_fork();
bool writer_child_after_fork();  // false: the child could make no files (it is not traced)

uint64_t events_written();
uint64_t events_dropped();
uint64_t events_recorded();
const char* trace_path();

// Provided by lifecycle.cc: the header lines of a new file (process metadata).
void write_process_header(Out& out, const EncodeCtx& ctx);
// Provided by lifecycle.cc: this process's file name parts.
void trace_file_parts(const char** dir, const char** name, const char** host);

}  // namespace iot
