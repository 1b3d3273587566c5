// File-backed memory maps by start address, so munmap/msync can name their file. A fixed
// lock-free open-addressing table: maps beyond its size are simply not named.
#pragma once
#include "intern.h"

namespace iot {
void mmap_remember(void* addr, Str* path);
bool mmap_known(void* addr);
Str* mmap_lookup(void* addr);
Str* mmap_forget(void* addr);  // returns the path it had
}  // namespace iot
