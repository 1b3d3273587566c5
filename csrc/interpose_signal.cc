// The tracer's fatal-signal handler must stay invisible: where it stands in for the default
// action, the program asking sigaction/signal sees SIG_DFL (Python's signal.getsignal, for one,
// would otherwise say None), setting SIG_DFL keeps the stand-in, and setting a handler of its
// own replaces it for good.
#include <signal.h>
#include <string.h>

#include "interpose.h"

using namespace iot;

namespace {
REAL_FN(sigaction, int (*)(int, const struct sigaction*, struct sigaction*))
REAL_FN(signal, sighandler_t (*)(int, sighandler_t))

// Not in a vfork child: its signal actions are its own, but g_signal_stand_in is the parent's.
bool stands_in(int sig) {
  return sig > 0 && sig < kMaxSignal && g_signal_stand_in[sig] && !in_vfork_child();
}

void as_default(struct sigaction* old) {
  if (!old) return;
  memset(old, 0, sizeof *old);
  old->sa_handler = SIG_DFL;
  sigemptyset(&old->sa_mask);
}

bool wants_default(const struct sigaction* act) {
  return act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}
}  // namespace

IOT_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!stands_in(sig)) return real_sigaction()(sig, act, old);
  if (!act || wants_default(act)) {  // a query, or "default" again: the stand-in stays
    as_default(old);
    return 0;
  }
  int r = real_sigaction()(sig, act, nullptr);
  if (r == 0) {
    g_signal_stand_in[sig] = false;
    as_default(old);
  }
  return r;
}

IOT_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (!stands_in(sig)) return real_signal()(sig, handler);
  if (handler == SIG_DFL) return SIG_DFL;
  sighandler_t r = real_signal()(sig, handler);
  if (r == SIG_ERR) return r;
  g_signal_stand_in[sig] = false;
  return SIG_DFL;
}
