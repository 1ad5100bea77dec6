/* Calls that name the calling thread implicitly (pid 0, PI
 * futex ownership, prctl options): forwarded with the detached thread
 * named, run here, or answered without the kernel.  CPU clocks: cputime.c. */
#include "runtime/identity.h"
#include "runtime/seccomp.h"
#include "runtime/uaccess.h"

#include <linux/capability.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

long do_futex(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	int op = (int)a[1] & FUTEX_CMD_MASK;

	(void)uc;
	switch (op) {
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_UNLOCK_PI:
	case FUTEX_TRYLOCK_PI:
	case FUTEX_WAIT_REQUEUE_PI:
	case FUTEX_CMP_REQUEUE_PI:
		return local_call(t, nr, a);
	}
	return forward(t, nr, a);
}

long do_prctl(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long ret;

	(void)uc;
	if (a[0] == PR_SET_SECCOMP || a[0] == PR_GET_SECCOMP)
		return seccomp_prctl(t, nr, a);
	ret = local_call(t, nr, a);
	switch (a[0]) {
	case PR_SET_NO_NEW_PRIVS:
	case PR_CAPBSET_DROP:
	case PR_SET_KEEPCAPS:
	case PR_SET_SECUREBITS:
		/* per-thread credentials: the proxy must follow */
		if (ret >= 0 && !calls_stay(t))
			proxy_forward(t, nr, a);
	}
	return ret;
}

long do_gettid(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)nr; (void)a; (void)uc;
	return t->tid;
}

long do_getcpu(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	unsigned cpu = (unsigned)t->cpu, node = (unsigned)t->node;
	long err = 0;

	(void)nr; (void)uc;
	/* both written when they can be, as the kernel's put_user each */
	if (a[0])
		err |= copy_to_user((void *)a[0], &cpu, sizeof(cpu));
	if (a[1])
		err |= copy_to_user((void *)a[1], &node, sizeof(node));
	return err ? -EFAULT : 0;
}

long do_sched_yield(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)t; (void)nr; (void)a; (void)uc;
	cpu_relax();
	return 0;
}

/* capset(hdr, data) sets the capabilities of the thread hdr->pid names (0:
 * the caller), and of no other.  The proxy follows with its own copy of
 * the header naming itself, as every thread of a glibc program follows a
 * setuid (SIGSETXID); the program sees the detached thread's answer. */
long do_capset(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct { uint32_t version; int pid; } hdr, *h = (void *)a[0];
	long b[6], ret = local_call(t, nr, a);

	(void)uc;
	if (ret < 0 || !h || calls_stay(t) || copy_from_user(&hdr, h, sizeof(hdr)))
		return ret;
	hdr.pid = 0;
	memcpy(b, a, sizeof(b));
	b[0] = (long)&hdr;
	proxy_forward(t, nr, b);
	return ret;
}

/* Keyrings: joining a session keyring changes the calling thread's
 * credentials for every later call, so the proxy is made again from it
 * (call.c).  Every other keyring call is forwarded, the thread keyring's
 * too: the proxy carries them all, so they all see the same one (a key
 * added to it here and looked for there would be missing). */
#define KEYCTL_JOIN_SESSION_KEYRING 1

long do_keyctl(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (nr == SYS_keyctl && (int)a[0] == KEYCTL_JOIN_SESSION_KEYRING)
		return proxy_renewed_around(t, nr, a);
	return forward(t, nr, a);
}
