/* detach check: what can reach the listed CPUs: IRQs, workqueue and
 * watchdog masks, the default IRQ affinity, tasks and kernel threads. */
#include "cli/check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool irq_unmovable(const struct check *c, int irq)
{
	char path[128], buf[4096];

	for (int i = 0; i < c->j.n; i++)
		if (c->j.e[i].kind == J_UNMOVABLE_IRQ && c->j.e[i].irq == irq)
			return true;
	snprintf(path, sizeof(path), "/sys/kernel/debug/irq/irqs/%d", irq);
	return read_text_file(path, buf, sizeof(buf)) == 0 && strstr(buf, "AFFINITY_MANAGED");
}

void probe_irqs(struct check *c, int cpu)
{
	DIR *d = opendir("/proc/irq");
	struct dirent *de;
	char path[300], aff[256], eff[256], name[256], fix[512];
	int found = 0;

	(void)cpu;
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
			check_add(c, "irq", S_WARN, -1, false, fix,
			          "IRQ %d (%s) can be delivered to the listed CPUs (affinity %s, effective %s) and is managed by the kernel: it cannot be moved",
			          irq, name, aff, eff);
		} else {
			snprintf(fix, sizeof(fix), "detach isolate -c %s (or echo %s > /proc/irq/%d/smp_affinity_list)", c->cpus_s, c->hk_s, irq);
			check_add(c, "irq", S_WARN, -1, true, fix,
			          "IRQ %d (%s) can be delivered to the listed CPUs (affinity %s, effective %s)", irq, name, aff, eff);
		}
	}
	if (d)
		closedir(d);
	if (!found)
		check_add(c, "irq", S_OK, -1, true, NULL, "no IRQ has the listed CPUs in its affinity");
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
		check_add(c, id, S_WARN, -1, true, fix, "%s includes the listed CPUs (%s: %s)", what, path, buf);
	} else {
		check_add(c, id, S_OK, -1, true, NULL, "%s excludes the listed CPUs (%s)", what, buf);
	}
}

/* The global unbound workqueue cpumask, then each workqueue's own. */
void probe_workqueues(struct check *c, int cpu)
{
	DIR *d = opendir("/sys/bus/workqueue/devices");
	struct dirent *de;
	char path[600], what[300];

	(void)cpu;
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
}

void probe_watchdog(struct check *c, int cpu)
{
	(void)cpu;
	check_mask_file(c, "watchdog", "/proc/sys/kernel/watchdog_cpumask", false, "the lockup watchdog cpumask (a timer every few seconds)");
}

void probe_irq_default(struct check *c, int cpu)
{
	(void)cpu;
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

/* Every task allowed on the listed CPUs, in four findings: "tasks" (movable:
 * isolate moves them), "percpu_kthreads", "kthreads" (placed by the kernel),
 * "in_partition" (detached threads). */
void probe_tasks(struct check *c, int cpu)
{
	DIR *pd = opendir("/proc");
	struct dirent *p;
	char movable[700] = "", pinned[700] = "", fixed[700] = "", inpart[700] = "", fix[300];
	int nmov = 0, npin = 0, nfix = 0, npart = 0;
	pid_t self = getpid();

	(void)cpu;
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
			/* a zombie never runs again, and no cpuset takes it */
			if (strchr("ZX", task_state(tid) ?: 'X'))
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
		check_add(c, "tasks", S_WARN, -1, true, fix,
		          "%d task(s) may run on the listed CPUs: %s", nmov, movable);
	} else {
		check_add(c, "tasks", S_OK, -1, true, NULL, "no movable task may run on the listed CPUs");
	}
	if (npin)
		check_add(c, "percpu_kthreads", S_INFO, -1, false, NULL,
		          "%d per-CPU kernel thread(s) bound to the listed CPUs (they stay; they run when that CPU has work for them): %s", npin, pinned);
	if (nfix)
		check_add(c, "kthreads", S_INFO, -1, false, NULL,
		          "%d kernel thread(s) the kernel places itself may run there (workqueue rescuers, kthreadd; idle unless needed): %s", nfix, fixed);
	if (npart)
		check_add(c, "in_partition", S_INFO, -1, false, NULL,
		          "%d thread(s) in the detach partition (detached threads): %s", npart, inpart);
}
