// The one writer of a process: a background thread that drains every thread's buffers into
// the trace file, on a full buffer and on a time bound; plus the synchronous flushes of exit,
// _exit, exec and fatal signals.
#pragma once
#include <stdint.h>

#include "encoder.h"

namespace iot {

void writer_init();   // pools, registry, the pthread key; once per process
void writer_start();  // the background thread (again in a fork child)
// Drain everything recorded so far into the file. `may_block` false (signal handlers): give
// up rather than wait for a lock held by the interrupted code.
void flush_now(bool may_block);
// Drain, write the end marker and `]`, close the file. `final`: no file is opened again (exit);
// otherwise the next flush opens a new one (a failed exec).
void finish_file(const char* reason, bool may_block, bool final);
// Fork: hold the locks across fork; the child drops the parent's buffers and file.
void writer_prepare_fork();
void writer_parent_after_fork();
void writer_child_after_fork();

uint64_t events_written();
uint64_t events_dropped();
uint64_t events_recorded();
const char* trace_path();

// Provided by lifecycle.cc: the header lines of a new file (process metadata).
void write_process_header(Out& out, const EncodeCtx& ctx);
// Provided by lifecycle.cc: this process's file name parts.
void trace_file_parts(const char** dir, const char** name, const char** host);

}  // namespace iot
