/* detach check: the shared context of the verb (check.c), its probes
 * (check_kernel.c, check_cpus.c, check_reach.c, check_memory.c), its
 * measurements (check_sample.c) and its report (check_report.c).
 *
 * A probe reads one aspect of the machine and records findings, each with a
 * severity and a fix; the findings alone make the verdict and the exit status.
 * A measurement runs after the verdict, as information only (these are
 * shared VMs): it never changes the exit status. */
#ifndef DETACH_CLI_CHECK_H
#define DETACH_CLI_CHECK_H

#include "cli/journal.h"
#include "cli/procfs.h"

#include <stdbool.h>
#include <stdint.h>

enum sev { S_OK, S_INFO, S_WARN, S_BLOCK };

/* Exit statuses (also in --help and docs/isolate.md). */
#define CHECK_READY    0
#define CHECK_WARNINGS 3
#define CHECK_BLOCKED  4

struct finding {
	char id[32];
	const char *category;
	enum sev sev;
	int cpu;               /* -1: not about one CPU */
	bool by_isolate;       /* `detach isolate` fixes it */
	char what[768];
	char fix[512];
};

struct sample {
	int cpu;
	bool done;
	char why[160];         /* when not done */
	double seconds;
	uint64_t max_gap_ns, gaps;
	long long loc;
};

/* The user's ask, filled by check_parse_args() alone. */
struct check_args {
	const char *cpus;      /* -c LIST, or NULL: the partition's, else the last online */
	bool json;             /* --json[=FILE] */
	const char *json_file; /* NULL: JSON on stdout instead of the text */
	uint64_t sample_ns;    /* --sample: busy loop per CPU; 0: none */
	uint64_t measure_ns;   /* --measure: traced probe per CPU; 0: none */
	uint64_t threshold_ns; /* --threshold; 0: a few median steps */
	const char *trace_out; /* --trace-out FILE */
	bool help;
};

struct check_probe;

/* What every probe and measurement reads (set up before the first probe,
 * read-only afterwards) and what they write (findings, samples). */
struct check {
	struct check_args args;
	cpu_set_t cpus, online, hk;
	char cpus_s[256], hk_s[256];
	char cmdline[4096];    /* /proc/cmdline */
	struct partition part;
	bool have_part;
	struct journal j;      /* isolate's state, when readable */
	const struct check_probe *probe;   /* the probe running */
	struct finding *f;
	int n, cap;
	struct sample *s;      /* check_sample.c's results */
	int ns;
	struct measure_result *mr;   /* check_measure.c's results */
	int nmr;
	struct tsc_clock tsc;
	bool measured;         /* a measurement has lines to print */
};

/* One probe: id names it (its findings carry that id, or ids listed in its
 * comment), category is the category of all its findings.  A per-CPU probe
 * is called once per listed CPU; the others once with cpu -1. */
struct check_probe {
	const char *id;
	const char *category;
	bool per_cpu;
	void (*probe)(struct check *c, int cpu);
};

/* One measurement, after the verdict, information only: run() measures,
 * text() prints its lines under "measured", json() writes its key(s) into the
 * top-level object.  check.c holds the table (the busy-loop sample today). */
struct check_measure {
	const char *id;
	void (*run)(struct check *c);
	void (*text)(const struct check *c);
	void (*json)(const struct check *c, struct json *j);
};

/* Records a finding of the running probe's category (check_report.c). */
void check_add(struct check *c, const char *id, enum sev sev, int cpu, bool by_isolate,
	       const char *fix, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* The exit status the findings make, with the warn and block counts. */
int check_verdict(const struct check *c, int *nwarn, int *nblock);
void check_print_text(const struct check *c, int rc, const struct check_measure *const *m, int nm);
int check_write_json(const struct check *c, FILE *out, int rc, const struct check_measure *const *m, int nm);

/* ---- probes, in the order check.c's table runs them ---------------------- */
/* check_kernel.c: kernel build, boot options, clock, RT throttling */
void probe_sud(struct check *c, int cpu);
void probe_preempt(struct check *c, int cpu);
void probe_hz(struct check *c, int cpu);
void probe_nohz_full(struct check *c, int cpu);
void probe_isolcpus(struct check *c, int cpu);
void probe_rcu_nocbs(struct check *c, int cpu);
void probe_irqaffinity(struct check *c, int cpu);
void probe_clocksource(struct check *c, int cpu);
void probe_tsc(struct check *c, int cpu);
void probe_rt_throttling(struct check *c, int cpu);
/* check_cpus.c: each listed CPU */
void probe_smt(struct check *c, int cpu);
void probe_partition(struct check *c, int cpu);
void probe_cpufreq(struct check *c, int cpu);
void probe_idle(struct check *c, int cpu);
/* check_reach.c: what can reach the listed CPUs */
void probe_irqs(struct check *c, int cpu);
void probe_workqueues(struct check *c, int cpu);
void probe_watchdog(struct check *c, int cpu);
void probe_irq_default(struct check *c, int cpu);
void probe_tasks(struct check *c, int cpu);
/* check_memory.c */
void probe_thp(struct check *c, int cpu);
void probe_numa_balancing(struct check *c, int cpu);
void probe_mmap_min_addr(struct check *c, int cpu);
void probe_swap(struct check *c, int cpu);

/* ---- measurements ---------------------------------------------------------- */
/* check_sample.c: a busy loop on each listed CPU, its gaps and timer ticks */
extern const struct check_measure check_sample;
/* check_measure.c: --measure, a traced probe per listed CPU, each gap named */
extern const struct check_measure check_measure;

#endif
