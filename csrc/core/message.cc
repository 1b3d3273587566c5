#include "message.h"

#include <atomic>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <initializer_list>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

namespace iot {

namespace {
std::atomic<unsigned> g_said{0};
uint64_t g_dev = 0, g_ino = 0;  // the stderr the process started with (0, 0: none)

// The program's stderr, if it is still the file it started with: opened anew through /proc
// (the writer thread has an fd table of its own, without the program's fds), for appending
// (a new open file description of a regular file starts at offset 0). Failing that (no /proc:
// a chroot), fd 2 itself. -1: nowhere to say it.
long open_stderr(bool* opened) {
  struct stat st;
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd/2",
                    O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  *opened = fd >= 0;
  if (fd < 0) fd = 2;
  if (syscall(SYS_fstat, fd, &st) != 0 || uint64_t(st.st_dev) != g_dev ||
      uint64_t(st.st_ino) != g_ino || g_ino == 0) {
    if (*opened) syscall(SYS_close, fd);
    *opened = false;
    return -1;  // fd 2 is another file now (the program's data, or /dev/null): not ours to write
  }
  return fd;
}
}  // namespace

void messages_init() {
  struct stat st;
  if (syscall(SYS_fstat, 2, &st) == 0) g_dev = st.st_dev, g_ino = st.st_ino;
}

void messages_reset() { g_said.store(0); }

// The parts go out as they are, gathered by one writev: no buffer to format them in (the
// caller may be on a signal handler's small alternate stack), one write as before.
void say_once(MessageKind kind, const char* a, const char* b, const char* c, const char* d,
              const char* e) {
  if (g_said.fetch_or(kind) & kind) return;
  int saved = errno;
  struct iovec v[7];
  int n = 0;
  for (const char* s : {"iotrace: ", a, b, c, d, e, "\n"})
    if (size_t len = strlen(s)) v[n++] = {const_cast<char*>(s), len};
  bool opened;
  long fd = open_stderr(&opened);
  if (fd >= 0) syscall(SYS_writev, fd, v, n);
  if (opened) syscall(SYS_close, fd);
  errno = saved;
}

}  // namespace iot
