/* membarrier(2) as the program would see it without the runtime.
 *
 * Rewrite mode registers the address space for the private expedited
 * SYNC_CORE command (rewrite.c serializes every CPU running a thread of
 * ours after each patch).  The kernel keeps one registration per address
 * space, so without this file the program would see the runtime's: its own
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE would succeed where natively,
 * unregistered, it fails with EPERM, and MEMBARRIER_CMD_GET_REGISTRATIONS
 * would name the registration.  Until the program registers for it itself,
 * its calls get the kernel's answers for an unregistered process: the
 * SYNC_CORE command fails with EPERM, and the registrations name neither
 * SYNC_CORE's bit nor the private expedited bit the kernel sets with it
 * (natively 0x50 after a SYNC_CORE registration alone, 0x10 after a plain
 * one).  The plain private expedited command needs a registration of its
 * own, which the runtime's is not: the kernel's EPERM is already right.
 * Every other command is forwarded untouched.  Threads the runtime does
 * not see (--select) call the kernel directly and see the registration. */
#include "runtime/membarrier.h"
#include "runtime/sys.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)       /* Linux 6.3 */
#endif

/* Set once each, never cleared (a registration lasts as long as the
 * address space): a racing reader at worst sees a registration a moment
 * late, as it could natively of another thread's register call. */
static bool runtime_registered;
static bool program_sync_core, program_plain;   /* the program registered */

bool membarrier_register_sync_core(void)
{
	runtime_registered = sys_call3(SYS_membarrier,
			MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
	return runtime_registered;
}

long do_membarrier(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* the kernel reads cmd and flags as ints */
	int cmd = (int)a[0], flags = (int)a[1];
	long r;

	(void)uc;
	if (!runtime_registered || program_sync_core)
		return forward(t, nr, a);
	switch (cmd) {
	case MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE:
		if (flags)              /* the kernel's EINVAL comes first */
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return -EPERM;
	case MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE:
	case MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED:
		r = forward(t, nr, a);
		if (r == 0 && cmd == MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
			program_plain = true;
		else if (r == 0)
			program_sync_core = true;
		return r;
	case MEMBARRIER_CMD_GET_REGISTRATIONS:
		r = forward(t, nr, a);
		if (r < 0)
			return r;
		r &= ~(long)MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE;
		return program_plain ? r : r & ~(long)MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
	}
	return forward(t, nr, a);
}
