/* The housekeeping side of channels and doorbells: one thread per process
 * that has any open, never on a detached CPU.  A detached thread cannot
 * enter the kernel to wake a Linux waiter or to ask whether its peer
 * lives; this thread does both for it:
 *
 *   - doorbells: in a process with detached threads, while a Linux waiter
 *     wants a wake-up from an object (its wake_wanted is not 0), it looks
 *     at the object's progress word (a channel's tail, a bell's count)
 *     every WATCH_ACTIVE_NS and writes the object's wake FIFO when the word
 *     moved (Linux threads wake their waiters themselves).  While nobody
 *     waits it sleeps: the first waiter kicks it through the object's kick
 *     FIFO (ipc_want_wakes), so a program whose Linux side polls is not
 *     interrupted 20,000 times a second on a housekeeping CPU;
 *   - liveness: it holds a pidfd of each channel peer; when one becomes
 *     readable (the peer exited) and /proc confirms it, it clears the
 *     peer's role word, so the detached side sees -EPIPE by a plain load,
 *     and wakes local waiters;
 *   - our own role words: a value that is not ours while we hold the role
 *     was written by someone else, and is put back (every WATCH_IDLE_NS
 *     at the latest, as new peers are noticed).
 *
 * A process that detaches its first thread after opening (dt_detach
 * without `detach run`) kicks it too (watcher_kick): it moves itself to the
 * housekeeping CPUs and takes up its waking duty.
 *
 * The list of objects is only touched under the lock; the detached side
 * never takes it (open and close do). */
#include "runtime/ipc.h"
#include "runtime/config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WATCH_ACTIVE_NS 50000          /* doorbell duty: wake latency of Linux waiters */
#define WATCH_IDLE_NS   10000000       /* otherwise: new peers noticed within 10 ms */
#define WATCH_MAX_FDS   256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_obj *objs;
static pid_t running_in;               /* the process whose watcher runs (fork) */
static int kick_fd = -1;               /* eventfd: the list changed, or we detached */

static void peer_gone(struct ipc_obj *o, uint64_t peer)
{
	__atomic_compare_exchange_n(o->peer_role, &peer, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	if (o->peer_pidfd >= 0)
		close(o->peer_pidfd);
	o->peer_pidfd = -1;
	o->peer_seen = 0;
	ipc_wake(o->wake_fd);                  /* our waiters see -EPIPE now */
}

static bool fired(const int *ready, int nready, int fd)
{
	for (int i = 0; i < nready; i++)
		if (ready[i] == fd)
			return true;
	return false;
}

static void watch_peer(struct ipc_obj *o, const int *ready, int nready)
{
	uint64_t p = load_acquire(o->peer_role);

	if (p != o->peer_seen) {
		if (o->peer_pidfd >= 0)
			close(o->peer_pidfd);
		o->peer_pidfd = -1;
		o->peer_seen = p;
		if (!p)
			return;
		/* the pidfd first, then /proc: a pid reused in between fails
		 * the start-time check */
		o->peer_pidfd = (int)syscall(SYS_pidfd_open, ipc_role_pid(p), 0);
		if (o->peer_pidfd < 0 || !ipc_role_alive(p))
			peer_gone(o, p);
	} else if (p && o->peer_pidfd >= 0 && fired(ready, nready, o->peer_pidfd) && !ipc_role_alive(p)) {
		/* a readable pidfd is a hint (fd numbers are reused): /proc decides */
		peer_gone(o, p);
	}
}

/* One look at every object; fills fds with what to sleep on: the pidfds
 * of peers, and while nobody wants a wake-up, the kick FIFOs of the
 * objects we would wake for.  *duty: someone does. */
static int tick(struct pollfd *fds, const int *ready, int nready, bool *duty, int *first_kick)
{
	/* Only a process with detached threads wakes Linux waiters: a fork
	 * child of an ordinary thread inherits dt_cfg.active but no detached
	 * thread, and a second watcher writing the same named FIFO leaves it
	 * readable after the waiter took the wake-up. */
	bool waker = dt_cfg.active && dt_cfg.pid == running_in;
	int n = 1, kicks = 0;

	*duty = false;
	/* pairs with the waiter's seq_cst count: we drained the kick FIFOs
	 * before this look, so a waiter we do not count here left a byte */
	full_fence();
	for (struct ipc_obj *o = objs; o; o = o->next) {
		if (o->my_role && load_relaxed(o->my_role) != o->me) {
			store_release(o->my_role, o->me);
			__atomic_fetch_add(o->corrupt_count, 1, __ATOMIC_RELAXED);
		}
		if (o->peer_role)
			watch_peer(o, ready, nready);
		if (o->peer_pidfd >= 0 && n < WATCH_MAX_FDS)
			fds[n++] = (struct pollfd){ .fd = o->peer_pidfd, .events = POLLIN };
		if (o->progress && waker) {
			uint64_t v = load_acquire(o->progress);
			bool wanted = load_relaxed(o->wake_wanted) != 0;
			if (v != o->progress_seen) {
				o->progress_seen = v;
				full_fence();   /* pairs with the waiter's: wake_wanted set, then progress read */
				if (load_relaxed(o->wake_wanted))
					ipc_wake(o->wake_fd);
			}
			*duty |= wanted;
			kicks++;
		}
	}
	/* Sleeping: a waiter's first count writes the kick FIFO. */
	*first_kick = n;
	for (struct ipc_obj *o = objs; !*duty && kicks && o; o = o->next)
		if (o->progress && n < WATCH_MAX_FDS)
			fds[n++] = (struct pollfd){ .fd = o->kick_fd, .events = POLLIN };
	return n;
}

static void *watcher(void *arg)
{
	struct pollfd fds[WATCH_MAX_FDS];
	int ready[WATCH_MAX_FDS], nready = 0, n;
	bool duty, placed = false, kicked = false;
	int first_kick;
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);   /* glibc's sites may hold an int3 (proxy.c) */
	pthread_sigmask(SIG_BLOCK, &all, NULL);   /* the program's handlers run elsewhere */
	/* the kernel's default slack (50 us) would make each 50 us look
	 * 100 us apart, and a Linux waiter's wake-up as late */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	for (;;) {
		/* started before the process detached a thread: off its CPU now */
		if (!placed && dt_cfg.active && dt_cfg.pid == running_in)
			placed = !sched_setaffinity(0, sizeof(dt_hk_mask), &dt_hk_mask);
		pthread_mutex_lock(&lock);
		/* a kick FIFO fired: emptied before tick looks at the counts (the
		 * fds are ours only under the lock: close follows watcher_remove) */
		for (struct ipc_obj *o = objs; kicked && o; o = o->next)
			if (o->progress)
				ipc_drain(o->kick_fd);
		kicked = false;
		n = tick(fds, ready, nready, &duty, &first_kick);
		pthread_mutex_unlock(&lock);
		fds[0] = (struct pollfd){ .fd = kick_fd, .events = POLLIN };
		uint64_t ns = duty ? WATCH_ACTIVE_NS : WATCH_IDLE_NS;
		struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
		nready = 0;
		if (ppoll(fds, (nfds_t)n, &ts, NULL) > 0) {
			uint64_t v;
			if (fds[0].revents && read(kick_fd, &v, sizeof(v)) < 0)
				v = 0;
			for (int i = 1; i < n; i++) {
				if (fds[i].revents && i >= first_kick)
					kicked = true;
				else if (fds[i].revents)
					ready[nready++] = fds[i].fd;
			}
		}
	}
	return NULL;
}

/* Called with the lock held. */
static int start(void)
{
	pthread_attr_t attr;
	pthread_t th;
	int err;

	if (running_in == getpid())
		return 0;
	if (kick_fd >= 0)
		close(kick_fd);
	if ((kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (dt_cfg.active)       /* never on a detached CPU */
		pthread_attr_setaffinity_np(&attr, sizeof(dt_hk_mask), &dt_hk_mask);
	err = pthread_create(&th, &attr, watcher, NULL);
	pthread_attr_destroy(&attr);
	if (err)
		return -err;
	pthread_setname_np(th, "detach-ipc");
	running_in = getpid();
	return 0;
}

/* A fork child has no watcher and none of its parent's handles. */
static void forked(void)
{
	pthread_mutex_init(&lock, NULL);
	objs = NULL;
}

static void at_fork_once(void)
{
	pthread_atfork(NULL, NULL, forked);
}

void watcher_kick(void)
{
	uint64_t one = 1;

	pthread_mutex_lock(&lock);
	if (running_in == getpid() && write(kick_fd, &one, sizeof(one)) < 0)
		one = 0;        /* full: it has been kicked */
	pthread_mutex_unlock(&lock);
}

int watcher_add(struct ipc_obj *o)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint64_t one = 1;
	int err;

	pthread_once(&once, at_fork_once);
	pthread_mutex_lock(&lock);
	if (!(err = start())) {
		o->next = objs;
		objs = o;
		if (write(kick_fd, &one, sizeof(one)) < 0)
			err = 0;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

void watcher_remove(struct ipc_obj *o)
{
	pthread_mutex_lock(&lock);
	for (struct ipc_obj **p = &objs; *p; p = &(*p)->next)
		if (*p == o) {
			*p = o->next;
			break;
		}
	if (o->peer_pidfd >= 0)
		close(o->peer_pidfd);
	o->peer_pidfd = -1;
	pthread_mutex_unlock(&lock);
}
