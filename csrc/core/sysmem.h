// Memory of the tracer that never comes from malloc. The tracer runs where malloc must not be
// called: in a signal handler that interrupted malloc (glibc aborts a double free inside
// free(), with the arena locked; a SIGTERM can land anywhere), and on the writer thread while
// such a handler waits for it. Buffers, tables, strings and the compressors' workspaces
// therefore come from mmap: system calls, async-signal-safe, no lock to wait on.
#pragma once
#include <stddef.h>

namespace iot {

// Zeroed pages (rounded up to the page size); NULL on failure.
void* sys_map(size_t n);
void sys_unmap(void* p, size_t n);
// Grow a mapping to `new_n` bytes, moving it if need be; NULL on failure (the old one stays).
void* sys_remap(void* p, size_t old_n, size_t new_n);
// malloc-shaped, for libraries that take an allocator (zstd, zlib): the size rides in a header.
void* sys_alloc(size_t n);
void sys_free(void* p);
// Small objects that live as long as the process (interned strings, open-file entries, thread
// states): carved from mapped chunks with one atomic add, zeroed, 16-byte aligned.
void* arena_alloc(size_t n);

}  // namespace iot
