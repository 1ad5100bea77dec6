/* detach isolate: the cpuset partition.  cgroup v1: a housekeeping cpuset
 * every movable task moves to, an exclusive one for the listed CPUs, load
 * balancing off at the root; cgroup v2: an isolated partition. */
#include "cli/cli.h"
#include "cli/isolate.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
		if (iso_record(s, line))
			return -EIO;
	}
	if (mkdir(dir, 0755) == 0) {
		printf("create cpuset %s\n", dir);
		iso_changed(s);
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
		iso_move_mask(s, path, V_LIST, true);
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
				iso_changed(s);
				moved_now++;
				continue;
			}
			if (!journal_has_task(&s->j, tid)) {
				unsigned long long st = task_starttime(tid);
				if (!st || sched_getaffinity((pid_t)tid, sizeof(aff), &aff))
					continue;       /* exited */
				cpulist_format(&aff, list, sizeof(list));
				snprintf(line, sizeof(line), "task %ld %llu %s", tid, st, list);
				if (iso_record(s, line))
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
				iso_changed(s);
				continue;
			}
			if (err) {
				long *ns = realloc(stuck, sizeof(long) * (size_t)(nstuck + 1));
				if (ns) { stuck = ns; stuck[nstuck++] = tid; }
				continue;
			}
			printf("move task %ld (%s) to %s\n", tid, comm, PARTITION_HK_NAME);
			iso_changed(s);
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

int isolate_cgroup_v1(struct iso *s)
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
		if (iso_must_set(s, path, s->hk_s, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.mems", hk);
		if (iso_must_set(s, path, mems, V_LIST))
			return -1;
	}
	if (make_cgroup(s, part))
		return -1;
	if (!s->dry) {
		snprintf(path, sizeof(path), "%s/cpuset.cpus", part);
		if (iso_must_set(s, path, s->cpus_s, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.mems", part);
		if (iso_must_set(s, path, mems, V_LIST))
			return -1;
		snprintf(path, sizeof(path), "%s/cpuset.cpu_exclusive", part);
		if (iso_must_set(s, path, "1", V_TEXT))
			return -1;
		/* No load balancing inside the partition: each CPU its own domain. */
		snprintf(path, sizeof(path), "%s/cpuset.sched_load_balance", part);
		if (iso_must_set(s, path, "0", V_TEXT))
			return -1;
	}
	snprintf(path, sizeof(path), "%s/tasks", hk);
	move_tasks_v1(s, path);
	/* Last: with balancing off at the root, the scheduler's domains come from
	 * the children, and the partition (balance 0) is in none of them. */
	snprintf(path, sizeof(path), "%s/cpuset.sched_load_balance", R);
	return iso_must_set(s, path, "0", V_TEXT);
}

/* ---- cgroup v2 (written for the unified hierarchy; not run on the v1 VMs
 * this was developed on, see docs/isolate.md) ------------------------------- */

int isolate_cgroup_v2(struct iso *s)
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
			if (!journal_has_write(&s->j, path) && iso_record(s, line))
				return -1;
			if (write_text_file(path, "+cpuset")) {
				cli_err("cannot enable the cpuset controller in %s: %s", path, strerror(errno));
				s->failures++;
				return -1;
			}
			printf("set %s: +cpuset\n", path);
			iso_changed(s);
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
	if (iso_set(s, path, "threaded", V_TEXT) < 0)
		cli_warn("%s: cannot make it threaded; detached threads will need their whole process moved", part);
	snprintf(path, sizeof(path), "%s/cpuset.cpus", part);
	if (iso_must_set(s, path, s->cpus_s, V_LIST))
		return -1;
	snprintf(path, sizeof(path), "%s/cpuset.cpus.partition", part);
	if (iso_must_set(s, path, "isolated", V_TEXT))
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
