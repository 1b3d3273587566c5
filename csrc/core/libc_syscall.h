// The tracer's own system calls go to libc's syscall(), never to the interposed one
// (interpose/creds.cc exports `syscall` to see a program's raw seccomp, unshare, setns and
// set*id calls): that wrapper's variadic frame would add to the program's stack on every
// tracer slow path, and its checks are for the program's calls. Force-included in every
// translation unit of the tracer (CMakeLists.txt); creds.cc, which defines `syscall`, undoes it.
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {
// libc's syscall(), looked up once past this library (RTLD_NEXT).
long libc_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
template <class... A>
inline long libc_syscall(long nr, A... a) {
  static_assert(sizeof...(A) <= 6, "a system call takes 6 arguments at most");
  long v[6] = {(long)a...};
  return libc_syscall6(nr, v[0], v[1], v[2], v[3], v[4], v[5]);
}
}  // namespace iot

#define syscall(...) ::iot::libc_syscall(__VA_ARGS__)
