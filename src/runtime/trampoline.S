/* The entry for rewritten system call sites (rewrite.c).
 *
 * A site's stub (rewrite.c) ran the instruction moved out of the site,
 * stepped below the program's red zone and called here with `call *%r11`.
 * On entry:
 *   (%rsp)  the return address: the stub's `ret`, a key of
 *           dt_rewritten_sites; the program's rsp is 8 + RED_ZONE above
 *   rax     the system call number; rdi rsi rdx r10 r8 r9 its arguments
 *   rcx r11 free: a real syscall clobbers them, so the program keeps nothing
 *           there (the stub's call already used r11)
 * The program's stack may be tiny (a goroutine's): on a detached or watched
 * thread the entry writes only the flags and one register there and moves
 * onto the runtime's own stack (stack.c); on other threads it runs the call
 * natively.
 * The program must find every other register as a real `syscall` leaves it:
 * general registers but rax/rcx/r11, the flags, and all x87/SSE/AVX/AVX-512
 * state.  The C code behind (rewrite.c: dt_trampoline_dispatch) may use any
 * of them, glibc's string functions included, so the entry saves them all:
 * the argument registers in a frame, the vector state with xsavec (only
 * the components in use are written: cheap when the upper halves are clean)
 * or xsave.  The return sets r11 to the flags; the stub sets rcx and rsp.
 *
 * Calls that cannot return through the stub go to the site's own `syscall`,
 * which rewrite.c keeps, with the program's rsp (the stub's ret+RET_TO_SITE jumps
 * there): rt_sigreturn (its frame is at the caller's rsp), the clone
 * family on a thread not detached (.Lnot_detached: a child on another
 * stack would resume in the stub with a wrong rsp), and on a detached
 * thread every call the dispatch says needs a signal frame (a clone the
 * gate does not make).  There a detached thread traps, and the trap
 * handler (intercept.c), which has a signal frame to work with, does what
 * it does in sud mode; any other thread makes the call natively.  A
 * detached thread's vfork, fork and clone3 of a thread run here, in the
 * clone gate (.Lgate).
 */
#include "gen/runtime/asm_offsets.h"   /* asm_offsets.c: NR_*, T_*, W_*, REWRITE_*, ... */
#define F_REST (-72 - W_SIZE)           /* the frame's wait record, from rbp */

/* Unwind information (CFI), so that a debugger's or a profiler's backtrace
 * of a call in the runtime walks on to the program's frames, as it walks
 * from a system call natively: the caller of this frame is taken to be the
 * site's function itself, resuming after its `syscall` (stub_site_end) with
 * the program's rsp (the CFA); the stub is skipped.  The stub's return
 * address lies RED_ZONE + 8 below the CFA, so the caller's rip is
 *   ret + RET_RCX_NEXT + (int32_t)*(ret + RET_RCX_DISP),  ret = *(CFA - 136)
 * (DW_CFA_val_expression; the unwinder pushes the CFA first).  Only the CFA
 * changes along the code: F (the flags' slot) + RED_ZONE + 16. */
#if RED_ZONE + 16 >= 16384 || RED_ZONE + 8 < 128 || RET_RCX_NEXT >= 128
#error "the CFI below encodes these as two-byte ULEB128"
#endif
#define ULEB2(x) (((x) & 0x7f) | 0x80), ((x) >> 7)
#define CFI_STUB_CALLER_RIP                                                      \
	.cfi_escape 0x16, 0x10, 27,                   /* val_expression rip */   \
		    0x10, ULEB2(RED_ZONE + 8), 0x1c, 0x06, /* ret = *(CFA - 136) */ \
		    0x12, 0x23, RET_RCX_DISP, 0x94, 0x04, /* rel32 at ret + 11 */    \
		    0x10, 0x80, 0x80, 0x80, 0x80, 0x08, 0x27, /* sign-extended */   \
		    0x10, 0x80, 0x80, 0x80, 0x80, 0x08, 0x1c,                        \
		    0x22, 0x23, RET_RCX_NEXT              /* ret + 15 + rel32 */
/* CFA = *(rbp + 8) + 144: the frame's F; the program's rbp saved at rbp */
#define CFI_FRAME                                                                 \
	.cfi_escape 0x0f, 6, 0x76, 0x08, 0x06, 0x23, ULEB2(RED_ZONE + 16);        \
	.cfi_escape 0x10, 0x06, 2, 0x76, 0x00
/* The program's first five argument registers from the frame (rbp), where
 * the entry pushed them (-48 rdi .. -16 r8; r9 at -8 is loaded apart: the
 * clone gate carries the number in it) */
#define ARGS_FROM_FRAME                                                           \
	movq -48(%rbp), %rdi;                                                     \
	movq -40(%rbp), %rsi;                                                     \
	movq -32(%rbp), %rdx;                                                     \
	movq -24(%rbp), %r10;                                                     \
	movq -16(%rbp), %r8

/* CFA = *rsp + 144: rsp at the slot of F, rbp the program's again */
#define CFI_AT_F_SLOT                                                             \
	.cfi_escape 0x0f, 6, 0x77, 0x00, 0x06, 0x23, ULEB2(RED_ZONE + 16);        \
	.cfi_same_value %rbp

	.text
	.globl dt_trampoline_entry
	.hidden dt_trampoline_entry
	.type dt_trampoline_entry,@function
dt_trampoline_entry:
	.cfi_startproc simple
	.cfi_def_cfa %rsp, RED_ZONE + 8
	CFI_STUB_CALLER_RIP
	/* The flags first: syscall preserves them. */
	pushfq                          /* rsp = F; the return address at F+8 */
	.cfi_def_cfa_offset RED_ZONE + 16
	/* Is the return address a stub's (rewrite.c's table, the same probe
	 * as table_has)?  Else this is a stray jump into the runtime. */
	pushq %rdx
	.cfi_def_cfa_offset RED_ZONE + 24
	movq 16(%rsp), %r11             /* the return address */
	movabsq $REWRITE_HASH_MUL, %rcx
	imulq %r11, %rcx
	shrq $REWRITE_HASH_SHIFT, %rcx
	andl $REWRITE_SITES-1, %ecx
	leaq dt_rewritten_sites(%rip), %rdx
4:	cmpq %r11, (%rdx,%rcx,8)
	je 5f
	cmpq $0, (%rdx,%rcx,8)
	je .Lstray
	incl %ecx
	andl $REWRITE_SITES-1, %ecx
	jmp 4b
5:	popq %rdx
	.cfi_def_cfa_offset RED_ZONE + 16
	cmpl $NR_rt_sigreturn, %eax
	je .Lto_site

	/* Which thread?  Not detached nor watched (other threads, proxies,
	 * children, a vfork child on a detached thread's TLS): the call runs
	 * natively, using no more of the program's stack than the flags and
	 * one register. */
	movq dt_self@gottpoff(%rip), %r11
	movq %fs:(%r11), %r11
	testq %r11, %r11
	jz .Lnot_detached
	cmpb $0, T_VFORK_CHILD(%r11)
	jne .Lnot_detached

	/* Onto the runtime's own stack (stack.c) before anything else goes on
	 * the program's: its stack may be a goroutine's 2 KiB.  Already on it
	 * (a handler that runs on top of a forwarded call's wait makes a
	 * call), or on the program's alternate stack (an SA_ONSTACK handler's
	 * call): stay, so that frames nest and never overwrite each other. */
	movq %rsp, %rcx                 /* F */
	.cfi_def_cfa %rcx, RED_ZONE + 16
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
	CFI_FRAME
	pushq %r9                       /* -8:  the arguments, in order at -48 */
	pushq %r8                       /* -16 */
	pushq %r10                      /* -24 */
	pushq %rdx                      /* -32 */
	pushq %rsi                      /* -40 */
	pushq %rdi                      /* -48 */
	pushq %rax                      /* -56: nr */
	pushq $0                        /* -64: retrap flag, set by C: 1 retrap, 2 wait's tail, 3 gate */
	pushq $0                        /* -72: result */
	subq $W_SIZE, %rsp              /* F_REST: a sleep's rest (struct wait_record) */
	/* A call that dt_dispatch carries out in general registers alone
	 * (dispatch_general_only: a plain forward, gettid) on a detached
	 * thread: the C code behind is built with -mgeneral-regs-only and
	 * reaches no libc, so no vector register can change.  Anything else
	 * may reach libc (string functions use AVX): all of it is saved. */
	cmpq $DT_NR_SYSCALLS, %rax
	jae .Lsave_vectors
	leaq dt_general_only(%rip), %rcx
	cmpb $0, (%rcx,%rax)
	je .Lsave_vectors
	cmpb $0, T_OBSERVED(%r11)
	jne .Lsave_vectors
	andq $-16, %rsp
	leaq F_REST(%rbp), %r8           /* a sleep may leave its rest there */
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
	leaq F_REST(%rbp), %r12           /* the record */
	leaq .Lwaited(%rip), %r13
	jmp dt_wait_end
	.p2align 6
.Lwaited:
	movq %rax, -72(%rbp)
	popq %r13
	popq %r13
	popq %r12
	popq %rbx
	/* on into .Lrestore: the wait's way back is .Lwaited and .Lrestore,
	 * two cache lines from r13 that dt_wait_end touches before the
	 * deadline */
.Lrestore:
	ARGS_FROM_FRAME
	movq -8(%rbp), %r9
	cmpq $0, -64(%rbp)
	jne .Lretrap_from_frame
	movq -72(%rbp), %rax
	.cfi_remember_state
	movq %rbp, %rsp
	popq %rbp
	CFI_AT_F_SLOT
	popq %rsp                       /* F, on the program's stack */
	.cfi_def_cfa %rsp, RED_ZONE + 16
.Lreturn_at_f:                          /* rsp = F, rax the result, the rest the program's */
	movq (%rsp), %r11               /* r11 as the kernel leaves it: the flags */
	/* The flags back.  popfq costs some 10 cycles on the way back of
	 * every call (and of every timed wait's wake-up); flags that hold
	 * nothing but the arithmetic ones (with IF and the reserved bit 1,
	 * always set in user mode) come back from the saved copy through
	 * sahf, with OF from an add that overflows exactly when it was set.
	 * DF is clear then, as the runtime left it (cld above).  Anything
	 * else (DF, TF, AC, ID set) takes popfq.  rcx holds the result
	 * meanwhile: the stub sets rcx after the `ret`. */
	testl $~FLAGS_ARITH_ONLY, %r11d
	jnz .Lpopfq
	movq %rax, %rcx
	movl %r11d, %eax
	shll $8, %eax                   /* ah: the low byte: SF ZF AF PF CF */
	movb $0x7f, %al
	btl $11, %r11d                  /* CF: the saved OF */
	adcb $0, %al                    /* 0x7f + 1 overflows: OF as saved */
	sahf                            /* SF ZF AF PF CF; OF stays */
	movq %rcx, %rax
	leaq 8(%rsp), %rsp              /* past the saved flags (lea: they stay) */
	.cfi_def_cfa_offset RED_ZONE + 8
	ret                             /* to the stub, which sets rcx and rsp */
.Lpopfq:
	.cfi_def_cfa_offset RED_ZONE + 16
	popfq
	.cfi_def_cfa_offset RED_ZONE + 8
	ret
	.cfi_restore_state

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
	cmpq $3, -64(%rbp)              /* a clone for the clone gate (below) */
	je .Lgate
	jmp .Lrestore

.Lretrap_from_frame:
	movq -56(%rbp), %rax            /* nr */
	.cfi_remember_state
	movq %rbp, %rsp
	popq %rbp
	CFI_AT_F_SLOT
	popq %rsp                       /* F */
	.cfi_def_cfa %rsp, RED_ZONE + 16
	/* To the site's `syscall`, with the program's registers, flags and
	 * rsp (rsp = F): see above. */
.Lto_site:
	popfq
	.cfi_def_cfa_offset RED_ZONE + 8
	popq %r11                       /* the stub's ret */
	.cfi_def_cfa_offset RED_ZONE
	leaq RED_ZONE(%rsp), %rsp       /* the program's rsp (lea: the flags stay) */
	.cfi_def_cfa_offset 0
	leaq RET_TO_SITE(%r11), %r11
	jmp *%r11
	.cfi_restore_state

	/* The clone gate: a detached thread's vfork, fork or clone3 of a
	 * thread (lifecycle.c, do_clone: DT_CLONE_GATE; a clone3 child's way
	 * is below, .Lgate_thread_child), made here from the allowed range (stubs.S,
	 * dt_clone_gate) without a trap.  The trap path's frame copy is not
	 * needed: both child and parent resume the program through this
	 * frame's return, which restores every register from the frame, the
	 * vector state from the xsave area at rsp, and the flags and the
	 * stub's `ret` from F and F+8 on the program's stack.  A fork child has
	 * a copy of all of it; a vfork child shares it, which the rest of
	 * this comment is about (the same code serves both).  On entry rsp is
	 * that area (just restored: the vector state is the program's), rbx
	 * rbp(frame) r12-r15 as the C code left them (the program's; rbp the
	 * frame's).  The child shares all our memory and runs while we are
	 * suspended; so:
	 *   - it writes nothing on this stack above the syscall's rsp: its
	 *     hook runs below it, and no signal is delivered to it while it is
	 *     here (every signal is blocked over the gate: a child's mask is
	 *     its parent's), so no signal frame lands on ours either;
	 *   - it writes the program's stack from F's height up once it runs
	 *     the program (glibc's vfork returns, its caller calls execve):
	 *     the flags at F and the stub's `ret` at F+8 are copied below the
	 *     area first, and the parent writes them back when it resumes;
	 *   - it shares our TLS, and marks itself a vfork child in the thread's
	 *     record (dt_child_placement), as on the trap path, so that its
	 *     calls at rewritten sites run natively (the entry above).
	 * Signals: all blocked from before the syscall until each side's
	 * hook has run (by do_clone, which keeps the mask as it was in
	 * t->gate_mask), so that no
	 * handler runs between the gate's syscall and the hooks: the child is
	 * moved off this CPU (dt_child_placement) before any program code,
	 * handler or not, runs in it, and the parent puts the thread's state
	 * back (dt_gate_done: do_clone's work after the call, lifecycle.c)
	 * before any handler sees it.  The
	 * parent is suspended meanwhile in the kernel's vfork wait, which
	 * delivers no signal either (it is killable only). */
.Lgate:
	movq 8(%rbp), %rcx              /* F */
	pushq (%rcx)                    /* the flags, kept above the syscall's rsp */
	pushq 8(%rcx)                   /* the stub's `ret`, too; rsp stays 16-aligned */
	/* every signal is blocked already (do_clone: the mask as it was in
	 * t->gate_mask, for both sides) */
	cmpl $NR_clone3, -56(%rbp)
	jne 1f
	/* clone3: the child starts on its own stack, beside us, and we
	 * return through this frame and reuse it at once: it gets a packet
	 * below its stack top (do_clone: t->gate_top) with all it needs,
	 * laid out so that its way back is the one below (.Lgate_child_f):
	 *   top-136  the stub's `ret`   } F' = top-144: its `ret` leaves rsp
	 *   top-144  the flags          } top-128, the stub's lea makes it top
	 *   top-208  the mask (F'-64)
	 *   top-264  the program's rbp, then the arguments at top-256..-216
	 *   X        the xsave area: (top - GATE_PACKET - size) & -64 */
	movq dt_self@gottpoff(%rip), %rcx
	movq %fs:(%rcx), %rcx
	movq T_GATE_MASK(%rcx), %rdx
	movq T_GATE_TOP(%rcx), %rcx     /* top */
	movq %rdx, -208(%rcx)
	movq 8(%rbp), %rax              /* F */
	movq (%rax), %rdx
	movq %rdx, -144(%rcx)
	movq 8(%rax), %rdx
	movq %rdx, -136(%rcx)
	movq (%rbp), %rdx               /* the program's rbp */
	movq %rdx, -264(%rcx)
	movq -48(%rbp), %rdx
	movq %rdx, -256(%rcx)
	movq -40(%rbp), %rdx
	movq %rdx, -248(%rcx)
	movq -32(%rbp), %rdx
	movq %rdx, -240(%rcx)
	movq -24(%rbp), %rdx
	movq %rdx, -232(%rcx)
	movq -16(%rbp), %rdx
	movq %rdx, -224(%rcx)
	movq -8(%rbp), %rdx
	movq %rdx, -216(%rcx)
	leaq -GATE_PACKET(%rcx), %rdi
	subq dt_xsave_size(%rip), %rdi
	andq $-64, %rdi                 /* X */
	leaq 16(%rsp), %rsi             /* our area, as xrstor left it */
	movq dt_xsave_size(%rip), %rcx
	rep movsb                       /* DF is clear (cld above) */
1:
	/* The program's registers for the call, as at the site (the child
	 * gets them all, rax 0, as natively) */
	ARGS_FROM_FRAME
	movq -56(%rbp), %rax            /* nr: vfork, fork, clone or clone3 */
	/* r9 is no argument of these calls: it carries nr to the child,
	 * which tells a clone3 child by it without reading our frame (a
	 * thread's parent returns through it and reuses it at once); each
	 * side reloads the program's r9 (the frame, the packet) */
	movq %rax, %r9
	/* jumped to and back, never called: a return address pushed here
	 * would be overwritten by the child's calls before the parent read it */
	jmp dt_clone_gate
	.globl dt_clone_gate_back
	.hidden dt_clone_gate_back
dt_clone_gate_back:
	testq %rax, %rax
	jnz 1f
	cmpl $NR_clone3, %r9d           /* nr (above) */
	je .Lgate_thread_child
	jmp .Lgate_child
1:
	/* The parent (or the call failed, no child): a vfork child has
	 * exec'd or exited, the program's stack is ours again.  Nothing above our rsp
	 * was written by it; the vector state and every register but rax
	 * rcx r11 are as the kernel kept them across the call. */
	movq %rax, -72(%rbp)            /* the child's pid, or -errno */
	movq 8(%rbp), %rcx              /* F */
	popq 8(%rcx)                    /* the stub's `ret` back */
	popq (%rcx)                     /* the flags back; rsp = the area */
	movq -56(%rbp), %rdi            /* nr */
	movq %rax, %rsi
	call dt_gate_done               /* lifecycle.c */
	movq dt_self@gottpoff(%rip), %rdx
	movq %fs:(%rdx), %rdx
	leaq T_GATE_MASK(%rdx), %rdx    /* the mask as it was */
	call .Lgate_unblock
	movl $-1, %eax                  /* the C calls above use general registers */
	movl $-1, %edx                  /* only (-mgeneral-regs-only); restored all */
	xrstor (%rsp)                   /* the same, so that nothing relies on it */
	movq $0, -64(%rbp)
	jmp .Lrestore
.Lgate_child:
	/* The child: on its way to the program through this frame, which a
	 * vfork parent will need again: only reads above rsp.  Its hook
	 * (dt_gate_done: a vfork child's dt_child_placement, off the detached
	 * CPU, the vfork child's mark, the scheduling settings it inherits; a
	 * fork child's dt_fork_child) runs below the copies; no filters to
	 * inherit (do_clone sends a thread with some to the trap path).  It
	 * returns the mask the child runs the program with: a fork child's is
	 * the one its program believes in (kept_open), as on the trap path. */
	movq -56(%rbp), %rdi            /* nr */
	xorl %esi, %esi
	call dt_gate_done               /* lifecycle.c; rax: the child's mask */
	movq 8(%rbp), %rcx
	movq %rax, -64(%rcx)            /* below F and the pushes below (dead for the parent) */
	leaq 16(%rsp), %rsp             /* the area; the copies are the parent's */
	movl $-1, %eax
	movl $-1, %edx
	xrstor (%rsp)                   /* the hook may have used vector registers */
	ARGS_FROM_FRAME
	movq -8(%rbp), %r9
	.cfi_remember_state
	movq %rbp, %rsp
	popq %rbp
	CFI_AT_F_SLOT
	popq %rsp                       /* F, on the program's stack */
	.cfi_def_cfa %rsp, RED_ZONE + 16
.Lgate_child_f:                         /* rsp = F, its mask at F-64 */
	/* The mask back, only now: a signal delivered to the child from here
	 * on makes its frame below F on the program's stack, which the child
	 * uses anyway (natively, below its rsp), never on ours above, where the
	 * parent's frame is.  The registers sys_call6 clobbers are saved below
	 * F (below the red zone: the program keeps nothing there). */
	pushq %rdi
	.cfi_adjust_cfa_offset 8
	pushq %rsi
	.cfi_adjust_cfa_offset 8
	pushq %rdx
	.cfi_adjust_cfa_offset 8
	pushq %r10
	.cfi_adjust_cfa_offset 8
	pushq %r8
	.cfi_adjust_cfa_offset 8
	pushq %r9
	.cfi_adjust_cfa_offset 8
	leaq -16(%rsp), %rdx            /* F-64: the mask (a fork child has no dt_self now) */
	call .Lgate_unblock
	popq %r9
	.cfi_adjust_cfa_offset -8
	popq %r8
	.cfi_adjust_cfa_offset -8
	popq %r10
	.cfi_adjust_cfa_offset -8
	popq %rdx
	.cfi_adjust_cfa_offset -8
	popq %rsi
	.cfi_adjust_cfa_offset -8
	popq %rdi
	.cfi_adjust_cfa_offset -8
	xorl %eax, %eax                 /* vfork's 0 in the child */
	jmp .Lreturn_at_f
	.cfi_restore_state

	/* A clone3 child: rsp = its stack top (the kernel's stack +
	 * stack_size), the packet below it (above); rbp is the parent's frame
	 * pointer, a frame the parent returns through and reuses at once:
	 * never read here.  Every signal blocked (the parent's mask). */
.Lgate_thread_child:
	movq %rsp, %rcx                 /* top */
	leaq -GATE_PACKET(%rcx), %r11
	subq dt_xsave_size(%rip), %r11
	andq $-64, %r11                 /* X */
	leaq -64(%r11), %rsp            /* below the packet, 16-aligned */
	pushq %rcx
	pushq %rcx                      /* top, twice: 16-aligned */
	xorl %edi, %edi                 /* no filters (do_clone) */
	call *sys_on_clone_child(%rip)  /* threads.c: dt_child_placement */
	popq %rcx
	popq %rcx
	leaq -GATE_PACKET(%rcx), %r11
	subq dt_xsave_size(%rip), %r11
	andq $-64, %r11
	movl $-1, %eax
	movl $-1, %edx
	xrstor (%r11)                   /* the program's vector state, copied */
	movq -256(%rcx), %rdi
	movq -248(%rcx), %rsi
	movq -240(%rcx), %rdx
	movq -232(%rcx), %r10
	movq -224(%rcx), %r8
	movq -216(%rcx), %r9
	movq -264(%rcx), %rbp           /* the program's */
	leaq -144(%rcx), %rsp           /* F' */
	jmp .Lgate_child_f

	/* rt_sigprocmask(SIG_SETMASK, rdx, NULL): the mask at rdx back;
	 * clobbers what sys_call6 does */
.Lgate_unblock:
	movl $NR_rt_sigprocmask, %edi
	movl $SIG_SETMASK, %esi
	xorl %ecx, %ecx
	movl $8, %r8d
	jmp sys_call6

	/* dt_trampoline_dispatch(nr, args, &retrap, return address, r8: the
	 * wait's record or NULL), the frame at rbp; one return address deeper,
	 * so the stack stays aligned for the C call */
.Ldispatch:
	movq -56(%rbp), %rdi            /* nr */
	leaq -48(%rbp), %rsi            /* args[6] */
	leaq -64(%rbp), %rdx            /* retrap flag */
	movq 8(%rbp), %rcx
	movq 8(%rcx), %rcx              /* return address: the stub's ret */
	subq $8, %rsp
	call dt_trampoline_dispatch
	addq $8, %rsp
	ret

	/* Not a detached thread (the stub is checked): the call itself, from
	 * the range Syscall User Dispatch lets through.  rsp = F.  vfork,
	 * clone and fork go to the site's kept `syscall` instead (never armed
	 * here: it runs natively), as they always did: made here, a vfork
	 * parent would return through our `ret` at F+8, where the child may
	 * have written by then, and a child on another stack would return
	 * there with a wrong rsp. */
.Lnot_detached:
	.cfi_def_cfa %rsp, RED_ZONE + 16
	.cfi_same_value %rbp
	cmpl $NR_vfork, %eax
	je .Lto_site
	cmpl $NR_clone, %eax            /* the same for a child that shares memory */
	je .Lto_site
	cmpl $NR_fork, %eax             /* and a fork, as before */
	je .Lto_site
	cmpl $NR_clone3, %eax
	je .Lto_site
.Lnative:
	popfq                           /* rsp -> return address */
	.cfi_def_cfa_offset RED_ZONE + 8
	jmp dt_native_syscall
.Lstray:
	.cfi_def_cfa_offset RED_ZONE + 24
	movq 16(%rsp), %rdi
	andq $-16, %rsp
	.cfi_undefined %rip
	call dt_stray_jump              /* does not return */
	ud2
	.cfi_endproc
	.size dt_trampoline_entry, .-dt_trampoline_entry

	.section .note.GNU-stack,"",@progbits
