/* The process's locks in the locks file (lib/liveness.h): byte LOCK_PID_BASE
 * + pid while it lives (its registry file REGISTRY_DIR/pid is then its own),
 * byte CPU for each CPU holding one of its detached threads.  The kernel
 * drops them when the process dies, however it dies, so neither a file of
 * a killed program nor a CPU it held outlives it for any reader.
 *
 * One descriptor, opened once, moved out of the program's way (high), closed
 * on exec except across a detached thread's execve, where the new image
 * takes it over (ENV_CLAIMS): its locks, and so the CPU, stay the process's
 * without a moment free.  A program that closes it (close_range over every
 * descriptor) gives its locks up: the process then looks dead to readers
 * and its CPU free; the descriptor is checked (device, inode) before each
 * use so that a number reused by the program is never locked by us.
 * Layer 2 (docs/architecture.md). */
#include "runtime/claims.h"
#include "runtime/config.h"
#include "lib/contract.h"
#include "lib/liveness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long locks_fd = -1;
static long passed_fd = -1;            /* from the image before execve */
static dev_t locks_dev;
static ino_t locks_ino;
static bool alive;                      /* the pid's byte is ours */
static cpu_set_t held;                  /* the CPUs whose bytes are ours */

void claims_from_env(const char *v)
{
	char *end;
	long fd;

	if (!v)
		return;
	fd = strtol(v, &end, 10);
	if (!*end && fd >= 0)
		passed_fd = fd;
}

/* fd is our locks file still (the program may have closed it and reused
 * the number).  Raw: called in the trap. */
static bool ours(long fd)
{
	struct stat st;

	return fd >= 0 && sys_call2(SYS_fstat, fd, &st) == 0 && st.st_dev == locks_dev && st.st_ino == locks_ino;
}

/* The number compared first: the fstat of ours() only when it matches. */
bool claims_fd_is(long fd)
{
	return locks_fd >= 0 && (int)fd == locks_fd && ours(locks_fd);
}

long claims_fd_in(unsigned lo, unsigned hi)
{
	return locks_fd >= 0 && (unsigned long)locks_fd >= lo && (unsigned long)locks_fd <= hi && ours(locks_fd) ?
	       locks_fd : -1;
}

static long fcntl_lock(int cmd, struct flock *fl)
{
	return sys_call3(SYS_fcntl, locks_fd, cmd, fl);
}

/* Above the descriptors a program counts on (a fresh open gets the lowest
 * free number): near 1000, below the soft limit. */
static long move_high(long fd)
{
	struct rlimit rl;
	long at = 1000, hi;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)at + 32 > rl.rlim_cur)
		at = (long)rl.rlim_cur - 32;
	if (at <= fd || (hi = fcntl((int)fd, F_DUPFD_CLOEXEC, (int)at)) < 0)
		return fd;
	close((int)fd);                 /* no lock taken on it yet */
	return hi;
}

int claims_open(void)
{
	struct stat st, want;
	long fd = -1;
	int err = 0;

	alive = false;
	if (passed_fd >= 0 && !fstat((int)passed_fd, &st) && !stat(LOCKS_FILE, &want) &&
	    st.st_dev == want.st_dev && st.st_ino == want.st_ino) {
		fd = passed_fd;         /* with the locks of the image before */
		fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	} else if (ours(locks_fd)) {
		fd = locks_fd;          /* a fork child's copy: its own locks from here */
	} else if ((fd = locks_open(true)) >= 0) {
		fd = move_high(fd);
	}
	passed_fd = -1;
	if (fd < 0) {
		dt_warn("%s: %s: CPUs are claimed within this process only, and 'detach ps' "
			"does not show it", LOCKS_FILE, strerror((int)-fd));
		locks_fd = -1;
		return (int)fd;
	}
	fstat((int)fd, &st);
	locks_fd = fd;
	locks_dev = st.st_dev;
	locks_ino = st.st_ino;
	/* A reader holds a dead process's byte for a moment while it removes
	 * that process's file (liveness.c): only then can this fail. */
	for (int i = 0; i < 500; i++) {
		struct flock fl = lock_byte(F_WRLCK, LOCK_PID_BASE + dt_cfg.pid, 1);
		if ((err = (int)fcntl_lock(F_SETLK, &fl)) != -EAGAIN && err != -EACCES)
			break;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	if (err) {
		dt_warn("%s: cannot take this process's lock (%s): 'detach ps' does not show it",
			LOCKS_FILE, strerror(-err));
		return err;
	}
	alive = true;
	return 0;
}

bool claims_alive(void)
{
	return alive && ours(locks_fd);
}

int claims_take(int cpu, pid_t *holder)
{
	struct flock fl = lock_byte(F_WRLCK, cpu, 1);
	long err;

	if (holder)
		*holder = 0;
	if (!alive || !ours(locks_fd))
		return 0;               /* within the process only (said at start) */
	if (!(err = fcntl_lock(F_SETLK, &fl))) {
		CPU_SET(cpu, &held);
		return 0;
	}
	if (err != -EAGAIN && err != -EACCES)
		return 0;
	fl = lock_byte(F_WRLCK, cpu, 1);
	if (holder && fcntl_lock(F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
		*holder = fl.l_pid;
	return -EBUSY;
}

void claims_drop(int cpu)
{
	struct flock fl = lock_byte(F_UNLCK, cpu, 1);

	CPU_CLR(cpu, &held);
	if (alive && ours(locks_fd))
		fcntl_lock(F_SETLK, &fl);
}

void claims_keep(const cpu_set_t *mine)
{
	CPU_AND(&held, &held, mine);
	for (int lo = 0, hi; lo < CPU_SETSIZE; lo = hi) {
		for (hi = lo; hi < CPU_SETSIZE && !CPU_ISSET(hi, mine); hi++)
			;
		if (hi > lo) {
			struct flock fl = lock_byte(F_UNLCK, lo, hi - lo);
			if (alive && ours(locks_fd))
				fcntl_lock(F_SETLK, &fl);
		}
		while (hi < CPU_SETSIZE && CPU_ISSET(hi, mine))
			hi++;
	}
}

void claims_fork_child(void)
{
	alive = false;          /* POSIX locks stay with the parent */
}

long claims_pass_on(void)
{
	if (!alive || !ours(locks_fd) || sys_call3(SYS_fcntl, locks_fd, F_SETFD, 0))
		return -1;
	return locks_fd;
}

void claims_exec_failed(long fd)
{
	if (fd >= 0)
		sys_call3(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
}

/* dup2 or dup3 of the program's onto our number: closing it, the kernel
 * drops every lock the process holds on the file (so does closing any
 * copy).  Ours moves to another number first; after the call the locks
 * are taken again through it (free for a moment in between); a call that
 * failed left the old number open: the copy goes (dropping the locks
 * again) and the old number is ours again.  Raw calls: in the trap. */
static long stepped_from = -1;

bool claims_step_aside(long newfd)
{
	long moved;

	if (!claims_fd_is(newfd) ||
	    (moved = sys_call3(SYS_fcntl, locks_fd, F_DUPFD_CLOEXEC, locks_fd + 1)) < 0)
		return false;
	stepped_from = locks_fd;
	locks_fd = moved;
	return true;
}

void claims_stepped_aside(bool done)
{
	struct flock fl = lock_byte(F_WRLCK, LOCK_PID_BASE + dt_cfg.pid, 1);

	if (!done) {
		sys_call1(SYS_close, locks_fd);
		locks_fd = stepped_from;
	}
	stepped_from = -1;
	if (!alive || !ours(locks_fd))
		return;
	fcntl_lock(F_SETLK, &fl);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &held)) {
			fl = lock_byte(F_WRLCK, cpu, 1);
			fcntl_lock(F_SETLK, &fl);
		}
}
