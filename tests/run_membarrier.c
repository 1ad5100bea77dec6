/* Description: membarrier answers the detached thread as it answers the
 * program natively: rewrite mode registers the address space for the
 * private expedited SYNC_CORE command (to serialize the CPUs after each
 * patch), yet until the program registers for it itself, the command fails
 * with EPERM and MEMBARRIER_CMD_GET_REGISTRATIONS does not name it (LTP's
 * membarrier01 saw the runtime's registration); once the program has
 * registered, both are the kernel's.  The same checks pass natively first. */
#include "helpers/t_detach.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)
#endif

static long mb(int cmd, unsigned flags)
{
	return syscall(SYS_membarrier, cmd, flags, 0);
}

int main(int argc, char **argv)
{
	long q = mb(MEMBARRIER_CMD_QUERY, 0);

	if (q < 0 || !(q & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE))
		t_skip("membarrier has no private expedited SYNC_CORE command here (query %ld)", q);
	t_native_then_detached(argc, argv, NULL);
	if (!t_native())
		t_check(t_find_proxy() > 0, "not detached");

	errno = 0;
	long r = mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0);
	printf("unregistered: sync_core %ld errno %d\n", r, errno);
	t_check(r == -1 && errno == EPERM, "SYNC_CORE before registering: %ld errno %d, want EPERM", r, errno);
	errno = 0;
	r = mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 1);
	t_check(r == -1 && errno == EINVAL, "SYNC_CORE with flags 1: %ld errno %d, want EINVAL", r, errno);
	errno = 0;
	r = mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
	t_check(r == -1 && errno == EPERM, "private expedited before registering: %ld errno %d, want EPERM", r, errno);
	long reg = mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0);     /* EINVAL before Linux 6.3 */
	printf("unregistered: registrations %#lx\n", reg);
	t_check(reg <= 0, "registrations %#lx before the program registered, want none", reg);

	r = mb(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0);
	t_check(r == 0, "registering for SYNC_CORE: %ld errno %d", r, errno);
	r = mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0);
	printf("registered: sync_core %ld\n", r);
	t_check(r == 0, "SYNC_CORE after registering: %ld errno %d", r, errno);
	errno = 0;
	r = mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);     /* a registration of its own */
	t_check(r == -1 && errno == EPERM, "private expedited after SYNC_CORE's registration: %ld errno %d, want EPERM", r, errno);
	if (reg >= 0) {
		reg = mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0);
		printf("registered: registrations %#lx\n", reg);
		t_check(reg & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
			"registrations %#lx do not name SYNC_CORE after the program registered", reg);
	}
	r = mb(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0);
	t_check(r == 0 && mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0,
		"private expedited after its own registration: %ld errno %d", r, errno);
	return t_native() ? t_done() : t_detached_done();
}
