/* The contract between the runtime's C and its assembly, the kernel's
 * asm-offsets technique: every structure offset, size and system call
 * number that a .S file of src/runtime uses is computed here by the
 * compiler from the C declarations, never typed by hand.
 *
 * This file is compiled to assembly only (-S), never linked.  Each DEFINE
 * leaves a line `.ascii "->NAME VALUE"` in build/src/runtime/asm_offsets.s;
 * the Makefile turns those lines into build/gen/runtime/asm_offsets.h
 * (`#define NAME VALUE`), which the .S files include.  The compile's
 * dependency file names every header read here, so a change of struct
 * dt_thread or struct wait_record regenerates the header and reassembles
 * the .S files that use it: a field moved can no longer leave the
 * trampoline reading the wrong word.
 *
 * What the assembly assumes beyond a value (the width of the instruction
 * that reads a field) is asserted here too, next to the value. */
#include "runtime/call.h"
#include "runtime/clock.h"
#include "runtime/intercept.h"
#include "runtime/rewrite.h"
#include "runtime/stack.h"
#include "runtime/sys.h"
#include "runtime/thread.h"
#include "lib/registry.h"

#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <ucontext.h>

/* %0 prints the value as an immediate, `$` first: the Makefile drops it */
#define DEFINE(sym, val) __asm__ volatile("\n.ascii \"->" #sym " %0\"" : : "i"((long)(val)))
#define FIELD_SIZE(type, member) sizeof(((type *)0)->member)

void asm_offsets(void);
void asm_offsets(void)
{
	/* System call numbers: the calls the trampoline sends back to the
	 * site's own `syscall` (trampoline.S), and the raw rt_sigreturn of
	 * stubs.S. */
	DEFINE(NR_rt_sigreturn, SYS_rt_sigreturn);
	DEFINE(NR_rt_sigprocmask, SYS_rt_sigprocmask);
	DEFINE(NR_clone, SYS_clone);
	DEFINE(NR_fork, SYS_fork);
	DEFINE(NR_vfork, SYS_vfork);
	DEFINE(NR_clone3, SYS_clone3);
	/* dt_general_only[] (rewrite.c), indexed by the call number: one byte each */
	DEFINE(DT_NR_SYSCALLS, DT_NR_SYSCALLS);
	DEFINE(EFAULT, EFAULT);                 /* uaccess.S's -EFAULT */
	DEFINE(RED_ZONE, RED_ZONE);

	/* The stubs and the table of their return addresses (rewrite.c):
	 * trampoline.S probes dt_rewritten_sites as table_has does, and sends
	 * a call back to the site through the stub's ret+RET_TO_SITE. */
	DEFINE(REWRITE_SITES, REWRITE_SITES);
	DEFINE(REWRITE_HASH_MUL, REWRITE_HASH_MUL);
	DEFINE(REWRITE_HASH_SHIFT, REWRITE_HASH_SHIFT);
	DEFINE(RET_TO_SITE, RET_TO_SITE);
	DEFINE(FLAGS_ARITH_ONLY, FLAGS_ARITH_ONLY);  /* the way back's flags without popfq */
	DEFINE(RET_RCX_DISP, RET_RCX_DISP);
	DEFINE(RET_RCX_NEXT, RET_RCX_NEXT);

	/* struct dt_thread (thread.h), through dt_self */
	DEFINE(T_VFORK_CHILD, offsetof(struct dt_thread, vfork_child));
	_Static_assert(FIELD_SIZE(struct dt_thread, vfork_child) == 1, "trampoline.S: cmpb");
	DEFINE(T_STACK_LO, offsetof(struct dt_thread, stack_lo));
	DEFINE(T_STACK_HI, offsetof(struct dt_thread, stack_hi));
	DEFINE(T_APP_SS_LO, offsetof(struct dt_thread, app_ss_lo));
	DEFINE(T_APP_SS_HI, offsetof(struct dt_thread, app_ss_hi));
	_Static_assert(FIELD_SIZE(struct dt_thread, stack_lo) == 8 && FIELD_SIZE(struct dt_thread, stack_hi) == 8 &&
		       FIELD_SIZE(struct dt_thread, app_ss_lo) == 8 && FIELD_SIZE(struct dt_thread, app_ss_hi) == 8,
		       "trampoline.S: cmpq, movq");
	DEFINE(T_GATE_MASK, offsetof(struct dt_thread, gate_mask));
	DEFINE(T_GATE_TOP, offsetof(struct dt_thread, gate_top));
	DEFINE(GATE_PACKET, GATE_PACKET);
	DEFINE(SIG_SETMASK, SIG_SETMASK);       /* the clone gate's rt_sigprocmask */
	DEFINE(T_OBSERVED, offsetof(struct dt_thread, observed));
	_Static_assert(FIELD_SIZE(struct dt_thread, observed) == 1, "trampoline.S: cmpb");
	DEFINE(T_INTR_FIRST, offsetof(struct dt_thread, intr_first));
	_Static_assert(FIELD_SIZE(struct dt_thread, intr_first) == 4, "clock_resume.S: cmpl, movl; stubs.S: cmpxchgl");

	/* struct wait_record (clock.h): a sleep's rest, in the trampoline's
	 * frame or below the program's red zone (clock_resume.S) */
	DEFINE(W_SIZE, sizeof(struct wait_record));
	DEFINE(W_RIP, offsetof(struct wait_record, rip));
	DEFINE(W_RET_TO, offsetof(struct wait_record, ret_to));
	DEFINE(W_TSC_END, offsetof(struct wait_record, tsc_end));
	_Static_assert(FIELD_SIZE(struct wait_record, rip) == 8 && FIELD_SIZE(struct wait_record, ret_to) == 8 &&
		       FIELD_SIZE(struct wait_record, tsc_end) == 8, "clock_resume.S: cmpq, movq");

	/* the kernel's signal frame: rax of a ucontext_t (stubs.S's vfork parent) */
	DEFINE(UC_RAX, offsetof(ucontext_t, uc_mcontext.gregs[REG_RAX]));
	/* dt_app_restorer (stubs.S): the frame's rip, the siginfo after the
	 * kernel's ucontext, and its CFI, which names each register's slot
	 * with literal bytes (DWARF's sleb128 of these offsets) */
	DEFINE(UC_RIP, offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]));
	DEFINE(KUC_SIZE, KERNEL_UCONTEXT_SIZE);
	_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_R8]) == 40 &&
		       offsetof(ucontext_t, uc_mcontext.gregs[REG_RDI]) == 104 &&
		       offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]) == 160 &&
		       offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]) == 168, "stubs.S: dt_app_restorer's CFI");
	/* intercept_entry.S: the runtime's stack, a trap's frame */
	DEFINE(RT_STACK_SIZE, STACK_SIZE);
	DEFINE(RT_STACK_SIGNAL_SIZE, STACK_SIGNAL_SIZE);
	DEFINE(RT_TRAP_COPY_ROOM, TRAP_COPY_ROOM);
	DEFINE(UC_RSP, offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]));
	DEFINE(SI_CODE, offsetof(siginfo_t, si_code));
	DEFINE(T_HANDLER_RETURNS, offsetof(struct dt_thread, handler_returns));
	/* dt_app_restorer: the mask the frame restores, the record of its
	 * SIGTTIN and SIGTTOU bits (an imm32 for andq) */
	DEFINE(UC_SIGMASK, offsetof(ucontext_t, uc_sigmask));
	DEFINE(T_TTY_BLOCKED, offsetof(struct dt_thread, mb.tty_blocked));
	DEFINE(TTY_SIGNALS_BITS, TTY_SIGNALS);
	_Static_assert(TTY_SIGNALS < 0x80000000u && FIELD_SIZE(struct mailbox, tty_blocked) == 8,
		       "stubs.S: andq $imm32, cmpq");
	_Static_assert(offsetof(ucontext_t, uc_sigmask) == KERNEL_UCONTEXT_SIZE - 8, "the kernel's uc_sigmask");
	_Static_assert(FIELD_SIZE(struct dt_thread, handler_returns) == 4, "stubs.S: incl");
}
