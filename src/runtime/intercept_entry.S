/* The SIGSYS handler's entry (layer 5, docs/architecture.md; intercept.c).
 *
 * A trap from code on no alternate stack, on a thread whose program set
 * one (sud mode's every call; rewrite mode's retraps), has its frame
 * written by the kernel at the top of the program's alternate stack.
 * Natively nothing is written there for a system call, and the program may
 * make that stack read-only from another thread at any moment (LTP's
 * signal06 toggles it in a loop): the C handler's first push faulted
 * there, and the SIGSEGV that followed (a handler without SA_ONSTACK: on
 * that same stack) could not be delivered.  So such a trap leaves that
 * stack here, before anything is written: onto the signal half of the
 * runtime's stack (stack.c), TRAP_COPY_ROOM below its top, and goes to
 * sigsys_moved (intercept.c), which copies the frame into that room and
 * returns from the copy; the program's stack is only read from then on.
 * Registers are free here: rt_sigreturn restores them all from the frame.
 * Every other signal and trap goes to sigsys_handler, on the stack the
 * kernel chose.
 *
 * On entry (the kernel's, as for any SA_SIGINFO handler):
 *   rdi  the signal number, rsi the siginfo, rdx the ucontext;
 *   rsp  the frame (its return address, to sys_sigreturn_restorer).
 */
#include "gen/runtime/asm_offsets.h"   /* asm_offsets.c: T_*, UC_RSP, SI_CODE, RT_*, NR_* */

	.text
	.globl sigsys_entry
	.hidden sigsys_entry
	.type sigsys_entry,@function
sigsys_entry:
	movq dt_self@gottpoff(%rip), %rax
	movq %fs:(%rax), %rax           /* t */
	testq %rax, %rax
	jz .Lin_place                   /* no detached thread: sigsys_handler says so */
	cmpl $2, SI_CODE(%rsi)          /* SYS_USER_DISPATCH: a trap */
	jne .Lin_place
	movq T_APP_SS_HI(%rax), %r8
	subq T_APP_SS_LO(%rax), %r8     /* the program's alternate stack's size, 0: none */
	movq %rsp, %rcx
	subq T_APP_SS_LO(%rax), %rcx
	cmpq %r8, %rcx
	jae .Lin_place                  /* the frame is not on it */
	movq UC_RSP(%rdx), %r9          /* the trapped code's rsp */
	movq %r9, %rcx
	subq T_APP_SS_LO(%rax), %rcx
	cmpq %r8, %rcx
	jb .Lin_place                   /* a handler's call on that stack: stack.c */
	subq T_STACK_LO(%rax), %r9
	cmpq $RT_STACK_SIZE, %r9
	jb .Lin_place                   /* a handler's call on ours: nests there */
	/* The program's signals wait until sigsys_moved has copied the frame
	 * and armed the program's stack again (it restores the frame's mask):
	 * the kernel disarmed that stack to run us (SS_AUTODISARM), so a
	 * signal taken after the switch below would run an SA_ONSTACK handler
	 * on the runtime's stack (Go aborts: "signal 23 received but handler
	 * not on signal stack", run_go_stack beside a loaded CPU), or, once
	 * armed, write its frame over the one not yet copied.  Faults stay
	 * open (blocked, the kernel would kill the process), and SIGSYS (a
	 * trap of ours here would be a bug, and a blocked one kills).  The
	 * `syscall` must lie in the allowed range and no call may push on
	 * the program's stack: a jump there and back, registers kept in
	 * callee-saved ones (all free: rt_sigreturn restores every register). */
	movq %rdi, %r12
	movq %rsi, %r13
	movq %rdx, %r14
	movq %rax, %r15
	movl $NR_rt_sigprocmask, %eax
	xorl %edi, %edi                 /* SIG_BLOCK */
	leaq stack_trap_blocked(%rip), %rsi   /* stack.c */
	xorl %edx, %edx                 /* no old set: the frame holds it */
	movl $8, %r10d
	jmp sigsys_entry_block
	.globl sigsys_entry_blocked
	.hidden sigsys_entry_blocked
sigsys_entry_blocked:
	movq %r12, %rdi
	movq %r13, %rsi
	movq %r14, %rdx
	movq %r15, %rax
	movq T_STACK_LO(%rax), %rsp
	addq $(RT_STACK_SIGNAL_SIZE - RT_TRAP_COPY_ROOM - 8), %rsp
	movq $0, (%rsp)                 /* no return: an unwinder stops here */
	jmp sigsys_moved
.Lin_place:
	jmp sigsys_handler
	.size sigsys_entry, .-sigsys_entry

	/* the block's `syscall`, in the range Syscall User Dispatch allows */
	.section detach_allow,"ax",@progbits
	.type sigsys_entry_block,@function
sigsys_entry_block:
	syscall
	jmp sigsys_entry_blocked
	.size sigsys_entry_block, .-sigsys_entry_block
	.section .note.GNU-stack,"",@progbits
