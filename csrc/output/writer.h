// The one writer of a process: it turns the records in the live file (live.h) into frames of
// the trace file. A background thread does it while there is much to write (it starts when
// the chunks in use pass a quarter of the cap, and ends when idle); otherwise the thread that
// asks (exit, _exit, exec, iotrace_flush) does it itself, on the tracer's stack. Asking is
// async-signal-safe (atomics and futex calls); nothing on the writer's path allocates with
// malloc or waits for a lock a program thread can hold (sysmem.h).
#pragma once
#include <stdint.h>

#include "encoder.h"

namespace iot {

// How long a thread waits for the writer's drain, at most: exit and exec give a big backlog
// time to be written (what is not written stays in the live file).
constexpr int64_t kExitWaitMs = 10000;

// The trace file and the live file (live.h) of this process, made at start; false: it cannot
// be traced (said once). No thread is started: the writer thread runs only while the records
// in flight need one.
bool writer_begin();
// Around a call that changes what a thread is (credentials, capabilities, namespaces, seccomp
// filters, the root): the writer thread is ended and none starts until the hold is released.
void writer_hold();
void writer_release();
bool writer_running();
// Root is about to become user `uid`: the trace file and the live file become its, and it may
// make files in the trace folder (an ACL entry), so that it and what it runs stay traced.
void writer_files_to_user(unsigned uid);
// The process's root is now `root` (as the old root named it): the trace folder is reached
// through it, or no more (then the records stay in the live file; no file is made in the jail).
void writer_root_changed(const char* root);
// Drain everything recorded so far into the file, waiting `wait_ms` at most.
void flush_now(int64_t wait_ms);
// Drain, write the end marker and `]`, close the file. `final`: no file is opened again (exit);
// otherwise the next flush after writer_exec_failed() opens a new one (a failed exec).
void finish_file(const char* reason, bool final, int64_t wait_ms);
void writer_exec_failed();
// Fork: the writer thread is ended and the locks held across fork; the child makes its own
// files and drops the parent's records.
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
