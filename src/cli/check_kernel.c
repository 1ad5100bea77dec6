/* detach check: probes of the kernel, its boot options, the clock and RT
 * throttling (one function per finding id, in check.c's table). */
#include "cli/check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#endif

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

/* Whether CONFIG_NAME=y. */
static bool kconfig_y(const char *name)
{
	char y[16];

	return kconfig(name, y, sizeof(y)) && !strcmp(y, "y");
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

/* Syscall User Dispatch: the runtime's way of catching syscalls. */
void probe_sud(struct check *c, int cpu)
{
	(void)cpu;
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0) == 0)
		check_add(c, "sud", S_OK, -1, false, NULL, "Syscall User Dispatch is available");
	else
		check_add(c, "sud", S_BLOCK, -1, false, "a kernel 5.11 or newer built with generic entry (x86-64 has it)",
			          "Syscall User Dispatch is not available (%s): detach run cannot catch system calls", strerror(errno));
}

/* The preemption model: debugfs, then preempt=, then the kernel config. */
void probe_preempt(struct check *c, int cpu)
{
	static const struct { const char *config, *model; } models[] = {
		{ "CONFIG_PREEMPT_RT", "rt" }, { "CONFIG_PREEMPT_LAZY", "lazy" },
		{ "CONFIG_PREEMPT", "full" }, { "CONFIG_PREEMPT_VOLUNTARY", "voluntary" },
		{ "CONFIG_PREEMPT_NONE", "none" },
	};
	char buf[1024], v[256] = "";
	struct utsname u;

	(void)cpu;
	uname(&u);
	if (read_text_file("/sys/kernel/debug/sched/preempt", buf, sizeof(buf)) == 0) {
		char *o = strchr(buf, '('), *e = o ? strchr(o, ')') : NULL;
		if (o && e)
			snprintf(v, sizeof(v), "%.*s", (int)(e - o - 1), o + 1);
	}
	if (!v[0])
		cmdline_arg(c->cmdline, "preempt", v, sizeof(v));
	if (!v[0] && strstr(u.version, "PREEMPT_RT"))
		snprintf(v, sizeof(v), "rt");
	for (size_t i = 0; !v[0] && i < sizeof(models) / sizeof(models[0]); i++)
		if (kconfig_y(models[i].config))
			snprintf(v, sizeof(v), "%s", models[i].model);
	if (!v[0])
		check_add(c, "preempt", S_INFO, -1, false, NULL,
			          "preemption model unknown (no debugfs, no preempt= and no kernel config; uname -v: %s)", u.version);
	else if (!strcmp(v, "none") || !strcmp(v, "voluntary"))
		check_add(c, "preempt", S_INFO, -1, false,
			          strstr(u.version, "PREEMPT_DYNAMIC") ? "boot with preempt=full (this kernel is PREEMPT_DYNAMIC)" : "a kernel with CONFIG_PREEMPT",
			          "preemption model %s: forwarded calls and Linux threads wait longer for the CPU; detached threads do not enter the kernel", v);
	else
		check_add(c, "preempt", S_OK, -1, false, NULL, "preemption model %s", v);
}

void probe_hz(struct check *c, int cpu)
{
	char v[256];

	(void)cpu;
	if (kconfig("CONFIG_HZ", v, sizeof(v)))
		check_add(c, "hz", S_INFO, -1, false, NULL, "the tick runs at %s Hz", v);
}

void probe_nohz_full(struct check *c, int cpu)
{
	char buf[1024], hz[256], fix[300];
	cpu_set_t set, miss;
	bool have;

	(void)cpu;
	if (cmdline_arg(c->cmdline, "nohz_full", buf, sizeof(buf)) && cmdline_cpus(buf, &set)) {
		CPU_XOR(&miss, &c->cpus, &set);
		CPU_AND(&miss, &miss, &c->cpus);
		if (CPU_COUNT(&miss))
			check_add(c, "nohz_full", S_WARN, -1, false, "boot with nohz_full covering them",
				          "nohz_full=%s does not cover CPU %s: the tick interrupts them", buf, cpulist_format(&miss, fix, sizeof(fix)));
		else
			check_add(c, "nohz_full", S_OK, -1, false, NULL, "nohz_full=%s: the tick stops on a CPU with one task", buf);
		return;
	}
	if (!kconfig("CONFIG_HZ", hz, sizeof(hz)))
		snprintf(hz, sizeof(hz), "?");
	have = kconfig_y("CONFIG_NO_HZ_FULL");
	snprintf(fix, sizeof(fix), "%sboot with nohz_full=%s",
		 have ? "" : "a kernel with CONFIG_NO_HZ_FULL, ", c->cpus_s);
	check_add(c, "nohz_full", S_WARN, -1, false, fix,
		          "no nohz_full: the %s Hz tick interrupts CPU %s even with one task%s", hz, c->cpus_s,
		          have ? "" : " (this kernel has no NO_HZ_FULL)");
}

void probe_isolcpus(struct check *c, int cpu)
{
	char buf[1024], fix[300];

	(void)cpu;
	if (cmdline_arg(c->cmdline, "isolcpus", buf, sizeof(buf))) {
		check_add(c, "isolcpus", S_INFO, -1, false, NULL, "isolcpus=%s on the command line", buf);
		return;
	}
	snprintf(fix, sizeof(fix), "boot with isolcpus=managed_irq,%s to keep managed IRQs off them", c->cpus_s);
	check_add(c, "isolcpus", S_INFO, -1, false, fix,
		          "no isolcpus (not needed: the detach partition isolates at run time, except managed IRQs)");
}

void probe_rcu_nocbs(struct check *c, int cpu)
{
	char buf[1024], fix[300];

	(void)cpu;
	if (cmdline_arg(c->cmdline, "rcu_nocbs", buf, sizeof(buf))) {
		check_add(c, "rcu_nocbs", S_OK, -1, false, NULL, "rcu_nocbs=%s", buf);
		return;
	}
	snprintf(fix, sizeof(fix), "boot with rcu_nocbs=%s", c->cpus_s);
	check_add(c, "rcu_nocbs", S_INFO, -1, false, fix,
		          "no rcu_nocbs: RCU callbacks queued on CPU %s run there", c->cpus_s);
}

void probe_irqaffinity(struct check *c, int cpu)
{
	char buf[1024];

	(void)cpu;
	if (cmdline_arg(c->cmdline, "irqaffinity", buf, sizeof(buf)))
		check_add(c, "irqaffinity", S_OK, -1, false, NULL, "irqaffinity=%s", buf);
	else
		check_add(c, "irqaffinity", S_INFO, -1, false, NULL,
			          "no irqaffinity: IRQs start on every CPU (detach isolate moves the movable ones)");
}

void probe_clocksource(struct check *c, int cpu)
{
	char buf[1024];

	(void)cpu;
	if (read_text_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof(buf)))
		return;
	if (!strcmp(buf, "tsc"))
		check_add(c, "clocksource", S_OK, -1, false, NULL, "clocksource is tsc");
	else
		check_add(c, "clocksource", S_WARN, -1, false,
			          "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource (if listed in available_clocksource)",
			          "clocksource is %s, not tsc: the kernel distrusts the TSC, which detached timed waits use", buf);
}

void probe_tsc(struct check *c, int cpu)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[8192];
	bool constant = false, nonstop = false;

	(void)cpu;
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
		check_add(c, "tsc", S_OK, -1, false, NULL, "TSC is constant and nonstop");
	else
		check_add(c, "tsc", S_BLOCK, -1, false, "a machine (or VM) with an invariant TSC",
			          "TSC is%s%s: detached timed waits count TSC cycles and would be wrong",
			          constant ? "" : " not constant", nonstop ? "" : " not nonstop");
}

void probe_rt_throttling(struct check *c, int cpu)
{
	long l;

	(void)cpu;
	if (read_long_file("/proc/sys/kernel/sched_rt_runtime_us", &l))
		return;
	if (l < 0)
		check_add(c, "rt_throttling", S_OK, -1, true, NULL, "RT throttling is off (sched_rt_runtime_us=-1)");
	else
		check_add(c, "rt_throttling", S_WARN, -1, true,
			          "detach isolate (sets it to -1), or sysctl kernel.sched_rt_runtime_us=-1",
			          "RT throttling is on (sched_rt_runtime_us=%ld): a busy SCHED_FIFO thread may be stopped every second", l);
}
