/* Channels: one producer, one consumer, a ring in shared memory (layout in
 * lib/ipc.h, design in docs/ipc.md).
 *
 * put and get make no system call on a detached thread: the ring is mapped,
 * prefaulted and locked at open, the indices are plain words.  Each side
 * keeps its own index privately (the producer's tail, the consumer's head)
 * and publishes it with a release store, which is the commit point: a
 * consumer that dies before its store leaves the message to the next one,
 * a producer that dies before its store leaves nothing half written.  The
 * other side's index and every record header are copied into locals once
 * and checked before use: a value out of range gives -EBADMSG, never an
 * access outside the ring.  Shared words a peer may have trampled (our own
 * index) are written back from the private copy at every call. */
#include "runtime/ipc.h"
#include "detach/detach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DT_API __attribute__((visibility("default")))
#define CHAN_DEFAULT_RING (64u * 1024)

struct dt_chan {
	struct ipc_obj o;               /* first: the watcher's view */
	struct chan_shared *sh;
	uint8_t *ring;
	uint64_t ring_bytes, mask;      /* private copies, fixed at open */
	bool producer, stream, fd_armed;
	uint64_t pos;                   /* ours: the tail (producer) or the head (consumer) */
	struct dt_chan_stats st;
};

static uint64_t round_pow2(uint64_t v)
{
	uint64_t r = CHAN_RING_MIN;

	while (r < v)
		r <<= 1;
	return r;
}

static void copy_in(struct dt_chan *c, uint64_t pos, const void *src, size_t len)
{
	size_t at = (size_t)(pos & c->mask), first = len < c->ring_bytes - at ? len : c->ring_bytes - at;

	memcpy(c->ring + at, src, first);
	memcpy(c->ring, (const char *)src + first, len - first);
}

static void copy_out(struct dt_chan *c, uint64_t pos, void *dst, size_t len)
{
	size_t at = (size_t)(pos & c->mask), first = len < c->ring_bytes - at ? len : c->ring_bytes - at;

	memcpy(dst, c->ring + at, first);
	memcpy((char *)dst + first, c->ring, len - first);
}

/* A value the peer wrote is an index we may use: within one ring of ours,
 * on the 8-byte grid of records. */
static bool index_ok(const struct dt_chan *c, uint64_t tail, uint64_t head)
{
	return tail - head <= c->ring_bytes && (c->stream || !((tail | head) & 7));
}

static int corrupt(struct dt_chan *c)
{
	c->st.corrupt++;
	store_relaxed(c->producer ? &c->sh->corrupt : &c->sh->corrupt_seen, c->st.corrupt);
	return -EBADMSG;
}

static int check_header(const struct chan_shared *init, const struct dt_chan *c, size_t map_bytes)
{
	if (init->magic != CHAN_MAGIC || init->version != IPC_VERSION)
		return -EINVAL;
	if (c->ring_bytes < CHAN_RING_MIN || c->ring_bytes > CHAN_RING_MAX || (c->ring_bytes & (c->ring_bytes - 1)) ||
	    map_bytes != CHAN_HDR_BYTES + c->ring_bytes)
		return -EINVAL;
	return 0;
}

/* Our index from the shared words, for a new producer or consumer. */
static int start_position(struct dt_chan *c)
{
	uint64_t t = load_acquire(&c->sh->tail), h = load_acquire(&c->sh->head);

	if (index_ok(c, t, h)) {
		c->pos = c->producer ? t : h;
		return 0;
	}
	/* damaged: a consumer starts where the producer is (what was in the
	 * ring is lost), a producer where the consumer is */
	c->pos = c->producer ? h : t;
	if (!c->stream && (c->pos & 7))
		return -EBADMSG;
	corrupt(c);
	return 0;
}

DT_API int dt_chan_open(const char *name, int flags, size_t bytes, struct dt_chan **out)
{
	int role = flags & (DT_CHAN_PRODUCER | DT_CHAN_CONSUMER);
	struct chan_shared init = { 0 };
	struct dt_chan *c;
	bool created;
	int err;

	if (!out || !ipc_name_ok(name) || (flags & ~(DT_CHAN_CREATE | DT_CHAN_PRODUCER | DT_CHAN_CONSUMER | DT_CHAN_STREAM)) ||
	    (role != DT_CHAN_PRODUCER && role != DT_CHAN_CONSUMER) || bytes > CHAN_RING_MAX)
		return -EINVAL;
	*out = NULL;
	init.magic = CHAN_MAGIC;
	init.version = IPC_VERSION;
	init.flags = flags & DT_CHAN_STREAM;
	init.ring_bytes = round_pow2(bytes ? bytes : CHAN_DEFAULT_RING);
	c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t)63);
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));            /* every byte touched now, not on a detached thread */
	c->o.kind = IPC_CHAN;
	c->o.wake_fd = -1;
	err = ipc_open_file(name, ".chan", flags & DT_CHAN_CREATE, CHAN_HDR_BYTES + init.ring_bytes,
			    CHAN_HDR_BYTES + CHAN_RING_MAX, &init, sizeof(init), &c->o.map, &c->o.map_bytes, &created);
	if (err)
		goto fail;
	c->sh = c->o.map;
	memcpy(&init, c->sh, sizeof(init));  /* the creator's line, read once */
	c->ring_bytes = init.ring_bytes;
	c->mask = c->ring_bytes - 1;
	c->ring = (uint8_t *)c->o.map + CHAN_HDR_BYTES;
	c->stream = init.flags & DT_CHAN_STREAM;
	c->producer = role == DT_CHAN_PRODUCER;
	err = check_header(&init, c, c->o.map_bytes);
	if (!err && (c->stream != !!(flags & DT_CHAN_STREAM) || (!created && bytes > c->ring_bytes)))
		err = -EINVAL;
	if (err)
		goto fail;
	if ((c->o.wake_fd = ipc_open_wake(name, ".chan.wake")) < 0) {
		err = c->o.wake_fd;
		goto fail;
	}
	dt_now_ns();                         /* the clock calibrated now, not in a get */
	c->o.me = ipc_self_role();
	c->o.my_role = c->producer ? &c->sh->producer : &c->sh->consumer;
	c->o.peer_role = c->producer ? &c->sh->consumer : &c->sh->producer;
	c->o.peer_pidfd = -1;
	c->o.wake_wanted = &c->sh->wake_wanted;
	c->o.progress = c->producer ? &c->sh->tail : NULL;
	c->o.corrupt_count = c->producer ? &c->sh->corrupt : &c->sh->corrupt_seen;
	if ((err = ipc_role_claim(c->o.my_role, c->o.me)))
		goto fail;
	if ((err = start_position(c))) {
		ipc_role_release(c->o.my_role, c->o.me);
		goto fail;
	}
	if (!c->producer) {
		/* the waiters of a consumer that died are gone */
		store_relaxed(&c->sh->wake_wanted, 0);
		ipc_drain(c->o.wake_fd);
		store_release(&c->sh->head, c->pos);
	}
	if ((err = watcher_add(&c->o))) {
		ipc_role_release(c->o.my_role, c->o.me);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	if (c->o.wake_fd >= 0)
		close(c->o.wake_fd);
	if (c->o.map)
		munmap(c->o.map, c->o.map_bytes);
	free(c);
	return err;
}

DT_API int dt_chan_put(struct dt_chan *c, const void *msg, size_t len)
{
	struct chan_shared *sh;
	uint64_t h, need;

	if (!c || !c->producer || (len && !msg))
		return -EINVAL;
	sh = c->sh;
	need = c->stream ? len : chan_record_bytes(len);
	if (need > c->ring_bytes || len > UINT32_MAX)
		return -EMSGSIZE;
	if (load_relaxed(&sh->tail) != c->pos)       /* trampled: ours is the truth */
		store_release(&sh->tail, c->pos);
	if (!load_relaxed(&sh->consumer)) {
		store_relaxed(&sh->no_consumer, ++c->st.no_peer);
		return -EPIPE;
	}
	/* acquire: the consumer had finished reading what it gives back */
	h = load_acquire(&sh->head);
	if (!index_ok(c, c->pos, h))
		return corrupt(c);
	if (c->ring_bytes - (c->pos - h) < need) {
		store_relaxed(&sh->full, ++c->st.full);
		return -EAGAIN;
	}
	if (c->stream) {
		copy_in(c, c->pos, msg, len);
	} else {
		struct chan_record r = { (uint32_t)len, chan_tag(c->pos, (uint32_t)len) };
		memcpy(c->ring + (c->pos & c->mask), &r, sizeof(r));
		copy_in(c, c->pos + sizeof(r), msg, len);
	}
	c->pos += need;
	/* release: the bytes are in place before the consumer can see them */
	store_release(&sh->tail, c->pos);
	c->st.messages++;
	c->st.bytes += len;
	store_relaxed(&sh->puts, c->st.messages);
	store_relaxed(&sh->put_bytes, c->st.bytes);
	if (!ipc_on_detached_thread()) {
		/* a Linux producer wakes Linux waiters itself; a detached one
		 * leaves it to the watcher on the housekeeping CPUs */
		full_fence();
		if (load_relaxed(&sh->wake_wanted))
			ipc_wake(c->o.wake_fd);
	}
	return 0;
}

/* Linux consumer with an fd in poll: the FIFO holds a byte exactly while a
 * message waits, as far as the consumer can tell. */
static void settle_fd(struct dt_chan *c)
{
	if (!c->fd_armed || ipc_on_detached_thread())
		return;
	ipc_drain(c->o.wake_fd);
	full_fence();
	if (load_acquire(&c->sh->tail) != c->pos)
		ipc_wake(c->o.wake_fd);
}

/* Nothing to read yet.  0: look again; else the call's result. */
static long wait_more(struct dt_chan *c, uint64_t deadline)
{
	uint64_t now;

	if (!load_relaxed(&c->sh->producer))
		return -EPIPE;
	if (!deadline) {
		settle_fd(c);
		return -EAGAIN;
	}
	now = dt_now_ns();
	if (now >= deadline)
		return -ETIMEDOUT;
	if (ipc_on_detached_thread()) {
		cpu_relax();
		return 0;
	}
	/* the watcher writes the FIFO when the producer dies, too */
	ipc_sleep_while(c->o.wake_fd, &c->sh->wake_wanted, &c->sh->tail, c->pos, now, deadline);
	return 0;
}

DT_API long dt_chan_get(struct dt_chan *c, void *buf, size_t len, uint64_t deadline_ns)
{
	struct chan_shared *sh;
	struct chan_record r;
	uint64_t t, h, used, size;
	long ret;

	if (!c || c->producer || (len && !buf))
		return -EINVAL;
	sh = c->sh;
	if (load_relaxed(&sh->head) != c->pos)       /* trampled: ours is the truth */
		store_release(&sh->head, c->pos);
	for (;;) {
		/* acquire: the producer's bytes are visible up to t */
		t = load_acquire(&sh->tail);
		h = c->pos;
		used = t - h;
		if (!index_ok(c, t, h)) {
			if (c->stream || !(t & 7)) {
				/* resynchronise on the producer, whichever is wrong:
				 * a producer that repairs its tail meets us there */
				c->pos = t;
				store_release(&sh->head, t);
			}
			return corrupt(c);
		}
		if (used)
			break;
		if ((ret = wait_more(c, deadline_ns)))
			return ret;
	}
	if (c->stream) {
		size = used < len ? used : len;
		copy_out(c, h, buf, size);
		ret = (long)size;
	} else {
		memcpy(&r, c->ring + (h & c->mask), sizeof(r));   /* once: the peer may change it */
		size = chan_record_bytes(r.len);
		if (r.tag != chan_tag(h, r.len) || size > used) {
			c->pos = t;                          /* skip what cannot be read */
			store_release(&sh->head, t);
			return corrupt(c);
		}
		if (r.len > len)
			return -EMSGSIZE;
		copy_out(c, h + sizeof(r), buf, r.len);
		ret = r.len;
	}
	/* the commit: release, the bytes are read before the producer may
	 * reuse them; a consumer that dies before this store has not taken it */
	c->pos = h + size;
	store_release(&sh->head, c->pos);
	c->st.messages++;
	c->st.bytes += (uint64_t)ret;
	store_relaxed(&sh->gets, c->st.messages);
	store_relaxed(&sh->get_bytes, c->st.bytes);
	if (c->fd_armed && t == c->pos)
		settle_fd(c);
	return ret;
}

DT_API int dt_chan_fd(struct dt_chan *c)
{
	if (!c || c->producer)
		return -EINVAL;
	if (!c->fd_armed) {
		c->fd_armed = true;
		__atomic_fetch_add(&c->sh->wake_wanted, WAKE_ARMED, __ATOMIC_SEQ_CST);
	}
	settle_fd(c);
	return c->o.wake_fd;
}

DT_API int dt_chan_stats(struct dt_chan *c, struct dt_chan_stats *s)
{
	if (!c || !s)
		return -EINVAL;
	*s = c->st;
	return 0;
}

DT_API int dt_chan_close(struct dt_chan *c)
{
	if (!c)
		return -EINVAL;
	watcher_remove(&c->o);
	if (c->fd_armed)
		__atomic_fetch_sub(&c->sh->wake_wanted, WAKE_ARMED, __ATOMIC_SEQ_CST);
	ipc_role_release(c->o.my_role, c->o.me);
	if (c->producer)
		ipc_wake(c->o.wake_fd);          /* a waiting consumer sees -EPIPE now */
	close(c->o.wake_fd);
	munmap(c->o.map, c->o.map_bytes);
	free(c);
	return 0;
}

DT_API int dt_chan_unlink(const char *name)
{
	return ipc_unlink(name, ".chan", true);
}
