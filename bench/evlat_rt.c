/* evlat_rt: the `executive` receiver of bench/evlat.c, an RTLinux program
 * (init_module, cleanup_module, RT threads made with pthread_create) built
 * with detach-rtl like any other (docs/rtl.md): an RT thread under the
 * executive, in an RT task of its own, as RTLinux programs run under detach.
 * evlat starts it for each of the receiver's blocks and ends it with
 * SIGTERM.  Its environment names the run: EVLAT_NAME (evlat's dt_shm region
 * and dt_bell), DETACH_RTL_CPU (the RT CPU).
 *
 * The RT thread waits in rtl_bell_wait (detach-rtl's wait point for a
 * doorbell, the stand-in for RTLinux's interrupts), stamps the TSC at its
 * first instruction after the wake-up and, under the flood load, floods
 * between events.  Once per run (the region's switch_cycles still 0),
 * init_module first measures the executive's switch: two RT threads that
 * sched_yield to each other. */
#include "evlat.h"
#include <detach/rtl.h>

static struct ctl *C;
static struct dt_bell *bell;
static struct flood_area area;
static pthread_t receiver_thread;
static volatile int stopping;

static void *receiver(void *arg)
{
	(void)arg;
	__atomic_store_n(&C->ready, 1, __ATOMIC_RELEASE);
	while (!stopping) {
		if (rtl_bell_wait(bell, gethrtime() + 10000000LL))
			continue;
		evlat_record(C);
		if (C->flood)
			flood_between(&area);
	}
	return NULL;
}

static volatile uint64_t yields;
static volatile int yield_stop;

static void *yielder(void *arg)
{
	(void)arg;
	while (!yield_stop) {
		yields++;
		sched_yield();
	}
	return NULL;
}

/* Cycles per switch between two RT threads of one priority that yield to
 * each other: the scheduler's scan and two context switches. */
static double switch_cycles(void)
{
	pthread_t a, b;
	uint64_t t0, n0, t1, n1;

	yields = 0;
	yield_stop = 0;
	if (pthread_create(&a, NULL, yielder, NULL) || pthread_create(&b, NULL, yielder, NULL))
		return -1;
	usleep(100000);                      /* this thread is Linux's: the libc's usleep */
	t0 = rdtsc(), n0 = yields;
	usleep(300000);
	t1 = rdtsc(), n1 = yields;
	yield_stop = 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return n1 > n0 ? (double)(t1 - t0) / (double)(n1 - n0) : -1;
}

int init_module(void)
{
	const char *name = getenv("EVLAT_NAME");
	struct sched_param sp = { .sched_priority = 50 };
	pthread_attr_t attr;
	void *map;
	int err;

	if (!name) {
		rtl_printf("evlat_rt: EVLAT_NAME is not set: bench/evlat starts this program\n");
		return -EINVAL;
	}
	if ((err = dt_shm_open(name, 0, 0, &map)) || (err = dt_bell_open(name, 0, &bell)))
		return err;
	C = map;
	if (flood_area_init(&area))
		return -ENOMEM;
	if (C->switch_cycles == 0)
		C->switch_cycles = switch_cycles();
	pthread_attr_init(&attr);
	pthread_attr_setschedparam(&attr, &sp);
	return pthread_create(&receiver_thread, &attr, receiver, NULL);
}

void cleanup_module(void)
{
	stopping = 1;
	pthread_join(receiver_thread, NULL);
	dt_bell_close(bell);
	dt_shm_close(C);
}
