/* detach check --measure: a traced probe, a measurement (information only).
 * On each listed CPU in turn (inside the detach partition when the CPU is
 * in it), a thread spins reading the TSC for DURATION and records every gap
 * longer than the threshold, while src/lib/trace.c records what the guest
 * kernel did on that CPU; src/lib/stall.c then names the causes of each
 * gap.  Output: a summary per cause like rtla osnoise top, the probe's
 * percentiles, steal, the largest gaps with their causes (text); every gap
 * (JSON); every event (--trace-out). */
#include "cli/check.h"
#include "cli/cli.h"
#include "lib/stall.h"
#include "lib/stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_GAPS      (1u << 20)   /* 16 MB, touched before the probe starts */
#define MAX_CAUSES    8            /* per gap */
#define SHOWN_GAPS    10           /* the largest, in the text */
#define SHOWN_CAUSES  15           /* the heaviest, in the text */
#define STEP_FACTOR   5            /* default threshold: times the median step */
#define CALIBRATE_NS  20000000ull

/* Step lengths: exact below LINEAR cycles, then 16 buckets per octave. */
#define LINEAR  4096
#define OCTAVES 40
struct steps {
	uint64_t lin[LINEAR];
	uint64_t log[OCTAVES][16];
	uint64_t n, max;
};

static inline void steps_add(struct steps *h, uint64_t d)
{
	h->n++;
	if (d > h->max)
		h->max = d;
	if (d < LINEAR) {
		h->lin[d]++;
	} else {
		int o = 63 - __builtin_clzll(d);
		h->log[o][(d >> (o - 4)) & 15]++;
	}
}

/* Nearest rank; a bucket above LINEAR reports its upper bound. */
static uint64_t steps_pct(const struct steps *h, double p)
{
	uint64_t rank = (uint64_t)((double)h->n * p / 100.0 + 0.999999), seen = 0;

	if (rank == 0)
		rank = 1;
	for (uint64_t d = 0; d < LINEAR; d++)
		if ((seen += h->lin[d]) >= rank)
			return d;
	for (int o = 12; o < OCTAVES; o++)
		for (int k = 0; k < 16; k++)
			if ((seen += h->log[o][k]) >= rank) {
				uint64_t up = (1ull << o) + ((uint64_t)(k + 1) << (o - 4)) - 1;
				return up < h->max ? up : h->max;
			}
	return h->max;
}

struct gap {
	uint64_t a, b;          /* TSC: the probe's reads before and after */
	uint32_t first;         /* its causes: cause[first .. first + n) */
	uint8_t n;
	uint64_t guest;         /* cycles some guest activity covered */
};

struct measure_result {
	int cpu;
	bool done;
	char why[200];
	bool traced;
	char trace_err[256];
	const char *clock;
	uint64_t lost;
	int tid;
	uint64_t t0, t1, threshold, median;
	struct steps *h;
	struct gap *g;
	uint32_t ng;
	uint64_t dropped;       /* gaps beyond MAX_GAPS */
	struct stall_cause *cause;
	uint32_t ncause;
	struct stall_summary sum;
	uint64_t unattributed;  /* cycles in gaps, when not traced */
	long long steal_ns;     /* over the measurement, -1 unknown */
};

struct probe_job {
	struct check *c;
	struct measure_result *r;
};

static void *probe_thread(void *arg)
{
	struct check *c = ((struct probe_job *)arg)->c;
	struct measure_result *r = ((struct probe_job *)arg)->r;
	struct steps *h = r->h;
	struct gap *g = r->g;
	uint64_t thr, end, prev, now, ng = 0, dropped = 0;
	cpu_set_t one;

	r->tid = (int)gettid();
	CPU_ZERO(&one);
	CPU_SET(r->cpu, &one);
	if (c->have_part && CPU_ISSET(r->cpu, &c->part.cpus))
		partition_add_thread(&c->part, 0);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		snprintf(r->why, sizeof(r->why), "cannot run on CPU %d (%s)%s", r->cpu, strerror(errno),
			 c->have_part ? ": it is in the detach partition; run check as root" : "");
		return NULL;
	}
	/* the median step of an undisturbed spin, for the default threshold */
	prev = rdtsc();
	end = prev + ns_to_tsc_cycles(&c->tsc, CALIBRATE_NS);
	do {
		now = rdtsc();
		steps_add(h, now - prev);
		prev = now;
	} while (now < end);
	r->median = steps_pct(h, 50);
	memset(h, 0, sizeof(*h));
	thr = c->args.threshold_ns ? ns_to_tsc_cycles(&c->tsc, c->args.threshold_ns)
				   : STEP_FACTOR * (r->median ? r->median : 1);
	r->threshold = thr;

	r->steal_ns = cpu_steal_ns(r->cpu);
	r->t0 = prev = rdtsc();
	end = r->t0 + ns_to_tsc_cycles(&c->tsc, c->args.measure_ns);
	do {
		now = rdtsc();
		steps_add(h, now - prev);
		if (now - prev > thr) {
			if (ng < MAX_GAPS)
				g[ng++] = (struct gap){ .a = prev, .b = now };
			else
				dropped++;
		}
		prev = now;
	} while (now < end);
	r->t1 = now;
	if (r->steal_ns >= 0) {
		long long s1 = cpu_steal_ns(r->cpu);
		r->steal_ns = s1 >= 0 ? s1 - r->steal_ns : -1;
	}
	r->ng = (uint32_t)ng;
	r->dropped = dropped;
	r->done = true;
	return NULL;
}

static void attribute(struct check *c, struct measure_result *r, struct trace_session *t)
{
	struct stall_model *m;

	if (stall_model_build(&m, t, r->cpu, r->tid, &c->tsc) < 0) {
		snprintf(r->trace_err, sizeof(r->trace_err), "out of memory reading the trace");
		r->traced = false;
		return;
	}
	r->cause = calloc((size_t)r->ng * MAX_CAUSES + 1, sizeof(*r->cause));
	if (!r->cause) {
		stall_model_free(m);
		r->traced = false;
		return;
	}
	for (uint32_t i = 0; i < r->ng; i++) {
		struct gap *g = &r->g[i];
		g->first = r->ncause;
		g->n = (uint8_t)stall_attribute(m, g->a, g->b, r->threshold, &r->cause[r->ncause],
						MAX_CAUSES, &g->guest);
		stall_summary_add(&r->sum, &r->cause[r->ncause], g->n);
		r->ncause += g->n;
	}
	stall_summary_sort(&r->sum);
	stall_model_free(m);
}

static void write_trace_out(struct check *c, struct measure_result *r, struct trace_session *t)
{
	const struct trace_rec *rec;
	size_t n;
	FILE *f = fopen(c->args.trace_out, c->nmr ? "ae" : "we");
	char line[256];

	if (!f) {
		cli_err("cannot write %s: %s", c->args.trace_out, strerror(errno));
		return;
	}
	rec = trace_records(t, &n);
	fprintf(f, "# CPU %d, trace clock %s, times from the probe's start; %llu event(s) lost\n",
		r->cpu, r->clock, (unsigned long long)r->lost);
	for (size_t i = 0; i < n; i++) {
		trace_rec_format(t, &rec[i], r->t0, &c->tsc, line, sizeof(line));
		fprintf(f, "%s\n", line);
	}
	fclose(f);
}

static void measure_cpu(struct check *c, struct measure_result *r)
{
	struct trace_session *t = NULL;
	struct probe_job job = { c, r };
	pthread_t th;
	int rc;

	r->h = mmap(NULL, sizeof(*r->h), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	r->g = mmap(NULL, MAX_GAPS * sizeof(*r->g), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r->h == MAP_FAILED || r->g == MAP_FAILED) {
		r->h = NULL;
		r->g = NULL;
		snprintf(r->why, sizeof(r->why), "out of memory");
		return;
	}
	rc = trace_start(&t, r->cpu, r->trace_err, sizeof(r->trace_err));
	r->traced = rc == 0;
	if (!r->traced) {
		cli_err("cannot trace CPU %d: %s", r->cpu, r->trace_err);
		cli_note(rc == -EPERM ? "run detach check --measure as root; the gaps are measured but not attributed"
				      : "tracefs with the irq and sched events is needed; the gaps are measured but not attributed");
	}
	if (pthread_create(&th, NULL, probe_thread, &job) == 0)
		pthread_join(th, NULL);
	else
		snprintf(r->why, sizeof(r->why), "cannot start a thread");
	if (!r->traced)
		return;
	trace_stop(t);
	r->clock = trace_clock_name(t);
	r->lost = trace_lost(t);
	if (r->done)
		attribute(c, r, t);
	if (c->args.trace_out && r->done)
		write_trace_out(c, r, t);
	trace_close(t);
}

static void measure_run(struct check *c)
{
	if (!c->args.measure_ns)
		return;
	c->mr = calloc((size_t)CPU_COUNT(&c->cpus), sizeof(*c->mr));
	if (!c->mr || (!c->tsc.hz && tsc_calibrate(&c->tsc, 0)))
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &c->cpus))
			continue;
		c->mr[c->nmr].cpu = cpu;
		measure_cpu(c, &c->mr[c->nmr]);
		c->nmr++;
	}
	c->measured = true;
}

/* ---- report ------------------------------------------------------------ */

static double ns_of(const struct check *c, uint64_t cycles)
{
	return (double)tsc_cycles_to_ns(&c->tsc, cycles);
}

static uint64_t gap_total(const struct measure_result *r)
{
	uint64_t t = 0;

	for (uint32_t i = 0; i < r->ng; i++)
		t += r->g[i].b - r->g[i].a;
	return t;
}

static void gap_causes_text(const struct check *c, const struct measure_result *r, const struct gap *g)
{
	for (int k = 0; k < g->n; k++) {
		char label[160];
		stall_label(&r->cause[g->first + k], true, label, sizeof(label));
		printf("%s%s %.1f us", k ? ", " : " ", label, ns_of(c, r->cause[g->first + k].cycles) / 1e3);
	}
	if (!g->n)
		printf(" %s", r->traced ? "(entry and exit of what the trace saw)" : "unattributed");
	printf("\n");
}

static void measure_text(const struct check *c)
{
	for (int i = 0; i < c->nmr; i++) {
		const struct measure_result *r = &c->mr[i];
		double span = ns_of(c, r->t1 - r->t0);
		uint32_t top[SHOWN_GAPS];
		int ntop = 0;

		if (!r->done) {
			printf("  CPU %d: not measured: %s\n", r->cpu, r->why);
			continue;
		}
		printf("  CPU %d: %.1f s traced probe, threshold %.0f ns (median step %.0f ns), %u gap(s), %.3f%% of the time",
		       r->cpu, span / 1e9, ns_of(c, r->threshold), ns_of(c, r->median), r->ng,
		       100.0 * ns_of(c, gap_total(r)) / span);
		if (r->dropped)
			printf(" (%llu more not kept)", (unsigned long long)r->dropped);
		printf("\n    probe step: p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns, max %.1f us; steal %s",
		       ns_of(c, steps_pct(r->h, 50)), ns_of(c, steps_pct(r->h, 99)), ns_of(c, steps_pct(r->h, 99.9)),
		       ns_of(c, r->h->max) / 1e3, r->steal_ns < 0 ? "unknown" : "");
		if (r->steal_ns >= 0)
			printf("%.1f ms (%.2f%%, in 10 ms ticks)", (double)r->steal_ns / 1e6, 100.0 * (double)r->steal_ns / span);
		printf("\n");
		if (!r->traced) {
			printf("    not traced (%s): every gap is unattributed\n", r->trace_err);
		} else {
			printf("    trace clock %s, %llu event(s) lost\n", r->clock, (unsigned long long)r->lost);
			uint64_t guest = 0, all = gap_total(r);
			for (uint32_t k = 0; k < r->ng; k++)
				guest += r->g[k].guest;
			printf("    of the gaps' %.1f us the guest's trace covers %.1f%%\n",
			       ns_of(c, all) / 1e3, all ? 100.0 * (double)guest / (double)all : 0.0);
			printf("    %-44s %8s %12s %10s %8s\n", "cause", "count", "total us", "max us", "share");
			for (int k = 0; k < r->sum.n && k < SHOWN_CAUSES; k++) {
				const struct stall_row *w = &r->sum.rows[k];
				printf("    %-44.44s %8llu %12.1f %10.1f %7.3f%%\n", w->label, (unsigned long long)w->count,
				       ns_of(c, w->total) / 1e3, ns_of(c, w->max) / 1e3, 100.0 * ns_of(c, w->total) / span);
			}
			if (r->sum.n > SHOWN_CAUSES)
				printf("    (%d more causes, smaller; all of them in --json)\n", r->sum.n - SHOWN_CAUSES);
		}
		/* the largest gaps, largest first */
		for (; ntop < SHOWN_GAPS && ntop < (int)r->ng; ntop++) {
			uint32_t best = UINT32_MAX;
			for (uint32_t k = 0; k < r->ng; k++) {
				bool taken = false;
				for (int q = 0; q < ntop; q++)
					taken |= top[q] == k;
				if (!taken && (best == UINT32_MAX ||
					       r->g[k].b - r->g[k].a > r->g[best].b - r->g[best].a))
					best = k;
			}
			top[ntop] = best;
		}
		if (ntop)
			printf("    largest gaps (at ms since start: length, causes):\n");
		for (int k = 0; k < ntop; k++) {
			const struct gap *g = &r->g[top[k]];
			printf("    %10.3f ms: %.1f us:", ns_of(c, g->a - r->t0) / 1e6, ns_of(c, g->b - g->a) / 1e3);
			gap_causes_text(c, r, g);
		}
	}
}

static void measure_json(const struct check *c, struct json *j)
{
	if (!c->args.measure_ns)
		return;
	json_array_begin(j, "measure");
	for (int i = 0; i < c->nmr; i++) {
		const struct measure_result *r = &c->mr[i];
		json_object_begin(j, NULL);
		json_int(j, "cpu", r->cpu);
		json_bool(j, "measured", r->done);
		if (!r->done) {
			json_str(j, "why", r->why);
			json_object_end(j);
			continue;
		}
		json_bool(j, "traced", r->traced);
		if (r->traced) {
			json_str(j, "trace_clock", r->clock);
			json_uint(j, "events_lost", r->lost);
		} else {
			json_str(j, "trace_error", r->trace_err);
		}
		json_double(j, "seconds", ns_of(c, r->t1 - r->t0) / 1e9);
		json_uint(j, "threshold_ns", (uint64_t)ns_of(c, r->threshold));
		json_uint(j, "median_step_ns", (uint64_t)ns_of(c, r->median));
		json_object_begin(j, "step_ns");
		json_uint(j, "p50", (uint64_t)ns_of(c, steps_pct(r->h, 50)));
		json_uint(j, "p99", (uint64_t)ns_of(c, steps_pct(r->h, 99)));
		json_uint(j, "p99.9", (uint64_t)ns_of(c, steps_pct(r->h, 99.9)));
		json_uint(j, "max", (uint64_t)ns_of(c, r->h->max));
		json_object_end(j);
		if (r->steal_ns >= 0)
			json_int(j, "steal_ns", r->steal_ns);
		else
			json_null(j, "steal_ns");
		json_uint(j, "gaps_total_ns", (uint64_t)ns_of(c, gap_total(r)));
		json_uint(j, "gaps_not_kept", r->dropped);
		json_array_begin(j, "summary");
		for (int k = 0; r->traced && k < r->sum.n; k++) {
			const struct stall_row *w = &r->sum.rows[k];
			json_object_begin(j, NULL);
			json_str(j, "cause", w->label);
			json_str(j, "kind", stall_kind_name[w->kind]);
			json_uint(j, "count", w->count);
			json_uint(j, "total_ns", (uint64_t)ns_of(c, w->total));
			json_uint(j, "max_ns", (uint64_t)ns_of(c, w->max));
			json_double(j, "share", ns_of(c, w->total) / ns_of(c, r->t1 - r->t0));
			json_object_end(j);
		}
		json_array_end(j);
		json_array_begin(j, "gaps");
		for (uint32_t k = 0; k < r->ng; k++) {
			const struct gap *g = &r->g[k];
			json_object_begin(j, NULL);
			json_uint(j, "at_ns", (uint64_t)ns_of(c, g->a - r->t0));
			json_uint(j, "ns", (uint64_t)ns_of(c, g->b - g->a));
			if (r->traced) {
				json_uint(j, "guest_ns", (uint64_t)ns_of(c, g->guest));
				json_array_begin(j, "causes");
				for (int m = 0; m < g->n; m++)
					stall_cause_json(j, &r->cause[g->first + m], &c->tsc);
				json_array_end(j);
			} else {
				json_null(j, "causes");
			}
			json_object_end(j);
		}
		json_array_end(j);
		json_object_end(j);
	}
	json_array_end(j);
}

const struct check_measure check_measure = { "measure", measure_run, measure_text, measure_json };
