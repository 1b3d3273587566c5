#include "message.h"

#include <atomic>
#include <errno.h>
#include <initializer_list>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace iot {

namespace {
std::atomic<unsigned> g_said{0};
__thread int t_msg_fd __attribute__((tls_model("initial-exec"))) = -1;

void add(char* buf, size_t cap, size_t& n, const char* s) {
  size_t len = strlen(s);
  if (n + len > cap) len = cap - n;
  memcpy(buf + n, s, len);
  n += len;
}
}  // namespace

void message_fd_set(int fd) { t_msg_fd = fd; }

void messages_reset() { g_said.store(0); }

void say_once(MessageKind kind, const char* a, const char* b, const char* c, const char* d,
              const char* e) {
  if (t_msg_fd == kNoMessages || (g_said.fetch_or(kind) & kind)) return;
  int saved = errno;
  char buf[2048];
  size_t n = 0;
  for (const char* s : {"iotrace: ", a, b, c, d, e}) add(buf, sizeof buf - 1, n, s);
  buf[n++] = '\n';
  syscall(SYS_write, t_msg_fd >= 0 ? t_msg_fd : 2, buf, n);
  errno = saved;
}

}  // namespace iot
