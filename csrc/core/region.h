// This process's live file (live.h), from the inside: made when tracing starts, beside the trace
// file, and mapped shared; every thread's records go into chunks of it. The file descriptor
// is closed once the first part is mapped: later parts are mapped from the mapping itself
// (mremap), so the program's fd table never holds one of ours.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "live.h"

namespace iot {

struct RegionSetup {
  const char* trace_path;  // the trace file; the live file is it + live::kSuffix
  const char* trace_name;  // its name in its folder
  int pid;
  const char* host;
  bool compact;
  uint32_t compression, level, res_ns;
  const char* head;  // the process's header lines
  size_t head_len;
  size_t max_bytes;  // chunks in all: the cap on memory in flight (IOTRACE_MAX_BUFFERED)
};

// Make and map the live file (the previous one, a fork parent's, is unmapped first). false:
// none could be made (errno says why); recording then has nowhere to go.
bool region_create(const RegionSetup& s);
live::Header* region();  // NULL when there is none
const char* region_path();
// "IOTRACE_EXEC_LIVE=<the live file>", for the next image of this process (NULL: no file).
const char* exec_live_entry();
uint32_t region_generation();  // differs for every live file this memory has made

// A chunk for at least `need` bytes of records of thread `tid`, of `want` bytes in all (its
// header included) when it can: a thread's chunks grow as it records more. NULL: the cap is
// reached, or no more of the file could be had (disk full). `ahead`: the taker also has the
// file's next blocks when threads are carving fast (a program's thread; not the writer).
live::Chunk* region_take(uint32_t need, uint32_t want, int tid, bool ahead = true);
// Back to the free lists: its records are in the trace file. Waits for no lock when `try_only`
// (false: the lock was busy, nothing done).
bool region_give(live::Chunk* c, bool try_only);
// The writer, between drains: the file's next `bytes` made ready (its blocks had) before a
// thread's next chunk needs them, so that the traced threads seldom wait for the kernel.
void region_prepare(uint64_t bytes);
uint64_t region_in_use();  // bytes of chunks taken and not given back
uint64_t region_max();

// The end as the process says it, in the file (in case it cannot finish the trace itself).
void region_end(const char* reason, int tid, int64_t ns);
// The live file becomes user `uid`'s (root giving up its rights: writer_files_to_user).
void region_chown(unsigned uid);
// After a chroot to `root`: the live file's path as the new root names it. false: not under it.
bool region_rebase(const char* root);
// The records go on into another trace file (an exec that failed: the old one was ended).
void region_retarget(const char* trace_name);
// The trace is complete: the live file goes (its mapping stays: threads still recording while
// the process exits write into it).
void region_remove();

// Fork: the region's lock is held across fork.
void region_lock();
void region_unlock();
void region_reinit_lock();

}  // namespace iot
