/* What channels, doorbells and regions share: names in IPC_DIR, files
 * created whole and then named (link), mapped, prefaulted and locked at
 * open so that nothing faults later on a detached thread; roles held by
 * live processes; the FIFO that wakes Linux waiters.  Everything here runs
 * at open or close, or on Linux threads: it may enter the kernel. */
#include "runtime/ipc.h"
#include "detach/detach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int ipc_path(char *buf, size_t len, const char *name, const char *suffix)
{
	if (!ipc_name_ok(name))
		return -EINVAL;
	snprintf(buf, len, "%s/%s%s", IPC_DIR, name, suffix);
	return 0;
}

/* Every user's programs meet here, as in /dev/shm itself. */
static void make_dir(void)
{
	if (mkdir(REGISTRY_DIR, 01777) == 0)
		chmod(REGISTRY_DIR, 01777);
	if (mkdir(IPC_DIR, 01777) == 0)
		chmod(IPC_DIR, 01777);
}

void ipc_prefault(void *p, size_t bytes)
{
	/* An atomic add of 0 is a write that changes nothing, whoever else
	 * writes the page meanwhile: the page is mapped writable now. */
	for (size_t off = 0; off < bytes; off += 4096)
		__atomic_fetch_add((uint64_t *)((char *)p + off), 0, __ATOMIC_RELAXED);
}

/* The file made whole under a temporary name, then linked to its name:
 * an opener never sees a header half written.  Returns the open fd. */
static int create_file(const char *path, size_t bytes, const void *init, size_t init_bytes)
{
	char tmp[IPC_NAME_MAX + 128];
	int fd, err = 0;

	snprintf(tmp, sizeof(tmp), "%s/.new.%d.%llx", IPC_DIR, (int)getpid(), (unsigned long long)rdtsc());
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) || (init_bytes && pwrite(fd, init, init_bytes, 0) != (ssize_t)init_bytes))
		err = -errno;
	else if (link(tmp, path))
		err = -errno;
	unlink(tmp);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int ipc_open_file(const char *name, const char *suffix, bool create, size_t bytes, size_t max_bytes,
		  const void *init, size_t init_bytes, void **map, size_t *map_bytes, bool *created)
{
	char path[IPC_NAME_MAX + 64];
	struct stat st;
	int fd, err;
	void *p;

	if ((err = ipc_path(path, sizeof(path), name, suffix)))
		return err;
	make_dir();
	*created = false;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		fd = create_file(path, bytes, init, init_bytes);
		if (fd >= 0)
			*created = true;
		else if (fd == -EEXIST)          /* another creator was first */
			fd = open(path, O_RDWR | O_CLOEXEC);
		else
			return fd;
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (st.st_size <= 0 || (size_t)st.st_size > max_bytes || (st.st_size & 4095)) {
		close(fd);
		return -EINVAL;                  /* not one of ours, or damaged */
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	err = -errno;
	close(fd);
	if (p == MAP_FAILED)
		return err;
	ipc_prefault(p, (size_t)st.st_size);
	/* Locked, so that reclaim never takes a page back from under a detached
	 * thread; without the privilege (RLIMIT_MEMLOCK) the pages stay
	 * prefaulted, which is all a machine without swap needs. */
	mlock(p, (size_t)st.st_size);
	*map = p;
	*map_bytes = (size_t)st.st_size;
	return 0;
}

static int open_fifo(const char *name, const char *suffix, const char *which)
{
	char path[IPC_NAME_MAX + 64], full[IPC_NAME_MAX + 80];
	int fd, err;

	if ((err = ipc_path(path, sizeof(path), name, suffix)))
		return err;
	snprintf(full, sizeof(full), "%s%s", path, which);
	for (int i = 0; i < 2; i++) {
		/* O_RDWR: a FIFO opened for both never blocks the open and never
		 * reports end-of-file when the other side goes */
		fd = open(full, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			break;
		if (mkfifo(full, 0600) && errno != EEXIST)
			return -errno;
	}
	return fd >= 0 ? fd : -errno;
}

/* An object's FIFOs, beside its file: waiters sleep on .wake, watchers on
 * .kick (ipc.h). */
static const char *const fifo_suffix[2] = { ".wake", ".kick" };

int ipc_open_fifos(struct ipc_obj *o, const char *name, const char *suffix)
{
	int *fd[2] = { &o->wake_fd, &o->kick_fd };

	for (int i = 0; i < 2; i++)
		if ((*fd[i] = open_fifo(name, suffix, fifo_suffix[i])) < 0) {
			int err = *fd[i];
			*fd[i] = -1;
			return err;
		}
	return 0;
}

void ipc_close_fifos(struct ipc_obj *o)
{
	if (o->wake_fd >= 0)
		close(o->wake_fd);
	if (o->kick_fd >= 0)
		close(o->kick_fd);
	o->wake_fd = o->kick_fd = -1;
}

int ipc_unlink(const char *name, const char *suffix, bool with_fifos)
{
	char path[IPC_NAME_MAX + 64], fifo[IPC_NAME_MAX + 80];
	int err;

	if ((err = ipc_path(path, sizeof(path), name, suffix)))
		return err;
	if (unlink(path))
		return -errno;
	for (int i = 0; with_fifos && i < 2; i++) {
		snprintf(fifo, sizeof(fifo), "%s%s", path, fifo_suffix[i]);
		unlink(fifo);
	}
	return 0;
}

uint64_t ipc_self_role(void)
{
	static pid_t pid;
	static uint64_t role;
	pid_t now = getpid();
	uint64_t st = 0;
	char state;

	if (pid != now) {                        /* first call, or a fork child */
		ipc_proc_stat((uint32_t)now, &state, &st);
		role = ipc_role_word((uint32_t)now, (uint32_t)st);
		pid = now;
	}
	return role;
}

int ipc_role_claim(uint64_t *word, uint64_t me)
{
	for (int tries = 0; tries < 16; tries++) {
		uint64_t cur = load_acquire(word);

		if (cur == me || (cur && ipc_role_alive(cur)))
			return -EBUSY;
		if (__atomic_compare_exchange_n(word, &cur, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return 0;
	}
	return -EBUSY;
}

void ipc_role_release(uint64_t *word, uint64_t me)
{
	uint64_t cur = me;

	__atomic_compare_exchange_n(word, &cur, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void ipc_wake(int wake_fd)
{
	/* EAGAIN: the FIFO is full, the waiter has plenty to wake it */
	if (write(wake_fd, "", 1) < 0)
		return;
}

void ipc_drain(int wake_fd)
{
	char buf[256];

	while (read(wake_fd, buf, sizeof(buf)) > 0)
		;
}

/* The kick FIFO holds a byte while wake-ups are wanted and a watcher has
 * not taken it yet: the first waiter writes it, the last one (or a watcher)
 * drains it.  A waiter that came between the last one's count and its
 * drain is seen by the look after the drain, and its byte put back. */
void ipc_want_wakes(const struct ipc_obj *o, uint32_t n)
{
	/* seq_cst: the count is seen before the waiter looks at the word it
	 * waits on (pairs with the watcher's fence) */
	if (__atomic_fetch_add(o->wake_wanted, n, __ATOMIC_SEQ_CST) == 0)
		ipc_wake(o->kick_fd);
}

void ipc_unwant_wakes(const struct ipc_obj *o, uint32_t n)
{
	if (__atomic_fetch_sub(o->wake_wanted, n, __ATOMIC_SEQ_CST) != n)
		return;
	ipc_drain(o->kick_fd);
	full_fence();           /* the drain before the look: a newcomer's byte is not lost */
	if (load_relaxed(o->wake_wanted))
		ipc_wake(o->kick_fd);
}

/* A Linux waiter: counted in *wake_wanted, it looks at *word once more
 * (the seq_cst add and fence pair with the waker's fence: either the waker
 * sees the count or we see the word move), then sleeps on the FIFO while
 * the word still holds `seen`: until woken, the deadline, or 100 ms at
 * most, so that a corrupted count delays a wake-up but never hangs us. */
void ipc_sleep_while(const struct ipc_obj *o, const uint64_t *word, uint64_t seen, uint64_t now, uint64_t deadline)
{
	struct pollfd pfd = { .fd = o->wake_fd, .events = POLLIN };
	uint64_t ns = deadline - now < IPC_SLEEP_SLICE_NS ? deadline - now : IPC_SLEEP_SLICE_NS;
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	ipc_want_wakes(o, 1);
	full_fence();
	if (load_acquire(word) == seen)
		ppoll(&pfd, 1, &ts, NULL);
	ipc_unwant_wakes(o, 1);
	ipc_drain(o->wake_fd);
}
