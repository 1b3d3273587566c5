// The tracer's own stack, for its heavy work on a program thread (compressing the last frames
// at exit when no writer thread runs, finishing the trace of a child that died): the program's
// stack may be a signal handler's 8 KiB. One user at a time (a lock taken with signals
// blocked); every signal is blocked meanwhile, so no handler of the program runs on the tracer's
// stack (nor on an alternate stack the kernel would think free).
#pragma once

namespace iot {

// Run fn(arg) on the tracer's stack (mapped once, 512 KiB with a guard page below). false:
// that stack could not be had; fn(arg) then did not run.
bool on_tracer_stack(void (*fn)(void*), void* arg);
// A fork child: another thread of the parent may have held it.
void tracer_stack_after_fork();

}  // namespace iot
