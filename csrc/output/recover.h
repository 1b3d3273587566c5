// Finishing a trace from its live file (live.h), in another process than the one that wrote it:
// the records the process committed and its writer had not put in the trace file yet become
// frames of it, then the end marker, and the live file goes. The process must be gone (a signal
// ended it, or it could not finish the file itself: a changed root, a lost permission), or it
// would go on writing into a file that is no longer read.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace iot {

struct RecoverResult {
  int error = 0;         // errno-style: 0 done, else why nothing was done
  const char* why = "";  // a word on the error
  bool closed = false;   // the trace file was complete already: the live file just went
  bool ended = false;    // the process had said it ended (and why: end_reason)
  char end_reason[32] = "";
  int pid = 0;
  char host[64] = "";
  uint64_t events = 0;   // event lines added to the trace file
  uint64_t dropped = 0;  // events the process could find no buffer for
  char trace_path[4096] = "";
};

// What a live file says of its process, without changing anything. false: not a live file of
// a version this build reads (result.why says).
bool live_inspect(const char* live_path, RecoverResult* out);
// Is the process that writes this live file still running on this host? (false also when it
// is on another host: the caller decides.)
bool live_owner_alive(const char* live_path);
// The live file an exec'd image was told of (IOTRACE_EXEC_LIVE): its previous image's, closed
// when the exec began. Removed if it is that (a live file of `pid`, closed).
void live_remove_if_closed(const char* live_path, int pid);
// Finish the trace: `reason` is the end marker's when the process did not say it ended (e.g.
// "signal:15" from the parent that reaped it; NULL: "killed"). Async-signal-safe enough for the
// tracer's own use (no malloc; mapped memory only). `cpu_ns`: the process's CPU time as its
// parent reaped it (wait4's rusage), for the end marker, and `cpu_wait_ns` its main thread's
// wait for a CPU (read from /proc before it was reaped); -1: not known.
bool live_finish(const char* live_path, const char* reason, RecoverResult* out, int64_t cpu_ns = -1,
                 int64_t cpu_wait_ns = -1);

}  // namespace iot
