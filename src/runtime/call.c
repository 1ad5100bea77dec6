/* How a routed call runs (call.h), the part that is no inline: a call
 * that needs a new proxy.  Layer 2b (mechanism, docs/architecture.md). */
#include "runtime/call.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

/* A call that changes what its thread is to the kernel for every call after
 * it: its namespaces, fs and file tables (unshare, setns), its Landlock
 * domain, its session keyring.  Natively the thread's later calls run with
 * the change; here they run on the proxy, so the proxy must have exactly
 * the same.  A second call on the proxy (MIRROR, dispatch.c) cannot give
 * that: a second unshare makes a second namespace, a second
 * landlock_restrict_self a second domain, and unshare(CLONE_NEWUSER) or
 * setns into a user or mount namespace refuses a thread that shares its
 * process or fs with another (EINVAL: a program that is single-threaded
 * natively got it because of the proxy).  So the proxy ends, the call runs
 * on the detached thread alone, and a new proxy is made from the thread as
 * it is now: a clone inherits all of it.  Kernel entries on the detached
 * CPU, a thread creation among them: these calls are set-up, not the
 * steady state. */
long proxy_renewed_around(struct dt_thread *t, long nr, const long a[6])
{
	long none[6] = { 0 }, ret;
	pid_t old = t->proxy_tid;
	uint8_t selector = t->selector;
	int err;

	/* every signal but the faults, the runtime's and glibc's: see below */
	const uint64_t quiet = no_proxy_blocked();
	uint64_t mask;

	if (calls_stay(t))
		return local_call(t, nr, a);
	count(t, nr, &t->stats->local);
	/* From the retirement until dt_self is NULL below the thread has no
	 * proxy, but is still detached: a handler's forwarded call would
	 * wait for nobody (a SIGALRM handler's getppid hung at once).  The
	 * program's signals wait until then, delivered after the call, as
	 * one that comes during it natively is at its return.  Open again
	 * before the new proxy is made: it takes its record of SIGTTIN and
	 * SIGTTOU from the mask it is born with (proxy_main), and a handler
	 * that runs meanwhile makes its calls natively (dt_self NULL).
	 * glibc's SIGSETXID and SIGCANCEL stay open (no_proxy_blocked says
	 * why): their handlers' calls run here (proxyless, until proxy_start
	 * clears it; at depth 1 in the retirement's wait they do anyway). */
	t->proxyless = true;
	sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &quiet, &mask, 8);
	proxy_forward(t, DT_CMD_RETIRE, none);
	/* gone from the thread group: the single-thread checks see it */
	proxy_gone(old);
	ret = sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	/* pthread_create runs libc: its calls must run natively (selector
	 * ALLOW), not trap nor enter the trampoline's detached path (dt_self
	 * NULL), as when the thread was first detached (threads.c) */
	t->proxy_tid = 0;
	t->selector = 0;                        /* SYSCALL_DISPATCH_FILTER_ALLOW */
	dt_self = NULL;
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, 8);
	err = proxy_start(t);
	dt_self = t;
	t->selector = selector;
	if (err)
		dt_die("cannot start a new proxy thread after system call %ld: %s", nr, strerror(-err));
	t->stats->proxy_tid = t->proxy_tid;
	return ret;
}
