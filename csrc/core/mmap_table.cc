#include "mmap_table.h"

#include <atomic>
#include <stdint.h>

namespace iot {
namespace {
constexpr uint32_t kSlots = 1 << 14;
constexpr uint32_t kProbe = 32;
constexpr uintptr_t kTomb = 1;

struct Slot {
  std::atomic<uintptr_t> addr;
  std::atomic<Str*> path;
};
Slot g_slots[kSlots];

uint32_t home(uintptr_t a) { return uint32_t((a >> 12) * 2654435761u) & (kSlots - 1); }

Slot* find(void* addr) {
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (uint32_t i = 0, h = home(a); i < kProbe; i++) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    uintptr_t v = s.addr.load(std::memory_order_acquire);
    if (v == a) return &s;
    if (v == 0) return nullptr;
  }
  return nullptr;
}
}  // namespace

void mmap_remember(void* addr, Str* path) {
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (uint32_t i = 0, h = home(a); i < kProbe; i++) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    uintptr_t v = s.addr.load(std::memory_order_acquire);
    if (v == a || ((v == 0 || v == kTomb) &&
                   s.addr.compare_exchange_strong(v, a, std::memory_order_acq_rel))) {
      s.path.store(path, std::memory_order_release);
      return;
    }
  }
}

bool mmap_known(void* addr) { return find(addr) != nullptr; }

Str* mmap_lookup(void* addr) {
  Slot* s = find(addr);
  return s ? s->path.load(std::memory_order_acquire) : nullptr;
}

Str* mmap_forget(void* addr) {
  Slot* s = find(addr);
  if (!s) return nullptr;
  Str* p = s->path.load(std::memory_order_acquire);
  s->addr.store(kTomb, std::memory_order_release);
  return p;
}
}  // namespace iot
