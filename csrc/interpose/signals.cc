// Which thread is running one of the program's signal handlers. The tracer starts its writer
// thread lazily, from whichever thread records past the threshold; pthread_create is not
// async-signal-safe (it takes malloc's lock and the thread-stack lock, and blocks signals while
// it waits): from a handler that interrupted malloc, pthread_create or pthread_join on the same
// thread, it would wait forever for a lock its own thread holds. So the program's handlers run
// through a trampoline that marks the thread (t_in_handler, buffer.h), and no writer is started
// from a marked thread: the next record made outside a handler starts it.
//
// What the program sees is unchanged: sigaction and signal() give back its own handler and
// flags, the kernel's SigCgt is the same, and a handler left by siglongjmp is seen as left (the
// stack pointer is back above the handler's frame). Handlers installed with raw system calls
// are not seen (docs/limits.md).
#include <signal.h>

#include "interpose.h"

using namespace iot;

namespace {
REAL_FN(sigaction, int (*)(int, const struct sigaction*, struct sigaction*))
REAL_FN(signal, sighandler_t (*)(int, sighandler_t))
REAL_FN(bsd_signal, sighandler_t (*)(int, sighandler_t))
REAL_FN(sysv_signal, sighandler_t (*)(int, sighandler_t))
REAL_FN(sigset, sighandler_t (*)(int, sighandler_t))

// The program's handler of each signal, where the kernel has the trampoline.
struct Handler {
  std::atomic<void*> fn{nullptr};
  std::atomic<bool> siginfo{false};  // called as sa_sigaction (three arguments)
  // SA_SIGINFO is the trampoline's, not the program's: the kernel keeps the flags when
  // SA_RESETHAND puts SIG_DFL back, so a read then must not show it.
  std::atomic<bool> added_siginfo{false};
};
Handler g_handlers[_NSIG];

// What the table says of a signal, copied (to put back, or to answer with).
struct Known {
  void* fn;
  bool siginfo, added_siginfo;
};
Known known(int sig) {
  const Handler& h = g_handlers[sig];
  return Known{h.fn.load(std::memory_order_acquire), h.siginfo.load(std::memory_order_relaxed),
               h.added_siginfo.load(std::memory_order_relaxed)};
}
// The program's handler and how to call it: the flags first, so that the trampoline never
// calls a new handler the way of the one before it.
void remember(int sig, Known k) {
  g_handlers[sig].siginfo.store(k.siginfo, std::memory_order_relaxed);
  g_handlers[sig].added_siginfo.store(k.added_siginfo, std::memory_order_relaxed);
  g_handlers[sig].fn.store(k.fn, std::memory_order_release);
}
void remember(int sig, void* fn, int flags) {
  remember(sig, Known{fn, (flags & SA_SIGINFO) != 0, !(flags & SA_SIGINFO)});
}

void call(void* fn, bool three, int sig, siginfo_t* info, void* uc) {
  if (three)
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(fn)(sig, info, uc);
  else
    reinterpret_cast<void (*)(int)>(fn)(sig);
}

// A handler that interrupted the tracer's own work (t_guard: making the thread's state, a
// drain, fork's bookkeeping) makes the program's calls, recorded like any: aside (t_busy), as
// the work it interrupted may hold the locks and the buffer that recording takes.
__attribute__((noinline)) void call_in_tracer_work(void* fn, bool three, int sig, siginfo_t* info,
                                                   void* uc) {
  const int guard = t_guard;
  t_guard = 0;
  t_busy++;
  call(fn, three, sig, info, uc);
  t_busy--;
  t_guard = guard;
}

// The stack pointer, without making the caller keep a frame pointer for it.
__attribute__((always_inline)) inline void* stack_pointer() {
#if defined(__x86_64__)
  void* sp;
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  return sp;
#elif defined(__aarch64__)
  void* sp;
  asm volatile("mov %0, sp" : "=r"(sp));
  return sp;
#else
  return __builtin_frame_address(0);
#endif
}

// One small frame on the handler's stack (an 8 KiB alternate stack is common).
__attribute__((optimize("omit-frame-pointer"))) void trampoline(int sig, siginfo_t* info,
                                                                void* uc) {
  if (sig <= 0 || sig >= _NSIG) return;
  void* fn = g_handlers[sig].fn.load(std::memory_order_acquire);
  bool three = g_handlers[sig].siginfo.load(std::memory_order_relaxed);
  if (!fn) return;
  if (t_in_handler++ == 0) t_handler_frame = stack_pointer();
  if (__builtin_expect(t_guard != 0, 0))
    call_in_tracer_work(fn, three, sig, info, uc);
  else
    call(fn, three, sig, info, uc);
  if (t_in_handler > 0) t_in_handler--;
}

bool is_function(void* h) {
  return h != reinterpret_cast<void*>(SIG_DFL) && h != reinterpret_cast<void*>(SIG_IGN) &&
         h != reinterpret_cast<void*>(SIG_HOLD) && h != reinterpret_cast<void*>(SIG_ERR);
}
void* trampoline_ptr() { return reinterpret_cast<void*>(&trampoline); }

bool wrapped_here(int sig) { return sig > 0 && sig < _NSIG && g_interposing && !in_vfork_child(); }

// After libc's signal(), sigset() ...: the handler it gave the kernel goes through the trampoline,
// with every other part of the action as libc made it (flags, mask).
void adopt(int sig) {
  struct sigaction cur;
  if (real_sigaction()(sig, nullptr, &cur) != 0) return;
  void* fn = reinterpret_cast<void*>(cur.sa_sigaction);
  if (!is_function(fn)) g_handlers[sig].added_siginfo.store(false, std::memory_order_relaxed);
  if (!is_function(fn) || fn == trampoline_ptr()) return;
  remember(sig, fn, cur.sa_flags);
  cur.sa_sigaction = &trampoline;
  cur.sa_flags |= SA_SIGINFO;
  real_sigaction()(sig, &cur, nullptr);
}

template <class Real>
sighandler_t signal_like(Real real, int sig, sighandler_t h) {
  if (!wrapped_here(sig)) return real(sig, h);
  KeepErrno keep;
  void* before = g_handlers[sig].fn.load(std::memory_order_acquire);
  sighandler_t r = real(sig, h);
  if (r == SIG_ERR) {
    keep.saved = errno;
    return r;
  }
  adopt(sig);
  // The previous handler, as the program knows it.
  return reinterpret_cast<void*>(r) == trampoline_ptr() ? reinterpret_cast<sighandler_t>(before)
                                                        : r;
}
}  // namespace

IOT_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!wrapped_here(sig)) return real_sigaction()(sig, act, old);
  const Known before = known(sig);
  struct sigaction mine;
  const struct sigaction* use = act;
  void* fn = act ? reinterpret_cast<void*>(act->sa_sigaction) : nullptr;
  if (act && is_function(fn) && fn != trampoline_ptr()) {
    mine = *act;
    mine.sa_sigaction = &trampoline;
    mine.sa_flags |= SA_SIGINFO;
    use = &mine;
    remember(sig, fn, act->sa_flags);  // known before the kernel can call the trampoline
  }
  int r = real_sigaction()(sig, use, old);
  int err = errno;
  if (r != 0 && use == &mine)
    remember(sig, before);  // refused: the table as it was
  else if (r == 0 && act && use == act)
    g_handlers[sig].added_siginfo.store(false, std::memory_order_relaxed);  // SIG_DFL, SIG_IGN
  if (r == 0 && old) {
    if (reinterpret_cast<void*>(old->sa_sigaction) == trampoline_ptr()) {
      old->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(before.fn);
      if (!before.siginfo) old->sa_flags &= ~SA_SIGINFO;
    } else if (before.added_siginfo) {
      old->sa_flags &= ~SA_SIGINFO;  // reset by SA_RESETHAND: the flags are still ours
    }
  }
  errno = err;
  return r;
}

IOT_EXPORT sighandler_t signal(int sig, sighandler_t h) {
  return signal_like(real_signal(), sig, h);
}
IOT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) {
  return signal_like(real_bsd_signal(), sig, h);
}
IOT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h) {
  return signal_like(real_sysv_signal(), sig, h);
}
IOT_EXPORT sighandler_t sigset(int sig, sighandler_t h) {
  return signal_like(real_sigset(), sig, h);
}

namespace iot {
bool in_signal_handler() {
  if (t_in_handler == 0) return false;
  // Left by a long jump: the stack is back above (older than) the outermost handler's frame.
  if (stack_pointer() > t_handler_frame) {
    t_in_handler = 0;
    return false;
  }
  return true;
}
}  // namespace iot
