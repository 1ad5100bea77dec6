/* Description: the runtime's own descriptor (the locks file that says the
 * process lives and which CPUs it holds, runtime/claims.c) survives the
 * program's close-all idioms on its detached thread: close_range over every
 * descriptor, with and without CLOSE_RANGE_UNSHARE, and close() of its
 * number (EBADF, as natively for a descriptor that is not open), dup2
 * onto its number (the program gets its copy there, the runtime's moves);
 * the process still holds its CPU afterwards (`detach ps` lists it, the kernel's
 * /proc/locks shows the locks), and the program's own descriptors are
 * closed as natively. */
#include "helpers/t_detach.h"

#include <linux/close_range.h>

/* The runtime's descriptor: the one open on the locks file */
static int own_fd(void)
{
	char path[64], target[256];

	for (int fd = 3; fd < 65536; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			if (strstr(target, "/dev/shm/detach/locks"))
				return fd;
		}
	}
	return -1;
}

/* The kernel's record of a POSIX lock of ours on the locks file */
static bool locked(void)
{
	char line[256], me[32];
	FILE *f = fopen("/proc/locks", "r");
	bool found = false;

	snprintf(me, sizeof(me), " %d ", (int)getpid());
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, "POSIX") && strstr(line, me);
	if (f)
		fclose(f);
	return found;
}

static void round_of(const char *what, unsigned flags)
{
	int mine = open("/dev/null", O_RDONLY), own = own_fd();

	t_check(own >= 0, "%s: the runtime's descriptor is not open", what);
	t_check(syscall(SYS_close_range, 3, ~0u, flags) == 0, "%s: close_range: %s", what, strerror(errno));
	t_check(fcntl(mine, F_GETFD) == -1 && errno == EBADF, "%s: the program's descriptor %d is open", what, mine);
	t_check(own_fd() == own, "%s: the runtime's descriptor %d is gone", what, own);
	t_check(locked(), "%s: the process holds no lock any more", what);
}

int main(int argc, char **argv)
{
	t_reexec_detached(argc, argv, NULL);
	round_of("close_range(3, ~0)", 0);
	round_of("close_range(3, ~0, UNSHARE)", CLOSE_RANGE_UNSHARE);
	int own = own_fd();
	errno = 0;
	t_check(close(own) == -1 && errno == EBADF, "close(%d) of the runtime's descriptor: errno %d", own, errno);
	t_check(own_fd() == own && locked(), "close() took the runtime's descriptor");
	/* a program that dup2s onto that number (LTP's close_range01 uses
	 * 1000) gets its copy there, as natively; the runtime's descriptor
	 * moves, with its locks */
	int mine = open("/dev/null", O_RDONLY);
	t_check(dup2(mine, own) == own, "dup2 onto %d: %s", own, strerror(errno));
	char path[64], target[64] = "";
	snprintf(path, sizeof(path), "/proc/self/fd/%d", own);
	t_check(readlink(path, target, sizeof(target) - 1) > 0 && !strcmp(target, "/dev/null"),
		"descriptor %d is not the program's copy: %s", own, target);
	int moved = own_fd();
	t_check(moved >= 0 && moved != own && locked(), "the runtime's descriptor did not move with its locks (%d)",
		moved);
	t_check(close(own) == 0 && close(mine) == 0, "the program's own descriptors do not close: %s", strerror(errno));
	t_check(own_fd() == moved && locked(), "closing the program's copy took the runtime's locks");
	errno = 0;
	t_check(dup2(12345, moved) == -1 && errno == EBADF && own_fd() == moved && locked(),
		"a failed dup2 onto the runtime's descriptor: errno %d, descriptor %d", errno, own_fd());
	/* and a bad range is still the kernel's EINVAL */
	errno = 0;
	t_check(syscall(SYS_close_range, 10, 3, 0) == -1 && errno == EINVAL, "close_range(10, 3): errno %d", errno);
	return t_detached_done();
}
