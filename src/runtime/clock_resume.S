/* The end of a sleep's wait, next to the program (clock.c: timed_sleep).
 *
 * An interrupt during a wait (the tick, a host's exit) overwrites the
 * return-address predictor and evicts L1.  Every `ret` between the end of
 * the wait and the program whose `call` was made before that interrupt then
 * mispredicts; how many there are decides how much the wake-up varies from
 * one period to the next.  So a sleep's wait ends here, in a frame with no
 * return after it:
 *   dt_wait_resume   a trapped sleep, after the SIGSYS handler's
 *                    rt_sigreturn; leaves by a jump to the program's rip
 *   the trampoline's tail (trampoline.S), a rewritten site's sleep, after
 *                    the dispatch's C frames have returned; leaves by the
 *                    trampoline's `ret` to the site, whose prediction
 *                    dt_wait_end rehearses first
 * Both jump to dt_wait_end.  With a site's return to rehearse, it waits in
 * C up to LAST_NS before the deadline (timed_wait_approach), rehearses,
 * spins on the TSC for the last stretch in its own frame, and asks the
 * clock (timed_wait_finish) with a fresh call, whose return is predicted.
 * Without one it waits in C to the deadline (timed_wait_finish).
 *
 * dt_wait_resume is entered by the kernel's rt_sigreturn with every register
 * of the program (vector state included):
 *   rsp  the wait's record (struct wait_record, clock.c), written by the
 *        handler below the program's red zone: the program's rsp is
 *        rsp + W_SIZE + RED_ZONE
 *   rax  nothing yet: the call's result comes from dt_wait_end
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
 * dt_wait_end lies in `detach_wait`: a handler that runs there before the
 * deadline has passed ends the wait with EINTR (signals.c), as inside
 * timed_wait_until and timed_wait_finish's first look.  Three short spans
 * of a sleep's end do not, and a handler that runs there does not end it:
 *   the stub's `call *%r11`, run by the rehearsal: such a handler finds
 *     rip in the stub, r11 pointing into dt_wait_end and rsp on the
 *     runtime's stack;
 *   timed_wait_approach after its wait (a clock read, about 2 us before the
 *     deadline), and timed_wait_finish between its first look at the mark
 *     and its wait: they stay in .text (in `detach_wait` they move
 *     timed_wait_until's code, and sud mode's median deviation looked
 *     worse in the runs after; we could not tell that from noise).
 * The part after timed_wait_finish's return is not in `detach_wait`: the
 * wait is over, a handler that runs then does not make it fail.  A handler
 * that runs at the one instruction after that call, in `detach_wait`, finds
 * the wait over and leaves a mark (intr_first) that dt_wait_ended clears. */
#include "gen/runtime/asm_offsets.h"   /* asm_offsets.c: W_* (struct wait_record), T_* */

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
	 * a syscall, and rbx r12 r13, which dt_wait_end keeps its state in
	 * (rbp is our frame).  No vector state: clock.c is built with
	 * -mgeneral-regs-only and reads the clock through the vDSO, which uses
	 * none (clock.c: timed_wait_general_only). */
	pushq %rdi
	pushq %rsi
	pushq %rdx
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %rbp
	movq %rsp, %rbp
	andq $-16, %rsp
	movq %r11, %rbx                 /* t */
	leaq 8(%rcx), %r12              /* the record */
	leaq dt_wait_resumed(%rip), %r13
	jmp dt_wait_end
	.size dt_wait_resume, .-dt_wait_resume

	/* Entered by a jump, rsp 16-byte aligned (on the runtime's stack, or
	 * on the program's alternate stack for a call an SA_ONSTACK handler
	 * made):
	 *   rbx  t (struct dt_thread)
	 *   r12  the record
	 *   r13  where to go next, with the call's result in rax
	 * It changes rax rcx rdx rsi rdi r8-r11 and the flags. */
	.globl dt_wait_end
	.hidden dt_wait_end
	.type dt_wait_end,@function
dt_wait_end:
	/* No return to rehearse (a trapped sleep, whose way back is a jump):
	 * the last stretch would only add a clock read after the decision,
	 * which cost sud mode half a TSC step of median deviation; the rest
	 * is waited in C, which ends on the clock's own read. */
	cmpq $0, W_RET_TO(%r12)
	je 5f
	movq %rbx, %rdi
	movq %r12, %rsi
	call timed_wait_approach        /* up to LAST_NS before the deadline */
	testq %rax, %rax
	jnz dt_wait_ended               /* -EINTR: a handler ran */
	movq W_RET_TO(%r12), %rcx
	/* Rehearse the site's return.  Its stub's `call *%r11` pushed the
	 * stub's ret on the return-address predictor, and the trampoline's
	 * `ret` will pop it; an interrupt during the wait overwrote it.  So
	 * pop the predictor's top here (the stub's entry, or noise): a `ret`
	 * to the next instruction, mispredicted, before the deadline; and have
	 * the stub's own instruction push it again: executed with r11 pointing
	 * here, it calls us back and leaves the stub's ret on top of the
	 * predictor, over whatever the program's outer frames left there.
	 * Each is paid before the deadline; after it the trampoline's `ret` is
	 * predicted.  ret_to is 0 (rewrite.c: dispatch_sleep) under a shadow
	 * stack, which would fault on both. */
	leaq 1f(%rip), %rax
	pushq %rax
	ret
1:	leaq 3f(%rip), %r11
	subq $3, %rcx
	jmp *%rcx                       /* the stub: call *%r11 */
3:	addq $8, %rsp                   /* its return address, which we do not use */
	/* Touch the way back.  What runs after the last stretch was last run
	 * a period ago, and an interrupt during the wait evicts L1 and the
	 * TLBs: each line of it fetched again costs the wake-up tens of
	 * cycles, paid after the deadline, in the periods the tick hit.  So
	 * fetch them now, about 2 us before the deadline, where an interrupt
	 * is rare: its code (timed_wait_finish, dt_wait_ended, the
	 * trampoline's tail at r13, the site's code after its `syscall`, in
	 * W_RIP) and its data (the trampoline's frame at rbp, the flags and
	 * the stub's return address at F = 8(%rbp), the program's stack above
	 * them; ret_to is set only by the trampoline's tail, whose frame is
	 * at rbp: trampoline.S).  A prefetch takes no fault and changes no register but the
	 * one we load F into; the stub's line is fresh from the rehearsal. */
	prefetcht0 timed_wait_finish(%rip)
	prefetcht0 timed_wait_finish+64(%rip)
	prefetcht0 dt_wait_ended(%rip)
	prefetcht0 (%r13)
	prefetcht0 64(%r13)
	prefetcht0 -72(%rbp)
	prefetcht0 8(%rbp)
	movq W_RIP(%r12), %rax
	prefetcht0 (%rax)
	prefetcht0 64(%rax)
	movq 8(%rbp), %rax              /* F */
	prefetcht0 (%rax)
	prefetcht0 16+RED_ZONE(%rax)    /* the program's rsp */
	prefetcht0 16+RED_ZONE+64(%rax)
	movq W_TSC_END(%r12), %rcx
	/* The last stretch: as the runtime's other waits, a handler that ran
	 * (intr_first) ends it; timed_wait_finish then says EINTR.  rax: the
	 * last TSC read (tsc_end before the first), for the CPU-time count. */
	movq %rcx, %rax
4:	cmpl $0, T_INTR_FIRST(%rbx)
	jne 5f
	pause
	rdtsc
	shlq $32, %rdx
	orq %rdx, %rax
	cmpq %rcx, %rax
	jb 4b
5:	movq %rax, %rdx                 /* the stretch's last TSC read (none without one) */
	movq %rbx, %rdi
	movq %r12, %rsi
	call timed_wait_finish          /* the clock confirms the deadline, or waits for it */
	jmp dt_wait_ended
	.size dt_wait_end, .-dt_wait_end

	.text
	.p2align 4                      /* its 11-15 bytes in one cache line, which dt_wait_end touches */
	.type dt_wait_ended,@function
dt_wait_ended:
	/* See above: the wait is over.  At any depth: the waits before consume
	 * a mark when they look, so one left now was set after they looked,
	 * by a handler that ran within this sleep. */
	movl $0, T_INTR_FIRST(%rbx)
	jmp *%r13
	.size dt_wait_ended, .-dt_wait_ended

	.type dt_wait_resumed,@function
dt_wait_resumed:
	movq %rbp, %rsp
	popq %rbp
	popq %r13
	popq %r12
	popq %rbx
	popq %r10
	popq %r9
	popq %r8
	popq %rdx
	popq %rsi
	popq %rdi
	popq %rsp                       /* F, on the program's stack */
	movq (%rsp), %r11               /* r11: the flags, as the kernel leaves it */
	popfq                           /* rsp = the record */
	movq W_RIP(%rsp), %rcx          /* rcx: the return address, as the kernel leaves it */
	leaq W_SIZE+RED_ZONE(%rsp), %rsp   /* lea: the flags stay; the program's rsp */
	jmp *%rcx
	.size dt_wait_resumed, .-dt_wait_resumed

	.section .note.GNU-stack,"",@progbits
