/* Description: the runtime writes nothing of its own on the program's
 * alternate signal stack, where natively only the program's signal frames
 * go:
 *  - a handler there returns detached as natively when another thread has
 *    made that stack read-only while the handler ran (LTP's signal06
 *    toggles its protection in a loop): natively the return (glibc's
 *    restorer, rt_sigreturn) only reads the frame; a trapped rt_sigreturn
 *    needed a SIGSYS frame below the handler's, and the kernel, unable to
 *    write it, killed the process with SIGSEGV;
 *  - a stack that holds one signal frame and a small handler holds them
 *    detached too when the program raises the signal with a system call
 *    (LTP's sigaltstack01, 8 KiB): that call's trap frame, written by the
 *    kernel at the top of the stack, took the room the handler needed;
 *  - an unwinder in such a handler (glibc's backtrace) still walks through
 *    the signal frame into the interrupted function, as through glibc's
 *    __restore_rt. */
#include "helpers/t_altstack.h"

#include <execinfo.h>
#include <pthread.h>
#include <sys/mman.h>

#define SS_SIZE (64 * 1024)

static char *ss_lo;
static pthread_t main_thread;
static volatile int waiting, in_handler, go, handled, returned, restored, on_altstack, unwound;
static volatile int round_;

/* The interrupted function: the main thread spins here, making no call. */
__attribute__((noinline)) static void waiter(void)
{
	waiting = 1;
	while (!handled)
		__asm__ volatile("pause" ::: "memory");
}

static void on_usr1(int sig)
{
	(void)sig;
	on_altstack = t_runs_on(ss_lo, SS_SIZE);
	if (round_ == 0) {
		/* the stack is writable: the unwinder's round */
		void *ips[16];
		int n = backtrace(ips, 16);
		for (int i = 0; i < n; i++)
			if ((uintptr_t)ips[i] - (uintptr_t)waiter < 64)
				unwound = 1;
	}
	in_handler = 1;
	/* from here on nothing is written to this stack: the other thread
	 * makes it read-only, then lets the handler return */
	while (!go)
		__asm__ volatile("pause" ::: "memory");
	handled = 1;
}

static void *other(void *arg)
{
	(void)arg;
	while (!waiting)
		__asm__ volatile("pause" ::: "memory");
	pthread_kill(main_thread, SIGUSR1);
	while (!in_handler)
		__asm__ volatile("pause" ::: "memory");
	if (round_ == 1 && mprotect(ss_lo, SS_SIZE, PROT_READ))
		return (void *)1;
	go = 1;
	while (!returned)
		__asm__ volatile("pause" ::: "memory");
	if (mprotect(ss_lo, SS_SIZE, PROT_READ | PROT_WRITE))
		return (void *)2;
	restored = 1;
	return NULL;
}

/* A stack of the size one frame and the handler below need natively
 * (measured on a large one), a guard page under it: the handler of a
 * signal the thread sends itself runs there.  0 when it went as natively. */
static size_t frame_use, cur_size;
static char *cur_lo;

static void on_usr2(int sig)
{
	char here;

	(void)sig;
	frame_use = (size_t)(cur_lo + cur_size - &here);
	on_altstack = &here >= cur_lo && &here < cur_lo + cur_size;
}

static int one_frame(void)
{
	struct sigaction sa = { .sa_handler = on_usr2, .sa_flags = SA_ONSTACK };
	stack_t ss = { .ss_sp = ss_lo, .ss_size = SS_SIZE };

	cur_lo = ss_lo;
	cur_size = SS_SIZE;
	if (sigaction(SIGUSR2, &sa, NULL) || sigaltstack(&ss, NULL) || raise(SIGUSR2) || !on_altstack)
		return 20;
	/* room for the frame and 1 KiB more, the guard page right under it:
	 * natively the handler's frame is the only one there */
	cur_size = ss.ss_size = (frame_use + 1024 + 63) & ~(size_t)63;
	on_altstack = 0;
	if (sigaltstack(&ss, NULL))
		return 21;
	/* a raise from code on no alternate stack: its call traps */
	if (raise(SIGUSR2))
		return 22;
	if (!on_altstack)
		return 23;
	ss.ss_size = SS_SIZE;
	return sigaltstack(&ss, NULL) ? 24 : 0;
}

/* Round 0: an unwinder in the handler; round 1: the handler returns from
 * a read-only alternate stack; then a stack that holds one frame.  0 when
 * all went as natively. */
static int run(void)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	pthread_t pt;
	void *r;

	if (!(ss_lo = t_altstack_set(SS_SIZE)))
		return 10;
	if (sigaction(SIGUSR1, &sa, NULL))
		return 11;
	main_thread = pthread_self();
	for (round_ = 0; round_ < 2; round_++) {
		waiting = in_handler = go = handled = returned = restored = on_altstack = 0;
		if (pthread_create(&pt, NULL, other, NULL))
			return 12;
		waiter();
		returned = 1;
		/* no call while the stack is read-only: in sud mode the kernel
		 * writes each call's SIGSYS frame there, and could not
		 * (docs/runtime.md, "Known limits") */
		while (!restored)
			__asm__ volatile("pause" ::: "memory");
		if (pthread_join(pt, &r) || r)
			return 13;
		if (!on_altstack)
			return 14 + round_;
		if (round_ == 0 && !unwound)
			return 16;
	}
	return one_frame();
}

/* r: the step of run() or one_frame() that went wrong (16: no unwinding
 * through the signal frame) */
int main(int argc, char **argv)
{
	return t_altstack_main(argc, argv, run, "a handler that unwinds, returns from a read-only "
			       "alternate stack, and runs on one that holds one frame");
}
