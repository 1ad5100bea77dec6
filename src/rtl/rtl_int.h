/* detach-rtl inside: what exec.c, fifo.c, devfs.c, mbuff.c and main.c share
 * (docs/rtl.md).  The library is built without rtl.h's renaming macros, so
 * pthread_create here is the libc's. */
#ifndef DETACH_RTL_INT_H
#define DETACH_RTL_INT_H

#define RTL_LIBRARY_INTERNAL
#include "detach/rtl.h"
#include "detach/detach.h"

#include <stdbool.h>
#include <stdint.h>

#define RTL_API __attribute__((visibility("default")))
#define load_acquire(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* exec.c: the executive */
int rtl_exec_start(int cpu);            /* 0, or -errno (the detach failed) */
void rtl_exec_stop(void);
void rtl_exec_report(void);             /* overruns of the threads still there, to stderr */
bool rtl_on_executive(void);            /* the caller is an RT thread or a handler */
/* Wait points of the calling RT thread: false / -EPERM when it is not one. */
bool rtl_exec_sleep_until(uint64_t deadline_ns);
int rtl_exec_wait_fifo(unsigned fifo, uint64_t deadline_ns);   /* 0, -ETIMEDOUT */

/* fifo.c */
bool rtl_fifo_readable(unsigned int fifo);   /* for the RT side: Linux wrote, or gone */
void rtl_fifo_run_handlers(void);       /* on the executive */
void rtl_fifo_destroy_all(void);

/* devfs.c: /dev/rtfN over FUSE */
int rtl_devfs_start(void);
void rtl_devfs_stop(void);
int rtl_devfs_link(unsigned int fifo);   /* makes LINKDIR/rtfN; -EBUSY: another task has it */
void rtl_devfs_unlink(unsigned int fifo);

/* The FIFOs devfs.c serves (fifo.c owns them). */
struct rtl_fifo {
	int created;                     /* published with a release store */
	struct dt_chan *out, *in;        /* RT side: producer of out, consumer of in */
	struct dt_chan *out_reader, *in_writer;   /* Linux side, used by devfs.c */
	int (*handler)(unsigned int fifo);
	size_t ring_bytes;
	uint64_t in_put, in_got;         /* bytes Linux wrote / the RT side took */
	uint64_t writes, handled;        /* Linux writes / seen by the handler */
	uint64_t out_flushed;            /* bytes of out that rtf_flush discards */
	uint64_t out_taken;              /* bytes of out taken (read or discarded) */
	uint64_t out_put;                /* bytes the RT side put */
	int out_fd;                      /* readable while out holds bytes (dt_chan_fd) */
	void *poll_handle;               /* a poll waiting to be told (devfs.c) */
	unsigned poll_mask;              /* what it was answered */
	pthread_mutex_t rlock, wlock;    /* one Linux reader, one writer at a time */
};
extern struct rtl_fifo rtl_fifos[RTF_NO];
extern uint64_t rtl_fifo_writes;        /* all Linux writes: the executive's cue */

#endif
