/* detach isolate, shared by its files: isolate.c (the verb and its options),
 * isolate_apply.c (changing values through the journal; IRQs, workqueues,
 * sysctls), isolate_cgroup.c (the cpuset partition, cgroup v1 and v2) and
 * undo.c (--undo: the journal replayed). */
#ifndef DETACH_CLI_ISOLATE_H
#define DETACH_CLI_ISOLATE_H

#include "cli/journal.h"
#include "cli/procfs.h"

#include <stdbool.h>

/* The user's ask, filled by isolate_parse_args() alone. */
struct isolate_args {
	const char *cpus;        /* -c LIST */
	bool dry;                /* --dry-run */
	bool undo;               /* --undo */
	bool help;
};

/* One isolate run: what it isolates, and what it has done so far. */
struct iso {
	cpu_set_t cpus, hk;
	char cpus_s[256], hk_s[256];
	bool dry;
	struct partition cg;     /* kind and root of the cpuset hierarchy */
	struct journal j;
	int changes;             /* changes made (or planned, dry run) by this run */
	long pause_after;        /* test hook DETACH_TEST_PAUSE_AFTER */
	int failures;            /* steps that failed */
};

/* How a file's value compares: as text, a CPU list, or a hex CPU mask. */
enum vtype { V_TEXT, V_LIST, V_HEX };

/* ---- isolate_apply.c ------------------------------------------------------ */
/* Counts one change (and stops there for the DETACH_TEST_PAUSE_AFTER hook). */
void iso_changed(struct iso *s);
/* Appends a journal line (not in a dry run); 0, or -errno after an error line. */
int iso_record(struct iso *s, const char *line);
/* Sets path to v, journaling its old value first (once: a second isolate
 * keeps the original).  1: already so, 0: changed (or would be), -errno:
 * reading or writing failed (not reported: the caller knows what it means). */
int iso_set(struct iso *s, const char *path, const char *v, enum vtype t);
/* iso_set for a step that must work: reports a failure; 0 or -errno. */
int iso_must_set(struct iso *s, const char *path, const char *v, enum vtype t);
/* A file holding a CPU list or hex mask: take the isolated CPUs out. */
int iso_move_mask(struct iso *s, const char *path, enum vtype t, bool report);
/* The whole isolation; the exit status. */
int isolate_apply(struct iso *s);

/* ---- isolate_cgroup.c: the partition and moving tasks out of it ----------- */
int isolate_cgroup_v1(struct iso *s);
int isolate_cgroup_v2(struct iso *s);

/* ---- undo.c ---------------------------------------------------------------- */
/* Replays the journal newest first; the exit status. */
int isolate_undo(void);

#endif
