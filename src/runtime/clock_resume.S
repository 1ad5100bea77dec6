/* The end of a timed wait whose call trapped (clock.c: timed_sleep).
 *
 * A trapped call returns through the kernel: the SIGSYS handler's
 * rt_sigreturn, microseconds whose length varies from one call to the next.
 * A wait that ended inside the handler would hand all of that variation to
 * the program's wake-up.  So the handler waits until shortly before the
 * deadline and points the frame's rip here; rt_sigreturn brings back every
 * register of the program (vector state included) and the wait ends in
 * user space, in timed_wait_resume, with nothing between the deadline and
 * the program but this code.  On entry:
 *   rsp  the wait's record (struct wait_record, clock.c), written by the
 *        handler below the program's red zone: the program's rsp is
 *        rsp + RECORD + RED_ZONE
 *   rax  nothing yet: the call's result comes from timed_wait_resume
 *   rcx r11 free: a real syscall clobbers them (return address, flags)
 *   every other register as at the trapped `syscall`
 * The record lives on the program's stack so that a handler that runs
 * during the wait and makes a trapped sleep of its own, below it, has its
 * own.  clock.c comes here only when that stack is none of the runtime's
 * and no forwarded call is in flight: the trampoline's half of the
 * runtime's stack is free (stack.c), and a handler that runs while we are
 * on it runs on a stack of the runtime's or on the program's alternate
 * stack, never on it from the top.
 *
 * The part up to the C call's return lies in `detach_wait`: a handler that
 * runs there ends the wait with EINTR (signals.c), as inside
 * timed_wait_until.  The part after it does not: the wait is over, a
 * handler that runs then does not make it fail.  The C function is entered
 * with a `call`, so that its return is predicted; a handler that runs at
 * the one instruction after that call, in `detach_wait`, finds the wait
 * over and leaves a mark (intr_signo) that dt_wait_resumed clears. */
#define RED_ZONE   128
#define RECORD     32           /* sizeof(struct wait_record), checked in clock.c */
#define R_RIP      24           /* offsetof(struct wait_record, rip) */
#define T_STACK_HI 208          /* offsetof(struct dt_thread, stack_hi), checked in stack.c */
#define T_INTR_SIGNO 320        /* offsetof(struct dt_thread, intr_signo), checked in clock.c */

	.section detach_wait,"ax",@progbits
	.globl dt_wait_resume
	.hidden dt_wait_resume
	.type dt_wait_resume,@function
dt_wait_resume:
	pushfq                          /* rsp = F, the record above it */
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	movq %rsp, %rcx
	movq T_STACK_HI(%r11), %rsp
	pushq %rcx                      /* F, the way back */
	cld                             /* the C ABI wants DF clear */
	/* The registers the C code may change and the program keeps across
	 * a syscall (rbx rbp r12-r15 the C code keeps itself).  No vector
	 * state: clock.c is built with -mgeneral-regs-only and reads the clock
	 * through the vDSO, which uses none (clock.c: timed_wait_general_only). */
	pushq %rdi
	pushq %rsi
	pushq %rdx
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %rbp
	movq %rsp, %rbp
	andq $-16, %rsp
	movq %r11, %rdi                 /* t */
	leaq 8(%rcx), %rsi              /* the record */
	call timed_wait_resume
	jmp dt_wait_resumed             /* rax: the call's result */
	.size dt_wait_resume, .-dt_wait_resume

	.text
	.type dt_wait_resumed,@function
dt_wait_resumed:
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	movl $0, T_INTR_SIGNO(%r11)     /* see above: the wait is over */
	movq %rbp, %rsp
	popq %rbp
	popq %r10
	popq %r9
	popq %r8
	popq %rdx
	popq %rsi
	popq %rdi
	popq %rsp                       /* F, on the program's stack */
	movq (%rsp), %r11               /* r11: the flags, as the kernel leaves it */
	popfq                           /* rsp = the record */
	movq R_RIP(%rsp), %rcx          /* rcx: the return address, as the kernel leaves it */
	leaq RECORD+RED_ZONE(%rsp), %rsp   /* lea: the flags stay; the program's rsp */
	jmp *%rcx
	.size dt_wait_resumed, .-dt_wait_resumed

	.section .note.GNU-stack,"",@progbits
