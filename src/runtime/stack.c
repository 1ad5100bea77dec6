/* The runtime's own stack, one per detached or watched thread.
 *
 * Neither entry of a call may rely on the program's stack (a Go
 * goroutine starts with 2 KiB; a makecontext stack may be smaller still):
 *   - the SIGSYS handler has SA_ONSTACK (intercept.c), and this stack is
 *     the thread's alternate signal stack whenever the program set none, so
 *     the kernel writes the trap's frame (2-3 KB with AVX state) here;
 *   - the trampoline (rewrite mode) moves onto it by hand before it saves
 *     anything but the flags (trampoline.S).
 * A program handler that runs on top of a forwarded call's wait runs here
 * too (below the wait, as natively below the call), so the stack is large
 * and has a guard page.
 *
 * The program's own alternate stack keeps working: when it sets one
 * (sigaltstack, signals.c), that one is installed for real and the kernel
 * delivers every SA_ONSTACK handler, ours included, there, as Go's runtime
 * requires of its handlers; sigaltstack reports exactly what the program
 * set.  The trampoline stays on the program's alternate stack when entered
 * from it (a handler's call), so that stack and ours never interleave, and
 * sends the call to the trap path (rewrite.c), which runs its work here
 * (stack_trap_move) and keeps the stack armed (stack_on_return).
 *
 * A thread cannot unmap the stack it exits on: a stack is returned to a
 * small pool and given again once its thread is gone. */
#include "runtime/stack.h"
#include "runtime/config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define GUARD 4096
#define POOL 16

static struct { uintptr_t lo; pid_t tid; } pool[POOL];
static volatile int pool_lock;

static void pool_take(void)
{
	while (__atomic_exchange_n(&pool_lock, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
}

static void pool_give(void)
{
	__atomic_store_n(&pool_lock, 0, __ATOMIC_RELEASE);
}

/* A stack for t: one whose thread has exited, or a new mapping. */
int stack_give(struct dt_thread *t)
{
	uintptr_t lo = 0;

	pool_take();
	for (int i = 0; i < POOL && !lo; i++) {
		if (pool[i].lo && sys_call3(SYS_tgkill, dt_cfg.pid, pool[i].tid, 0) == -ESRCH) {
			lo = pool[i].lo;
			pool[i].lo = 0;
		}
	}
	pool_give();
	if (!lo) {
		long m = sys_call6(SYS_mmap, 0, GUARD + STACK_SIZE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (m < 0 && m > -4096)
			return (int)m;
		sys_call3(SYS_mprotect, m, GUARD, PROT_NONE);
		lo = (uintptr_t)m + GUARD;
	}
	t->stack_lo = lo;
	t->stack_hi = lo + STACK_SIZE;
	return 0;
}

/* t's thread is about to exit (it may still run on the stack). */
void stack_return(struct dt_thread *t)
{
	bool kept = false;

	pool_take();
	for (int i = 0; i < POOL && !kept; i++) {
		if (!pool[i].lo) {
			pool[i].lo = t->stack_lo;
			pool[i].tid = t->tid;
			kept = true;
		}
	}
	pool_give();
	/* pool full: the mapping stays (256 KiB of address space, touched
	 * pages only) */
}

/* The stack the kernel holds as the thread's alternate stack: the
 * program's, or the signal half of ours when the program has none; always
 * with SS_AUTODISARM, so that a thread inside any handler has none armed.
 * That is what lets a change take effect: rt_sigreturn installs the
 * frame's uc_stack only when the thread does not run on an armed alternate
 * stack (the kernel's on_sig_stack check, seen on 6.18), and our handler
 * always runs on one.  It changes nothing else a program can see: inside a
 * handler a nested signal lands below the current frame either way, and
 * outside handlers nothing runs on an alternate stack but the trampoline,
 * whose half of ours is not the signal half. */
void stack_real(const struct dt_thread *t, stack_t *real)
{
	if (t->app_ss.ss_flags & SS_DISABLE) {
		real->ss_sp = (void *)t->stack_lo;
		real->ss_size = STACK_SIGNAL_SIZE;
	} else {
		real->ss_sp = t->app_ss.ss_sp;
		real->ss_size = t->app_ss.ss_size;
	}
	real->ss_flags = SS_AUTODISARM;
}

/* A trap returns (uc is its frame; moved: its work ran on our stack,
 * stack_trap_move): rt_sigreturn installs uc_stack.  To code that runs on
 * no alternate stack it is stack_real(), the stack the program wants now
 * (after a sigaltstack, or a handler that siglongjmp'ed away and left the
 * stack disarmed).  To a handler on the program's alternate stack that the
 * program set without SS_AUTODISARM it is that stack as the program set it,
 * flags 0, armed for good, when nothing of ours is in use on it (moved: a
 * trap from the handler itself moved to the top level, so no other trap's
 * frame lies above the handler's; one moved to a lower level interrupted a
 * handler there, whose frame a signal taken on our stack would overwrite
 * at the top of a stack armed whole): natively such a stack never disarms, so a handler that
 * leaves by siglongjmp (a JIT's SIGSEGV handler, CPython's faulthandler,
 * LTP) leaves it armed, and the next signal runs on it; the return never
 * reaches us to re-arm it, and with every site rewritten no later call may
 * trap.  Nested signals still nest: the kernel's on_sig_stack check puts
 * them below the handler's rsp on an armed stack without SS_AUTODISARM.
 * Every other handler on an alternate stack keeps what the kernel saved
 * (disarmed): armed with SS_AUTODISARM, or under a live trap's frame, the
 * next signal would be written at the top of the stack that handler and
 * the traps under it run on. */
void stack_on_return(const struct dt_thread *t, ucontext_t *uc, bool moved)
{
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];

	if (sp - t->stack_lo < STACK_SIZE)
		return;
	if (sp - t->app_ss_lo < t->app_ss_hi - t->app_ss_lo) {
		if (moved && !(t->app_ss.ss_flags & SS_AUTODISARM)) {
			uc->uc_stack = t->app_ss;
			uc->uc_stack.ss_flags = 0;
		}
		return;
	}
	stack_real(t, &uc->uc_stack);
}

/* A trap whose frame the kernel wrote on the program's alternate stack
 * (the program set one: Python's faulthandler, Go's gsignal stacks) may not
 * run the runtime's work there too: the program sized that stack for its
 * own handlers (Python allocates it on its heap, SIGSTKSZ plus
 * AT_MINSIGSTKSZ), and a deep path of ours (sched_setaffinity's partition
 * lookup, a warning's vsnprintf: 9-12 KB below the frame) ran past its
 * bottom into the program's heap (CPython's faulthandler stack: "free(): invalid pointer" at
 * CPython's exit, a crash in its garbage collector).  So such a trap moves
 * to the signal half of our stack, unused by the kernel while the program
 * has its own, when it came from code on no alternate stack (the frame is
 * then at the top of the program's: nothing of ours is in use below it),
 * and when it came from a handler on the program's stack (a nested trap).
 * Such a handler may run on top of a moved trap's wait (a signal during a
 * forwarded call), whose work is in use on that half: a nested trap moves
 * to the next level below it (STACK_TRAP_LEVEL_SIZE, stack.h;
 * t->traps_moved counts the levels in use).  Left in place, its work ran
 * below two signal frames on the program's stack, where the handler's
 * frame, ours and our deepest path do not fit: an 8 KiB stack with AVX-512
 * state (3.4 KB a frame) overflowed at the siglongjmp of a handler that
 * interrupted a forwarded read (run_altstack_longjmp).
 * Returns the stack top to move to, 0 to stay: a trap from a handler on
 * our stack nests where it is, as does one nested deeper than the levels.
 * (A trap of a detached thread from code on no alternate stack never
 * comes here: the entry moves it before it writes anything,
 * intercept_entry.S.) */
uintptr_t stack_trap_move(struct dt_thread *t, const ucontext_t *uc)
{
	uintptr_t frame = (uintptr_t)uc, sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	uintptr_t app = t->app_ss_hi - t->app_ss_lo;
	bool on_app = sp - t->app_ss_lo < app;

	if (sp - t->stack_lo < STACK_SIZE)
		return 0;
	/* from code on no alternate stack: no moved trap's work is in use (a
	 * handler may have left one by siglongjmp, and this trap may not move:
	 * the handler left the program's stack disarmed) */
	if (!on_app)
		t->traps_moved = 0;
	if (frame - t->app_ss_lo >= app || t->traps_moved >= STACK_TRAP_LEVELS)
		return 0;
	return t->stack_lo + STACK_SIGNAL_SIZE - (uintptr_t)t->traps_moved * STACK_TRAP_LEVEL_SIZE;
}

/* The level (0: the top one) that our stack's address a lies in; 0 in the
 * trampoline's half, above the levels (no trap's work runs there). */
static unsigned trap_level(const struct dt_thread *t, uintptr_t a)
{
	uintptr_t top = t->stack_lo + STACK_SIGNAL_SIZE;

	return a >= top ? 0 : (unsigned)((top - 1 - a) / STACK_TRAP_LEVEL_SIZE);
}

/* A moved trap's work begins (its caller runs on the level stack_trap_move
 * gave it, or on the top one: sigsys_moved): its level and those above it
 * are in use.  Returns its level. */
unsigned stack_trap_moved(struct dt_thread *t)
{
	unsigned level = trap_level(t, (uintptr_t)__builtin_frame_address(0));

	t->traps_moved = (uint8_t)(level + 1);
	return level;
}

/* every signal but SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSYS (bits
 * signo - 1; SIGKILL and SIGSTOP the kernel never blocks) */
const uint64_t stack_trap_blocked = ~((1ull << (SIGILL - 1)) | (1ull << (SIGTRAP - 1)) | (1ull << (SIGBUS - 1)) |
				      (1ull << (SIGFPE - 1)) | (1ull << (SIGSEGV - 1)) | (1ull << (SIGSYS - 1)));

/* The trap being handled, of code whose rsp was sp, ends: its rt_sigreturn
 * follows (the end of a moved trap, intercept.c; a program handler's
 * rt_sigreturn, signals.c; a vfork parent, threads.c).  If it was moved
 * (its work runs on our stack, the code it came from on another), no moved
 * trap's work is in use any more, but the frame it returns through, or the
 * frames of ours that lead to its rt_sigreturn, still are: they lie just
 * below the top of the signal half, where a trap moves.  So the program's
 * signals wait from here (rt_sigreturn puts the frame's mask back, and a
 * signal pending then is taken where the trap returns to): one taken
 * between the clear and the rt_sigreturn ran an SA_ONSTACK handler whose
 * call moved to that top, over the frame (the kernel's XRSTOR of it failed
 * its check and the vector registers' upper halves were lost; a deeper path
 * reaches the general registers) or over our way back (a crash).  The
 * levels above its own stay in use: it ran on top of their waits.  A trap
 * nested in place runs on the program's alternate stack, or on ours when it
 * came from a handler there (one without SA_ONSTACK, on top of a moved
 * trap's wait, whose work is still in use). */
void stack_trap_leaves(struct dt_thread *t, uintptr_t sp)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);

	if (here - t->stack_lo < STACK_SIZE && sp - t->stack_lo >= STACK_SIZE) {
		/* blocked before the store: sys_call4 is a call the compiler
		 * cannot move the store above */
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &stack_trap_blocked, NULL, 8);
		t->traps_moved = (uint8_t)trap_level(t, here);
	}
}

/* Is the caller (the trampoline's C code, rewrite mode) on the program's
 * alternate stack?  The trampoline stays there for a call of a handler
 * that runs on it (trampoline.S). */
bool stack_on_program_altstack(const struct dt_thread *t)
{
	return (uintptr_t)__builtin_frame_address(0) - t->app_ss_lo < t->app_ss_hi - t->app_ss_lo;
}

/* On our stack after stack_trap_move: the program's alternate stack below
 * live (the trap's frame and the handler's first frames, still in use) is
 * armed, so that a program handler with SA_ONSTACK that runs on top of our
 * work (a signal during a forwarded call's wait) runs on the program's
 * alternate stack, as it would natively and as Go's handlers require.
 * SS_AUTODISARM as always (stack_real); the trap's return installs the
 * frame's uc_stack again.  Too little room left: it stays disarmed, and such
 * a handler runs on our stack. */
void stack_trap_arm_below(const struct dt_thread *t, uintptr_t live)
{
	stack_t below = {
		.ss_sp = (void *)t->app_ss_lo,
		.ss_size = ((live - 64) & ~(uintptr_t)15) - t->app_ss_lo,     /* 64: a margin below live */
		.ss_flags = SS_AUTODISARM,
	};

	/* 2048: MINSIGSTKSZ of the ABI (glibc's macro may call sysconf); the
	 * kernel refuses less than its own minimum (ENOMEM), and then nothing
	 * changes */
	if (live - t->app_ss_lo > 64 + 2048)
		sys_call2(SYS_sigaltstack, &below, NULL);
}

/* The program's alternate stack as it set it (SS_DISABLE: none), what
 * sigaltstack reports, and its range, which the trampoline compares rsp
 * with (app_ss_lo, app_ss_hi). */
void stack_set_program(struct dt_thread *t, const stack_t *ss)
{
	if (ss->ss_flags & SS_DISABLE) {
		t->app_ss = (stack_t){ .ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE };
		t->app_ss_lo = t->app_ss_hi = 0;
		return;
	}
	t->app_ss = *ss;
	t->app_ss.ss_flags &= ~SS_ONSTACK;
	t->app_ss_lo = (uintptr_t)ss->ss_sp;
	t->app_ss_hi = (uintptr_t)ss->ss_sp + ss->ss_size;
}

/* The thread starts taking traps: the program's alternate stack, if it set
 * one, is kept as the program's, and stack_real() is installed. */
void stack_arm(struct dt_thread *t)
{
	stack_t cur, real;

	sys_call2(SYS_sigaltstack, NULL, &cur);
	if ((uintptr_t)cur.ss_sp == t->stack_lo)
		cur.ss_flags = SS_DISABLE;      /* ours: the program has none */
	stack_set_program(t, &cur);
	stack_real(t, &real);
	sys_call2(SYS_sigaltstack, &real, NULL);
}

/* The thread stops taking traps (dt_attach): the program's alternate stack
 * as it set it.  On the way out of a trap (exit) the kernel refuses the
 * change; the thread is ending then anyway. */
void stack_disarm(struct dt_thread *t)
{
	sys_call2(SYS_sigaltstack, &t->app_ss, NULL);
}
