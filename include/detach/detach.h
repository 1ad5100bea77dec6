/* detach: the C API for programs that want more than transparency.
 *
 * Usable with the runtime preloaded by `detach run`, or linked
 * (-ldetach, or dlopen): then dt_detach() sets the runtime up itself, with
 * the housekeeping CPUs = the caller's affinity less the CPU it detaches on
 * and the mode from $DETACH_MODE (default auto).
 *
 * Functions returning int give 0 or -errno. */
#ifndef DETACH_DETACH_H
#define DETACH_DETACH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Detaches the calling thread on cpu (-1: the next free CPU of
 * `detach run -c`): pinned alone there, its system calls carried out by a
 * proxy thread of its own on the housekeeping CPUs.  -EBUSY: already
 * detached, or the CPU is taken; -EINVAL: no such CPU, or none left for
 * housekeeping. */
int dt_detach(int cpu);

/* The calling detached thread becomes an ordinary thread again, on the
 * housekeeping CPUs; its proxy ends.  -EINVAL if it is not detached. */
int dt_attach(void);

/* 1 if the calling thread is detached, else 0. */
int dt_is_detached(void);

/* The time-stamp counter. */
uint64_t dt_cycles(void);

/* CLOCK_MONOTONIC in nanoseconds, from the TSC: no kernel entry (the first
 * call calibrates the TSC against CLOCK_MONOTONIC, for 20 ms). */
uint64_t dt_now_ns(void);

/* Waits until CLOCK_MONOTONIC reaches ns (absolute), spinning against the
 * TSC: no Linux timer, never early.  0, or -EINTR when a signal handler
 * ran meanwhile (on a detached thread). */
int dt_wait_until(uint64_t ns);

struct dt_stats {
	int tid;
	int cpu;                     /* -1 when not detached */
	uint64_t forwarded;          /* system calls carried out by the proxy */
	uint64_t local;              /* run on the thread itself */
	uint64_t emulated;           /* answered without the kernel (timed waits too) */
	uint64_t traps;              /* Syscall User Dispatch traps */
	uint64_t sites_rewritten;    /* rewrite mode */
};

/* The calling thread's counters; -EINVAL if it is not detached. */
int dt_stats(struct dt_stats *s);

/* ---- talking to Linux through memory (docs/ipc.md) ----------------------
 * Channels, doorbells and regions are named (NAME: [A-Za-z0-9._-], up to 128
 * bytes, not starting with '.') and live in /dev/shm/detach/ipc/.  On a
 * detached thread dt_chan_put, dt_chan_get, dt_bell_ring, dt_bell_wait and
 * the use of a region make no system call; opening and closing may.  The
 * same calls work in any process linked with -ldetach, detached or not.
 * Everything a peer can write is checked before use: a corrupt channel gives
 * -EBADMSG, never a read or write outside it.  A handle belongs to the
 * process that opened it (not to a fork child); one thread at a time uses a
 * channel handle. */
#include <stddef.h>

struct dt_chan;                       /* a named single-producer single-consumer channel */
#define DT_CHAN_CREATE   0x1          /* create it if it does not exist (mode 0600 & ~umask) */
#define DT_CHAN_PRODUCER 0x2          /* open as its one producer */
#define DT_CHAN_CONSUMER 0x4          /* open as its one consumer */
#define DT_CHAN_STREAM   0x8          /* with CREATE: a byte stream, not messages (RT-FIFO
                                         semantics: a put is all or nothing, a get takes
                                         what is there up to len) */

/* bytes: the ring's capacity when it is created (rounded up to a power of
 * two, 4 KiB .. 1 GiB); opening an existing channel, 0 or no more than its
 * capacity.  -EBUSY: that role is taken by a live process; -ENOENT (no such
 * channel, no CREATE), -EACCES, -EINVAL (flags, name, size). */
int  dt_chan_open(const char *name, int flags, size_t bytes, struct dt_chan **out);
/* 0; -EAGAIN full (nothing written); -EPIPE no live consumer (nothing
 * written); -EMSGSIZE larger than the ring can hold; -EBADMSG corrupt. */
int  dt_chan_put(struct dt_chan *c, const void *msg, size_t len);
/* The message's length (stream: the bytes copied); deadline 0: do not wait
 * (-EAGAIN); else wait until dt_now_ns() >= deadline (-ETIMEDOUT), for a
 * message and, before there is one, for a producer, as a FIFO's reader
 * waits for its writer.  -EPIPE: empty, and the producer this handle had
 * (one it saw open, or whose message it got) is gone, until another opens;
 * -EMSGSIZE: the message is longer than len (it stays); -EBADMSG: corrupt
 * (the unreadable rest is skipped). */
long dt_chan_get(struct dt_chan *c, void *buf, size_t len, uint64_t deadline_ns);
/* Linux side: readable in poll/epoll while a message waits. */
int  dt_chan_fd(struct dt_chan *c);
int  dt_chan_close(struct dt_chan *c);
int  dt_chan_unlink(const char *name);

struct dt_chan_stats {
	uint64_t messages;               /* put or got through this handle */
	uint64_t bytes;
	uint64_t full;                   /* puts refused with -EAGAIN */
	uint64_t no_peer;                /* -EPIPE */
	uint64_t corrupt;                /* -EBADMSG */
};
int  dt_chan_stats(struct dt_chan *c, struct dt_chan_stats *s);

struct dt_bell;                       /* a named doorbell: the stand-in for a device interrupt */
int  dt_bell_open(const char *name, int flags, struct dt_bell **out);   /* flags: DT_CHAN_CREATE */
int  dt_bell_ring(struct dt_bell *b);
/* 0: rung since this handle last returned 0 (or was opened); -ETIMEDOUT.
 * deadline 0: do not wait. */
int  dt_bell_wait(struct dt_bell *b, uint64_t deadline_ns);
int  dt_bell_fd(struct dt_bell *b);   /* readable while rung and not yet waited for */
int  dt_bell_close(struct dt_bell *b);
int  dt_bell_unlink(const char *name);

/* A named region, locked and prefaulted.  bytes: its size when created
 * (rounded up to pages); opening an existing one, 0 (all of it) or no more
 * than its size. */
int  dt_shm_open(const char *name, int flags, size_t bytes, void **addr);
int  dt_shm_close(void *addr);
int  dt_shm_unlink(const char *name);

#ifdef __cplusplus
}
#endif
#endif
