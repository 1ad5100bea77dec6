/* The runtime's own system call instructions.
 *
 * Everything in the section `detach_allow` is the address range given to
 * Syscall User Dispatch (intercept.c): a `syscall` here always runs, so the
 * runtime never traps on its own calls and never has to flip the selector.
 * Nothing else of the runtime may execute `syscall` on a detached thread.
 *
 * Register use follows the x86-64 syscall ABI: number in rax, arguments in
 * rdi, rsi, rdx, r10, r8, r9; the instruction clobbers rcx and r11.
 */
#include "gen/runtime/asm_offsets.h"   /* asm_offsets.c: NR_rt_sigreturn, UC_RAX */

/* From the C calling convention (nr, a1..a5 in rdi rsi rdx rcx r8 r9) to
 * the syscall one (rax; rdi rsi rdx r10 r8); the sixth argument, where
 * there is one, comes from the stack. */
.macro C_TO_SYSCALL_ARGS
	movq %rdi, %rax
	movq %rsi, %rdi
	movq %rdx, %rsi
	movq %rcx, %rdx
	movq %r8, %r10
	movq %r9, %r8
.endm

.macro SIGNAL_FRAME_CFI
	.cfi_startproc simple
	.cfi_signal_frame
	/* DW_CFA_def_cfa_expression: *(rsp + 160), uc_mcontext's rsp */
	.cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06
	/* DW_CFA_expression REG: rsp + the slot of REG in uc_mcontext.gregs
	 * (asm_offsets.c checks the offsets: r8 at 40 .. rip at 168) */
	.cfi_escape 0x10, 0x08, 0x02, 0x77, 0x28               /* r8   40 */
	.cfi_escape 0x10, 0x09, 0x02, 0x77, 0x30               /* r9   48 */
	.cfi_escape 0x10, 0x0a, 0x02, 0x77, 0x38               /* r10  56 */
	.cfi_escape 0x10, 0x0b, 0x03, 0x77, 0xc0, 0x00         /* r11  64 */
	.cfi_escape 0x10, 0x0c, 0x03, 0x77, 0xc8, 0x00         /* r12  72 */
	.cfi_escape 0x10, 0x0d, 0x03, 0x77, 0xd0, 0x00         /* r13  80 */
	.cfi_escape 0x10, 0x0e, 0x03, 0x77, 0xd8, 0x00         /* r14  88 */
	.cfi_escape 0x10, 0x0f, 0x03, 0x77, 0xe0, 0x00         /* r15  96 */
	.cfi_escape 0x10, 0x05, 0x03, 0x77, 0xe8, 0x00         /* rdi 104 */
	.cfi_escape 0x10, 0x04, 0x03, 0x77, 0xf0, 0x00         /* rsi 112 */
	.cfi_escape 0x10, 0x06, 0x03, 0x77, 0xf8, 0x00         /* rbp 120 */
	.cfi_escape 0x10, 0x03, 0x03, 0x77, 0x80, 0x01         /* rbx 128 */
	.cfi_escape 0x10, 0x01, 0x03, 0x77, 0x88, 0x01         /* rdx 136 */
	.cfi_escape 0x10, 0x00, 0x03, 0x77, 0x90, 0x01         /* rax 144 */
	.cfi_escape 0x10, 0x02, 0x03, 0x77, 0x98, 0x01         /* rcx 152 */
	.cfi_escape 0x10, 0x07, 0x03, 0x77, 0xa0, 0x01         /* rsp 160 */
	.cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01         /* rip 168 */
.endm

	.section detach_allow,"ax",@progbits

/* long sys_call6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) */
	.globl sys_call6
	.hidden sys_call6
	.type sys_call6,@function
sys_call6:
	C_TO_SYSCALL_ARGS
	movq 8(%rsp), %r9
	syscall
	ret
	.size sys_call6, .-sys_call6

/* A rewritten site's call on a thread that is not detached (trampoline.S):
 * rsp at the stub's return address, the program's registers and flags as
 * at the site.  The stub sets rcx; r11 is the kernel's (the flags).  Its
 * CFI is trampoline.S's at its entry (see there): a backtrace of a thread
 * blocked here walks on to the site's function and its callers. */
	.globl dt_native_syscall
	.hidden dt_native_syscall
	.type dt_native_syscall,@function
dt_native_syscall:
	.cfi_startproc simple
	.cfi_def_cfa %rsp, RED_ZONE + 8
	.cfi_escape 0x16, 0x10, 27, 0x10, (RED_ZONE + 8) & 0x7f | 0x80, (RED_ZONE + 8) >> 7, 0x1c, 0x06, \
		    0x12, 0x23, RET_RCX_DISP, 0x94, 0x04, 0x10, 0x80, 0x80, 0x80, 0x80, 0x08, 0x27, \
		    0x10, 0x80, 0x80, 0x80, 0x80, 0x08, 0x1c, 0x22, 0x23, RET_RCX_NEXT
	syscall
	/* not a `ret` at the address a blocked call shows: gdb takes a
	 * `ret` there for a function's epilogue (rsp + 8) and ignores the
	 * CFI of code that an assembler made */
	nop
	ret
	.cfi_endproc
	.size dt_native_syscall, .-dt_native_syscall

/* The sa_restorer of the runtime's SIGSYS handler.  glibc's __restore_rt
 * lies outside the allowed range: returning through it would trap inside a
 * trap.  The kernel enters here with rsp at the signal frame's ucontext.
 * It carries a signal frame's CFI, as dt_app_restorer (below) says, so that
 * a debugger's or a profiler's backtrace of a call that trapped (sud mode,
 * a first trap, a retrap) walks on from the trap to the program's frames
 * (the trapped site, its function and its callers), as it walks from a
 * system call natively; without it, it stopped here. */
	.p2align 4
	SIGNAL_FRAME_CFI
	nop
	.globl sys_sigreturn_restorer
	.hidden sys_sigreturn_restorer
	.type sys_sigreturn_restorer,@function
sys_sigreturn_restorer:
	movl $NR_rt_sigreturn, %eax
	syscall
	ud2
	.cfi_endproc
	.size sys_sigreturn_restorer, .-sys_sigreturn_restorer

/* The sa_restorer of the program's handlers (signals.c, restorer_for):
 * the kernel enters here with rsp at the handler's frame's ucontext, as it
 * enters glibc's __restore_rt, and rt_sigreturn runs here, in the allowed
 * range, without a trap.  A trapped rt_sigreturn would need a SIGSYS frame
 * below the handler's, on the program's alternate stack: room a stack
 * sized for one frame lacks (8 KiB: LTP's sigaltstack01), and a write the
 * program does not expect, to a stack it may have made read-only while its
 * handler ran (LTP's signal06); natively the return writes nothing.  So
 * nothing here writes to the stack: registers only (rt_sigreturn restores
 * them all from the frame), and the thread's record through dt_self.
 * What do_sigreturn (signals.c) records of a return, recorded here:
 *   handler_returns  a handler of the program returned (waits.c);
 *   intr_first       it ran on top of the wait for the proxy: the frame's
 *                    rip is in the section detach_wait, its number in the
 *                    siginfo after the kernel's ucontext (the action has
 *                    SA_SIGINFO: do_sigaction makes sure of it), kept
 *                    only where no earlier handler's is (thread.h);
 *   tty_blocked      the SIGTTIN and SIGTTOU bits of the mask the return
 *                    restores, which the proxy follows (proxy.c).
 * On a thread not detached (dt_self NULL) only the mark is kept, in
 * dt_orphan_intr, where a fork child made by a handler on top of a wait
 * finds it (proxy.c, wait_orphaned).
 * Every register is free here: rt_sigreturn reloads them all from the
 * frame (rax, rcx, rdx and r8 are used).
 * Unwinders (libgcc's, gdb's, glibc's backtrace in a handler) know a
 * signal frame by glibc's CFI for __restore_rt or by its bytes: this has
 * the same CFI (a signal frame, each register at its slot of the
 * ucontext at rsp, the CFA at the saved rsp), from the `nop` before it,
 * since they look a return address up at one byte before it. */
	.p2align 4
	SIGNAL_FRAME_CFI
	nop
	.globl dt_app_restorer
	.hidden dt_app_restorer
	.type dt_app_restorer,@function
dt_app_restorer:
	movq dt_self@gottpoff(%rip), %rax
	movq %fs:(%rax), %rax           /* t; NULL: a thread not detached */
	testq %rax, %rax
	jz 3f
	incl T_HANDLER_RETURNS(%rax)
	/* the mask this return restores is the thread's from now on: its
	 * proxy blocks SIGTTIN and SIGTTOU as it does (signals.c,
	 * tty_blocked_is; written only when it changes) */
	movq UC_SIGMASK(%rsp), %rcx
	andq $TTY_SIGNALS_BITS, %rcx
	cmpq %rcx, T_TTY_BLOCKED(%rax)
	je 2f
	movq %rcx, T_TTY_BLOCKED(%rax)
2:	leaq T_INTR_FIRST(%rax), %r8    /* where the mark goes */
4:	movq UC_RIP(%rsp), %rcx
	leaq __start_detach_wait(%rip), %rdx
	cmpq %rdx, %rcx
	jb 1f
	leaq __stop_detach_wait(%rip), %rdx
	cmpq %rdx, %rcx
	jae 1f
	movl KUC_SIZE(%rsp), %ecx       /* si_signo */
	leal -1(%rcx), %edx
	cmpl $63, %edx                  /* 1..64, or the action had no SA_SIGINFO */
	ja 1f
	xorl %eax, %eax                 /* stored only over 0: the first decides */
	/* one instruction, without lock: no handler of this thread can run
	 * between its compare and its store, and no other thread writes the
	 * field */
	cmpxchgl %ecx, (%r8)
1:	movl $NR_rt_sigreturn, %eax
	syscall
	ud2
	/* Not detached, returning into a wait for a proxy all the same: a
	 * fork child made by this handler (or by one nested in it), in its
	 * copy of the wait, which no proxy answers; the mark, in
	 * dt_orphan_intr, tells it how the call goes on (proxy.c,
	 * wait_orphaned).  %fs:0 is the thread pointer (the TCB's pointer to
	 * itself, x86-64 TLS ABI). */
3:	movq %fs:0, %r8
	addq dt_orphan_intr@gottpoff(%rip), %r8
	jmp 4b
	.cfi_endproc
	.size dt_app_restorer, .-dt_app_restorer
	.hidden __start_detach_wait
	.hidden __stop_detach_wait

/* noreturn void sys_sigreturn_at(void *uc): rt_sigreturn reads the frame's
 * ucontext at rsp (the handler's `ret` has already popped pretcode). */
	.globl sys_sigreturn_at
	.hidden sys_sigreturn_at
	.type sys_sigreturn_at,@function
sys_sigreturn_at:
	movq %rdi, %rsp
	movl $NR_rt_sigreturn, %eax
	syscall
	ud2
	.size sys_sigreturn_at, .-sys_sigreturn_at

/* long sys_clone_resume(nr, a1, a2, a3, a4, a5, child_uc, parent_uc)
 *
 * Runs clone, clone3, fork or vfork for the detached thread.  A child that
 * shares our memory must not return through the handler's stack frames: a
 * thread starts on a stack of its own, a vfork child borrows ours and
 * overwrites it.  So such a child (child_uc != 0) leaves through a copy of
 * the trap's signal frame prepared by the caller, with rax = 0 and its own
 * rsp in it.  Before anything else it moves itself to the housekeeping CPUs,
 * so that it never competes with the detached thread on its CPU
 * (sys_on_clone_child: threads.c's dt_child_placement, registered at start;
 * a pointer, because this layer calls nothing above it).
 * The word just below the frame copy is what the child inherits (the
 * parent's seccomp filters, lifecycle.c): it is the argument of
 * sys_on_clone_child.
 * A vfork parent (parent_uc != 0) finds its stack used by the child: it too
 * leaves through the frame copy, with rax = the child's pid.
 * child_uc and parent_uc travel in rbx and r12: callee-saved registers that
 * the syscall preserves and the child inherits. */
	.globl sys_clone_resume
	.hidden sys_clone_resume
	.type sys_clone_resume,@function
sys_clone_resume:
	pushq %rbx
	pushq %r12
	movq 24(%rsp), %rbx             /* child_uc  (7th argument) */
	movq 32(%rsp), %r12             /* parent_uc (8th argument) */
	C_TO_SYSCALL_ARGS
	syscall
	testq %rax, %rax
	jz 2f
	testq %r12, %r12                /* parent or error */
	jz 1f
	cmpq $-4095, %rax               /* vfork failed: the stack is intact */
	jae 1f
	movq %rax, UC_RAX(%r12)
	andq $-16, %rsp                 /* the child is gone: our stack is ours */
	movq %r12, %rdi                 /* parent_uc */
	call *sys_on_vfork_parent(%rip)
	movq %r12, %rsp
	movl $NR_rt_sigreturn, %eax
	syscall
	ud2
1:	popq %r12
	popq %rbx
	ret
2:	testq %rbx, %rbx                /* child */
	jz 1b                           /* no shared memory: return normally */
	/* Below the frame copy is free: on a new stack, nothing of the
	 * program's yet; in the vfork buffer, the rest of the buffer. */
	leaq -64(%rbx), %rsp
	andq $-16, %rsp
	movq -8(%rbx), %rdi
	call *sys_on_clone_child(%rip)
	movq %rbx, %rsp
	movl $NR_rt_sigreturn, %eax
	syscall
	ud2
	.size sys_clone_resume, .-sys_clone_resume

/* The clone gate's `syscall` (trampoline.S): a detached thread's vfork,
 * fork or clone3 at a rewritten site, with the program's registers.
 * Jumped to and back, never called: a vfork child and its parent share the
 * stack, and the child's calls would overwrite a return address before
 * the parent read it. */
	.globl dt_clone_gate
	.hidden dt_clone_gate
	.type dt_clone_gate,@function
dt_clone_gate:
	syscall
	jmp dt_clone_gate_back
	.size dt_clone_gate, .-dt_clone_gate

	.text
/* long sys_proxy_call(nr, a1, a2, a3, a4, a5, a6, volatile uint8_t *intr)
 * Runs on a proxy (never armed): needs no special section.  The window
 * [sys_proxy_call_check, sys_proxy_call_insn] is what the proxy's interrupt
 * handler (proxy.c) inspects.  A call cancelled before the kernel was
 * entered (*intr == INTR_CANCEL: its caller longjmp'd away) ends with
 * -EINTR without running.  rcx is zeroed before the window: the `syscall`
 * instruction sets it to its return address, so a signal frame with rip at
 * the instruction and rcx == rip + 2 says "entered, and about to be
 * restarted by the kernel", rcx == 0 "not entered yet". */
	.globl sys_proxy_call
	.hidden sys_proxy_call
	.globl sys_proxy_call_check
	.hidden sys_proxy_call_check
	.globl sys_proxy_call_insn
	.hidden sys_proxy_call_insn
	.globl sys_proxy_call_eintr
	.hidden sys_proxy_call_eintr
	.type sys_proxy_call,@function
sys_proxy_call:
	movq 16(%rsp), %r11             /* intr (r11 is dead until the syscall) */
	C_TO_SYSCALL_ARGS
	movq 8(%rsp), %r9
	xorl %ecx, %ecx                 /* "not entered" (see above) */
sys_proxy_call_check:
	cmpb $1, (%r11)
	je sys_proxy_call_eintr
sys_proxy_call_insn:
	syscall
	ret
sys_proxy_call_eintr:
	movq $-4, %rax                  /* -EINTR */
	ret
	.size sys_proxy_call, .-sys_proxy_call

/* void sys_run_on(fn, a, b, sp): fn(a, b, live) with rsp = sp (aligned
 * down to 16 here), back on the caller's stack after.  live: the lowest
 * address of the caller's stack still in use (its return address and
 * our saved rbp); everything below it is free while fn runs.  rbp is
 * callee-saved, so fn keeps the way back. */
	.globl sys_run_on
	.hidden sys_run_on
	.type sys_run_on,@function
sys_run_on:
	pushq %rbp
	movq %rsp, %rbp
	andq $-16, %rcx
	movq %rcx, %rsp
	movq %rdi, %rax
	movq %rsi, %rdi
	movq %rdx, %rsi
	movq %rbp, %rdx                 /* live */
	call *%rax
	movq %rbp, %rsp
	popq %rbp
	ret
	.size sys_run_on, .-sys_run_on

	.section .note.GNU-stack,"",@progbits

/* The two calls sys_clone_resume makes upward, registered by the runtime's
 * start (init.c): a pointer each, so that nothing here names a function of
 * a layer above. */
	.data
	.balign 8
	.globl sys_on_clone_child
	.hidden sys_on_clone_child
sys_on_clone_child:
	.quad 0
	.globl sys_on_vfork_parent
	.hidden sys_on_vfork_parent
sys_on_vfork_parent:
	.quad 0
