/* Channels, doorbells and regions inside libdetach.so: what chan.c, bell.c,
 * shm.c and watcher.c share (ipc.c).  The layout in shared memory is
 * lib/ipc.h; docs/ipc.md says why it is built this way. */
#ifndef DETACH_RUNTIME_IPC_H
#define DETACH_RUNTIME_IPC_H

#include "lib/ipc.h"
#include "lib/util.h"
#include "runtime/thread.h"

#include <stddef.h>
#include <stdint.h>

/* Pairs of barriers, as in the runtime's mailbox: a release store
 * publishes what was written before it; an acquire load sees it. */
#define load_acquire(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define load_relaxed(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
/* Dekker between a waiter (sets wake_wanted, then looks at the data) and a
 * waker (publishes the data, then looks at wake_wanted): each side needs
 * its store ordered before its load. */
#define full_fence()        __atomic_thread_fence(__ATOMIC_SEQ_CST)

enum ipc_kind { IPC_CHAN, IPC_BELL };

/* What the housekeeping watcher (watcher.c) knows of an open channel or
 * bell; the first member of struct dt_chan and struct dt_bell. */
struct ipc_obj {
	struct ipc_obj *next;           /* watcher's list, under its lock */
	enum ipc_kind kind;
	int wake_fd;                    /* the FIFO waiters sleep on, O_RDWR | O_NONBLOCK */
	int kick_fd;                    /* the FIFO that wakes the watchers: a waiter came */
	void *map;
	size_t map_bytes;
	/* roles (channels): the word we hold and the one of our peer */
	uint64_t *my_role;
	uint64_t me;
	uint64_t *peer_role;
	uint32_t *wake_wanted;          /* Linux waiters on the far side of the FIFO */
	const uint64_t *progress;       /* tail or rings: what a waiter waits for */
	uint64_t *corrupt_count;        /* shared counter for `detach ps` */
	/* watcher's own state */
	uint64_t peer_seen;
	int peer_pidfd;
	uint64_t progress_seen;
};

/* Is the calling thread detached (so it must not enter the kernel)? */
static inline bool ipc_on_detached_thread(void)
{
	return dt_self && !dt_self->observed && !dt_self->vfork_child;
}

/* ipc.c */
int ipc_path(char *buf, size_t len, const char *name, const char *suffix);
/* Opens (or with create, makes) IPC_DIR/NAME.SUFFIX: a file of `bytes`
 * whose first `init_bytes` bytes are `init` (written before the name
 * appears, so nobody sees it half made) and its wake FIFO.  Maps it,
 * prefaults every page for writing and locks it.  *created tells which;
 * a file of more than max_bytes is refused (-EINVAL). */
int ipc_open_file(const char *name, const char *suffix, bool create, size_t bytes, size_t max_bytes,
		  const void *init, size_t init_bytes, void **map, size_t *map_bytes, bool *created);
/* Opens the object's two FIFOs, IPC_DIR/NAME.SUFFIX.wake and .kick, into
 * o->wake_fd and o->kick_fd (-1 each on failure); ipc_close_fifos closes
 * what is open. */
int ipc_open_fifos(struct ipc_obj *o, const char *name, const char *suffix);
void ipc_close_fifos(struct ipc_obj *o);
int ipc_unlink(const char *name, const char *suffix, bool with_fifos);
void ipc_prefault(void *p, size_t bytes);
uint64_t ipc_self_role(void);
int ipc_role_claim(uint64_t *word, uint64_t me);
void ipc_role_release(uint64_t *word, uint64_t me);
/* Wakes Linux waiters: one byte into the FIFO (full is as good). */
void ipc_wake(int wake_fd);
/* Linux side: takes the bytes out of the FIFO. */
void ipc_drain(int wake_fd);
/* Linux side: n more (or fewer) wake-ups wanted in *o->wake_wanted (1 a
 * sleeper, WAKE_ARMED a polled fd).  The first of them kicks the watchers,
 * which sleep while nobody wants a wake-up (watcher.c); the last drains
 * the kick. */
void ipc_want_wakes(const struct ipc_obj *o, uint32_t n);
void ipc_unwant_wakes(const struct ipc_obj *o, uint32_t n);
/* Linux side: sleeps on the FIFO while *word == seen, at most until
 * deadline (> now) and IPC_SLEEP_SLICE_NS. */
#define IPC_SLEEP_SLICE_NS 100000000ull
void ipc_sleep_while(const struct ipc_obj *o, const uint64_t *word, uint64_t seen, uint64_t now, uint64_t deadline);

/* watcher.c */
int watcher_add(struct ipc_obj *o);
void watcher_remove(struct ipc_obj *o);
/* This process got detached threads (dt_detach without `detach run`):
 * the watcher leaves the detached CPUs and takes up its waking duty. */
void watcher_kick(void);

#endif
