// Scratch memory for the tracer's slow paths on the program's thread: learning an unknown fd's
// path, resolving a relative path, reading the cwd. The wrappers run on the program's stack,
// which may be a signal handler's alternate stack of 8 KiB, the kernel's signal frame already
// on it: a PATH_MAX buffer there overflows it. So the tracer keeps to a few hundred bytes of
// stack and takes its page-sized buffers from here.
//
// A fixed pool of slots in the library's zero-filled data, each taken with one atomic exchange:
// no malloc, no lock, no system call, async-signal-safe. A handler that interrupts a holder takes
// another slot; when every slot is held (thousands of threads on a slow path at once) or a request
// is larger than a slot, the holder maps pages of its own and unmaps them after use.
#pragma once
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

namespace iot {

// A slot: a path resolved against its folder is at most two paths long (intern_path_at).
constexpr size_t kScratchBytes = 2 * PATH_MAX;

// At least `n` bytes of scratch while the holder lives, not zeroed. False when no memory could
// be had: the caller does without (the path stays unresolved, the fd unknown).
class Scratch {
 public:
  explicit Scratch(size_t n = kScratchBytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* get() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  // 16 bytes: it sits in the frames of the slow paths.
  char* p_ = nullptr;
  uint32_t n_ = 0;  // the size of a mapping of its own (a path is far below 4 GiB)
  int32_t slot_ = -1;
};

}  // namespace iot
