#include "tracer_stack.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sysmem.h"

// Call fn(arg) with the stack pointer at `top`; back on the caller's stack on return.
extern "C" void iot_call_on_stack(void* arg, void (*fn)(void*), void* top);

#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl iot_call_on_stack\n"
    ".hidden iot_call_on_stack\n"
    ".type iot_call_on_stack, @function\n"
    "iot_call_on_stack:\n"
    "  pushq %rbp\n"
    "  movq %rsp, %rbp\n"
    "  movq %rdx, %rsp\n"  // 16-byte aligned: the call pushes the return address
    "  callq *%rsi\n"      // fn(arg): arg is already in %rdi
    "  movq %rbp, %rsp\n"
    "  popq %rbp\n"
    "  retq\n"
    ".size iot_call_on_stack, .-iot_call_on_stack\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n"
    ".globl iot_call_on_stack\n"
    ".hidden iot_call_on_stack\n"
    ".type iot_call_on_stack, %function\n"
    "iot_call_on_stack:\n"
    "  stp x29, x30, [sp, #-16]!\n"
    "  mov x29, sp\n"
    "  mov sp, x2\n"
    "  blr x1\n"  // fn(arg): arg is already in x0
    "  mov sp, x29\n"
    "  ldp x29, x30, [sp], #16\n"
    "  ret\n"
    ".size iot_call_on_stack, .-iot_call_on_stack\n");
#endif

namespace iot {

namespace {
constexpr size_t kStackBytes = 512 << 10;
constexpr size_t kGuard = 4096;
char* g_stack = nullptr;  // its lowest byte (the guard page); mapped on first use
// One user at a time. Taken with every signal blocked: no handler can interrupt its holder.
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
}  // namespace

bool on_tracer_stack(void (*fn)(void*), void* arg) {
#if defined(__x86_64__) || defined(__aarch64__)
  sigset_t all, was;
  sigfillset(&all);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &was, _NSIG / 8);
  pthread_mutex_lock(&g_mu);
  if (!g_stack && (g_stack = static_cast<char*>(sys_map(kStackBytes))))
    syscall(SYS_mprotect, g_stack, kGuard, PROT_NONE);  // an overflow faults, not corrupts
  if (g_stack) iot_call_on_stack(arg, fn, g_stack + kStackBytes);
  bool ran = g_stack != nullptr;
  pthread_mutex_unlock(&g_mu);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &was, nullptr, _NSIG / 8);
  return ran;
#else
  fn(arg);
  return true;
#endif
}

void tracer_stack_after_fork() { pthread_mutex_init(&g_mu, nullptr); }

}  // namespace iot
