/* Doorbells: a counter in shared memory that any holder rings and any
 * holder waits on, the stand-in for the device interrupt of the paper.
 * Ringing is one atomic add, waiting on a detached thread a spin on the
 * counter: no system call.  A Linux waiter sleeps on the bell's FIFO,
 * written by a Linux ringer itself or, for a detached ringer, by the
 * watcher (watcher.c).  Every handle sees every ring (several rings between
 * two waits count as one), like a level that stays up until looked at. */
#include "runtime/ipc.h"
#include "detach/detach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DT_API __attribute__((visibility("default")))

struct dt_bell {
	struct ipc_obj o;               /* first: the watcher's view */
	struct bell_shared *sh;
	uint64_t seen;                  /* rings when this handle last returned 0 */
	bool fd_armed;
};

DT_API int dt_bell_open(const char *name, int flags, struct dt_bell **out)
{
	struct bell_shared init = { 0 };
	struct dt_bell *b;
	bool created;
	int err;

	if (!out || !ipc_name_ok(name) || (flags & ~DT_CHAN_CREATE))
		return -EINVAL;
	*out = NULL;
	init.magic = BELL_MAGIC;
	init.version = IPC_VERSION;
	b = aligned_alloc(64, (sizeof(*b) + 63) & ~(size_t)63);
	if (!b)
		return -ENOMEM;
	memset(b, 0, sizeof(*b));
	b->o.kind = IPC_BELL;
	b->o.wake_fd = b->o.kick_fd = -1;
	b->o.peer_pidfd = -1;
	err = ipc_open_file(name, ".bell", flags & DT_CHAN_CREATE, BELL_BYTES, BELL_BYTES, &init, sizeof(init),
			    &b->o.map, &b->o.map_bytes, &created);
	if (err)
		goto fail;
	b->sh = b->o.map;
	memcpy(&init, b->sh, sizeof(init));
	if (init.magic != BELL_MAGIC || init.version != IPC_VERSION) {
		err = -EINVAL;
		goto fail;
	}
	if ((err = ipc_open_fifos(&b->o, name, ".bell")))
		goto fail;
	dt_now_ns();                         /* the clock calibrated now, not in a wait */
	b->seen = load_acquire(&b->sh->rings);
	b->o.progress = &b->sh->rings;
	b->o.progress_seen = b->seen;
	b->o.wake_wanted = &b->sh->wake_wanted;
	if ((err = watcher_add(&b->o)))
		goto fail;
	*out = b;
	return 0;
fail:
	ipc_close_fifos(&b->o);
	if (b->o.map)
		munmap(b->o.map, b->o.map_bytes);
	free(b);
	return err;
}

DT_API int dt_bell_ring(struct dt_bell *b)
{
	if (!b)
		return -EINVAL;
	__atomic_fetch_add(&b->sh->rings, 1, __ATOMIC_SEQ_CST);
	if (!ipc_on_detached_thread() && load_relaxed(&b->sh->wake_wanted))
		ipc_wake(b->o.wake_fd);      /* the seq_cst add ordered the ring before this load */
	return 0;
}

/* Linux handle with an fd in poll: readable exactly while rung and not
 * yet waited for, as far as this handle can tell. */
static void settle_fd(struct dt_bell *b)
{
	if (!b->fd_armed || ipc_on_detached_thread())
		return;
	ipc_drain(b->o.wake_fd);
	full_fence();
	if (load_acquire(&b->sh->rings) != b->seen)
		ipc_wake(b->o.wake_fd);
}

DT_API int dt_bell_wait(struct dt_bell *b, uint64_t deadline_ns)
{
	if (!b)
		return -EINVAL;
	for (;;) {
		uint64_t v = load_acquire(&b->sh->rings), now;

		if (v != b->seen) {          /* any change is a ring: no value is invalid */
			b->seen = v;
			settle_fd(b);
			return 0;
		}
		now = deadline_ns ? dt_now_ns() : 0;
		if (now >= deadline_ns) {
			settle_fd(b);
			return -ETIMEDOUT;
		}
		if (ipc_on_detached_thread()) {
			cpu_relax();
			continue;
		}
		ipc_sleep_while(&b->o, &b->sh->rings, b->seen, now, deadline_ns);
	}
}

DT_API int dt_bell_fd(struct dt_bell *b)
{
	if (!b)
		return -EINVAL;
	if (!b->fd_armed) {
		b->fd_armed = true;
		ipc_want_wakes(&b->o, WAKE_ARMED);
	}
	settle_fd(b);
	return b->o.wake_fd;
}

DT_API int dt_bell_close(struct dt_bell *b)
{
	if (!b)
		return -EINVAL;
	watcher_remove(&b->o);
	if (b->fd_armed)
		ipc_unwant_wakes(&b->o, WAKE_ARMED);
	ipc_close_fifos(&b->o);
	munmap(b->o.map, b->o.map_bytes);
	free(b);
	return 0;
}

DT_API int dt_bell_unlink(const char *name)
{
	return ipc_unlink(name, ".bell", true);
}
