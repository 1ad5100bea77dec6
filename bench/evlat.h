/* What bench/evlat.c and its executive receiver bench/evlat_rt.c (an
 * RTLinux program, a process of its own) share: the control region, the
 * receiver's stamp and the flooding (docs/bench.md). */
#ifndef DETACH_BENCH_EVLAT_H
#define DETACH_BENCH_EVLAT_H

#include "lib/util.h"
#include <detach/detach.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The dt_shm region of the run (named EVLAT_NAME in the receivers'
 * environment), with its dt_bell of the same name. */
struct ctl {
	_Alignas(64) volatile uint64_t seq;       /* event number rung */
	_Alignas(64) volatile uint64_t ack;       /* event number seen */
	volatile uint64_t t1;                     /* TSC at the receiver's wake-up */
	_Alignas(64) volatile int run;            /* the receiver's block: 1 serve, 0 stop */
	volatile int turn;                        /* process receiver: serve now */
	volatile int ready, done;                 /* receiver running (-1: cannot) / attached again */
	volatile int flood;                       /* flood after each event */
	volatile int quit;
	volatile double switch_cycles;            /* the executive's switch, once measured */
	_Alignas(64) volatile uint32_t futex;
};

/* The receiver's first instruction after the wake-up: its stamp, then the
 * event's number for the ringer. */
static inline void evlat_record(struct ctl *c)
{
	c->t1 = rdtsc();
	__atomic_store_n(&c->ack, c->seq, __ATOMIC_RELEASE);
}

/* Flooding: a buffer of twice the last-level cache, at most 64 MiB (a VM
 * may report a cache larger than the machine's), a multiple of 64 KiB,
 * written at a line stride: every cache level dirty with it, the TLB full
 * of its pages, not the receiver's. */
struct flood_area {
	char *buf;
	size_t bytes, at;
};

static inline int flood_area_init(struct flood_area *f)
{
	long v = sysconf(_SC_LEVEL3_CACHE_SIZE);

	if (v <= 0)
		v = sysconf(_SC_LEVEL2_CACHE_SIZE);
	if (v <= 0 || v > 32l << 20)
		v = 32l << 20;
	f->bytes = ((size_t)v * 2 + 65535) & ~(size_t)65535;
	f->at = 0;
	if (!(f->buf = malloc(f->bytes)))
		return -1;
	memset(f->buf, 1, f->bytes);
	mlock(f->buf, f->bytes);
	return 0;
}

static inline void flood(char *buf, size_t bytes)
{
	for (size_t i = 0; i < bytes; i += 64)
		buf[i]++;
}

/* The receiver's flood between events: the paper's flooder ran below the
 * RT thread, preempted by the next event; ours cannot be preempted, so it
 * stops after FLOOD_BUDGET_NS (less than the shortest interval, 2 ms), in
 * 64 KiB steps, going on where the last one stopped. */
#define FLOOD_BUDGET_NS 1500000ull

static inline void flood_between(struct flood_area *f)
{
	uint64_t end = dt_now_ns() + FLOOD_BUDGET_NS;

	do {
		flood(f->buf + f->at, 65536);
		f->at = (f->at + 65536) % f->bytes;
	} while (dt_now_ns() < end);
}

#endif
