/* detach isolate: applying it.  Every value is journaled (old value,
 * fsynced) before it is changed, so that a crash at any point leaves a state
 * file --undo can restore from; see journal.h for the record format and
 * docs/isolate.md for the steps. */
#include "cli/cli.h"
#include "cli/isolate.h"
#include "lib/undo_log.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- changing one value -------------------------------------------------- */

void iso_changed(struct iso *s)
{
	s->changes++;
	if (!s->dry && s->pause_after > 0 && s->changes >= s->pause_after) {
		fprintf(stderr, "detach: test hook DETACH_TEST_PAUSE_AFTER: paused after %d changes\n",
			s->changes);
		fflush(stdout);
		for (;;)
			pause();
	}
}

int iso_record(struct iso *s, const char *line)
{
	int err;

	if (s->dry)
		return 0;
	if ((err = journal_append(&s->j, line))) {
		cli_err("cannot write the state file %s: %s", ISOLATE_STATE_FILE, strerror(-err));
		s->failures++;
	}
	return err;
}

static bool same_value(enum vtype t, const char *a, const char *b)
{
	cpu_set_t x, y;

	if (t == V_LIST && !cpulist_parse(a, &x) && !cpulist_parse(b, &y))
		return CPU_EQUAL(&x, &y);
	if (t == V_HEX && !hexmask_parse(a, &x) && !hexmask_parse(b, &y))
		return CPU_EQUAL(&x, &y);
	return !strcmp(a, b);
}

int iso_set(struct iso *s, const char *path, const char *v, enum vtype t)
{
	char old[1024], esc[1100], line[1700];
	int err;

	if ((err = read_text_file(path, old, sizeof(old))))
		return err;
	if (same_value(t, old, v))
		return 1;
	if (s->dry) {
		printf("would set %s: %s -> %s\n", path, old, v);
		iso_changed(s);
		return 0;
	}
	if (!journal_has_write(&s->j, path) && !journal_in_made_dir(&s->j, path)) {
		undo_log_escape(old, esc, sizeof(esc));
		snprintf(line, sizeof(line), "write %s\t%s", path, esc);
		if ((err = iso_record(s, line)))
			return err;
	}
	if ((err = write_text_file(path, v)))
		return err;
	printf("set %s: %s -> %s\n", path, old, v);
	iso_changed(s);
	return 0;
}

int iso_must_set(struct iso *s, const char *path, const char *v, enum vtype t)
{
	int err = iso_set(s, path, v, t);

	if (err < 0) {
		cli_err("cannot set %s to %s: %s", path, v, strerror(-err));
		s->failures++;
	}
	return err < 0 ? err : 0;
}

/* A CPU mask with the isolated CPUs taken out; the housekeeping CPUs if
 * nothing would be left. */
static void without_isolated(const struct iso *s, const cpu_set_t *in, cpu_set_t *out)
{
	cpu_set_t iso = s->cpus;

	CPU_XOR(out, in, &iso);
	CPU_AND(out, out, in);
	if (!CPU_COUNT(out))
		*out = s->hk;
}

int iso_move_mask(struct iso *s, const char *path, enum vtype t, bool report)
{
	char cur[1024], nv[1024];
	cpu_set_t set, out;
	int err;

	if ((err = read_text_file(path, cur, sizeof(cur))))
		return err;
	if ((t == V_HEX ? hexmask_parse(cur, &set) : cpulist_parse(cur, &set)))
		return -EINVAL;
	without_isolated(s, &set, &out);
	if (t == V_HEX)
		hexmask_format(&out, nv, sizeof(nv));
	else
		cpulist_format(&out, nv, sizeof(nv));
	err = iso_set(s, path, nv, t);
	if (err < 0 && report) {
		cli_warn("cannot set %s to %s: %s", path, nv, strerror(-err));
		s->failures++;
	}
	return err;
}

/* ---- everything outside cgroups ------------------------------------------ */

static void move_irqs(struct iso *s)
{
	DIR *d = opendir("/proc/irq");
	struct dirent *de;
	char path[PATH_MAX], name[256], line[128];
	int err;

	if (!d)
		return;
	while ((de = readdir(d))) {
		int irq;
		char *end;

		irq = (int)strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name)
			continue;
		snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", irq);
		err = iso_move_mask(s, path, V_LIST, false);
		if (err >= 0 || err == -ENOENT)
			continue;
		/* Managed IRQs (multiqueue devices) refuse with EIO; some chips
		 * refuse with EPERM or EINVAL: the kernel keeps them. */
		irq_name(irq, name, sizeof(name));
		printf("IRQ %d (%s): affinity cannot be changed (%s): managed by the kernel, stays\n",
		       irq, name, strerror(-err));
		snprintf(line, sizeof(line), "unmovable-irq %d %d", irq, -err);
		iso_record(s, line);
	}
	closedir(d);
	iso_move_mask(s, "/proc/irq/default_smp_affinity", V_HEX, true);
}

static void move_workqueues(struct iso *s)
{
	DIR *d;
	struct dirent *de;
	char path[PATH_MAX];

	if (iso_move_mask(s, "/sys/devices/virtual/workqueue/cpumask", V_HEX, false) == -ENOENT)
		printf("no global workqueue cpumask here (kernel without it)\n");
	d = opendir("/sys/bus/workqueue/devices");
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/workqueue/devices/%s/cpumask", de->d_name);
		if (access(path, F_OK) == 0)
			iso_move_mask(s, path, V_HEX, true);
	}
	closedir(d);
}

int isolate_apply(struct iso *s)
{
	char buf[1024];
	cpu_set_t prev;
	const char *env;

	env = getenv("DETACH_TEST_PAUSE_AFTER");
	if (env)
		s->pause_after = strtol(env, NULL, 10);
	if (cpuset_hierarchy(&s->cg)) {
		cli_err("no cpuset controller is mounted");
		cli_note("mount it: mkdir -p /sys/fs/cgroup/cpuset && mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset");
		return 1;
	}
	if (!s->dry) {
		if (journal_lock() < 0)
			return 1;
		if (journal_load(&s->j, ISOLATE_STATE_FILE) == 0 &&
		    journal_config_cpus(&s->j, &prev) == 0 && !CPU_EQUAL(&prev, &s->cpus)) {
			cli_err("CPUs %s are isolated already; this asks for %s",
				cpulist_format(&prev, buf, sizeof(buf)), s->cpus_s);
			cli_note("run 'detach isolate --undo' first");
			return 1;
		}
		journal_free(&s->j);
		snprintf(buf, sizeof(buf), "cpus=%s hk=%s backend=v%d root=%s",
			 s->cpus_s, s->hk_s, (int)s->cg.kind, s->cg.root);
		if (journal_open(&s->j, buf))
			return 1;
	} else {
		journal_load(&s->j, ISOLATE_STATE_FILE);
	}

	printf("%s CPU %s for detached threads, housekeeping CPU %s (cgroup v%d cpuset at %s)\n",
	       s->dry ? "dry run: would isolate" : "isolating", s->cpus_s, s->hk_s, (int)s->cg.kind, s->cg.root);
	if (s->cg.kind == CG_V1)
		isolate_cgroup_v1(s);
	else
		isolate_cgroup_v2(s);
	if (!s->failures) {
		move_irqs(s);
		move_workqueues(s);
		if (access("/proc/sys/kernel/watchdog_cpumask", F_OK) == 0)
			iso_move_mask(s, "/proc/sys/kernel/watchdog_cpumask", V_LIST, true);
		iso_must_set(s, "/proc/sys/kernel/sched_rt_runtime_us", "-1", V_TEXT);
	}
	if (s->failures) {
		cli_err("%d step(s) failed; %d change(s) made", s->failures, s->changes);
		if (!s->dry)
			cli_note("every change is saved in %s: 'detach isolate --undo' reverts them", ISOLATE_STATE_FILE);
		return 1;
	}
	if (s->dry)
		printf("dry run: %d change(s) would be made; nothing was changed\n", s->changes);
	else if (s->changes)
		printf("done: %d change(s), saved in %s; 'detach isolate --undo' reverts them\n",
		       s->changes, ISOLATE_STATE_FILE);
	else
		printf("done: already isolated, nothing to change\n");
	return 0;
}
