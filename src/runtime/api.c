/* The public API (include/detach/detach.h). */
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/init.h"
#include "runtime/ipc.h"
#include "runtime/threads.h"
#include "detach/detach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DT_API __attribute__((visibility("default")))

static volatile int setup_lock;

/* Linked or loaded without `detach run`: the runtime sets itself up on the
 * first dt_detach(). */
static int setup_standalone(int cpu)
{
	cpu_set_t own, one, online;
	const char *mode = getenv("DETACH_MODE");

	if (sched_getaffinity(0, sizeof(own), &own))
		return -errno;
	if (cpu < 0 || cpu >= CPU_SETSIZE || cpus_online(&online) || !CPU_ISSET(cpu, &online))
		return -EINVAL;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	CPU_CLR(cpu, &own);
	if (!CPU_COUNT(&own))
		return -EINVAL;
	config_defaults(&one, &own);
	if (mode && *mode)
		snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "%s", mode);
	return runtime_start();
}

DT_API int dt_detach(int cpu)
{
	int err = 0;
	bool started = false;

	if (dt_self && !dt_self->observed)
		return -EBUSY;
	while (__atomic_exchange_n(&setup_lock, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
	if (!dt_cfg.active)
		started = !(err = setup_standalone(cpu));
	__atomic_store_n(&setup_lock, 0, __ATOMIC_RELEASE);
	if (err)
		return err;
	if (started)
		watcher_kick();         /* channels opened before: off this CPU, and waking */
	if (cpu >= 0 && !CPU_ISSET(cpu, &dt_cfg.cpus))
		return -EINVAL;
	if ((cpu = claim_cpu(cpu)) < 0)
		return cpu;             /* -EBUSY: ours, or another process's (claims.c) */
	return detach_thread(dt_self, cpu);   /* dt_self: a watched thread's struct, or NULL */
}

DT_API int dt_attach(void)
{
	struct dt_thread *t = dt_self;

	if (!t || t->observed)
		return -EINVAL;
	/* Called on top of a forwarded call in flight (a signal handler, or
	 * `detach pid --attach` stopping the thread inside the wait): the
	 * proxy is busy with that call and must finish it first. */
	if (t->depth > 0)
		return -EBUSY;
	thread_end(t, THREAD_ATTACH);
	return 0;
}

DT_API int dt_is_detached(void)
{
	return dt_self && !dt_self->observed && !dt_self->vfork_child;
}

DT_API uint64_t dt_cycles(void)
{
	return rdtsc();
}

static struct tsc_clock api_clock;

/* Calibrated on first use, spinning (a detached thread makes no call for
 * it); published by its hz, stored last (release), so that another thread
 * never reads a base or factor half written. */
static const struct tsc_clock *clock_ready(void)
{
	struct tsc_clock c;

	if (!__atomic_load_n(&api_clock.hz, __ATOMIC_ACQUIRE) && !tsc_calibrate_busy(&c, 0)) {
		uint64_t hz = c.hz;

		c.hz = 0;
		api_clock = c;
		__atomic_store_n(&api_clock.hz, hz, __ATOMIC_RELEASE);
	}
	return &api_clock;
}

DT_API uint64_t dt_now_ns(void)
{
	/* calibrated first, then read: in one expression the TSC may be read
	 * before a first call's calibration, 20 ms earlier than its base */
	const struct tsc_clock *c = clock_ready();

	return tsc_to_ns(c, rdtsc());
}

DT_API int dt_wait_until(uint64_t ns)
{
	struct dt_thread *t = dt_self && !dt_self->observed ? dt_self : NULL;

	clock_ready();
	return (int)timed_wait_until(t, CLOCK_MONOTONIC, ns);
}

DT_API int dt_stats(struct dt_stats *s)
{
	struct dt_thread *t = dt_self;

	if (!t || t->observed || !s)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->tid = t->tid;
	s->cpu = t->cpu;
	s->forwarded = t->stats->forwarded;
	s->local = t->stats->local;
	s->emulated = t->stats->emulated;
	s->traps = t->stats->traps;
	s->sites_rewritten = t->stats->sites_rewritten;
	return 0;
}
