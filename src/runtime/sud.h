/* Layer 2a (services, docs/architecture.md): arming Syscall User Dispatch on a thread, the
 * process's SIGSYS action, and what a trap's frame says of the call (sud.c). */
#ifndef DETACH_RUNTIME_SUD_H
#define DETACH_RUNTIME_SUD_H

#include <stdbool.h>
#include <ucontext.h>

#include "runtime/thread.h"

/* A thread's selector byte: its calls run natively, or trap */
#define SUD_ALLOW 0
#define SUD_BLOCK 1

/* What the program asked for SIGSYS: the runtime owns the real handler and
 * keeps the program's wish here (signals.c: do_sigaction). */
extern struct ksigaction dt_app_sigsys DT_HIDDEN;
/* The same for SIGTRAP, whose real action is intercept.c's in rewrite mode */
extern struct ksigaction dt_app_sigtrap DT_HIDDEN;
/* The SIGSYS action, with handler, the entry of every trap (intercept.c). */
int sud_install(void (*handler)(int, siginfo_t *, void *)) DT_HIDDEN;
int sud_arm(struct dt_thread *t) DT_HIDDEN;
void sud_disarm(struct dt_thread *t) DT_HIDDEN;
/* The frame of a call interrupted on the `syscall` instruction, about to
 * restart; and ending it with EINTR instead. */
bool frame_restart_pending(const ucontext_t *uc) DT_HIDDEN;
void frame_end_with_eintr(ucontext_t *uc) DT_HIDDEN;

#endif
