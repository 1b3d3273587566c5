// Process lifecycle: start-up, the process metadata, fork, exec, exit, _exit and fatal signals.
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
// Signals whose default action our flushing handler stands in for: the program is shown
// SIG_DFL for them until it installs a handler of its own (interpose_signal.cc).
constexpr int kMaxSignal = 65;
extern bool g_signal_stand_in[kMaxSignal];
// Before exec replaces the image: write everything and close the file. If exec fails, the next
// flush opens a new file (-1 suffix): the closed one stays a complete JSON array.
void before_exec();
// exec returned: it failed, the process goes on in a new file.
void after_failed_exec();
// _exit/_Exit: flush and close; the process is about to vanish without atexit.
void before_exit_now(const char* reason);
void set_process_info(const char* role, int64_t parent_pid, int64_t worker_id);
}  // namespace iot
