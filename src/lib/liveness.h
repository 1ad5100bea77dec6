/* Liveness the kernel keeps for us: one file, LOCKS_FILE, in which a
 * process under detach holds POSIX record locks (fcntl F_SETLK) for as long
 * as it lives:
 *   byte CPU                 the CPU holds a detached thread of the holder
 *                            (the system-wide claim: a second process is
 *                            refused, -EBUSY)
 *   byte LOCK_PID_BASE + PID the registry file REGISTRY_DIR/PID is PID's
 *                            and PID is alive
 * POSIX locks, not OFD locks or flock: the kernel drops them when the
 * process dies, however it dies (before it is a zombie), a fork child does
 * not inherit them, they survive execve on a descriptor left open across it
 * (the runtime passes it on: ENV_CLAIMS), and F_GETLK names the holder's pid.
 * Their one trap: closing ANY descriptor of the file drops the process's
 * locks, so the runtime opens it once and no reader of the process opens it
 * a second time.  The interface between the runtime (src/runtime/claims.c)
 * and its readers (`detach ps`, `detach run`, tests/helpers/state.sh, which
 * reads /proc/locks). */
#ifndef DETACH_LIB_LIVENESS_H
#define DETACH_LIB_LIVENESS_H

#include "lib/contract.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define LOCKS_FILE    REGISTRY_DIR "/locks"
#define LOCK_PID_BASE ((off_t)CPU_SETSIZE)     /* bytes below: CPUs */

/* The struct flock for one byte (len 0: from `at` to the end of the file).
 * No call: the runtime's trap uses it with raw fcntl. */
static inline struct flock lock_byte(short type, off_t at, off_t len)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = at;
	fl.l_len = len;
	return fl;
}

/* The rest is for readers (libc calls, never in the runtime's trap). */

/* LOCKS_FILE for reading, or for taking locks (write): a descriptor or
 * -errno.  Created world-writable (every user's programs claim CPUs). */
int locks_open(bool write);
/* The pid holding byte `at` of the locks file, 0 when nobody does, -errno. */
pid_t lock_holder(int fd, off_t at);
/* The registry file of pid (REGISTRY_DIR/pid) belongs to a live process:
 * 1, or 0 after removing it when its owner is gone and the caller may
 * (stale: the program was killed before it could), or 0 when it cannot. */
int registry_live(int fd, pid_t pid);

/* A process that exists and is not a zombie: a zombie has released its
 * files and locks and runs nothing.  A leader that exited shows Z while its
 * other threads still run (they hold the files, and the locks): alive while
 * one of them is not a zombie.  From /proc/PID/stat, else (no /proc) the
 * kernel's kill 0.  The one "is this pid alive" of the tree; inline, for
 * libdetach-rtl.a too, which links no src/lib. */
static inline int liveness_stat_state(const char *stat_path)
{
	char buf[512], *p;
	int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold ')' itself */
	return (p = strrchr(buf, ')')) && p[1] == ' ' ? p[2] : '?';
}

static inline bool liveness_running(int state)
{
	return state && state != 'Z' && state != 'X' && state != 'x';
}

static inline bool pid_alive(pid_t pid)
{
	char path[96];
	int state;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(state = liveness_stat_state(path)))       /* gone; or no /proc (hidepid, a chroot) */
		return access("/proc/self/stat", F_OK) == 0 ? false : kill(pid, 0) == 0 || errno == EPERM;
	if (liveness_running(state))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	bool any = false;
	while (d && !any && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/stat", (int)pid, e->d_name);
		any = liveness_running(liveness_stat_state(path));
	}
	if (d)
		closedir(d);
	return any;
}

/* The same for one thread of pid. */
static inline bool task_alive(pid_t pid, pid_t tid)
{
	char path[96];

	if (pid <= 0 || tid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	return liveness_running(liveness_stat_state(path));
}

/* Every CPU of cpus holds a detached thread of a process other than self
 * (`detach run` and `detach pid` refuse then): true, with the first such
 * CPU and its holder. */
bool cpus_all_held(const cpu_set_t *cpus, pid_t self, int *cpu, pid_t *holder);
/* "pid PID (COMMAND)" into buf, for messages naming a holder. */
const char *pid_describe(pid_t pid, char *buf, size_t len);

#endif
