/* detach isolate: make the listed CPUs a partition for detached threads, and
 * put everything back with --undo.
 *
 * Every value is journaled (old value, fsynced) before it is changed, so that
 * a crash at any point leaves a state file --undo can restore from; see
 * isolation.h for the record format and docs/isolate.md for the steps. */
#include "cli/cli.h"
#include "cli/isolation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum vtype { V_TEXT, V_LIST, V_HEX };

struct iso {
	cpu_set_t cpus, hk;
	char cpus_s[256], hk_s[256];
	bool dry;
	bool zero_page;
	struct partition cg;     /* kind and root of the cpuset hierarchy */
	struct journal j;
	int changes;             /* changes made (or planned, dry run) by this run */
	long pause_after;        /* test hook DETACH_TEST_PAUSE_AFTER */
	int failures;            /* steps that failed */
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: detach isolate -c LIST [--dry-run] [--allow-zero-page]\n"
"       detach isolate --undo\n"
"\n"
"Makes the listed CPUs a partition for detached threads: a cpuset of their own\n"
"(cgroup v2 isolated partition, or on cgroup v1 an exclusive cpuset with load\n"
"balancing off at the root), every movable task and kernel thread moved to the\n"
"other (housekeeping) CPUs, movable IRQs, the default IRQ affinity, the workqueue\n"
"cpumasks and the watchdog cpumask moved, RT throttling off\n"
"(sched_rt_runtime_us=-1).  Prints each change.  Needs root.\n"
"\n"
"The previous value of everything it changes is saved first, in\n"
ISOLATE_STATE_FILE " (root only), so --undo restores it even after a crash.\n"
"Running isolate again with the same CPUs is harmless.\n"
"\n"
"  -c, --cpu LIST        CPUs to isolate, like 3 or 2-5,8; at least one online\n"
"                        CPU must stay outside the list for housekeeping\n"
"  -n, --dry-run         print what would change, change nothing (no root needed)\n"
"      --allow-zero-page also set vm.mmap_min_addr=0, which the rewrite mode of\n"
"                        `detach run` needs; see the security note in docs\n"
"  -u, --undo            restore every saved value, report what could not be\n"
"                        restored (a task that exited, an IRQ that vanished),\n"
"                        remove the state file\n"
"  -h, --help            this text\n"
"\n"
"Exit status: 0 done; 1 a step failed, or not root (what was changed is saved\n"
"and --undo restores it); 2 bad usage.\n");
	return status;
}

/* ---- changing one value -------------------------------------------------- */

static void changed(struct iso *s)
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

static int record(struct iso *s, const char *line)
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

/* Files in a cgroup this tool made go away with it: no need to save them. */
static bool in_made_dir(const struct iso *s, const char *path)
{
	for (int i = 0; i < s->j.n; i++) {
		size_t n = strlen(s->j.e[i].path);
		if (s->j.e[i].kind == J_MKDIR && !strncmp(path, s->j.e[i].path, n) && path[n] == '/')
			return true;
	}
	return false;
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

/* Sets path to v, journaling its old value first (once: a second isolate
 * keeps the original).  1: already so, 0: changed (or would be), -errno:
 * reading or writing failed (not reported: the caller knows what it means). */
static int set_value(struct iso *s, const char *path, const char *v, enum vtype t)
{
	char old[1024], esc[1100], line[1700];
	int err;

	if ((err = read_text_file(path, old, sizeof(old))))
		return err;
	if (same_value(t, old, v))
		return 1;
	if (s->dry) {
		printf("would set %s: %s -> %s\n", path, old, v);
		changed(s);
		return 0;
	}
	if (!journal_has_write(&s->j, path) && !in_made_dir(s, path)) {
		value_escape(old, esc, sizeof(esc));
		snprintf(line, sizeof(line), "write %s\t%s", path, esc);
		if ((err = record(s, line)))
			return err;
	}
	if ((err = write_text_file(path, v)))
		return err;
	printf("set %s: %s -> %s\n", path, old, v);
	changed(s);
	return 0;
}

/* set_value for a step that must work: reports a failure. */
static int must_set(struct iso *s, const char *path, const char *v, enum vtype t)
{
	int err = set_value(s, path, v, t);

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

/* A file holding a CPU list or hex mask: take the isolated CPUs out. */
static int move_mask_file(struct iso *s, const char *path, enum vtype t, bool report)
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
	err = set_value(s, path, nv, t);
	if (err < 0 && report) {
		cli_warn("cannot set %s to %s: %s", path, nv, strerror(-err));
		s->failures++;
	}
	return err;
}

/* ---- cgroup v1 ----------------------------------------------------------- */

static int make_cgroup(struct iso *s, const char *dir)
{
	char line[600];

	if (s->dry) {
		struct stat st;
		if (stat(dir, &st))
			printf("would create cpuset %s\n", dir);
		return 0;
	}
	if (!journal_has_mkdir(&s->j, dir)) {
		if (access(dir, F_OK) == 0) {
			cli_err("%s exists, but %s does not record creating it", dir, ISOLATE_STATE_FILE);
			cli_note("someone else made it; remove it (rmdir) if it is a leftover");
			s->failures++;
			return -EEXIST;
		}
		snprintf(line, sizeof(line), "mkdir %s", dir);
		if (record(s, line))
			return -EIO;
	}
	if (mkdir(dir, 0755) == 0) {
		printf("create cpuset %s\n", dir);
		changed(s);
	} else if (errno != EEXIST) {
		cli_err("cannot create %s: %s", dir, strerror(errno));
		s->failures++;
		return -errno;
	}
	return 0;
}

/* Shrinks existing cpusets below dir that use isolated CPUs, children first
 * (v1 wants a child's CPUs inside its parent's). */
static void shrink_others(struct iso *s, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (depth == 0 && (!strcmp(de->d_name, PARTITION_NAME) || !strcmp(de->d_name, PARTITION_HK_NAME)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		shrink_others(s, path, depth + 1);
		snprintf(path, sizeof(path), "%s/%s/cpuset.cpus", dir, de->d_name);
		move_mask_file(s, path, V_LIST, true);
	}
	closedir(d);
}

static void move_tasks_v1(struct iso *s, const char *hk_tasks)
{
	char path[PATH_MAX], comm[64];
	long *stuck = NULL;
	int nstuck = 0, moved = 0;

	snprintf(path, sizeof(path), "%s/tasks", s->cg.root);
	/* Tasks fork while we move them: go round until a pass moves nothing. */
	for (int pass = 0; pass < 8; pass++) {
		FILE *f = fopen(path, "re");
		long tid;
		int moved_now = 0;

		if (!f) {
			cli_err("cannot read %s: %s", path, strerror(errno));
			s->failures++;
			break;
		}
		while (fscanf(f, "%ld", &tid) == 1) {
			cpu_set_t aff;
			char list[512], line[700], buf[32];
			bool skip = false;
			int err;

			for (int i = 0; i < nstuck; i++)
				skip |= stuck[i] == tid;
			if (skip || tid == 0)
				continue;
			task_comm(tid, comm, sizeof(comm));
			if (s->dry) {
				/* per-CPU kernel threads would refuse: say so ahead */
				unsigned long fl = task_flags(tid);
				if (fl & PF_NO_SETAFFINITY_FLAG) {
					long *ns = realloc(stuck, sizeof(long) * (size_t)(nstuck + 1));
					if (ns) { stuck = ns; stuck[nstuck++] = tid; }
					continue;
				}
				printf("would move task %ld (%s) to %s\n", tid, comm, PARTITION_HK_NAME);
				changed(s);
				moved_now++;
				continue;
			}
			if (!journal_has_task(&s->j, tid)) {
				unsigned long long st = task_starttime(tid);
				if (!st || sched_getaffinity((pid_t)tid, sizeof(aff), &aff))
					continue;       /* exited */
				cpulist_format(&aff, list, sizeof(list));
				snprintf(line, sizeof(line), "task %ld %llu %s", tid, st, list);
				if (record(s, line))
					break;
			}
			snprintf(buf, sizeof(buf), "%ld", tid);
			err = write_text_file(hk_tasks, buf);
			if (err == -ESRCH)
				continue;
			/* kthreadd may not leave the root cpuset, but its affinity
			 * can be set; the task record above restores it on undo. */
			if (err && !(task_flags(tid) & PF_NO_SETAFFINITY_FLAG) &&
			    sched_getaffinity((pid_t)tid, sizeof(aff), &aff) == 0 &&
			    !CPU_EQUAL(&aff, &s->hk) &&
			    sched_setaffinity((pid_t)tid, sizeof(s->hk), &s->hk) == 0) {
				printf("pin task %ld (%s) to CPU %s: it cannot leave the root cpuset\n", tid, comm, s->hk_s);
				changed(s);
				continue;
			}
			if (err) {
				long *ns = realloc(stuck, sizeof(long) * (size_t)(nstuck + 1));
				if (ns) { stuck = ns; stuck[nstuck++] = tid; }
				continue;
			}
			printf("move task %ld (%s) to %s\n", tid, comm, PARTITION_HK_NAME);
			changed(s);
			moved_now++;
		}
		fclose(f);
		moved += moved_now;
		if (!moved_now || s->dry)
			break;
	}
	/* Of the threads that stay, only those allowed on the isolated CPUs
	 * matter: per-CPU threads of those CPUs and workqueue rescuers. */
	int nleft = 0;
	char names[900] = "";
	size_t o = 0;
	for (int i = 0; i < nstuck; i++) {
		cpu_set_t aff;
		if (sched_getaffinity((pid_t)stuck[i], sizeof(aff), &aff))
			continue;
		CPU_AND(&aff, &aff, &s->cpus);
		if (!CPU_COUNT(&aff))
			continue;
		nleft++;
		if (o < sizeof(names) - 80) {
			task_comm(stuck[i], comm, sizeof(comm));
			o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", o ? " " : "", comm);
		}
	}
	if (nleft)
		printf("%s %d kernel thread(s) allowed on CPU %s: the kernel places them (per-CPU threads, workqueue rescuers): %s%s\n",
		       s->dry ? "would leave" : "left", nleft, s->cpus_s, names, o >= sizeof(names) - 80 ? " ..." : "");
	(void)moved;
	free(stuck);
}

static int isolate_v1(struct iso *s)
{
	char hk[PATH_MAX], part[PATH_MAX], path[PATH_MAX + 32], mems[256];
	const char *R = s->cg.root;

	snprintf(hk, sizeof(hk), "%s/%s", R, PARTITION_HK_NAME);
	snprintf(part, sizeof(part), "%s/%s", R, PARTITION_NAME);
	snprintf(path, sizeof(path), "%s/cpuset.mems", R);
	if (read_text_file(path, mems, sizeof(mems)) || !mems[0])
		snprintf(mems, sizeof(mems), "0");

	/* Other cpusets may not overlap an exclusive one. */
	shrink_others(s, R, 0);

	/* Housekeeping cpuset first, so that tasks have somewhere to go. */
	if (make_cgroup(s, hk))
		return -1;
	if (!s->dry) {
		snprintf(path, sizeof(path), "%s/cpuset.cpus", hk);
		if (must_set(s, path, s->hk_s, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.mems", hk);
		if (must_set(s, path, mems, V_LIST))
			return -1;
	}
	if (make_cgroup(s, part))
		return -1;
	if (!s->dry) {
		snprintf(path, sizeof(path), "%s/cpuset.cpus", part);
		if (must_set(s, path, s->cpus_s, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.mems", part);
		if (must_set(s, path, mems, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.cpu_exclusive", part);
		if (must_set(s, path, "1", V_TEXT))
			return -1;
		/* No load balancing inside the partition: each CPU its own domain. */
		snprintf(path, sizeof(path), "%s/cpuset.sched_load_balance", part);
		if (must_set(s, path, "0", V_TEXT))
			return -1;
	}
	snprintf(path, sizeof(path), "%s/tasks", hk);
	move_tasks_v1(s, path);
	/* Last: with balancing off at the root, the scheduler's domains come from
	 * the children, and the partition (balance 0) is in none of them. */
	snprintf(path, sizeof(path), "%s/cpuset.sched_load_balance", R);
	return must_set(s, path, "0", V_TEXT);
}

/* ---- cgroup v2 (written for the unified hierarchy; not run on the v1 VMs
 * this was developed on, see docs/isolate.md) ------------------------------- */

static int isolate_v2(struct iso *s)
{
	char part[PATH_MAX], path[PATH_MAX + 32], buf[512];
	const char *R = s->cg.root;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", R);
	if (read_text_file(path, buf, sizeof(buf)) == 0 && !strstr(buf, "cpuset")) {
		char line[PATH_MAX + 64];
		if (s->dry) {
			printf("would enable the cpuset controller in %s\n", path);
		} else {
			snprintf(line, sizeof(line), "write %s\t-cpuset", path);
			if (!journal_has_write(&s->j, path) && record(s, line))
				return -1;
			if (write_text_file(path, "+cpuset")) {
				cli_err("cannot enable the cpuset controller in %s: %s", path, strerror(errno));
				s->failures++;
				return -1;
			}
			printf("set %s: +cpuset\n", path);
			changed(s);
		}
	}
	snprintf(part, sizeof(part), "%s/%s", R, PARTITION_NAME);
	if (make_cgroup(s, part))
		return -1;
	if (s->dry) {
		printf("would set %s/cpuset.cpus to %s and cpuset.cpus.partition to isolated\n", part, s->cpus_s);
		return 0;
	}
	/* Threaded, so that single threads of a process in the root cgroup can
	 * join (partition_add_thread); a partition works without it too. */
	snprintf(path, sizeof(path), "%s/cgroup.type", part);
	if (set_value(s, path, "threaded", V_TEXT) < 0)
		cli_warn("%s: cannot make it threaded; detached threads will need their whole process moved", part);
	snprintf(path, sizeof(path), "%s/cpuset.cpus", part);
	if (must_set(s, path, s->cpus_s, V_LIST))
		return -1;
	snprintf(path, sizeof(path), "%s/cpuset.cpus.partition", part);
	if (must_set(s, path, "isolated", V_TEXT))
		return -1;
	if (read_text_file(path, buf, sizeof(buf)) == 0 && strcmp(buf, "isolated")) {
		cli_err("the kernel did not accept the partition: %s", buf);
		cli_note("another cgroup claims CPU %s in its cpuset.cpus; 'detach isolate --undo' reverts", s->cpus_s);
		s->failures++;
		return -1;
	}
	/* Tasks elsewhere lose the partition's CPUs by themselves: the kernel
	 * takes them out of every other cgroup's effective CPUs. */
	return 0;
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
		err = move_mask_file(s, path, V_LIST, false);
		if (err >= 0 || err == -ENOENT)
			continue;
		/* Managed IRQs (multiqueue devices) refuse with EIO; some chips
		 * refuse with EPERM or EINVAL: the kernel keeps them. */
		irq_name(irq, name, sizeof(name));
		printf("IRQ %d (%s): affinity cannot be changed (%s): managed by the kernel, stays\n",
		       irq, name, strerror(-err));
		snprintf(line, sizeof(line), "unmovable-irq %d %d", irq, -err);
		record(s, line);
	}
	closedir(d);
	move_mask_file(s, "/proc/irq/default_smp_affinity", V_HEX, true);
}

static void move_workqueues(struct iso *s)
{
	DIR *d;
	struct dirent *de;
	char path[PATH_MAX];

	if (move_mask_file(s, "/sys/devices/virtual/workqueue/cpumask", V_HEX, false) == -ENOENT)
		printf("no global workqueue cpumask here (kernel without it)\n");
	d = opendir("/sys/bus/workqueue/devices");
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/workqueue/devices/%s/cpumask", de->d_name);
		if (access(path, F_OK) == 0)
			move_mask_file(s, path, V_HEX, true);
	}
	closedir(d);
}

static int open_state(struct iso *s)
{
	int fd;
	struct stat st;

	if (mkdir(ISOLATE_STATE_DIR, 0700) && errno != EEXIST) {
		cli_err("cannot create %s: %s", ISOLATE_STATE_DIR, strerror(errno));
		return -1;
	}
	fd = open(ISOLATE_STATE_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		cli_err("cannot open %s: %s", ISOLATE_STATE_FILE, strerror(errno));
		return -1;
	}
	fstat(fd, &st);
	journal_load(&s->j, ISOLATE_STATE_FILE);
	s->j.fd = fd;
	if (st.st_size == 0) {
		char line[700];
		int dfd;

		snprintf(line, sizeof(line), "config cpus=%s hk=%s backend=v%d root=%s",
			 s->cpus_s, s->hk_s, (int)s->cg.kind, s->cg.root);
		if (journal_append(&s->j, "detach-isolate 1") || journal_append(&s->j, line)) {
			cli_err("cannot write %s: %s", ISOLATE_STATE_FILE, strerror(errno));
			return -1;
		}
		/* the new directory entry must survive a crash too */
		dfd = open(ISOLATE_STATE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return 0;
}

/* Serializes isolate and undo runs. */
static int take_lock(void)
{
	int fd;

	mkdir(ISOLATE_STATE_DIR, 0700);
	fd = open(ISOLATE_STATE_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		if (fd >= 0 && errno == EWOULDBLOCK) {
			cli_err("another 'detach isolate' is running");
			cli_note("wait for it, or end it; a killed one leaves a state file that --undo restores");
		} else {
			cli_err("cannot lock %s/lock: %s", ISOLATE_STATE_DIR, strerror(errno));
		}
		return -1;
	}
	return fd;   /* held until exit */
}

static int do_isolate(struct iso *s)
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
		if (take_lock() < 0)
			return 1;
		if (journal_load(&s->j, ISOLATE_STATE_FILE) == 0 &&
		    journal_config_cpus(&s->j, &prev) == 0 && !CPU_EQUAL(&prev, &s->cpus)) {
			cli_err("CPUs %s are isolated already; this asks for %s",
				cpulist_format(&prev, buf, sizeof(buf)), s->cpus_s);
			cli_note("run 'detach isolate --undo' first");
			return 1;
		}
		journal_free(&s->j);
		if (open_state(s))
			return 1;
	} else {
		journal_load(&s->j, ISOLATE_STATE_FILE);
	}

	printf("%s CPU %s for detached threads, housekeeping CPU %s (cgroup v%d cpuset at %s)\n",
	       s->dry ? "dry run: would isolate" : "isolating", s->cpus_s, s->hk_s, (int)s->cg.kind, s->cg.root);
	if (s->cg.kind == CG_V1)
		isolate_v1(s);
	else
		isolate_v2(s);
	if (!s->failures) {
		move_irqs(s);
		move_workqueues(s);
		if (access("/proc/sys/kernel/watchdog_cpumask", F_OK) == 0)
			move_mask_file(s, "/proc/sys/kernel/watchdog_cpumask", V_LIST, true);
		must_set(s, "/proc/sys/kernel/sched_rt_runtime_us", "-1", V_TEXT);
		if (s->zero_page) {
			must_set(s, "/proc/sys/vm/mmap_min_addr", "0", V_TEXT);
			printf("security: vm.mmap_min_addr=0 lets any program map page 0, which turns kernel\n"
			       "  NULL-pointer bugs into exploits; --undo restores it\n");
		}
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

/* ---- undo ----------------------------------------------------------------- */

struct undo_report {
	int restored, unchanged, tasks, gone_tasks, gone_files, failed;
};

/* Moves every task of cgroup dir into root, so that dir can be removed. */
static void empty_cgroup(const char *dir, const char *root, enum cg_kind kind)
{
	static const char *v1[] = { "tasks", NULL };
	static const char *v2[] = { "cgroup.threads", "cgroup.procs", NULL };
	const char **files = kind == CG_V1 ? v1 : v2;
	char path[PATH_MAX], to[PATH_MAX];

	for (int pass = 0; pass < 4; pass++) {
		for (int i = 0; files[i]; i++) {
			FILE *f;
			long tid;

			snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
			snprintf(to, sizeof(to), "%s/%s", root, files[i]);
			if (!(f = fopen(path, "re")))
				continue;
			while (fscanf(f, "%ld", &tid) == 1) {
				char buf[32];
				snprintf(buf, sizeof(buf), "%ld", tid);
				write_text_file(to, buf);
			}
			fclose(f);
		}
	}
}

static int do_undo(void)
{
	struct journal j;
	struct undo_report r = { 0 };
	struct partition cg;
	char root[PATH_MAX] = "", buf[1100], comm[64];
	enum cg_kind kind = CG_NONE;
	int err;

	if (take_lock() < 0)
		return 1;
	err = journal_load(&j, ISOLATE_STATE_FILE);
	if (err == -ENOENT) {
		printf("nothing to undo: no %s\n", ISOLATE_STATE_FILE);
		return 0;
	}
	if (err) {
		cli_err("cannot read %s: %s", ISOLATE_STATE_FILE, strerror(-err));
		return 1;
	}
	for (int i = 0; i < j.n; i++) {
		int v;
		if (j.e[i].kind == J_CONFIG && sscanf(j.e[i].value, "%*s %*s backend=v%d root=%4000s", &v, root) == 2)
			kind = (enum cg_kind)v;
	}
	if (kind == CG_NONE && cpuset_hierarchy(&cg) == 0) {
		kind = cg.kind;
		snprintf(root, sizeof(root), "%s", cg.root);
	}

	/* Newest first: a change is undone after everything that built on it. */
	for (int i = j.n - 1; i >= 0; i--) {
		struct jentry *e = &j.e[i];

		switch (e->kind) {
		case J_WRITE: {
			bool made = false;
			for (int k = 0; k < j.n; k++) {
				size_t n = strlen(j.e[k].path);
				made |= j.e[k].kind == J_MKDIR && !strncmp(e->path, j.e[k].path, n) && e->path[n] == '/';
			}
			if (made)
				break;      /* goes with the cgroup */
			if (read_text_file(e->path, buf, sizeof(buf))) {
				printf("could not restore %s: it is gone%s\n", e->path,
				       !strncmp(e->path, "/proc/irq/", 10) ? " (the IRQ vanished)" : "");
				r.gone_files++;
				break;
			}
			if (!strcmp(buf, e->value)) {
				r.unchanged++;
				break;
			}
			err = write_text_file(e->path, e->value);
			if (err) {
				printf("could not restore %s to %s: %s\n", e->path, e->value, strerror(-err));
				r.failed++;
				break;
			}
			/* "-cpuset" into subtree_control reads back differently */
			read_text_file(e->path, buf, sizeof(buf));
			if (strcmp(buf, e->value) && e->value[0] != '-') {
				printf("restored %s, but it reads %s, not %s\n", e->path, buf, e->value);
				r.failed++;
				break;
			}
			printf("restored %s: %s\n", e->path, e->value);
			r.restored++;
			break;
		}
		case J_MKDIR:
			if (access(e->path, F_OK))
				break;
			empty_cgroup(e->path, root, kind);
			if (rmdir(e->path)) {
				printf("could not remove cpuset %s: %s\n", e->path, strerror(errno));
				r.failed++;
			} else {
				printf("removed cpuset %s\n", e->path);
				r.restored++;
			}
			break;
		case J_TASK: {
			cpu_set_t aff, now;
			char path[PATH_MAX + 16], tid[32];

			if (task_starttime(e->tid) != e->start) {
				printf("could not restore task %ld: it exited\n", e->tid);
				r.gone_tasks++;
				break;
			}
			snprintf(tid, sizeof(tid), "%ld", e->tid);
			snprintf(path, sizeof(path), "%s/tasks", root);
			write_text_file(path, tid);   /* fails for those that never moved */
			if (cpulist_parse(e->value, &aff))
				break;
			if (sched_getaffinity((pid_t)e->tid, sizeof(now), &now) == 0 && CPU_EQUAL(&now, &aff)) {
				r.tasks++;
				break;
			}
			if (sched_setaffinity((pid_t)e->tid, sizeof(aff), &aff)) {
				task_comm(e->tid, comm, sizeof(comm));
				if (errno == ESRCH) {
					printf("could not restore task %ld: it exited\n", e->tid);
					r.gone_tasks++;
				} else {
					printf("could not restore the affinity of task %ld (%s) to %s: %s\n",
					       e->tid, comm, e->value, strerror(errno));
					r.failed++;
				}
				break;
			}
			r.tasks++;
			break;
		}
		default:
			break;
		}
	}
	printf("undo: %d value(s) restored, %d already as saved, %d task(s) put back; "
	       "could not: %d exited task(s), %d vanished file(s), %d failure(s)\n",
	       r.restored, r.unchanged, r.tasks, r.gone_tasks, r.gone_files, r.failed);
	journal_free(&j);
	if (r.failed) {
		cli_err("%d value(s) could not be restored", r.failed);
		cli_note("%s is kept; fix the cause and run 'detach isolate --undo' again", ISOLATE_STATE_FILE);
		return 1;
	}
	if (unlink(ISOLATE_STATE_FILE) && errno != ENOENT) {
		cli_err("cannot remove %s: %s", ISOLATE_STATE_FILE, strerror(errno));
		return 1;
	}
	return 0;
}

static int isolate_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "allow-zero-page", no_argument, NULL, 'Z' },
		{ "undo", no_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct iso s;
	const char *cpu_arg = NULL;
	bool undo = false;
	cpu_set_t online;
	int c, rc;

	memset(&s, 0, sizeof(s));
	s.j.fd = -1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+c:nuh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': cpu_arg = optarg; break;
		case 'n': s.dry = true; break;
		case 'Z': s.zero_page = true; break;
		case 'u': undo = true; break;
		case 'h': return usage(0);
		default:
			cli_err("bad option '%s'", argv[optind - 1]);
			cli_note("'detach isolate --help' lists the options");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_err("unexpected argument '%s'", argv[optind]);
		cli_note("'detach isolate --help' lists the options");
		return EXIT_USAGE;
	}
	if (undo) {
		if (cpu_arg || s.dry || s.zero_page) {
			cli_err("--undo takes no other option");
			cli_note("it restores everything the state file records");
			return EXIT_USAGE;
		}
		if (geteuid() != 0) {
			cli_err("detach isolate --undo changes system settings: it must run as root");
			cli_note("run it with sudo");
			return 1;
		}
		return do_undo();
	}
	if (!cpu_arg) {
		cli_err("which CPUs? -c LIST is required");
		cli_note("for example 'detach isolate -c 1'; 'detach isolate --help' says more");
		return EXIT_USAGE;
	}
	if (parse_cpu_option(cpu_arg, &s.cpus))
		return EXIT_USAGE;
	if (cpus_online(&online)) {
		cli_err("cannot read the online CPUs");
		return 1;
	}
	CPU_XOR(&s.hk, &online, &s.cpus);
	CPU_AND(&s.hk, &s.hk, &online);
	cpulist_format(&s.cpus, s.cpus_s, sizeof(s.cpus_s));
	cpulist_format(&s.hk, s.hk_s, sizeof(s.hk_s));
	if (!CPU_COUNT(&s.hk)) {
		cli_err("CPU list %s leaves no housekeeping CPU", s.cpus_s);
		cli_note("leave at least one online CPU (%s) out of the list for everything else",
			 cpulist_format(&online, s.cpus_s, sizeof(s.cpus_s)));
		return EXIT_USAGE;
	}
	if (!s.dry && geteuid() != 0) {
		cli_err("detach isolate changes system settings: it must run as root");
		cli_note("run it with sudo, or add --dry-run to see what it would change");
		return 1;
	}
	rc = do_isolate(&s);
	journal_free(&s.j);
	return rc;
}

DETACH_VERB(verb_isolate) = { "isolate", "make CPUs a partition for detached threads (--undo reverts)", isolate_main };
