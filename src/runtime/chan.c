/* Channels: one producer, one consumer, a ring in shared memory (layout in
 * lib/ipc.h, design in docs/ipc.md).
 *
 * put and get make no system call on a detached thread: the ring is mapped,
 * prefaulted and locked at open, the indices are plain words.  Each side
 * keeps its own index privately (the producer's tail, the consumer's head)
 * and publishes it with a release store.  A message's commit point is the
 * release store of its header word (the producer) and of the head (the
 * consumer): a consumer that dies before its store leaves the message to
 * the next one, a producer that dies before its store leaves nothing half
 * written.
 *
 * Cache lines: a consumer polls the header word where the next record
 * will be, not the producer's tail, and a producer reads the consumer's
 * head only when its last copy says the ring is full; so in the steady
 * state each side writes only its own line, and what crosses between the
 * CPUs is the record (docs/ipc.md counts them).  The tail still follows
 * every put: it tells an empty ring from a damaged header, wakes Linux
 * sleepers and is where a new producer starts.
 *
 * The other side's index and every record header are copied into locals
 * once and checked before use: a value out of range gives -EBADMSG, never
 * an access outside the ring.  Shared words a peer may have trampled (our
 * own index) are written back from the private copy at every call. */
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
	uint64_t head_seen;             /* producer: the consumer's head when last read */
	uint64_t tail_seen;             /* consumer: the producer's tail when last read */
	uint32_t idle;                  /* consumer: empty looks since the last message */
	bool had_producer;              /* consumer: one was seen open, or put what we got */
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
	if (first < len)
		memcpy(c->ring, (const char *)src + first, len - first);
}

static void copy_out(struct dt_chan *c, uint64_t pos, void *dst, size_t len)
{
	size_t at = (size_t)(pos & c->mask), first = len < c->ring_bytes - at ? len : c->ring_bytes - at;

	memcpy(dst, c->ring + at, first);
	if (first < len)
		memcpy((char *)dst + first, c->ring, len - first);
}

/* A value the peer wrote is an index we may use: within one ring of ours,
 * on the 8-byte grid of records. */
static bool index_ok(const struct dt_chan *c, uint64_t tail, uint64_t head)
{
	return tail - head <= c->ring_bytes && (c->stream || !((tail | head) & 7));
}

/* The header word at pos, as the producer published it. */
static uint64_t header_at(const struct dt_chan *c, uint64_t pos)
{
	/* acquire: pairs with the producer's release of the header, so the
	 * bytes of the record are visible once the header is */
	return load_acquire((const uint64_t *)(c->ring + (pos & c->mask)));
}

/* w is the header of a record at pos that a put could have made: *bytes
 * its size in the ring. */
static bool header_ok(const struct dt_chan *c, uint64_t pos, uint64_t w, uint64_t *bytes)
{
	*bytes = chan_record_bytes((uint32_t)w);
	return w == chan_header(pos, (uint32_t)w) && *bytes <= c->ring_bytes;
}

static int corrupt(struct dt_chan *c)
{
	c->st.corrupt++;
	store_relaxed(c->producer ? &c->sh->corrupt : &c->sh->corrupt_seen, c->st.corrupt);
	return -EBADMSG;
}

static int check_header(const struct chan_shared *init, const struct dt_chan *c, size_t map_bytes)
{
	/* a channel of another layout (version 1 had another magic) */
	if (init->magic != CHAN_MAGIC || init->version != CHAN_VERSION)
		return -EINVAL;
	if (c->ring_bytes < CHAN_RING_MIN || c->ring_bytes > CHAN_RING_MAX || (c->ring_bytes & (c->ring_bytes - 1)) ||
	    map_bytes != CHAN_HDR_BYTES + c->ring_bytes)
		return -EINVAL;
	return 0;
}

/* Our index from the shared words, for a new producer or consumer. */
static int start_position(struct dt_chan *c)
{
	uint64_t t = load_acquire(&c->sh->tail), h = load_acquire(&c->sh->head), bytes;

	if (index_ok(c, t, h)) {
		c->pos = c->producer ? t : h;
	} else {
		/* damaged: a consumer starts where the producer is (what was in
		 * the ring is lost), a producer where the consumer is */
		c->pos = c->producer ? h : t;
		if (!c->stream && (c->pos & 7))
			return -EBADMSG;
		corrupt(c);
	}
	if (!c->producer)
		return 0;
	c->head_seen = h;               /* valid, or where we start */
	/* a producer that died between a header and its tail committed that
	 * record: start after it (the records end at a word that is no
	 * header, so this stops within a ring) */
	while (!c->stream && header_ok(c, c->pos, header_at(c, c->pos), &bytes) && c->pos + bytes - h <= c->ring_bytes)
		c->pos += bytes;
	store_release(&c->sh->tail, c->pos);
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
	init.version = CHAN_VERSION;
	init.flags = flags & DT_CHAN_STREAM;
	init.ring_bytes = round_pow2(bytes ? bytes : CHAN_DEFAULT_RING);
	c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t)63);
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));            /* every byte touched now, not on a detached thread */
	c->o.kind = IPC_CHAN;
	c->o.wake_fd = c->o.kick_fd = -1;
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
	if ((err = ipc_open_fifos(&c->o, name, ".chan")))
		goto fail;
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
		/* a producer that died before we came is none we had: its word
		 * goes (as the watchers clear it), so that a get waits for the
		 * next one instead of taking it for one that just left */
		uint64_t p = load_acquire(&c->sh->producer);
		if (p && !ipc_role_alive(p))
			__atomic_compare_exchange_n(&c->sh->producer, &p, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		/* the waiters of a consumer that died are gone */
		store_relaxed(&c->sh->wake_wanted, 0);
		ipc_drain(c->o.wake_fd);
		ipc_drain(c->o.kick_fd);
		store_release(&c->sh->head, c->pos);
	}
	if ((err = watcher_add(&c->o))) {
		ipc_role_release(c->o.my_role, c->o.me);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	ipc_close_fifos(&c->o);
	if (c->o.map)
		munmap(c->o.map, c->o.map_bytes);
	free(c);
	return err;
}

/* A head beyond our tail: the consumer took records at our position that
 * we never put (a header a peer wrote there checks: our marker with one
 * bit flipped is the header of a record of 0 bytes), and waits for our
 * tail to come after them, as for a producer between a header and its
 * tail (tail_check).  Refusing (-EBADMSG at every put) would leave both
 * waiting for ever once the damage stops.  They are taken: we skip them,
 * as a new producer does (start_position), and go on where the consumer
 * is.  false: the head is not at the end of such records. */
static bool skip_taken(struct dt_chan *c, uint64_t h)
{
	uint64_t pos = c->pos, bytes;

	if (c->stream)          /* no headers to read */
		return false;
	/* at most a ring of records of 8 bytes or more */
	while (pos != h && h - pos <= c->ring_bytes && header_ok(c, pos, header_at(c, pos), &bytes) &&
	       bytes <= h - pos)
		pos += bytes;
	if (pos != h)
		return false;
	c->pos = pos;
	store_release(&c->sh->tail, pos);
	return true;
}

DT_API int dt_chan_put(struct dt_chan *c, const void *msg, size_t len)
{
	struct chan_shared *sh;
	uint64_t h, need, room;

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
	room = c->ring_bytes - (c->pos - c->head_seen);
	if (room < need) {
		/* full as far as we knew: only now the consumer's line.
		 * acquire: the consumer had finished reading what it gives back */
		h = load_acquire(&sh->head);
		if (!index_ok(c, c->pos, h) && !skip_taken(c, h))
			return corrupt(c);
		c->head_seen = h;
		room = c->ring_bytes - (c->pos - h);
		if (room < need) {
			store_relaxed(&sh->full, ++c->st.full);
			return -EAGAIN;
		}
	}
	if (c->stream) {
		copy_in(c, c->pos, msg, len);
	} else {
		uint64_t at = c->pos + sizeof(struct chan_record);
		size_t near = (size_t)(((c->pos | 63) + 1) - at);
		if (near > len)
			near = len;
		/* the bytes beyond the header's cache line first, so that the
		 * stores into the line the consumer polls come last and
		 * together (one transfer of it, not one per store) */
		copy_in(c, at + near, (const char *)msg + near, len - near);
		/* where the next header goes: a word that is none (without room
		 * for it the ring is full to the consumer's record, whose header
		 * is of the lap before, so none either) */
		if (room >= need + 8)
			store_relaxed((uint64_t *)(c->ring + ((c->pos + need) & c->mask)), chan_marker(c->pos + need));
		copy_in(c, at, msg, near);
		/* release: the bytes and the marker are in place before the
		 * consumer can see the header; this store is the commit */
		store_release((uint64_t *)(c->ring + (c->pos & c->mask)), chan_header(c->pos, (uint32_t)len));
	}
	c->pos += need;
	/* release: for a stream consumer, the bytes are in place before it
	 * sees them; for a message one, the header is before the tail */
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

/* Message mode, the header at our position is no record: what the
 * producer's tail says.  0: nothing was published beyond us; 1: something
 * was, look again; -EBADMSG: damaged (counted, and we resynchronised). */
static long tail_check(struct dt_chan *c)
{
	uint64_t t = load_acquire(&c->sh->tail), bytes;

	c->tail_seen = t;
	if (t == c->pos)
		return 0;
	if (index_ok(c, t, c->pos)) {
		/* published beyond us: after the acquire of t its header shows */
		if (header_ok(c, c->pos, header_at(c, c->pos), &bytes))
			return 1;
	} else if (c->pos - t <= c->ring_bytes && !(t & 7) && header_ok(c, t, header_at(c, t), &bytes) &&
		   t + bytes == c->pos) {
		/* we took the record whose tail is not stored yet (or one a peer
		 * wrote at the tail: the producer skips it, skip_taken) */
		return 0;
	}
	/* a tail that moved meanwhile is a producer at work, not proof */
	if (load_acquire(&c->sh->tail) != t)
		return 1;
	if (!(t & 7)) {
		/* resynchronise on the producer, whichever is wrong: a producer
		 * that repairs its tail meets us there */
		c->pos = t;
		store_release(&c->sh->head, t);
	}
	return corrupt(c);
}

/* A message waits (as far as a consumer can tell). */
static bool message_waits(struct dt_chan *c)
{
	uint64_t t = load_acquire(&c->sh->tail), bytes;

	if (c->stream)
		return t != c->pos;
	/* a tail behind us is a producer between a header and its tail */
	return (t != c->pos && index_ok(c, t, c->pos)) || header_ok(c, c->pos, header_at(c, c->pos), &bytes);
}

/* Linux consumer with an fd in poll: the FIFO holds a byte exactly while a
 * message waits, as far as the consumer can tell. */
static void settle_fd(struct dt_chan *c)
{
	if (!c->fd_armed || ipc_on_detached_thread())
		return;
	ipc_drain(c->o.wake_fd);
	full_fence();
	if (message_waits(c))
		ipc_wake(c->o.wake_fd);
}

/* A polling consumer that finds no record looks at the producer's tail
 * (which tells a damaged header from an empty ring) after this many empty
 * looks in a row: a look at the tail while the next record comes in
 * (a miss on the producer's line) delays it, measured at about 15% of a
 * ping-pong's round trip when it came at the 16th look. */
#define CHAN_TAIL_AFTER 1024u

/* Nothing to read yet.  0: look again; else the call's result. */
static long wait_more(struct dt_chan *c, uint64_t deadline)
{
	bool sleeps = deadline && !ipc_on_detached_thread();
	uint64_t now;
	long r;

	/* the tail: now and then, and before sleeping on it */
	if (!c->stream && (!(++c->idle % CHAN_TAIL_AFTER) || sleeps) && (r = tail_check(c)))
		return r < 0 ? r : 0;
	if (load_acquire(&c->sh->producer)) {
		c->had_producer = true;
	} else if (c->had_producer) {
		/* what a dead producer published is still ours to read */
		if (!c->stream && (r = tail_check(c)))
			return r < 0 ? r : 0;
		return -EPIPE;
	}
	/* else none yet: we wait for one as for its messages, as a FIFO's
	 * reader waits for its writer */
	if (!deadline) {
		settle_fd(c);
		return -EAGAIN;
	}
	now = dt_now_ns();
	if (now >= deadline)
		return -ETIMEDOUT;
	if (!sleeps) {
		cpu_relax();
		return 0;
	}
	/* the watcher writes the FIFO when the producer dies, too */
	ipc_sleep_while(&c->o, &c->sh->tail, c->stream ? c->pos : c->tail_seen, now, deadline);
	return 0;
}

DT_API long dt_chan_get(struct dt_chan *c, void *buf, size_t len, uint64_t deadline_ns)
{
	struct chan_shared *sh;
	uint64_t t, h, used = 0, size = 0;
	long ret;

	if (!c || c->producer || (len && !buf))
		return -EINVAL;
	sh = c->sh;
	if (load_relaxed(&sh->head) != c->pos)       /* trampled: ours is the truth */
		store_release(&sh->head, c->pos);
	for (;;) {
		h = c->pos;
		if (!c->stream) {
			/* the record's own header, copied once: the peer may
			 * change it */
			t = header_at(c, h);
			if (header_ok(c, h, t, &size))
				break;
		} else {
			/* acquire: the producer's bytes are visible up to t */
			t = load_acquire(&sh->tail);
			used = t - h;
			if (!index_ok(c, t, h)) {
				c->pos = t;          /* resynchronise on the producer */
				store_release(&sh->head, t);
				return corrupt(c);
			}
			if (used)
				break;
		}
		if ((ret = wait_more(c, deadline_ns)))
			return ret;
	}
	c->idle = 0;
	c->had_producer = true;         /* a producer put it, even one that came and went unseen */
	if (c->stream) {
		size = used < len ? used : len;
		copy_out(c, h, buf, size);
		ret = (long)size;
	} else {
		if ((uint32_t)t > len)
			return -EMSGSIZE;
		copy_out(c, h + sizeof(struct chan_record), buf, (uint32_t)t);
		ret = (uint32_t)t;
	}
	/* the commit: release, the bytes are read before the producer may
	 * reuse them; a consumer that dies before this store has not taken it */
	c->pos = h + size;
	store_release(&sh->head, c->pos);
	c->st.messages++;
	c->st.bytes += (uint64_t)ret;
	store_relaxed(&sh->gets, c->st.messages);
	store_relaxed(&sh->get_bytes, c->st.bytes);
	if (c->fd_armed && !message_waits(c))
		settle_fd(c);
	return ret;
}

DT_API int dt_chan_fd(struct dt_chan *c)
{
	if (!c || c->producer)
		return -EINVAL;
	if (!c->fd_armed) {
		c->fd_armed = true;
		ipc_want_wakes(&c->o, WAKE_ARMED);
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
		ipc_unwant_wakes(&c->o, WAKE_ARMED);
	ipc_role_release(c->o.my_role, c->o.me);
	if (c->producer)
		ipc_wake(c->o.wake_fd);          /* a waiting consumer sees -EPIPE now */
	ipc_close_fifos(&c->o);
	munmap(c->o.map, c->o.map_bytes);
	free(c);
	return 0;
}

DT_API int dt_chan_unlink(const char *name)
{
	return ipc_unlink(name, ".chan", true);
}
