// Signals that end a process by default: the trace must be written when they do, and the
// program must see its own dispositions, handlers and exit status exactly as untraced.
//
// For each signal of kEnding the tracer keeps one of three modes:
//  * stand-in: the program's disposition is SIG_DFL. The kernel has the tracer's handler,
//    which asks the writer for the last drain (async-signal-safe, bounded: writer.h), then
//    takes the default action. Whenever the program asks for SIG_DFL (at start, or a crash
//    reporter's handler restoring it before re-raising, Python's faulthandler and its exit on
//    KeyboardInterrupt included) it gets the stand-in instead; asking sigaction, it sees SIG_DFL.
//  * wrapped: a handler of the program's that the kernel could not run alone without losing
//    the trace: one with SA_RESETHAND (the kernel would reset the disposition to SIG_DFL out
//    of the tracer's sight, and the handler's own re-raise would kill unflushed), and any
//    SIGABRT handler (abort() resets SIGABRT with glibc's internal sigaction and raises again
//    once the handler returns). The kernel has a trampoline that emulates the reset with the
//    stand-in, calls the program's handler with the same arguments, mask and flags, and after
//    a returning SIGABRT handler writes what was recorded. sigaction shows the program's own.
//  * pass-through: SIG_IGN, or any other handler: the kernel has the program's own.
// Not covered: dispositions set with the raw rt_sigaction syscall, or sigset(); documented in
// docs/limits.md.
#include <atomic>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"
#include "writer.h"

using namespace iot;

namespace {
REAL_FN(sigaction, int (*)(int, const struct sigaction*, struct sigaction*))
REAL_FN(abort, void (*)(void))

// Default action: end the process (with or without a core). SIGKILL and SIGSTOP cannot be caught.
const int kEnding[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,    SIGFPE,
                       SIGUSR1, SIGSEGV,   SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU,
                       SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   SIGPWR,  SIGSYS};

enum Mode : uint8_t { kPassThrough = 0, kStandIn = 1, kWrapped = 2 };

std::atomic<uint8_t> g_mode[kMaxSignal];
bool g_ending[kMaxSignal];      // in kEnding (and IOTRACE_SIGNALS on, preloaded)
char g_reason[kMaxSignal][16];  // "signal:N", written before any handler can run
// The program's own action as the kernel would hold it untraced, for a stand-in (SIG_DFL with
// the flags and mask it was given) or a wrapped signal; two slots, so that a handler running
// on one thread reads a whole action while another thread installs the next one.
struct sigaction g_prog[kMaxSignal][2];
std::atomic<uint8_t> g_prog_slot[kMaxSignal];
std::atomic_flag g_update = ATOMIC_FLAG_INIT;  // sigaction calls, one at a time (signals blocked)
__thread bool t_aborting __attribute__((tls_model("initial-exec"))) = false;

bool ending(int sig) { return sig > 0 && sig < kMaxSignal && g_ending[sig] && !in_vfork_child(); }

void on_ending_signal(int sig, siginfo_t* info, void*);
void trampoline(int sig, siginfo_t* info, void* uc);

// The program's action becomes `view` (in the other slot; then published).
void set_view(int sig, const struct sigaction& view) {
  uint8_t slot = uint8_t(1 - g_prog_slot[sig].load(std::memory_order_relaxed));
  g_prog[sig][slot] = view;
  g_prog_slot[sig].store(slot, std::memory_order_release);
}

// The kernel gets the stand-in; the program's view is `view` (its SIG_DFL, flags and mask).
int install_stand_in(int sig, const struct sigaction& view) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_ending_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  int r = real_sigaction()(sig, &sa, nullptr);
  if (r == 0) {
    set_view(sig, view);
    g_mode[sig].store(kStandIn, std::memory_order_release);
  }
  return r;
}

// The stand-in: the last drain, then the default action. A hardware fault (the kernel sent
// it: si_code > 0) is left to happen again on return, now with the default action, so the
// core shows the faulting instruction; anything else is raised again at this thread.
void on_ending_signal(int sig, siginfo_t* info, void*) {
  int saved = errno;
  end_process(g_reason[sig], kSignalWaitMs);
  errno = saved;
  bool fault = (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) && info &&
               info->si_code > 0;
  if (!fault) syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig);
}

void trampoline(int sig, siginfo_t* info, void* uc) {
  const struct sigaction a = g_prog[sig][g_prog_slot[sig].load(std::memory_order_acquire)];
  if (a.sa_flags & SA_RESETHAND) {
    // What the kernel does on entry for SA_RESETHAND: the handler is SIG_DFL now (flags and
    // mask stay), which for an ending signal means the stand-in (the handler's own re-raise
    // then flushes).
    int saved = errno;
    struct sigaction dfl = a;
    dfl.sa_handler = SIG_DFL;
    install_stand_in(sig, dfl);
    errno = saved;
  }
  if (a.sa_flags & SA_SIGINFO)
    a.sa_sigaction(sig, info, uc);
  else if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN)
    a.sa_handler(sig);
  if (sig == SIGABRT) {
    int saved = errno;
    // abort() kills the process now that the handler returned; a SIGABRT raised or sent
    // otherwise may be survived: then only what was recorded is written.
    if (t_aborting)
      end_process(g_reason[sig], kSignalWaitMs);
    else
      flush_now(kSignalWaitMs);
    errno = saved;
  }
}

// The disposition the program sees.
void program_view(int sig, struct sigaction* old) {
  if (g_mode[sig].load(std::memory_order_acquire) != kPassThrough)
    *old = g_prog[sig][g_prog_slot[sig].load(std::memory_order_acquire)];
  else
    real_sigaction()(sig, nullptr, old);
}

int apply(int sig, const struct sigaction& act) {
  if (act.sa_handler == SIG_DFL) return install_stand_in(sig, act);  // 0 in either field
  if (act.sa_handler != SIG_IGN && ((act.sa_flags & SA_RESETHAND) || sig == SIGABRT)) {
    struct sigaction k = act;
    k.sa_sigaction = trampoline;
    k.sa_flags = (act.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
    // The trampoline may run as soon as the kernel has it: the action it reads first.
    struct sigaction was = g_prog[sig][g_prog_slot[sig].load(std::memory_order_relaxed)];
    set_view(sig, act);
    int r = real_sigaction()(sig, &k, nullptr);
    if (r == 0)
      g_mode[sig].store(kWrapped, std::memory_order_release);
    else
      set_view(sig, was);
    return r;
  }
  int r = real_sigaction()(sig, &act, nullptr);
  if (r == 0) g_mode[sig].store(kPassThrough, std::memory_order_release);
  return r;
}

// sigaction for an ending signal: one update at a time, with every signal blocked meanwhile
// (a handler may call sigaction too: faulthandler restores the old action in its handler).
int ending_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  sigset_t all, was;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &was);
  while (g_update.test_and_set(std::memory_order_acquire)) sched_yield();
  struct sigaction view;
  if (old) program_view(sig, &view);
  int r = act ? apply(sig, *act) : 0;
  int err = errno;
  if (r == 0 && old) *old = view;
  g_update.clear(std::memory_order_release);
  pthread_sigmask(SIG_SETMASK, &was, nullptr);
  errno = err;
  return r;
}

// signal() and kin, by their glibc definitions: the old handler, or SIG_ERR.
sighandler_t set_handler(int sig, sighandler_t handler, int flags, bool mask_self) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (mask_self) sigaddset(&act.sa_mask, sig);
  if (ending_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
}  // namespace

namespace iot {
void signals_install() {
  (void)real_abort();  // resolved now: abort() may come when the heap is no longer usable
  for (int sig = 1; sig < kMaxSignal; sig++) {
    char* r = g_reason[sig];
    memcpy(r, "signal:", 7);
    if (sig < 10)
      r[7] = char('0' + sig), r[8] = 0;
    else
      r[7] = char('0' + sig / 10), r[8] = char('0' + sig % 10), r[9] = 0;
  }
  for (int sig : kEnding) {
    struct sigaction old;
    if (real_sigaction()(sig, nullptr, &old) != 0) continue;
    g_ending[sig] = true;
    // At start: the default becomes the stand-in; an inherited SIG_IGN stays as it is.
    if (old.sa_handler == SIG_DFL) install_stand_in(sig, old);
  }
}
}  // namespace iot

IOT_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!ending(sig)) return real_sigaction()(sig, act, old);
  return ending_sigaction(sig, act, old);
}

IOT_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (!ending(sig)) {
    static sighandler_t (*real)(int, sighandler_t) = nullptr;
    return next_fn(real, "signal")(sig, handler);
  }
  return set_handler(sig, handler, SA_RESTART, true);
}
IOT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) { return signal(sig, handler); }
IOT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  if (!ending(sig)) {
    static sighandler_t (*real)(int, sighandler_t) = nullptr;
    return next_fn(real, "sysv_signal")(sig, handler);
  }
  return set_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}
IOT_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return sysv_signal(sig, handler);
}

// abort() through the PLT: marks the thread, so that a SIGABRT handler that returns is known
// to be followed by the process's death (glibc's internal aborts, assert's and malloc's, come
// without the mark: their trace is flushed, not ended).
IOT_EXPORT void abort(void) {
  t_aborting = true;
  real_abort()();
  __builtin_unreachable();
}
