/* seccomp and prctl(PR_SET_SECCOMP, PR_GET_SECCOMP) of a detached or
 * watched thread: the calls; the filters themselves are sandbox.c's.
 *
 * Strict mode (SECCOMP_MODE_STRICT: read, write, _exit and sigreturn only)
 * cannot work detached: the runtime's own machinery (its proxy's polling,
 * its traps' sigreturn frames, rewrite mode's patching) needs other calls,
 * and strict mode kills the process at the first.  It is refused at the
 * call with EINVAL, the kernel's answer for a mode it does not offer, and
 * one line on stderr: the program goes on and can tell.
 *
 * A filter (SECCOMP_SET_MODE_FILTER, PR_SET_SECCOMP with a filter) is kept
 * by the runtime and judged in user space on every call of the thread
 * (sandbox.c); no kernel filter goes on the thread nor on its proxy. */
#include "runtime/seccomp.h"
#include "runtime/config.h"
#include "runtime/sandbox.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

long seccomp_refuse_strict(struct dt_thread *t, long nr)
{
	count(t, nr, &t->stats->emulated);
	dt_warn("the program asks for seccomp strict mode, which a detached thread cannot keep "
		"(the runtime's own calls would kill it): refused with EINVAL");
	return -EINVAL;
}

long do_seccomp(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	switch (a[0]) {
	case SECCOMP_SET_MODE_STRICT:
		/* the kernel checks flags and args first */
		if (a[1] || a[2])
			return -EINVAL;
		return seccomp_refuse_strict(t, nr);
	case SECCOMP_SET_MODE_FILTER:
		count(t, nr, &t->stats->emulated);
		return sandbox_install(t, (unsigned long)a[1], (const void *)a[2]);
	}
	return local_call(t, nr, a);    /* the queries: the kernel answers */
}

/* prctl(PR_SET_SECCOMP, mode, filter) is seccomp(mode's operation, 0,
 * filter); PR_GET_SECCOMP tells the mode the program set. */
long seccomp_prctl(struct dt_thread *t, long nr, long *a)
{
	if (a[0] == PR_GET_SECCOMP) {
		if (!t->filters)
			return local_call(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return SECCOMP_MODE_FILTER;
	}
	switch (a[1]) {
	case SECCOMP_MODE_STRICT:
		return seccomp_refuse_strict(t, nr);
	case SECCOMP_MODE_FILTER:
		count(t, nr, &t->stats->emulated);
		return sandbox_install(t, 0, (const void *)a[2]);
	}
	return -EINVAL;
}
