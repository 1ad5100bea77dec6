/* detach check: audit the machine for detached execution.
 *
 * The verb: its options (check_parse_args), the target CPUs, the table of
 * probes (whose findings make the verdict and the exit status), then the
 * table of measurements (information only: it never changes the verdict,
 * these are shared VMs), then the report.  check.h describes the parts. */
#include "cli/check.h"
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: detach check [-c LIST] [--json[=FILE]] [--sample DURATION]\n"
"                    [--measure DURATION [--threshold NS] [--trace-out FILE]]\n"
"\n"
"Audits this machine for detached execution on the listed CPUs and prints\n"
"findings, each with a severity (ok, info, warn, block) and a fix: preemption\n"
"model, HZ, nohz_full/isolcpus/rcu_nocbs/irqaffinity, clocksource and TSC, RT\n"
"throttling, SMT siblings, IRQs and workqueues that can reach the CPUs, tasks\n"
"and kernel threads allowed there, the detach partition, THP, NUMA balancing,\n"
"vm.mmap_min_addr, cpufreq governor, idle states, swap, Syscall User Dispatch.\n"
"Then, as information only, a busy loop on each listed CPU: its largest gap,\n"
"gaps over 10 us, and local timer interrupts meanwhile.\n"
"\n"
"  -c, --cpu LIST       CPUs to audit (default: the detach partition's CPUs,\n"
"                       else the last online CPU)\n"
"      --json[=FILE]    findings and samples as JSON with the common header;\n"
"                       without FILE on stdout instead of the text\n"
"      --sample DUR     length of the busy loop per CPU (default 2s; 0: none;\n"
"                       none by default with --measure)\n"
"      --measure DUR    a probe spins on each listed CPU for DUR while the\n"
"                       guest's tracepoints are recorded (root): each gap gets\n"
"                       its causes (IRQ, softirq, IPI/TLB with sender, tick,\n"
"                       task, or host), with a summary per cause (docs/trace.md)\n"
"      --threshold DUR  shortest gap recorded (default 5 median steps)\n"
"      --trace-out FILE every traced event as text\n"
"  -h, --help           this text\n"
"\n"
"Exit status, from the configuration findings only (the sample never counts):\n"
"  0  ready: nothing warns or blocks\n"
"  3  ready with warnings: detached threads run, but something listed as warn\n"
"     still disturbs the CPUs\n"
"  4  blocked: a finding says detached execution cannot work here\n"
"  1  error, 2 bad usage\n");
	return status;
}

/* Fills *a from the command line; 0, or EXIT_USAGE after printing why. */
static int check_parse_args(int argc, char **argv, struct check_args *a)
{
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "json", optional_argument, NULL, 'j' },
		{ "sample", required_argument, NULL, 's' },
		{ "measure", required_argument, NULL, 'm' },
		{ "threshold", required_argument, NULL, 't' },
		{ "trace-out", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	bool sample_given = false;
	int opt;

	memset(a, 0, sizeof(*a));
	a->sample_ns = 2000000000ull;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': a->cpus = optarg; break;
		case 'j': a->json = true; a->json_file = optarg; break;
		case 's':
			if (duration_parse(optarg, &a->sample_ns)) {
				cli_err("bad duration '%s' for --sample", optarg);
				cli_note("durations look like 2s, 500ms or 0");
				return EXIT_USAGE;
			}
			sample_given = true;
			break;
		case 'm':
		case 't':
			if (duration_parse(optarg, opt == 'm' ? &a->measure_ns : &a->threshold_ns)) {
				cli_err("bad duration '%s' for --%s", optarg, opt == 'm' ? "measure" : "threshold");
				cli_note("durations look like 10s, 500ms or 20us");
				return EXIT_USAGE;
			}
			break;
		case 'o': a->trace_out = optarg; break;
		case 'h': a->help = true; return 0;
		default: return cli_bad_option("check", argv);
		}
	}
	if (a->measure_ns && !sample_given)
		a->sample_ns = 0;
	if ((a->threshold_ns || a->trace_out) && !a->measure_ns) {
		cli_err("--threshold and --trace-out go with --measure");
		cli_note("for example: detach check -c 1 --measure 10s --threshold 20us");
		return EXIT_USAGE;
	}
	if (optind < argc)
		return cli_unexpected_arg("check", argv[optind]);
	return 0;
}

static void probe_housekeeping(struct check *c, int cpu)
{
	(void)cpu;
	if (!CPU_COUNT(&c->hk))
		check_add(c, "housekeeping", S_BLOCK, -1, false, "list fewer CPUs: proxies need a housekeeping CPU",
			          "CPU list %s leaves no housekeeping CPU for the proxies", c->cpus_s);
}

/* The probes, in report order.  A run of per-CPU probes goes CPU by CPU, so
 * each CPU's findings stay together. */
static const struct check_probe probes[] = {
	{ "housekeeping",   "partition", false, probe_housekeeping },
	{ "sud",            "kernel",    false, probe_sud },
	{ "preempt",        "kernel",    false, probe_preempt },
	{ "hz",             "kernel",    false, probe_hz },
	{ "nohz_full",      "kernel",    false, probe_nohz_full },
	{ "isolcpus",       "kernel",    false, probe_isolcpus },
	{ "rcu_nocbs",      "kernel",    false, probe_rcu_nocbs },
	{ "irqaffinity",    "kernel",    false, probe_irqaffinity },
	{ "clocksource",    "clock",     false, probe_clocksource },
	{ "tsc",            "clock",     false, probe_tsc },
	{ "rt_throttling",  "partition", false, probe_rt_throttling },
	{ "smt",            "topology",  true,  probe_smt },
	{ "partition",      "partition", true,  probe_partition },
	{ "cpufreq",        "power",     true,  probe_cpufreq },
	{ "idle",           "power",     true,  probe_idle },
	{ "irq",            "partition", false, probe_irqs },
	{ "workqueue",      "partition", false, probe_workqueues },
	{ "watchdog",       "partition", false, probe_watchdog },
	{ "irq_default",    "partition", false, probe_irq_default },
	{ "tasks",          "partition", false, probe_tasks },
	{ "thp",            "memory",    false, probe_thp },
	{ "numa_balancing", "memory",    false, probe_numa_balancing },
	{ "mmap_min_addr",  "memory",    false, probe_mmap_min_addr },
	{ "swap",           "memory",    false, probe_swap },
};

/* The measurements, after the verdict, information only.  A new mode of
 * measuring (an option that selects which run) adds its entry here. */
static const struct check_measure *const measures[] = { &check_sample, &check_measure };

static void run_probes(struct check *c)
{
	const size_t n = sizeof(probes) / sizeof(probes[0]);

	for (size_t i = 0; i < n;) {
		size_t end = i + 1;

		if (!probes[i].per_cpu) {
			c->probe = &probes[i];
			probes[i++].probe(c, -1);
			continue;
		}
		while (end < n && probes[end].per_cpu)
			end++;
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
			for (size_t k = i; k < end && CPU_ISSET(cpu, &c->cpus); k++) {
				c->probe = &probes[k];
				probes[k].probe(c, cpu);
			}
		i = end;
	}
}

/* The CPUs to audit, the housekeeping rest, the partition, isolate's
 * journal and the boot command line: the context every probe reads. */
static int check_setup(struct check *c)
{
	if (cpus_online(&c->online)) {
		cli_err("cannot read the online CPUs");
		return 1;
	}
	c->have_part = partition_find(&c->part) == 0;
	if (c->args.cpus) {
		if (cli_parse_cpus("-c", c->args.cpus, &c->cpus))
			return EXIT_USAGE;
	} else if (c->have_part && CPU_COUNT(&c->part.cpus)) {
		c->cpus = c->part.cpus;
	} else {
		CPU_ZERO(&c->cpus);
		for (int i = CPU_SETSIZE - 1; i >= 0; i--)
			if (CPU_ISSET(i, &c->online)) {
				CPU_SET(i, &c->cpus);
				break;
			}
	}
	CPU_XOR(&c->hk, &c->online, &c->cpus);
	CPU_AND(&c->hk, &c->hk, &c->online);
	cpulist_format(&c->cpus, c->cpus_s, sizeof(c->cpus_s));
	cpulist_format(&c->hk, c->hk_s, sizeof(c->hk_s));
	if (journal_load(&c->j, ISOLATE_STATE_FILE))
		memset(&c->j, 0, sizeof(c->j));
	if (read_text_file("/proc/cmdline", c->cmdline, sizeof(c->cmdline)))
		c->cmdline[0] = '\0';
	return 0;
}

static int report(const struct check *c, int rc)
{
	const struct check_args *a = &c->args;
	const int nm = (int)(sizeof(measures) / sizeof(measures[0]));
	FILE *f;

	if (!a->json || a->json_file)
		check_print_text(c, rc, measures, nm);
	if (!a->json)
		return rc;
	f = a->json_file ? fopen(a->json_file, "we") : stdout;
	if (!f) {
		cli_err("cannot write %s: %s", a->json_file, strerror(errno));
		return 1;
	}
	if (check_write_json(c, f, rc, measures, nm) || (a->json_file && fclose(f))) {
		cli_err("cannot write the JSON output");
		return 1;
	}
	return rc;
}

static int check_main(int argc, char **argv)
{
	struct check c;
	int nw, nb, rc;

	memset(&c, 0, sizeof(c));
	if ((rc = check_parse_args(argc, argv, &c.args)))
		return rc;
	if (c.args.help)
		return usage(0);
	if ((rc = check_setup(&c)))
		return rc;
	run_probes(&c);
	rc = check_verdict(&c, &nw, &nb);
	for (size_t i = 0; i < sizeof(measures) / sizeof(measures[0]); i++)
		measures[i]->run(&c);
	rc = report(&c, rc);
	free(c.f);
	free(c.s);
	journal_free(&c.j);
	return rc;
}

DETACH_VERB(verb_check) = { "check", "audit this machine for detached execution, with fixes", check_main };
