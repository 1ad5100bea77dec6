/* detach check: per-CPU probes (each called once per listed CPU): SMT
 * siblings, partition membership, cpufreq governor, idle states. */
#include "cli/check.h"

#include <string.h>

void probe_smt(struct check *c, int cpu)
{
	char path[256], buf[1024], sib[256], fix[512];
	cpu_set_t set;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
	if (read_text_file(path, buf, sizeof(buf)) || cpulist_parse(buf, &set))
		return;
	CPU_CLR(cpu, &set);
	if (!CPU_COUNT(&set)) {
		check_add(c, "smt", S_OK, cpu, false, NULL, "CPU %d has no SMT sibling", cpu);
		return;
	}
	cpulist_format(&set, sib, sizeof(sib));
	snprintf(fix, sizeof(fix), "keep CPU %s idle (isolate it too) or turn SMT off: echo off > /sys/devices/system/cpu/smt/control", sib);
	check_add(c, "smt", S_WARN, cpu, false, fix,
		          "CPU %d shares its core with CPU %s: work there slows it down", cpu, sib);
}

void probe_partition(struct check *c, int cpu)
{
	char fix[512];

	if (c->have_part && c->part.valid && CPU_ISSET(cpu, &c->part.cpus)) {
		check_add(c, "partition", S_OK, cpu, true, NULL, "CPU %d is in the detach partition %s", cpu, c->part.dir);
		return;
	}
	snprintf(fix, sizeof(fix), "detach isolate -c %s", c->cpus_s);
	check_add(c, "partition", S_WARN, cpu, true, fix,
		          "CPU %d is not in a detach partition: the scheduler balances load onto it", cpu);
}

void probe_cpufreq(struct check *c, int cpu)
{
	char path[256], buf[1024], fix[512];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", cpu);
	if (read_text_file(path, buf, sizeof(buf))) {
		check_add(c, "cpufreq", S_INFO, cpu, false, NULL, "CPU %d: no cpufreq (the firmware or hypervisor sets the clock)", cpu);
	} else if (!strcmp(buf, "performance")) {
		check_add(c, "cpufreq", S_OK, cpu, false, NULL, "CPU %d: cpufreq governor performance", cpu);
	} else {
		snprintf(fix, sizeof(fix), "echo performance > %s", path);
		check_add(c, "cpufreq", S_WARN, cpu, false, fix,
			          "CPU %d: cpufreq governor %s changes the clock under the thread", cpu, buf);
	}
}

/* Enabled idle states with a nonzero exit latency. */
void probe_idle(struct check *c, int cpu)
{
	char path[256], states[512] = "", fix[512];
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
	if (!o) {
		check_add(c, "idle", S_OK, cpu, false, NULL, "CPU %d: no idle state with exit latency enabled", cpu);
		return;
	}
	snprintf(fix, sizeof(fix), "echo 1 > /sys/devices/system/cpu/cpu%d/cpuidle/stateN/disable for those, or boot with idle=poll", cpu);
	check_add(c, "idle", S_INFO, cpu, false, fix,
		          "CPU %d may enter idle states with exit latency: %s (a busy detached thread never idles; waits may)", cpu, states);
}
