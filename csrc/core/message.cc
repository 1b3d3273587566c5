#include "message.h"

#include <atomic>
#include <errno.h>
#include <initializer_list>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

namespace iot {

namespace {
std::atomic<unsigned> g_said{0};
__thread int t_msg_fd __attribute__((tls_model("initial-exec"))) = -1;
}  // namespace

void message_fd_set(int fd) { t_msg_fd = fd; }

void messages_reset() { g_said.store(0); }

// The parts go out as they are, gathered by one writev: no buffer to format them in (the
// caller may be on a signal handler's small alternate stack), one write as before.
void say_once(MessageKind kind, const char* a, const char* b, const char* c, const char* d,
              const char* e) {
  if (t_msg_fd == kNoMessages || (g_said.fetch_or(kind) & kind)) return;
  int saved = errno;
  struct iovec v[7];
  int n = 0;
  for (const char* s : {"iotrace: ", a, b, c, d, e, "\n"})
    if (size_t len = strlen(s)) v[n++] = {const_cast<char*>(s), len};
  syscall(SYS_writev, t_msg_fd >= 0 ? t_msg_fd : 2, v, n);
  errno = saved;
}

}  // namespace iot
