// The tracer's few words to the person running the program: each kind at most once per
// process, written with one raw write to the stderr the process started with, and only while
// fd 2 is still that file: a program that later makes fd 2 its data file never finds the
// tracer's words in its data. The tracer keeps no fd of its own for it.
#pragma once

namespace iot {

enum MessageKind : unsigned {
  kMsgNoFile = 1u << 0,    // the trace file cannot be created
  kMsgLost = 1u << 1,      // events lost: the file cannot be written (disk full, I/O error)
  kMsgReplaced = 1u << 2,  // the trace file was swapped for another file or a symlink
  kMsgDropped = 1u << 3,   // events dropped: no buffer could be had
  kMsgNoLive = 1u << 4,    // no live file: records are in memory only
};

// Note which file fd 2 is (at start; in a fork child, whose stderr is the parent's).
void messages_init();
// "iotrace: " + the parts + "\n", once per kind per process. Async-signal-safe.
void say_once(MessageKind kind, const char* a, const char* b = "", const char* c = "",
              const char* d = "", const char* e = "");
// Forget which kinds were said (a fork child is a new process).
void messages_reset();

}  // namespace iot
