/* The executive's context switch (exec.c): the callee-saved state of the
 * System V x86-64 ABI, on the stack being left, then the other stack.  No
 * signal mask, no kernel entry (unlike swapcontext, which calls
 * rt_sigprocmask): a switch between RT threads is a function call.
 *
 *   void rtl_switch(void **save_sp, void *to_sp)
 *
 * Saved: rbx rbp r12-r15 (the ABI's callee-saved registers), MXCSR's
 * control bits and the x87 control word (callee-saved too, per the ABI). */
	.text
	.globl	rtl_switch
	.hidden	rtl_switch
	.type	rtl_switch, @function
rtl_switch:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	rtl_switch, .-rtl_switch

/* A new RT thread's first instruction: rtl_switch "returns" here with the
 * thread in r12 (set up by rtl_stack_init).  The stack is 16-byte aligned
 * at the call, as the ABI wants; rtl_thread_main never returns. */
	.globl	rtl_thread_entry
	.hidden	rtl_thread_entry
	.type	rtl_thread_entry, @function
rtl_thread_entry:
	.cfi_startproc
	.cfi_undefined rip
	movq	%r12, %rdi
	call	rtl_thread_main
	ud2
	.cfi_endproc
	.size	rtl_thread_entry, .-rtl_thread_entry

	.section .note.GNU-stack, "", @progbits
