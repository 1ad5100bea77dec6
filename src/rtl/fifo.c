/* RT-FIFOs: rtf_* on the RT side, over two stream channels each
 * (docs/rtl.md).
 *
 * FIFO N is the channels rtl.PID.rtfN.out (the RT side puts, /dev/rtfN's
 * readers get) and rtl.PID.rtfN.in (/dev/rtfN's writers put, the RT side
 * gets), DT_CHAN_STREAM: a put is all or nothing, a get takes what is there,
 * as RTLinux's rtf_put and rtf_get.  Both ends of both channels are opened
 * here, in the task's own process: the RT ends are used on the executive
 * only, the Linux ends by the FUSE server (devfs.c) under a lock.  Put and
 * get make no system call on the executive (dt_chan's promise).
 *
 * What the executive needs to know without a call: a Linux write adds to
 * in_put and writes, and to rtl_fifo_writes; a thread in rtf_get_wait is
 * ready when in_put > in_got; a handler runs when writes moved. */
#include "rtl/rtl_int.h"

#include <unistd.h>

struct rtl_fifo rtl_fifos[RTF_NO];
uint64_t rtl_fifo_writes;
static uint64_t writes_seen;             /* the executive's */

static struct rtl_fifo *fifo_get(unsigned int n)
{
	return n < RTF_NO && load_acquire(&rtl_fifos[n].created) ? &rtl_fifos[n] : NULL;
}

static void chan_name(char *buf, size_t len, unsigned int n, const char *dir)
{
	snprintf(buf, len, "rtl.%d.rtf%u.%s", (int)getpid(), n, dir);
}

static void close_all(struct rtl_fifo *f, unsigned int n)
{
	char name[64];
	struct dt_chan **c[] = { &f->out, &f->out_reader, &f->in, &f->in_writer };

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (*c[i]) {
			dt_chan_close(*c[i]);
			*c[i] = NULL;
		}
	chan_name(name, sizeof(name), n, "out");
	dt_chan_unlink(name);
	chan_name(name, sizeof(name), n, "in");
	dt_chan_unlink(name);
}

/* Both ends of one direction; the creating open first. */
static int open_pair(unsigned int n, const char *dir, size_t bytes, struct dt_chan **prod, struct dt_chan **cons)
{
	char name[64];
	int err;

	chan_name(name, sizeof(name), n, dir);
	dt_chan_unlink(name);                    /* a dead task's, with our pid */
	err = dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_STREAM | DT_CHAN_PRODUCER, bytes, prod);
	if (!err)
		err = dt_chan_open(name, DT_CHAN_STREAM | DT_CHAN_CONSUMER, 0, cons);
	return err;
}

RTL_API int rtf_create(unsigned int n, int size)
{
	struct rtl_fifo *f;
	size_t ring = 4096;
	int err;

	if (n >= RTF_NO)
		return -ENODEV;
	if (size <= 0)
		return -EINVAL;
	f = &rtl_fifos[n];
	if (load_acquire(&f->created))
		return -EBUSY;
	while (ring < (size_t)size)
		ring <<= 1;                      /* as dt_chan rounds it */
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->rlock, NULL);
	pthread_mutex_init(&f->wlock, NULL);
	f->ring_bytes = ring;
	if ((err = open_pair(n, "out", ring, &f->out, &f->out_reader)) ||
	    (err = open_pair(n, "in", ring, &f->in_writer, &f->in))) {
		close_all(f, n);
		return err == -EINVAL ? -ENOMEM : err;
	}
	if ((err = rtl_devfs_link(n))) {
		close_all(f, n);
		return err;
	}
	store_release(&f->created, 1);
	return 0;
}

RTL_API int rtf_destroy(unsigned int n)
{
	struct rtl_fifo *f = fifo_get(n);

	if (!f)
		return -EINVAL;
	store_release(&f->created, 0);
	rtl_devfs_unlink(n);
	/* the FUSE server's readers and writers look at created between
	 * slices of their waits: once we hold both locks none is inside */
	pthread_mutex_lock(&f->rlock);
	pthread_mutex_lock(&f->wlock);
	close_all(f, n);
	pthread_mutex_unlock(&f->wlock);
	pthread_mutex_unlock(&f->rlock);
	return 0;
}

void rtl_fifo_destroy_all(void)
{
	for (unsigned int n = 0; n < RTF_NO; n++)
		rtf_destroy(n);
}

RTL_API int rtf_put(unsigned int n, void *buf, int count)
{
	struct rtl_fifo *f = fifo_get(n);
	int err;

	if (!f || count < 0 || (count && !buf))
		return -EINVAL;
	err = dt_chan_put(f->out, buf, (size_t)count);
	if (err == -EAGAIN || err == -EMSGSIZE)
		return -ENOSPC;
	if (err)
		return err;
	__atomic_add_fetch(&f->out_put, (uint64_t)count, __ATOMIC_RELEASE);
	return count;
}

RTL_API int rtf_get(unsigned int n, void *buf, int count)
{
	struct rtl_fifo *f = fifo_get(n);
	long got;

	if (!f || count < 0 || (count && !buf))
		return -EINVAL;
	if (!count)
		return 0;
	got = dt_chan_get(f->in, buf, (size_t)count, 0);
	if (got == -EAGAIN)
		return 0;
	if (got > 0)
		__atomic_add_fetch(&f->in_got, (uint64_t)got, __ATOMIC_RELEASE);
	return (int)got;
}

RTL_API int rtf_get_wait(unsigned int n, void *buf, int count, hrtime_t deadline)
{
	int got, err;

	for (;;) {
		if ((got = rtf_get(n, buf, count)) != 0 || !count)
			return got;
		if ((err = rtl_exec_wait_fifo(n, deadline > 0 ? (uint64_t)deadline : 0)))
			return err;
	}
}

bool rtl_fifo_readable(unsigned int n)
{
	struct rtl_fifo *f = &rtl_fifos[n];

	/* gone counts as readable: rtf_get then says -EINVAL */
	return !load_acquire(&f->created) || load_acquire(&f->in_put) != f->in_got;
}

RTL_API int rtf_create_handler(unsigned int n, int (*handler)(unsigned int fifo))
{
	struct rtl_fifo *f = fifo_get(n);

	if (!f || !handler)
		return -EINVAL;
	f->handled = load_acquire(&f->writes);
	__atomic_store_n(&f->handler, handler, __ATOMIC_RELEASE);
	return 0;
}

RTL_API int rtf_create_rt_handler(unsigned int n, int (*handler)(unsigned int fifo))
{
	return rtf_create_handler(n, handler);
}

/* On the executive, before it picks a thread: one load when nothing was
 * written. */
void rtl_fifo_run_handlers(void)
{
	uint64_t w = load_acquire(&rtl_fifo_writes);

	if (w == writes_seen)
		return;
	writes_seen = w;
	for (unsigned int n = 0; n < RTF_NO; n++) {
		struct rtl_fifo *f = &rtl_fifos[n];
		int (*h)(unsigned int);
		uint64_t fw;

		if (!load_acquire(&f->created) || !(h = __atomic_load_n(&f->handler, __ATOMIC_ACQUIRE)))
			continue;
		if ((fw = load_acquire(&f->writes)) != f->handled) {
			f->handled = fw;
			h(n);
		}
	}
}

RTL_API int rtf_flush(unsigned int n)
{
	struct rtl_fifo *f = fifo_get(n);
	struct dt_chan_stats st;
	char scratch[256];
	long got;

	if (!f)
		return -EINVAL;
	/* toward the RT side: taken here (the RT side is its consumer) */
	while ((got = dt_chan_get(f->in, scratch, sizeof(scratch), 0)) > 0)
		__atomic_add_fetch(&f->in_got, (uint64_t)got, __ATOMIC_RELEASE);
	/* toward Linux: what was put so far, the next reader discards */
	dt_chan_stats(f->out, &st);
	store_release(&f->out_flushed, st.bytes);
	return 0;
}
