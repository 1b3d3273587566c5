#include "libc_syscall.h"

#include <dlfcn.h>

#undef syscall

namespace iot {

namespace {
using fn_t = long (*)(long, ...);
fn_t g_fn = nullptr;  // resolved at the first call: the constructor's
}  // namespace

long libc_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) {
  fn_t f = __atomic_load_n(&g_fn, __ATOMIC_RELAXED);
  if (__builtin_expect(!f, 0)) {
    f = reinterpret_cast<fn_t>(dlsym(RTLD_NEXT, "syscall"));
    if (!f) f = &::syscall;  // linked statically into a module: libc's own
    __atomic_store_n(&g_fn, f, __ATOMIC_RELAXED);
  }
  return f(nr, a1, a2, a3, a4, a5, a6);
}

}  // namespace iot
