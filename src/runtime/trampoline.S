/* The entry for rewritten system call sites (rewrite.c).
 *
 * A site's 2-byte `syscall` (0f 05) became `call *%rax` (ff d0).  rax holds
 * the system call number, so the call lands in the nop sled of page 0, at
 * address nr, and slides into a jump to dt_trampoline_entry.  On entry:
 *   (%rsp)  the return address, site + 2
 *   rax     the system call number; rdi rsi rdx r10 r8 r9 its arguments
 *   rcx r11 free: a real syscall clobbers them, so the program keeps nothing
 *           there (the sled's jump already used r11)
 * The program's stack may be tiny (a goroutine's): on a detached or watched
 * thread the entry writes only the flags there, below the red zone, and
 * moves onto the runtime's own stack (stack.c); on other threads it probes
 * the site table with one more word and runs the call natively.
 * The program must find every other register as a real `syscall` leaves it:
 * general registers but rax/rcx/r11, the flags, and all x87/SSE/AVX/AVX-512
 * state.  The C code behind (rewrite.c: dt_trampoline_dispatch) may use any
 * of them, glibc's string functions included, so the entry saves them all:
 * the argument registers in a frame, the vector state with xsavec (only
 * the components in use are written: cheap when the upper halves are clean)
 * or xsave.
 *
 * Three kinds of calls cannot return through a C frame and take other ways:
 *   rt_sigreturn  the signal frame is at the caller's rsp;
 *   clone, clone3, vfork  the child may start on another stack, or borrow
 *           ours and overwrite it.
 * On a thread that is not detached (the program's other threads, proxies,
 * children) they run right here, zpoline-style.  On a detached thread they
 * are re-issued from dt_retrap_syscall, outside the range Syscall User
 * Dispatch lets through: they trap, and the trap handler (intercept.c),
 * which has a signal frame to work with, does what it does in sud mode.
 */
#define NR_rt_sigreturn 15
#define NR_clone        56
#define NR_vfork        58
#define NR_clone3       435
#define CLONE_VFORK     0x4000
#define CA_STACK        40      /* offsetof(struct clone_args, stack) */
#define CA_STACK_SIZE   48
#define CA_MAX          88      /* sizeof(struct clone_args) of Linux 5.7+ */
#define RED_ZONE        128
#define T_VFORK_CHILD   192     /* offsetof(struct dt_thread, vfork_child), checked in rewrite.c */
#define T_STACK_LO      200     /* offsetof(struct dt_thread, stack_lo) ..., checked in stack.c */
#define T_STACK_HI      208
#define T_APP_SS_LO     216
#define T_APP_SS_HI     224
#define T_OBSERVED      (T_APP_SS_HI + 8 + 24 + 1)   /* checked in stack.c */
#define SITES           8192    /* rewrite.c's table */
#define NR_TABLE        512     /* DT_NR_SYSCALLS */
#define W_RECORD        48      /* sizeof(struct wait_record), checked in clock.c */

	.text
	.globl dt_trampoline_entry
	.hidden dt_trampoline_entry
	.type dt_trampoline_entry,@function
dt_trampoline_entry:
	/* Step over the red zone of the code we came from, whose data below
	 * its rsp we must not touch (the call already used 8 bytes of it;
	 * rewrite.c does not rewrite sites that keep data there), and save the
	 * flags before anything changes them: syscall preserves them. */
	leaq -RED_ZONE(%rsp), %rsp
	pushfq                          /* rsp = F; the return address at F+136 */
	cmpl $NR_rt_sigreturn, %eax
	je .Lsigreturn
	cmpl $NR_clone, %eax
	je .Lclone_family
	cmpl $NR_vfork, %eax
	je .Lclone_family
	cmpl $NR_clone3, %eax
	je .Lclone_family

	/* Which thread?  Not detached nor watched (other threads, proxies,
	 * children, a vfork child on a detached thread's TLS): the call runs
	 * natively, using no more of the program's stack than the flags and
	 * one register. */
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	testq %r11, %r11
	jz .Lnative
	cmpb $0, T_VFORK_CHILD(%r11)
	jne .Lnative

	/* Onto the runtime's own stack (stack.c) before anything else goes on
	 * the program's: its stack may be a goroutine's 2 KiB.  Already on it
	 * (a handler that runs on top of a forwarded call's wait makes a
	 * call), or on the program's alternate stack (an SA_ONSTACK handler's
	 * call): stay, so that frames nest and never overwrite each other. */
	movq %rsp, %rcx                 /* F */
	cmpq T_STACK_LO(%r11), %rsp
	jb 1f
	cmpq T_STACK_HI(%r11), %rsp
	jb 2f
1:	cmpq T_APP_SS_LO(%r11), %rsp
	jb 3f
	cmpq T_APP_SS_HI(%r11), %rsp
	jb 2f
3:	movq T_STACK_HI(%r11), %rsp
2:	pushq %rcx                      /* F, the way back */
	cld                             /* the C ABI wants DF clear */
	pushq %rbp
	movq %rsp, %rbp                 /* 8(%rbp): F */
	pushq %r9                       /* -8:  the arguments, in order at -48 */
	pushq %r8                       /* -16 */
	pushq %r10                      /* -24 */
	pushq %rdx                      /* -32 */
	pushq %rsi                      /* -40 */
	pushq %rdi                      /* -48 */
	pushq %rax                      /* -56: nr */
	pushq $0                        /* -64: retrap flag, set by C: 1 retrap, 2 wait's tail */
	pushq $0                        /* -72: result */
	subq $W_RECORD, %rsp            /* -120: a sleep's rest (struct wait_record) */
	/* A call that dt_dispatch carries out in general registers alone
	 * (dispatch_general_only: a plain forward, gettid) on a detached
	 * thread: the C code behind is built with -mgeneral-regs-only and
	 * reaches no libc, so no vector register can change.  Anything else
	 * may reach libc (string functions use AVX): all of it is saved. */
	cmpq $NR_TABLE, %rax
	jae .Lsave_vectors
	leaq dt_general_only(%rip), %rcx
	cmpb $0, (%rcx,%rax)
	je .Lsave_vectors
	cmpb $0, T_OBSERVED(%r11)
	jne .Lsave_vectors
	andq $-16, %rsp
	leaq -120(%rbp), %r8            /* a sleep may leave its rest there */
	call .Ldispatch
	movq %rax, -72(%rbp)
	cmpq $2, -64(%rbp)
	jne .Lrestore
	/* A sleep's rest (clock.c: timed_sleep): waited in dt_wait_end
	 * (clock_resume.S), after the C calls of the dispatch have returned,
	 * so that no return whose call came before the wait lies between its
	 * end and the program but the site's, which dt_wait_end rehearses; an
	 * interrupt during the wait (the tick) overwrites the return-address
	 * predictor, and every such `ret` would mispredict.  dt_wait_end runs
	 * in general registers alone, as the dispatch, and keeps its state in
	 * rbx r12 r13: the program's, saved here. */
	movq $0, -64(%rbp)
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r13                      /* keeps rsp 16-byte aligned for the C calls */
	movq dt_self@gottpoff(%rip), %rbx
	movq %fs:(%rbx), %rbx           /* t */
	leaq -120(%rbp), %r12           /* the record */
	leaq .Lwaited(%rip), %r13
	jmp dt_wait_end
.Lwaited:
	movq %rax, -72(%rbp)
	popq %r13
	popq %r13
	popq %r12
	popq %rbx
	jmp .Lrestore
.Lsave_vectors:
	andq $-64, %rsp                 /* xsave wants 64-byte alignment */
	subq dt_xsave_size(%rip), %rsp
	xorl %ecx, %ecx                 /* the header must start zeroed */
	movq %rcx, 512(%rsp)
	movq %rcx, 520(%rsp)
	movq %rcx, 528(%rsp)
	movq %rcx, 536(%rsp)
	movq %rcx, 544(%rsp)
	movq %rcx, 552(%rsp)
	movq %rcx, 560(%rsp)
	movq %rcx, 568(%rsp)
	movl $-1, %eax                  /* every component XCR0 enables */
	movl $-1, %edx
	cmpb $0, dt_have_xsavec(%rip)
	je 1f
	xsavec (%rsp)
	jmp 2f
1:	xsave (%rsp)
2:	xorl %r8d, %r8d                 /* no wait's tail: it restores no vector state */
	call .Ldispatch
	movq %rax, -72(%rbp)
	movl $-1, %eax
	movl $-1, %edx
	xrstor (%rsp)
.Lrestore:
	movq -48(%rbp), %rdi
	movq -40(%rbp), %rsi
	movq -32(%rbp), %rdx
	movq -24(%rbp), %r10
	movq -16(%rbp), %r8
	movq -8(%rbp), %r9
	cmpq $0, -64(%rbp)
	jne .Lretrap_from_frame
	movq -72(%rbp), %rax
	movq %rbp, %rsp
	popq %rbp
	popq %rsp                       /* F, on the program's stack */
	popfq
	leaq RED_ZONE(%rsp), %rsp
	/* rcx and r11 as the kernel leaves them: return address and flags */
	movq (%rsp), %rcx
	pushfq
	popq %r11
	ret

.Lretrap_from_frame:
	movq -56(%rbp), %rax            /* nr */
	movq %rbp, %rsp
	popq %rbp
	popq %rsp                       /* F */
.Lretrap:                               /* rsp = F */
	popfq
	leaq RED_ZONE(%rsp), %rsp       /* rsp -> return address, as on entry */
	jmp dt_retrap_syscall

	/* dt_trampoline_dispatch(nr, args, &retrap, return address, r8: the
	 * wait's record or NULL), the frame at rbp; one return address deeper,
	 * so the stack stays aligned for the C call */
.Ldispatch:
	movq -56(%rbp), %rdi            /* nr */
	leaq -48(%rbp), %rsi            /* args[6] */
	leaq -64(%rbp), %rdx            /* retrap flag */
	movq 8(%rbp), %rcx
	movq 8+RED_ZONE(%rcx), %rcx     /* return address: site + 2 */
	subq $8, %rsp
	call dt_trampoline_dispatch
	addq $8, %rsp
	ret

	/* Not a detached thread: is the return address a rewritten site
	 * (rewrite.c's table, the same probe as table_has)?  Then the call
	 * itself, from the range Syscall User Dispatch lets through.  rsp = F. */
.Lnative:
	pushq %rdx
	movq 8+8+RED_ZONE(%rsp), %r11   /* return address */
	subq $2, %r11                   /* the site */
	movabsq $0x9E3779B97F4A7C15, %rcx
	imulq %r11, %rcx
	shrq $51, %rcx
	andl $SITES-1, %ecx
	leaq dt_rewritten_sites(%rip), %rdx
4:	cmpq %r11, (%rdx,%rcx,8)
	je 5f
	cmpq $0, (%rdx,%rcx,8)
	je .Lstray
	incl %ecx
	andl $SITES-1, %ecx
	jmp 4b
5:	popq %rdx
	popfq
	leaq RED_ZONE(%rsp), %rsp       /* rsp -> return address */
	jmp dt_native_syscall
.Lstray:
	movq 8+8+RED_ZONE(%rsp), %rdi
	andq $-16, %rsp
	call dt_stray_jump              /* does not return */
	ud2

	/* rt_sigreturn: the frame's ucontext is at the caller's rsp; the flags
	 * and every register come from it. */
.Lsigreturn:
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	movl $NR_rt_sigreturn, %eax
	testq %r11, %r11
	jz 1f
	cmpb $0, T_VFORK_CHILD(%r11)
	je .Lretrap
1:	leaq RED_ZONE+8+8(%rsp), %rsp
	syscall
	ud2

	/* clone, clone3, vfork.  Only rcx and r11 may change, and the flags
	 * must be the program's at the syscall and after it. */
.Lclone_family:
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	testq %r11, %r11
	jz .Lnative_clone
	cmpb $0, T_VFORK_CHILD(%r11)    /* a vfork child borrowing a detached thread's TLS */
	je .Lretrap

	/* On a thread that is not detached.  Without a stack of its own, the
	 * child resumes on ours: the way back waits in a TLS slot (a vfork child
	 * shares our TLS, a fork child has a copy).  With one, the way back, the
	 * register we change and the flags go on top of the new stack, where the
	 * child pops them. */
.Lnative_clone:
	cmpl $NR_clone3, %eax
	je .Lclone3
	cmpl $NR_clone, %eax
	jne .Lno_stack                  /* vfork */
	testq %rsi, %rsi
	jz .Lno_stack
	movq 8+RED_ZONE(%rsp), %r11     /* clone(flags, newsp, ...) */
	movq %r11, -8(%rsi)
	movq %rsi, -16(%rsi)
	movq (%rsp), %rcx
	movq %rcx, -24(%rsi)
	movq dt_clone_ret@gottpoff(%rip), %rcx
	movq %r11, %fs:(%rcx)
	leaq -24(%rsi), %rsi
	popfq
	leaq RED_ZONE+8(%rsp), %rsp     /* the program's rsp */
	syscall
	testq %rax, %rax
	jz .Lchild_stack_rsi
	leaq 24(%rsi), %rsi
	pushq -24(%rsi)                 /* the flags, saved on the child's stack */
	popfq
	movq dt_clone_ret@gottpoff(%rip), %rcx
	jmp *%fs:(%rcx)
.Lchild_stack_rsi:
	popfq
	popq %rsi
	ret

.Lclone3:
	movq CA_STACK(%rdi), %rcx
	testq %rcx, %rcx
	jz .Lno_stack
	addq CA_STACK_SIZE(%rdi), %rcx  /* the child's stack top */
	movq 8+RED_ZONE(%rsp), %r11
	movq %r11, -8(%rcx)
	movq %rdi, -16(%rcx)
	movq (%rsp), %r11
	movq %r11, -24(%rcx)
	movq 8+RED_ZONE(%rsp), %r11
	movq dt_clone_ret@gottpoff(%rip), %rcx
	movq %r11, %fs:(%rcx)
	/* a copy of the arguments with 24 bytes less stack, below F */
	subq $CA_MAX+8, %rsp
	movq %rdi, CA_MAX(%rsp)         /* the program's rdi, for the parent */
	movq 0(%rdi), %rcx;  movq %rcx, 0(%rsp)
	movq 8(%rdi), %rcx;  movq %rcx, 8(%rsp)
	movq 16(%rdi), %rcx; movq %rcx, 16(%rsp)
	movq 24(%rdi), %rcx; movq %rcx, 24(%rsp)
	movq 32(%rdi), %rcx; movq %rcx, 32(%rsp)
	movq 40(%rdi), %rcx; movq %rcx, 40(%rsp)
	movq 48(%rdi), %rcx; subq $24, %rcx; movq %rcx, 48(%rsp)
	movq 56(%rdi), %rcx; movq %rcx, 56(%rsp)
	cmpq $64, %rsi                  /* later fields only when given */
	jbe 3f
	movq 64(%rdi), %rcx; movq %rcx, 64(%rsp)
	movq 72(%rdi), %rcx; movq %rcx, 72(%rsp)
	cmpq $80, %rsi
	jbe 3f
	movq 80(%rdi), %rcx; movq %rcx, 80(%rsp)
3:	movq %rsp, %rdi
	pushq CA_MAX+8(%rsp)            /* the program's flags, from F */
	popfq
	syscall
	testq %rax, %rax
	jz .Lchild_stack_rdi
	movq CA_MAX(%rsp), %rdi
	pushq CA_MAX+8(%rsp)
	popfq
	leaq CA_MAX+8+8+RED_ZONE+8(%rsp), %rsp   /* the program's rsp */
	movq dt_clone_ret@gottpoff(%rip), %rcx
	jmp *%fs:(%rcx)
.Lchild_stack_rdi:
	popfq
	popq %rdi
	ret

.Lno_stack:
	movq 8+RED_ZONE(%rsp), %r11
	movq dt_clone_ret@gottpoff(%rip), %rcx
	movq %r11, %fs:(%rcx)
	popfq
	leaq RED_ZONE+8(%rsp), %rsp     /* the program's rsp */
	syscall
	movq dt_clone_ret@gottpoff(%rip), %rcx
	jmp *%fs:(%rcx)
	.size dt_trampoline_entry, .-dt_trampoline_entry

/* Outside `detach_allow`: a detached thread that executes this traps, and
 * the handler resumes it at the return address left at (%rsp). */
	.globl dt_retrap_syscall
	.hidden dt_retrap_syscall
	.type dt_retrap_syscall,@function
dt_retrap_syscall:
	syscall
	ud2
	.size dt_retrap_syscall, .-dt_retrap_syscall

	.section .note.GNU-stack,"",@progbits
