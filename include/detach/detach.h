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

/* CLOCK_MONOTONIC in nanoseconds, from the TSC: no kernel entry. */
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

#ifdef __cplusplus
}
#endif
#endif
