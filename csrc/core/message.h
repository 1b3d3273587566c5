// The tracer's few words to the person running the program: each kind at most once per
// process, written with one raw write to the stderr the process started with. The writer
// thread keeps a private copy of that fd (writer.cc), so a program that later makes fd 2 its
// data file never finds the tracer's words in its data; other threads (no writer running)
// fall back to fd 2.
#pragma once

namespace iot {

enum MessageKind : unsigned {
  kMsgNoFile = 1u << 0,    // the trace file cannot be created
  kMsgLost = 1u << 1,      // events lost: the file cannot be written (disk full, I/O error)
  kMsgReplaced = 1u << 2,  // the trace file was swapped for another file or a symlink
  kMsgDropped = 1u << 3,   // events dropped: no buffer could be had
  kMsgNoLive = 1u << 4,    // no live file: records are in memory only
};

// The calling thread's private copy of the starting stderr (the writer, at its start);
// kNoMessages: there was none (fd 2 was closed), say nothing.
constexpr int kNoMessages = -2;
void message_fd_set(int fd);
// "iotrace: " + the parts + "\n", once per kind per process. Async-signal-safe.
void say_once(MessageKind kind, const char* a, const char* b = "", const char* c = "",
              const char* d = "", const char* e = "");
// Forget which kinds were said (a fork child is a new process).
void messages_reset();

}  // namespace iot
