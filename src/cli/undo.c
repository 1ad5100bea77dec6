/* detach isolate --undo: the journal replayed, newest record first, every
 * saved value written back, the cpusets isolate made emptied and removed,
 * tasks put back with their affinity; what cannot be restored (a task that
 * exited, an IRQ that vanished) is reported.  The state file goes only when
 * everything else was restored. */
#include "cli/cli.h"
#include "cli/isolate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What undo did, counted for its closing line. */
struct undo_report {
	int restored, unchanged, tasks, gone_tasks, gone_files, failed;
};

/* Where the cpusets isolate made live (the journal's config line, else the
 * mounted hierarchy). */
struct undo_cgroups {
	enum cg_kind kind;
	char root[PATH_MAX];
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

/* write PATH VALUE: VALUE back into PATH (unless the file went with a
 * cgroup isolate made). */
static void undo_write(const struct journal *j, const struct jentry *e, struct undo_report *r)
{
	char buf[1100];
	int err;

	if (journal_in_made_dir(j, e->path))
		return;
	if (read_text_file(e->path, buf, sizeof(buf))) {
		printf("could not restore %s: it is gone%s\n", e->path,
		       !strncmp(e->path, "/proc/irq/", 10) ? " (the IRQ vanished)" : "");
		r->gone_files++;
		return;
	}
	if (!strcmp(buf, e->value)) {
		r->unchanged++;
		return;
	}
	err = write_text_file(e->path, e->value);
	if (err) {
		printf("could not restore %s to %s: %s\n", e->path, e->value, strerror(-err));
		r->failed++;
		return;
	}
	/* "-cpuset" into subtree_control reads back differently */
	read_text_file(e->path, buf, sizeof(buf));
	if (strcmp(buf, e->value) && e->value[0] != '-') {
		printf("restored %s, but it reads %s, not %s\n", e->path, buf, e->value);
		r->failed++;
		return;
	}
	printf("restored %s: %s\n", e->path, e->value);
	r->restored++;
}

/* mkdir PATH: the cpuset emptied and removed. */
static void undo_mkdir(const struct jentry *e, const struct undo_cgroups *cg, struct undo_report *r)
{
	if (access(e->path, F_OK))
		return;
	empty_cgroup(e->path, cg->root, cg->kind);
	if (rmdir(e->path)) {
		printf("could not remove cpuset %s: %s\n", e->path, strerror(errno));
		r->failed++;
	} else {
		printf("removed cpuset %s\n", e->path);
		r->restored++;
	}
}

/* task TID START LIST: the task back in the root cpuset, with its affinity. */
static void undo_task(const struct jentry *e, const struct undo_cgroups *cg, struct undo_report *r)
{
	cpu_set_t aff, now;
	char path[PATH_MAX + 16], tid[32], comm[64];

	if (task_starttime(e->tid) != e->start) {
		printf("could not restore task %ld: it exited\n", e->tid);
		r->gone_tasks++;
		return;
	}
	snprintf(tid, sizeof(tid), "%ld", e->tid);
	snprintf(path, sizeof(path), "%s/tasks", cg->root);
	write_text_file(path, tid);   /* fails for those that never moved */
	if (cpulist_parse(e->value, &aff))
		return;
	if (sched_getaffinity((pid_t)e->tid, sizeof(now), &now) == 0 && CPU_EQUAL(&now, &aff)) {
		r->tasks++;
		return;
	}
	if (sched_setaffinity((pid_t)e->tid, sizeof(aff), &aff)) {
		task_comm(e->tid, comm, sizeof(comm));
		if (errno == ESRCH) {
			printf("could not restore task %ld: it exited\n", e->tid);
			r->gone_tasks++;
		} else {
			printf("could not restore the affinity of task %ld (%s) to %s: %s\n",
			       e->tid, comm, e->value, strerror(errno));
			r->failed++;
		}
		return;
	}
	r->tasks++;
}

int isolate_undo(void)
{
	struct journal j;
	struct undo_report r = { 0 };
	struct undo_cgroups cg = { .kind = CG_NONE };
	struct partition mounted;
	int err;

	if (journal_lock() < 0)
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
		if (j.e[i].kind == J_CONFIG && sscanf(j.e[i].value, "%*s %*s backend=v%d root=%4000s", &v, cg.root) == 2)
			cg.kind = (enum cg_kind)v;
	}
	if (cg.kind == CG_NONE && cpuset_hierarchy(&mounted) == 0) {
		cg.kind = mounted.kind;
		snprintf(cg.root, sizeof(cg.root), "%s", mounted.root);
	}

	/* Newest first: a change is undone after everything that built on it. */
	for (int i = j.n - 1; i >= 0; i--) {
		const struct jentry *e = &j.e[i];

		if (e->kind == J_WRITE)
			undo_write(&j, e, &r);
		else if (e->kind == J_MKDIR)
			undo_mkdir(e, &cg, &r);
		else if (e->kind == J_TASK)
			undo_task(e, &cg, &r);
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
