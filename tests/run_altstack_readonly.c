/* Description: a handler on the program's alternate signal stack returns
 * detached as natively when another thread has made that stack read-only
 * while the handler ran (LTP's signal06 toggles its protection in a loop):
 * natively the return (glibc's restorer, rt_sigreturn) only reads the
 * frame; detached it may write nothing there either, where a trapped
 * rt_sigreturn needed a SIGSYS frame below the handler's and the kernel,
 * unable to write it, killed the process with SIGSEGV.  And an unwinder in
 * such a handler (glibc's backtrace) still walks through the signal frame
 * into the interrupted function, as through glibc's __restore_rt. */
#include "helpers/t_detach.h"

#include <execinfo.h>
#include <pthread.h>
#include <sys/mman.h>

#define SS_SIZE (64 * 1024)

static char *ss_lo;
static pthread_t main_thread;
static volatile int waiting, in_handler, go, handled, returned, on_altstack, unwound;
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
	char here;

	(void)sig;
	on_altstack = &here >= ss_lo && &here < ss_lo + SS_SIZE;
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
	return NULL;
}

/* Round 0: an unwinder in the handler; round 1: the handler returns from
 * a read-only alternate stack.  0 when both went as natively. */
static int run(void)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	pthread_t pt;
	void *r;

	if (!(ss_lo = t_guarded_stack(SS_SIZE)))
		return 10;
	stack_t ss = { .ss_sp = ss_lo, .ss_size = SS_SIZE };
	if (sigaltstack(&ss, NULL) || sigaction(SIGUSR1, &sa, NULL))
		return 11;
	main_thread = pthread_self();
	for (round_ = 0; round_ < 2; round_++) {
		waiting = in_handler = go = handled = returned = on_altstack = 0;
		if (pthread_create(&pt, NULL, other, NULL))
			return 12;
		waiter();
		returned = 1;
		if (pthread_join(pt, &r) || r)
			return 13;
		if (!on_altstack)
			return 14 + round_;
		if (round_ == 0 && !unwound)
			return 16;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (!getenv("T_DETACHED")) {
		int r = run();
		if (r) {
			printf("natively: step %d went wrong: the test itself is wrong here\n", r);
			return 1;
		}
		printf("natively: the handler unwound and returned from a read-only alternate stack\n");
		fflush(stdout);
		t_reexec_detached(argc, argv, NULL);
	}
	if (!t_find_proxy())
		t_check(0, "not detached");
	int r = run();
	printf("detached: the handler %s (%d)\n", r ? "went wrong" : "unwound and returned as natively", r);
	t_check(r == 0, "step %d went wrong (16: no unwinding through the signal frame)", r);
	return t_detached_done();
}
