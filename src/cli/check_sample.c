/* detach check: the busy-loop sample, a measurement (information only):
 * on each listed CPU in turn, a thread spins reading the TSC for --sample
 * and records its largest gap, the gaps over 10 us and the local timer
 * interrupts the kernel counted on that CPU meanwhile. */
#include "cli/check.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct sample_job {
	struct check *c;
	struct sample *s;
};

static void *sample_thread(void *arg)
{
	struct check *c = ((struct sample_job *)arg)->c;
	struct sample *s = ((struct sample_job *)arg)->s;
	cpu_set_t one;
	uint64_t thresh, end, prev, now, max = 0, gaps = 0, t0;
	long long loc0, loc1;

	CPU_ZERO(&one);
	CPU_SET(s->cpu, &one);
	if (c->have_part && CPU_ISSET(s->cpu, &c->part.cpus))
		partition_add_thread(&c->part, 0);   /* may fail without root */
	if (sched_setaffinity(0, sizeof(one), &one)) {
		snprintf(s->why, sizeof(s->why), "cannot run on CPU %d (%s)%s", s->cpu, strerror(errno),
			 c->have_part ? ": it is in the detach partition; run check as root" : "");
		return NULL;
	}
	thresh = ns_to_tsc_cycles(&c->tsc, 10000);
	end = ns_to_tsc_cycles(&c->tsc, c->args.sample_ns);
	loc0 = loc_count(s->cpu);
	t0 = prev = rdtsc();
	end += t0;
	do {
		now = rdtsc();
		if (now - prev > max)
			max = now - prev;
		if (now - prev > thresh)
			gaps++;
		prev = now;
	} while (now < end);
	loc1 = loc_count(s->cpu);
	s->seconds = (double)tsc_cycles_to_ns(&c->tsc, now - t0) / 1e9;
	s->max_gap_ns = tsc_cycles_to_ns(&c->tsc, max);
	s->gaps = gaps;
	s->loc = (loc0 >= 0 && loc1 >= 0) ? loc1 - loc0 : -1;
	s->done = true;
	return NULL;
}

static void sample_run(struct check *c)
{
	c->s = calloc((size_t)CPU_COUNT(&c->cpus), sizeof(*c->s));
	if (!c->s || !c->args.sample_ns)
		return;
	if (tsc_calibrate(&c->tsc, 0))
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		struct sample_job job;
		pthread_t t;

		if (!CPU_ISSET(cpu, &c->cpus))
			continue;
		job.c = c;
		job.s = &c->s[c->ns++];
		job.s->cpu = cpu;
		if (pthread_create(&t, NULL, sample_thread, &job) == 0)
			pthread_join(t, NULL);
		else
			snprintf(job.s->why, sizeof(job.s->why), "cannot start a thread");
	}
	if (c->ns)
		c->measured = true;
}

static void sample_text(const struct check *c)
{
	for (int i = 0; i < c->ns; i++) {
		const struct sample *s = &c->s[i];
		if (!s->done)
			printf("  CPU %d: not measured: %s\n", s->cpu, s->why);
		else
			printf("  CPU %d: %.1f s busy loop: largest gap %.1f us, %llu gap(s) over 10 us, %lld local timer interrupt(s)\n",
			       s->cpu, s->seconds, (double)s->max_gap_ns / 1000.0, (unsigned long long)s->gaps, s->loc);
	}
}

static void sample_json(const struct check *c, struct json *j)
{
	json_array_begin(j, "samples");
	for (int i = 0; i < c->ns; i++) {
		const struct sample *s = &c->s[i];
		json_object_begin(j, NULL);
		json_int(j, "cpu", s->cpu);
		json_bool(j, "measured", s->done);
		if (s->done) {
			json_double(j, "seconds", s->seconds);
			json_uint(j, "max_gap_ns", s->max_gap_ns);
			json_uint(j, "gaps_over_10us", s->gaps);
			json_int(j, "local_timer_interrupts", s->loc);
		} else {
			json_str(j, "why", s->why);
		}
		json_object_end(j);
	}
	json_array_end(j);
}

const struct check_measure check_sample = { "sample", sample_run, sample_text, sample_json };
