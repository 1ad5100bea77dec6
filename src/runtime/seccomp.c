/* seccomp on a detached thread.
 *
 * Strict mode (SECCOMP_MODE_STRICT: read, write, _exit and sigreturn only)
 * cannot work detached: the runtime's own machinery (its proxy's polling,
 * its traps' sigreturn frames, rewrite mode's patching) needs other calls,
 * and strict mode kills the process at the first.  It is refused at the
 * call with EINVAL, the kernel's answer for a mode it does not offer, and
 * one line on stderr: the program goes on and can tell.
 *
 * A filter (SECCOMP_SET_MODE_FILTER, PR_SET_SECCOMP with a filter) is
 * installed on the detached thread and on its proxy, which carries out its
 * forwarded calls (the table's MIRROR). */
#include "runtime/seccomp.h"
#include "runtime/config.h"

#include <errno.h>
#include <linux/seccomp.h>
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
	long ret;

	(void)uc;
	if (a[0] == SECCOMP_SET_MODE_STRICT)
		return seccomp_refuse_strict(t, nr);
	ret = local_call(t, nr, a);
	if (ret >= 0 && t->depth == 0 && !t->observed)
		proxy_forward(t, nr, a);
	return ret;
}
