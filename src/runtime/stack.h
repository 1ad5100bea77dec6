/* Layer 2a (services, docs/architecture.md): the runtime's own stack of a thread, and its
 * alternate signal stack (stack.c). */
#ifndef DETACH_RUNTIME_STACK_H
#define DETACH_RUNTIME_STACK_H

#include <signal.h>
#include <ucontext.h>

#include "runtime/thread.h"

#define STACK_SIZE (256 * 1024)
/* the lower half is the alternate (signal) stack, the upper the trampoline's */
#define STACK_SIGNAL_SIZE (STACK_SIZE / 2)
/* The signal half holds the work of moved traps nested in each other, each
 * at a level of its own from the top down (stack_trap_move): the first
 * takes the frame's copy (TRAP_COPY_ROOM, intercept.h) and its work, a
 * nested one its work; the deepest path of ours is 9-12 KB below its
 * start.  A trap nested deeper than the levels runs where it is. */
#define STACK_TRAP_LEVEL_SIZE (40 * 1024)
#define STACK_TRAP_LEVELS (STACK_SIGNAL_SIZE / STACK_TRAP_LEVEL_SIZE)

int stack_give(struct dt_thread *t) DT_HIDDEN;   /* 0 or -errno */
void stack_return(struct dt_thread *t) DT_HIDDEN;
void stack_set_program(struct dt_thread *t, const stack_t *ss) DT_HIDDEN;
void stack_arm(struct dt_thread *t) DT_HIDDEN;
void stack_disarm(struct dt_thread *t) DT_HIDDEN;
void stack_real(const struct dt_thread *t, stack_t *real) DT_HIDDEN;
void stack_on_return(const struct dt_thread *t, ucontext_t *uc, bool moved) DT_HIDDEN;
uintptr_t stack_trap_move(struct dt_thread *t, const ucontext_t *uc) DT_HIDDEN;
bool stack_on_program_altstack(const struct dt_thread *t) DT_HIDDEN;
void stack_trap_leaves(struct dt_thread *t, uintptr_t sp) DT_HIDDEN;
unsigned stack_trap_moved(struct dt_thread *t) DT_HIDDEN;
/* The program's signals blocked while a moved trap's frame or its way back
 * is in use and a trap could move onto it: from the entry until the frame
 * is copied (intercept_entry.S), from the end of the trap until its
 * rt_sigreturn (stack_trap_leaves) */
extern const uint64_t stack_trap_blocked DT_HIDDEN;
void stack_trap_arm_below(const struct dt_thread *t, uintptr_t live) DT_HIDDEN;

#endif
