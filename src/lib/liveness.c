/* Liveness the kernel keeps: the readers' side of lib/liveness.h. */
#include "lib/liveness.h"
#include "lib/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int locks_open(bool write)
{
	int fd;

	if (!write)
		return (fd = open(LOCKS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 ? -errno : fd;
	if (mkdir(REGISTRY_DIR, 01777) == 0)
		chmod(REGISTRY_DIR, 01777);     /* every user's programs publish here */
	fd = open(LOCKS_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (fd < 0)
		return -errno;
	struct stat st;
	/* made by us now (umask took bits away), or by an earlier process */
	if (!fstat(fd, &st) && st.st_uid == geteuid() && (st.st_mode & 0777) != 0666)
		fchmod(fd, 0666);
	return fd;
}

pid_t lock_holder(int fd, off_t at)
{
	struct flock fl = lock_byte(F_WRLCK, at, 1);

	if (fcntl(fd, F_GETLK, &fl) < 0)
		return -errno;
	/* an OFD lock reports -1: not ours, but somebody's */
	return fl.l_type == F_UNLCK ? 0 : fl.l_pid ? fl.l_pid : -1;
}

/* Removed only while holding the pid's byte ourselves: its owner takes the
 * byte before it creates the file and keeps it until it dies, so a file
 * found here with the byte free is a dead process's, and no process of
 * that pid can come and make a new one until we let go. */
int registry_live(int fd, pid_t pid)
{
	struct flock fl = lock_byte(F_WRLCK, LOCK_PID_BASE + pid, 1);
	pid_t holder = fd >= 0 ? lock_holder(fd, LOCK_PID_BASE + pid) : 0;
	char path[64];

	if (holder == pid)
		return 1;
	if (holder != 0 || fd < 0)
		return 0;       /* being removed by another reader; or no locks file: nobody lives */
	if (fcntl(fd, F_SETLK, &fl) < 0)
		return 0;       /* read-only (another user's), or taken meanwhile: next time */
	snprintf(path, sizeof(path), "%s/%d", REGISTRY_DIR, (int)pid);
	unlink(path);
	fl.l_type = F_UNLCK;
	fcntl(fd, F_SETLK, &fl);
	return 0;
}

bool cpus_all_held(const cpu_set_t *cpus, pid_t self, int *cpu, pid_t *holder)
{
	int fd = locks_open(false);
	bool all = CPU_COUNT(cpus) > 0;

	*cpu = -1;
	*holder = 0;
	for (int i = 0; fd >= 0 && all && i < CPU_SETSIZE; i++) {
		pid_t h;
		if (!CPU_ISSET(i, cpus))
			continue;
		if ((h = lock_holder(fd, i)) == 0 || h == self || h < -1)
			all = false;
		else if (*cpu < 0)
			*cpu = i, *holder = h;
	}
	if (fd >= 0)
		close(fd);
	return fd >= 0 && all;
}

const char *pid_describe(pid_t pid, char *buf, size_t len)
{
	char path[64], comm[32] = "";

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_text_file(path, comm, sizeof(comm)) == 0)
		comm[strcspn(comm, "\n")] = '\0';
	if (comm[0])
		snprintf(buf, len, "pid %d (%s)", (int)pid, comm);
	else
		snprintf(buf, len, "pid %d", (int)pid);
	return buf;
}
