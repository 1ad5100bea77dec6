/* What the tests of a program's alternate signal stack share
 * (run_altstack_*.c, run_small_altstack.c): the stack, with a guard page
 * under it; whether a handler runs there; and main(): the test's run()
 * natively first, where it must go right (else the test itself is wrong),
 * then under `detach run`, where it must go right too. */
#ifndef DETACH_TESTS_T_ALTSTACK_H
#define DETACH_TESTS_T_ALTSTACK_H

#include "t_detach.h"

#include <signal.h>

/* Installs an alternate signal stack of size bytes with a guard page under
 * it (t_guarded_stack); its bottom, NULL when it could not. */
static inline char *t_altstack_set(size_t size)
{
	char *lo = t_guarded_stack(size);
	stack_t ss = { .ss_sp = lo, .ss_size = size };

	return lo && !sigaltstack(&ss, NULL) ? lo : NULL;
}

/* Does the caller run on [lo, lo + size)? */
static inline __attribute__((always_inline)) bool t_runs_on(const char *lo, size_t size)
{
	char here;

	return &here >= lo && &here < lo + size;
}

/* main() of such a test: run() returns 0 when all went as natively, else
 * the number of the step that went wrong (each test says which is which);
 * what: what it checks, for the lines printed. */
static inline int t_altstack_main(int argc, char **argv, int (*run)(void), const char *what)
{
	int r;

	if (!getenv("T_DETACHED")) {
		if ((r = run())) {
			printf("natively: step %d went wrong: the test itself is wrong here\n", r);
			return 1;
		}
		printf("natively: %s: right\n", what);
		fflush(stdout);
		t_reexec_detached(argc, argv, NULL);
	}
	if (!t_find_proxy())
		t_check(0, "not detached");
	r = run();
	printf("detached: %s: %s (%d)\n", what, r ? "wrong" : "right", r);
	t_check(r == 0, "step %d went wrong", r);
	return t_detached_done();
}

#endif
