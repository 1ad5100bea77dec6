/* detach check: audit the machine for detached execution.
 *
 * Configuration findings, each with a severity and a fix, make the verdict
 * and the exit status; a short measured sample per CPU follows as
 * information only (it never changes the verdict: these are shared VMs). */
#include "cli/cli.h"
#include "cli/isolation.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#endif

enum sev { S_OK, S_INFO, S_WARN, S_BLOCK };
static const char *const sev_name[] = { "ok", "info", "warn", "block" };

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

struct check {
	cpu_set_t cpus, online, hk;
	char cpus_s[256], hk_s[256];
	uint64_t sample_ns;
	struct partition part;
	bool have_part;
	struct journal j;      /* isolate's state, when readable */
	struct finding *f;
	int n, cap;
	struct sample *s;
	int ns;
	struct tsc_clock tsc;
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: detach check [-c LIST] [--json[=FILE]] [--sample DURATION]\n"
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
"      --sample DUR     length of the busy loop per CPU (default 2s; 0: none)\n"
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

static void add(struct check *c, const char *id, const char *cat, enum sev sev, int cpu,
		bool by_isolate, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

static void add(struct check *c, const char *id, const char *cat, enum sev sev, int cpu,
		bool by_isolate, const char *fix, const char *fmt, ...)
{
	struct finding *f;
	va_list ap;

	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 64;
		struct finding *nf = realloc(c->f, (size_t)cap * sizeof(*nf));
		if (!nf)
			return;
		c->f = nf;
		c->cap = cap;
	}
	f = &c->f[c->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->category = cat;
	f->sev = sev;
	f->cpu = cpu;
	f->by_isolate = by_isolate;
	snprintf(f->fix, sizeof(f->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
}

/* ---- kernel configuration ------------------------------------------------ */

/* CONFIG_NAME's value from /boot/config-$(uname -r) or /proc/config.gz. */
static bool kconfig(const char *name, char *val, size_t len)
{
	struct utsname u;
	char path[300], line[512];
	size_t nl = strlen(name);
	bool found = false, set_seen = false;
	FILE *f;
	bool piped = false;

	uname(&u);
	snprintf(path, sizeof(path), "/boot/config-%s", u.release);
	f = fopen(path, "re");
	if (!f && access("/proc/config.gz", R_OK) == 0) {
		f = popen("gzip -dc /proc/config.gz 2>/dev/null", "r");
		piped = true;
	}
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, name, nl) && line[nl] == '=') {
			snprintf(val, len, "%s", line + nl + 1);
			found = true;
		}
		set_seen = true;
	}
	if (piped)
		pclose(f);
	else
		fclose(f);
	if (!found && set_seen)
		snprintf(val, len, "n");   /* "# CONFIG_X is not set" */
	return set_seen;
}

/* Value of key= on the kernel command line, or NULL. */
static const char *cmdline_arg(const char *cmdline, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	for (const char *p = cmdline; p && *p;) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, "-- ", 3))
			break;                  /* the rest is for init */
		if (!strncmp(p, key, kl) && p[kl] == '=') {
			size_t n = strcspn(p + kl + 1, " ");
			snprintf(out, len, "%.*s", (int)n, p + kl + 1);
			return out;
		}
		p = strchr(p, ' ');
	}
	return NULL;
}

/* The CPU list of a boot option like "isolcpus=managed_irq,domain,2-3". */
static bool cmdline_cpus(const char *val, cpu_set_t *set)
{
	const char *p = val;

	while (*p && !(*p >= '0' && *p <= '9'))
		p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
	return *p && cpulist_parse(p, set) == 0;
}

static void check_kernel(struct check *c)
{
	char buf[1024], cmd[4096], v[256], fix[300];
	struct utsname u;
	cpu_set_t set, miss;
	long l;

	uname(&u);
	/* Syscall User Dispatch: the runtime's way of catching syscalls. */
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0) == 0)
		add(c, "sud", "kernel", S_OK, -1, false, NULL, "Syscall User Dispatch is available");
	else
		add(c, "sud", "kernel", S_BLOCK, -1, false, "a kernel 5.11 or newer built with generic entry (x86-64 has it)",
		    "Syscall User Dispatch is not available (%s): detach run cannot catch system calls", strerror(errno));

	/* preemption model */
	v[0] = '\0';
	if (read_text_file("/sys/kernel/debug/sched/preempt", buf, sizeof(buf)) == 0) {
		char *o = strchr(buf, '('), *e = o ? strchr(o, ')') : NULL;
		if (o && e)
			snprintf(v, sizeof(v), "%.*s", (int)(e - o - 1), o + 1);
	}
	read_text_file("/proc/cmdline", cmd, sizeof(cmd));
	if (!v[0])
		cmdline_arg(cmd, "preempt", v, sizeof(v));
	if (!v[0]) {
		char y[16];
		if (strstr(u.version, "PREEMPT_RT"))
			snprintf(v, sizeof(v), "rt");
		else if (kconfig("CONFIG_PREEMPT_RT", y, sizeof(y)) && !strcmp(y, "y"))
			snprintf(v, sizeof(v), "rt");
		else if (kconfig("CONFIG_PREEMPT_LAZY", y, sizeof(y)) && !strcmp(y, "y"))
			snprintf(v, sizeof(v), "lazy");
		else if (kconfig("CONFIG_PREEMPT", y, sizeof(y)) && !strcmp(y, "y"))
			snprintf(v, sizeof(v), "full");
		else if (kconfig("CONFIG_PREEMPT_VOLUNTARY", y, sizeof(y)) && !strcmp(y, "y"))
			snprintf(v, sizeof(v), "voluntary");
		else if (kconfig("CONFIG_PREEMPT_NONE", y, sizeof(y)) && !strcmp(y, "y"))
			snprintf(v, sizeof(v), "none");
	}
	if (!v[0])
		add(c, "preempt", "kernel", S_INFO, -1, false, NULL,
		    "preemption model unknown (no debugfs, no preempt= and no kernel config; uname -v: %s)", u.version);
	else if (!strcmp(v, "none") || !strcmp(v, "voluntary"))
		add(c, "preempt", "kernel", S_INFO, -1, false,
		    strstr(u.version, "PREEMPT_DYNAMIC") ? "boot with preempt=full (this kernel is PREEMPT_DYNAMIC)" : "a kernel with CONFIG_PREEMPT",
		    "preemption model %s: forwarded calls and Linux threads wait longer for the CPU; detached threads do not enter the kernel", v);
	else
		add(c, "preempt", "kernel", S_OK, -1, false, NULL, "preemption model %s", v);

	/* HZ and nohz_full */
	if (kconfig("CONFIG_HZ", v, sizeof(v)))
		add(c, "hz", "kernel", S_INFO, -1, false, NULL, "the tick runs at %s Hz", v);
	else
		snprintf(v, sizeof(v), "?");
	if (cmdline_arg(cmd, "nohz_full", buf, sizeof(buf)) && cmdline_cpus(buf, &set)) {
		CPU_XOR(&miss, &c->cpus, &set);
		CPU_AND(&miss, &miss, &c->cpus);
		if (CPU_COUNT(&miss))
			add(c, "nohz_full", "kernel", S_WARN, -1, false, "boot with nohz_full covering them",
			    "nohz_full=%s does not cover CPU %s: the tick interrupts them", buf, cpulist_format(&miss, fix, sizeof(fix)));
		else
			add(c, "nohz_full", "kernel", S_OK, -1, false, NULL, "nohz_full=%s: the tick stops on a CPU with one task", buf);
	} else {
		char y[16] = "";
		bool have = kconfig("CONFIG_NO_HZ_FULL", y, sizeof(y)) && !strcmp(y, "y");
		snprintf(fix, sizeof(fix), "%sboot with nohz_full=%s",
			 have ? "" : "a kernel with CONFIG_NO_HZ_FULL, ", c->cpus_s);
		add(c, "nohz_full", "kernel", S_WARN, -1, false, fix,
		    "no nohz_full: the %s Hz tick interrupts CPU %s even with one task%s", v, c->cpus_s,
		    have ? "" : " (this kernel has no NO_HZ_FULL)");
	}
	if (cmdline_arg(cmd, "isolcpus", buf, sizeof(buf)))
		add(c, "isolcpus", "kernel", S_INFO, -1, false, NULL, "isolcpus=%s on the command line", buf);
	else {
		snprintf(fix, sizeof(fix), "boot with isolcpus=managed_irq,%s to keep managed IRQs off them", c->cpus_s);
		add(c, "isolcpus", "kernel", S_INFO, -1, false, fix,
		    "no isolcpus (not needed: the detach partition isolates at run time, except managed IRQs)");
	}
	if (cmdline_arg(cmd, "rcu_nocbs", buf, sizeof(buf)))
		add(c, "rcu_nocbs", "kernel", S_OK, -1, false, NULL, "rcu_nocbs=%s", buf);
	else {
		snprintf(fix, sizeof(fix), "boot with rcu_nocbs=%s", c->cpus_s);
		add(c, "rcu_nocbs", "kernel", S_INFO, -1, false, fix,
		    "no rcu_nocbs: RCU callbacks queued on CPU %s run there", c->cpus_s);
	}
	if (cmdline_arg(cmd, "irqaffinity", buf, sizeof(buf)))
		add(c, "irqaffinity", "kernel", S_OK, -1, false, NULL, "irqaffinity=%s", buf);
	else
		add(c, "irqaffinity", "kernel", S_INFO, -1, false, NULL,
		    "no irqaffinity: IRQs start on every CPU (detach isolate moves the movable ones)");

	/* clock */
	if (read_text_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof(buf)) == 0) {
		if (!strcmp(buf, "tsc"))
			add(c, "clocksource", "clock", S_OK, -1, false, NULL, "clocksource is tsc");
		else
			add(c, "clocksource", "clock", S_WARN, -1, false,
			    "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource (if listed in available_clocksource)",
			    "clocksource is %s, not tsc: the kernel distrusts the TSC, which detached timed waits use", buf);
	}
	{
		FILE *f = fopen("/proc/cpuinfo", "re");
		char line[8192];
		bool constant = false, nonstop = false;
		while (f && fgets(line, sizeof(line), f)) {
			if (strncmp(line, "flags", 5))
				continue;
			constant = strstr(line, " constant_tsc") != NULL;
			nonstop = strstr(line, " nonstop_tsc") != NULL;
			break;
		}
		if (f)
			fclose(f);
		if (constant && nonstop)
			add(c, "tsc", "clock", S_OK, -1, false, NULL, "TSC is constant and nonstop");
		else
			add(c, "tsc", "clock", S_BLOCK, -1, false, "a machine (or VM) with an invariant TSC",
			    "TSC is%s%s: detached timed waits count TSC cycles and would be wrong",
			    constant ? "" : " not constant", nonstop ? "" : " not nonstop");
	}

	/* RT throttling */
	if (read_long_file("/proc/sys/kernel/sched_rt_runtime_us", &l) == 0) {
		if (l < 0)
			add(c, "rt_throttling", "partition", S_OK, -1, true, NULL, "RT throttling is off (sched_rt_runtime_us=-1)");
		else
			add(c, "rt_throttling", "partition", S_WARN, -1, true,
			    "detach isolate (sets it to -1), or sysctl kernel.sched_rt_runtime_us=-1",
			    "RT throttling is on (sched_rt_runtime_us=%ld): a busy SCHED_FIFO thread may be stopped every second", l);
	}
}

/* ---- the listed CPUs -------------------------------------------------------- */

static void check_cpus(struct check *c)
{
	char path[256], buf[1024], fix[512];
	cpu_set_t set;

	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &c->cpus))
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
		if (read_text_file(path, buf, sizeof(buf)) == 0 && cpulist_parse(buf, &set) == 0) {
			CPU_CLR(cpu, &set);
			if (CPU_COUNT(&set)) {
				char sib[256];
				cpulist_format(&set, sib, sizeof(sib));
				snprintf(fix, sizeof(fix), "keep CPU %s idle (isolate it too) or turn SMT off: echo off > /sys/devices/system/cpu/smt/control", sib);
				add(c, "smt", "topology", S_WARN, cpu, false, fix,
				    "CPU %d shares its core with CPU %s: work there slows it down", cpu, sib);
			} else {
				add(c, "smt", "topology", S_OK, cpu, false, NULL, "CPU %d has no SMT sibling", cpu);
			}
		}
		/* partition membership */
		if (c->have_part && c->part.valid && CPU_ISSET(cpu, &c->part.cpus))
			add(c, "partition", "partition", S_OK, cpu, true, NULL, "CPU %d is in the detach partition %s", cpu, c->part.dir);
		else {
			snprintf(fix, sizeof(fix), "detach isolate -c %s", c->cpus_s);
			add(c, "partition", "partition", S_WARN, cpu, true, fix,
			    "CPU %d is not in a detach partition: the scheduler balances load onto it", cpu);
		}
		/* cpufreq governor */
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", cpu);
		if (read_text_file(path, buf, sizeof(buf)) == 0) {
			if (!strcmp(buf, "performance"))
				add(c, "cpufreq", "power", S_OK, cpu, false, NULL, "CPU %d: cpufreq governor performance", cpu);
			else {
				snprintf(fix, sizeof(fix), "echo performance > %s", path);
				add(c, "cpufreq", "power", S_WARN, cpu, false, fix,
				    "CPU %d: cpufreq governor %s changes the clock under the thread", cpu, buf);
			}
		} else {
			add(c, "cpufreq", "power", S_INFO, cpu, false, NULL, "CPU %d: no cpufreq (the firmware or hypervisor sets the clock)", cpu);
		}
		/* idle states */
		{
			char states[512] = "";
			size_t o = 0;
			for (int s = 0; s < 16; s++) {
				char name[64], lat[32], dis[8] = "0";
				snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/name", cpu, s);
				if (read_text_file(path, name, sizeof(name)))
					break;
				snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/latency", cpu, s);
				if (read_text_file(path, lat, sizeof(lat)))
					snprintf(lat, sizeof(lat), "?");
				snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/disable", cpu, s);
				read_text_file(path, dis, sizeof(dis));
				if (strcmp(lat, "0") && strcmp(dis, "1") && o < sizeof(states) - 1)
					o += (size_t)snprintf(states + o, sizeof(states) - o, "%s%s (%s us)", o ? ", " : "", name, lat);
			}
			if (o) {
				snprintf(fix, sizeof(fix), "echo 1 > /sys/devices/system/cpu/cpu%d/cpuidle/stateN/disable for those, or boot with idle=poll", cpu);
				add(c, "idle", "power", S_INFO, cpu, false, fix,
				    "CPU %d may enter idle states with exit latency: %s (a busy detached thread never idles; waits may)", cpu, states);
			} else {
				add(c, "idle", "power", S_OK, cpu, false, NULL, "CPU %d: no idle state with exit latency enabled", cpu);
			}
		}
	}
}

/* ---- what can reach the CPUs ------------------------------------------------ */

static bool irq_unmovable(const struct check *c, int irq)
{
	char path[128], buf[4096];

	for (int i = 0; i < c->j.n; i++)
		if (c->j.e[i].kind == J_UNMOVABLE_IRQ && c->j.e[i].irq == irq)
			return true;
	snprintf(path, sizeof(path), "/sys/kernel/debug/irq/irqs/%d", irq);
	return read_text_file(path, buf, sizeof(buf)) == 0 && strstr(buf, "AFFINITY_MANAGED");
}

static void check_irqs(struct check *c)
{
	DIR *d = opendir("/proc/irq");
	struct dirent *de;
	char path[300], aff[256], eff[256], name[256], fix[512];
	int found = 0;

	while (d && (de = readdir(d))) {
		char *end;
		int irq = (int)strtol(de->d_name, &end, 10);
		cpu_set_t set;

		if (*end || end == de->d_name)
			continue;
		snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", irq);
		if (read_text_file(path, aff, sizeof(aff)) || cpulist_parse(aff, &set))
			continue;
		CPU_AND(&set, &set, &c->cpus);
		if (!CPU_COUNT(&set))
			continue;
		snprintf(path, sizeof(path), "/proc/irq/%d/effective_affinity_list", irq);
		if (read_text_file(path, eff, sizeof(eff)))
			snprintf(eff, sizeof(eff), "?");
		irq_name(irq, name, sizeof(name));
		found++;
		if (irq_unmovable(c, irq)) {
			snprintf(fix, sizeof(fix), "boot with isolcpus=managed_irq,%s (its affinity cannot be changed at run time)", c->cpus_s);
			add(c, "irq", "partition", S_WARN, -1, false, fix,
			    "IRQ %d (%s) can be delivered to the listed CPUs (affinity %s, effective %s) and is managed by the kernel: it cannot be moved",
			    irq, name, aff, eff);
		} else {
			snprintf(fix, sizeof(fix), "detach isolate -c %s (or echo %s > /proc/irq/%d/smp_affinity_list)", c->cpus_s, c->hk_s, irq);
			add(c, "irq", "partition", S_WARN, -1, true, fix,
			    "IRQ %d (%s) can be delivered to the listed CPUs (affinity %s, effective %s)", irq, name, aff, eff);
		}
	}
	if (d)
		closedir(d);
	if (!found)
		add(c, "irq", "partition", S_OK, -1, true, NULL, "no IRQ has the listed CPUs in its affinity");
}

static void check_mask_file(struct check *c, const char *id, const char *path, bool hex, const char *what)
{
	char buf[1024], fix[600];
	cpu_set_t set;

	if (read_text_file(path, buf, sizeof(buf)))
		return;
	if (hex ? hexmask_parse(buf, &set) : cpulist_parse(buf, &set))
		return;
	CPU_AND(&set, &set, &c->cpus);
	if (CPU_COUNT(&set)) {
		snprintf(fix, sizeof(fix), "detach isolate -c %s", c->cpus_s);
		add(c, id, "partition", S_WARN, -1, true, fix, "%s includes the listed CPUs (%s: %s)", what, path, buf);
	} else {
		add(c, id, "partition", S_OK, -1, true, NULL, "%s excludes the listed CPUs (%s)", what, buf);
	}
}

static void check_workqueues(struct check *c)
{
	DIR *d = opendir("/sys/bus/workqueue/devices");
	struct dirent *de;
	char path[600], what[300];

	check_mask_file(c, "workqueue", "/sys/devices/virtual/workqueue/cpumask", true, "the global unbound workqueue cpumask");
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/workqueue/devices/%s/cpumask", de->d_name);
		snprintf(what, sizeof(what), "the %s workqueue cpumask", de->d_name);
		check_mask_file(c, "workqueue", path, true, what);
	}
	if (d)
		closedir(d);
	check_mask_file(c, "watchdog", "/proc/sys/kernel/watchdog_cpumask", false, "the lockup watchdog cpumask (a timer every few seconds)");
	check_mask_file(c, "irq_default", "/proc/irq/default_smp_affinity", true, "the default affinity of new IRQs");
}

static void append_name(char *buf, size_t len, int *count, const char *name)
{
	size_t o = strlen(buf);

	if (*count < 12 && o + strlen(name) + 3 < len)
		snprintf(buf + o, len - o, "%s%s", o ? ", " : "", name);
	else if (*count == 12 && o + 5 < len)
		snprintf(buf + o, len - o, ", ...");
	(*count)++;
}

static void check_tasks(struct check *c)
{
	DIR *pd = opendir("/proc");
	struct dirent *p;
	char movable[700] = "", pinned[700] = "", fixed[700] = "", inpart[700] = "", fix[300];
	int nmov = 0, npin = 0, nfix = 0, npart = 0;
	pid_t self = getpid();

	while (pd && (p = readdir(pd))) {
		char tdir[300];
		DIR *td;
		struct dirent *t;
		long pid = strtol(p->d_name, NULL, 10);

		if (pid <= 0 || pid == self)
			continue;
		snprintf(tdir, sizeof(tdir), "/proc/%ld/task", pid);
		if (!(td = opendir(tdir)))
			continue;
		while ((t = readdir(td))) {
			long tid = strtol(t->d_name, NULL, 10);
			cpu_set_t aff, on;
			char comm[64], cs[300], path[300];
			unsigned long fl;

			if (tid <= 0 || sched_getaffinity((pid_t)tid, sizeof(aff), &aff))
				continue;
			CPU_AND(&on, &aff, &c->cpus);
			if (!CPU_COUNT(&on))
				continue;
			fl = task_flags(tid);
			task_comm(tid, comm, sizeof(comm));
			snprintf(path, sizeof(path), "/proc/%ld/task/%ld/cpuset", pid, tid);
			if (read_text_file(path, cs, sizeof(cs)))
				cs[0] = '\0';
			if (c->have_part && !strcmp(cs, "/" PARTITION_NAME))
				append_name(inpart, sizeof(inpart), &npart, comm);
			else if ((fl & PF_KTHREAD_FLAG) && CPU_COUNT(&aff) == 1)
				append_name(pinned, sizeof(pinned), &npin, comm);
			else if ((fl & PF_KTHREAD_FLAG) && (fl & PF_NO_SETAFFINITY_FLAG))
				append_name(fixed, sizeof(fixed), &nfix, comm);
			else
				append_name(movable, sizeof(movable), &nmov, comm);
		}
		closedir(td);
	}
	if (pd)
		closedir(pd);
	if (nmov) {
		snprintf(fix, sizeof(fix), "detach isolate -c %s", c->cpus_s);
		add(c, "tasks", "partition", S_WARN, -1, true, fix,
		    "%d task(s) may run on the listed CPUs: %s", nmov, movable);
	} else {
		add(c, "tasks", "partition", S_OK, -1, true, NULL, "no movable task may run on the listed CPUs");
	}
	if (npin)
		add(c, "percpu_kthreads", "partition", S_INFO, -1, false, NULL,
		    "%d per-CPU kernel thread(s) bound to the listed CPUs (they stay; they run when that CPU has work for them): %s", npin, pinned);
	if (nfix)
		add(c, "kthreads", "partition", S_INFO, -1, false, NULL,
		    "%d kernel thread(s) the kernel places itself may run there (workqueue rescuers, kthreadd; idle unless needed): %s", nfix, fixed);
	if (npart)
		add(c, "in_partition", "partition", S_INFO, -1, false, NULL,
		    "%d thread(s) in the detach partition (detached threads): %s", npart, inpart);
}

/* ---- memory ----------------------------------------------------------------- */

static void check_memory(struct check *c)
{
	char buf[1024];
	long l;

	if (read_text_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) == 0) {
		if (strstr(buf, "[always]"))
			add(c, "thp", "memory", S_WARN, -1, false, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
			    "transparent huge pages: always: khugepaged collapses pages of every process, with TLB shootdowns to its CPUs");
		else
			add(c, "thp", "memory", S_OK, -1, false, NULL, "transparent huge pages: %s", buf);
	}
	if (read_long_file("/proc/sys/kernel/numa_balancing", &l) == 0) {
		if (l)
			add(c, "numa_balancing", "memory", S_WARN, -1, false, "sysctl kernel.numa_balancing=0",
			    "NUMA balancing is on: it unmaps pages to sample accesses, which makes page faults on the listed CPUs");
		else
			add(c, "numa_balancing", "memory", S_OK, -1, false, NULL, "NUMA balancing is off");
	}
	if (read_long_file("/proc/sys/vm/mmap_min_addr", &l) == 0) {
		if (l == 0)
			add(c, "mmap_min_addr", "memory", S_OK, -1, false, NULL, "vm.mmap_min_addr=0: rewrite mode can map its trampoline at address 0");
		else
			add(c, "mmap_min_addr", "memory", S_INFO, -1, false,
			    "detach isolate --allow-zero-page, or sysctl vm.mmap_min_addr=0 (read the security note in docs/isolate.md)",
			    "vm.mmap_min_addr=%ld: rewrite mode needs 0, or root (CAP_SYS_RAWIO); sud mode works regardless", l);
	}
	{
		FILE *f = fopen("/proc/swaps", "re");
		char line[512];
		int n = 0;
		while (f && fgets(line, sizeof(line), f))
			n++;
		if (f)
			fclose(f);
		if (n > 1)
			add(c, "swap", "memory", S_INFO, -1, false, "keep detach run's default mlock (do not use --no-mlock)",
			    "%d swap area(s) active: unlocked memory of a detached program may be paged out", n - 1);
		else
			add(c, "swap", "memory", S_OK, -1, false, NULL, "no swap");
	}
}

/* ---- the measured sample ------------------------------------------------------ */

static void *sample_thread(void *arg)
{
	struct check *c = ((void **)arg)[0];
	struct sample *s = ((void **)arg)[1];
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
	end = ns_to_tsc_cycles(&c->tsc, c->sample_ns);
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

static void run_samples(struct check *c)
{
	c->s = calloc((size_t)CPU_COUNT(&c->cpus), sizeof(*c->s));
	if (!c->s || !c->sample_ns)
		return;
	if (tsc_calibrate(&c->tsc, 0))
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		pthread_t t;
		void *arg[2];
		struct sample *s;

		if (!CPU_ISSET(cpu, &c->cpus))
			continue;
		s = &c->s[c->ns++];
		s->cpu = cpu;
		arg[0] = c;
		arg[1] = s;
		if (pthread_create(&t, NULL, sample_thread, arg) == 0)
			pthread_join(t, NULL);
		else
			snprintf(s->why, sizeof(s->why), "cannot start a thread");
	}
}

/* ---- output --------------------------------------------------------------- */

static int verdict(const struct check *c, int *nwarn, int *nblock)
{
	*nwarn = *nblock = 0;
	for (int i = 0; i < c->n; i++) {
		*nwarn += c->f[i].sev == S_WARN;
		*nblock += c->f[i].sev == S_BLOCK;
	}
	return *nblock ? CHECK_BLOCKED : *nwarn ? CHECK_WARNINGS : CHECK_READY;
}

static void print_text(const struct check *c, int rc)
{
	static const char *const label[] = { "ok   ", "info ", "WARN ", "BLOCK" };
	int nw, nb;

	printf("detach check: CPU %s (housekeeping %s)", c->cpus_s, c->hk_s);
	if (c->have_part)
		printf(", partition %s: CPU %s%s\n", c->part.dir, cpulist_format(&c->part.cpus, (char[256]){ 0 }, 256),
		       c->part.valid ? "" : " (invalid)");
	else
		printf(", no detach partition\n");
	for (int i = 0; i < c->n; i++) {
		const struct finding *f = &c->f[i];
		printf("  %s %-16s %s\n", label[f->sev], f->id, f->what);
		if (f->sev >= S_INFO && f->fix[0])
			printf("        %-16s fix: %s\n", "", f->fix);
	}
	verdict(c, &nw, &nb);
	if (rc == CHECK_BLOCKED)
		printf("verdict: blocked: %d finding(s) block detached execution, %d warning(s) (exit status %d)\n", nb, nw, rc);
	else if (rc == CHECK_WARNINGS)
		printf("verdict: ready with %d warning(s): detached threads run, but the listed CPUs are still disturbed (exit status %d)\n", nw, rc);
	else
		printf("verdict: ready (exit status 0)\n");
	if (c->ns)
		printf("measured (information only, not part of the verdict):\n");
	for (int i = 0; i < c->ns; i++) {
		const struct sample *s = &c->s[i];
		if (!s->done)
			printf("  CPU %d: not measured: %s\n", s->cpu, s->why);
		else
			printf("  CPU %d: %.1f s busy loop: largest gap %.1f us, %llu gap(s) over 10 us, %lld local timer interrupt(s)\n",
			       s->cpu, s->seconds, (double)s->max_gap_ns / 1000.0, (unsigned long long)s->gaps, s->loc);
	}
}

static int write_json(const struct check *c, FILE *out, int rc)
{
	struct run_header h;
	struct json j;
	int nw, nb;

	run_header_init(&h, cli_argc, cli_argv);
	h.tsc_hz = c->tsc.hz;
	json_init(&j, out);
	json_object_begin(&j, NULL);
	json_common_header(&j, &h, rc);
	json_str(&j, "cpus", c->cpus_s);
	json_str(&j, "housekeeping", c->hk_s);
	if (c->have_part) {
		char buf[256];
		json_object_begin(&j, "partition");
		json_str(&j, "dir", c->part.dir);
		json_str(&j, "cgroup", c->part.kind == CG_V1 ? "v1" : "v2");
		json_str(&j, "cpus", cpulist_format(&c->part.cpus, buf, sizeof(buf)));
		json_bool(&j, "valid", c->part.valid);
		json_object_end(&j);
	} else {
		json_null(&j, "partition");
	}
	verdict(c, &nw, &nb);
	json_str(&j, "verdict", rc == CHECK_BLOCKED ? "blocked" : rc == CHECK_WARNINGS ? "warnings" : "ready");
	json_int(&j, "warnings", nw);
	json_int(&j, "blocks", nb);
	json_array_begin(&j, "findings");
	for (int i = 0; i < c->n; i++) {
		const struct finding *f = &c->f[i];
		json_object_begin(&j, NULL);
		json_str(&j, "id", f->id);
		json_str(&j, "category", f->category);
		json_str(&j, "severity", sev_name[f->sev]);
		if (f->cpu >= 0)
			json_int(&j, "cpu", f->cpu);
		else
			json_null(&j, "cpu");
		json_str(&j, "what", f->what);
		if (f->fix[0])
			json_str(&j, "fix", f->fix);
		else
			json_null(&j, "fix");
		json_bool(&j, "fixed_by_isolate", f->by_isolate);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array_begin(&j, "samples");
	for (int i = 0; i < c->ns; i++) {
		const struct sample *s = &c->s[i];
		json_object_begin(&j, NULL);
		json_int(&j, "cpu", s->cpu);
		json_bool(&j, "measured", s->done);
		if (s->done) {
			json_double(&j, "seconds", s->seconds);
			json_uint(&j, "max_gap_ns", s->max_gap_ns);
			json_uint(&j, "gaps_over_10us", s->gaps);
			json_int(&j, "local_timer_interrupts", s->loc);
		} else {
			json_str(&j, "why", s->why);
		}
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object_end(&j);
	return ferror(out) ? -EIO : 0;
}

static int check_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "json", optional_argument, NULL, 'j' },
		{ "sample", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct check c;
	const char *cpu_arg = NULL, *json_file = NULL;
	bool json = false;
	int opt, rc;

	memset(&c, 0, sizeof(c));
	c.sample_ns = 2000000000ull;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': cpu_arg = optarg; break;
		case 'j': json = true; json_file = optarg; break;
		case 's':
			if (duration_parse(optarg, &c.sample_ns)) {
				cli_err("bad duration '%s' for --sample", optarg);
				cli_note("durations look like 2s, 500ms or 0");
				return EXIT_USAGE;
			}
			break;
		case 'h': return usage(0);
		default:
			cli_err("bad option '%s'", argv[optind - 1]);
			cli_note("'detach check --help' lists the options");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_err("unexpected argument '%s'", argv[optind]);
		cli_note("'detach check --help' lists the options");
		return EXIT_USAGE;
	}
	if (cpus_online(&c.online)) {
		cli_err("cannot read the online CPUs");
		return 1;
	}
	c.have_part = partition_find(&c.part) == 0;
	if (cpu_arg) {
		if (parse_cpu_option(cpu_arg, &c.cpus))
			return EXIT_USAGE;
	} else if (c.have_part && CPU_COUNT(&c.part.cpus)) {
		c.cpus = c.part.cpus;
	} else {
		CPU_ZERO(&c.cpus);
		for (int i = CPU_SETSIZE - 1; i >= 0; i--)
			if (CPU_ISSET(i, &c.online)) {
				CPU_SET(i, &c.cpus);
				break;
			}
	}
	CPU_XOR(&c.hk, &c.online, &c.cpus);
	CPU_AND(&c.hk, &c.hk, &c.online);
	cpulist_format(&c.cpus, c.cpus_s, sizeof(c.cpus_s));
	cpulist_format(&c.hk, c.hk_s, sizeof(c.hk_s));
	if (journal_load(&c.j, ISOLATE_STATE_FILE))
		memset(&c.j, 0, sizeof(c.j));

	if (!CPU_COUNT(&c.hk))
		add(&c, "housekeeping", "partition", S_BLOCK, -1, false, "list fewer CPUs: proxies need a housekeeping CPU",
		    "CPU list %s leaves no housekeeping CPU for the proxies", c.cpus_s);
	check_kernel(&c);
	check_cpus(&c);
	check_irqs(&c);
	check_workqueues(&c);
	check_tasks(&c);
	check_memory(&c);
	{
		int nw, nb;
		rc = verdict(&c, &nw, &nb);
	}
	run_samples(&c);

	if (!json || json_file)
		print_text(&c, rc);
	if (json) {
		FILE *f = json_file ? fopen(json_file, "we") : stdout;
		if (!f) {
			cli_err("cannot write %s: %s", json_file, strerror(errno));
			return 1;
		}
		if (write_json(&c, f, rc) || (json_file && fclose(f))) {
			cli_err("cannot write the JSON output");
			return 1;
		}
	}
	free(c.f);
	free(c.s);
	journal_free(&c.j);
	return rc;
}

DETACH_VERB(verb_check) = { "check", "audit this machine for detached execution, with fixes", check_main };
