/* Reading and writing the program's memory from the runtime, as the kernel
 * does it (copy_from_user and its exception table): each routine has one
 * instruction that may fault on the program's address, and a fixup label
 * where it resumes with -EFAULT instead.  The runtime's SIGSEGV and SIGBUS
 * handler (signals.c) moves a fault whose rip is such an instruction to its
 * fixup (uaccess_fixup, uaccess.h); any other fault is the program's.
 * General registers only (the trampoline may not have saved the vector
 * state), no system call, no stack of the program's. */
#include "gen/runtime/asm_offsets.h"   /* asm_offsets.c: EFAULT */

	.text

/* long dt_copy(void *dst, const void *src, size_t n): 0, or -EFAULT when
 * either side faults (part of dst may then be written, as the kernel's). */
	.globl dt_copy
	.hidden dt_copy
	.globl dt_copy_insn
	.hidden dt_copy_insn
	.globl dt_copy_fixup
	.hidden dt_copy_fixup
	.type dt_copy,@function
dt_copy:
	cld                             /* a raw site may have left DF set */
	movq %rdx, %rcx
dt_copy_insn:
	rep movsb
	xorl %eax, %eax
	ret
dt_copy_fixup:
	movq $-EFAULT, %rax
	ret
	.size dt_copy, .-dt_copy

/* long dt_copy_str(char *dst, const char *src, size_t n): the string at src
 * with its NUL into dst, at most n bytes; its length, n when no NUL came
 * within n bytes (the caller's ENAMETOOLONG), or -EFAULT.  No byte past
 * the NUL is read (a string may end at the end of a mapping). */
	.globl dt_copy_str
	.hidden dt_copy_str
	.globl dt_copy_str_insn
	.hidden dt_copy_str_insn
	.globl dt_copy_str_fixup
	.hidden dt_copy_str_fixup
	.type dt_copy_str,@function
dt_copy_str:
	xorl %eax, %eax
1:	cmpq %rdx, %rax
	jae 2f
dt_copy_str_insn:
	movzbl (%rsi,%rax), %ecx
	movb %cl, (%rdi,%rax)
	testb %cl, %cl
	jz 2f
	incq %rax
	jmp 1b
2:	ret
dt_copy_str_fixup:
	movq $-EFAULT, %rax
	ret
	.size dt_copy_str, .-dt_copy_str

	.section .note.GNU-stack,"",@progbits
