#include "scratch.h"

#include <atomic>
#include <stdint.h>

#include "sysmem.h"

namespace iot {

namespace {
// Enough for the threads that are on a slow path at the same moment, and the handlers that
// interrupted them; past that, mappings of their own. A fork child keeps the slots that other
// threads of the parent held at the fork taken (their holders are gone): a few fewer slots.
constexpr int kSlots = 64;

struct alignas(64) Slot {
  std::atomic<bool> busy{false};
};
Slot g_slots[kSlots];
// The slots' memory, in the library's zero-filled data: its pages come when first touched,
// with no mapping to make (a mapping per slot took the mmap lock for writing 64 times, each
// queued behind the program's thread starts and holding up their page faults).
alignas(4096) char g_pages[kSlots][kScratchBytes];

// Each thread starts its search at a slot of its own (a hash of a thread-local's address), so
// that threads rarely contend for the same slot.
__thread char t_mark __attribute__((tls_model("initial-exec")));
int first_slot() {
  uint64_t a = reinterpret_cast<uintptr_t>(&t_mark);
  return int(((a * 0x9e3779b97f4a7c15ull) >> 32) % kSlots);
}
}  // namespace

Scratch::Scratch(size_t n) {
  if (n <= kScratchBytes) {
    const int first = first_slot();
    for (int i = 0; i < kSlots; i++) {
      int k = (first + i) % kSlots;
      Slot& s = g_slots[k];
      // Taken by an exchange, never waited for: a handler that interrupted the holder on this
      // thread must not wait for it.
      if (s.busy.load(std::memory_order_relaxed) ||
          s.busy.exchange(true, std::memory_order_acquire))
        continue;
      p_ = g_pages[k];
      slot_ = k;
      return;
    }
  }
  if (n > UINT32_MAX) return;
  p_ = static_cast<char*>(sys_map(n));
  if (p_) n_ = uint32_t(n);
}

Scratch::~Scratch() {
  if (slot_ >= 0)
    g_slots[slot_].busy.store(false, std::memory_order_release);
  else
    sys_unmap(p_, n_);
}

}  // namespace iot
