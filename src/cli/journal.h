/* The journal of `detach isolate`: every value it changes is recorded here
 * (old value, fsynced) before the change, so --undo (undo.c) restores it even
 * after a crash; `detach check` reads it for what isolate found unmovable. */
#ifndef DETACH_CLI_JOURNAL_H
#define DETACH_CLI_JOURNAL_H

#include "lib/partition.h"
#include "lib/util.h"

#include <stdbool.h>

/* ISOLATE_STATE_FILE (lib/partition.h) is an undo log (lib/undo_log.h), one record a line, appended and fsynced before each change:
 *   detach-isolate 1
 *   config cpus=LIST hk=LIST backend=v1|v2 root=PATH
 *   write PATH<TAB>VALUE        undo writes VALUE to PATH (value escaped)
 *   mkdir PATH                  undo empties and removes the cgroup PATH
 *   task TID STARTTIME CPULIST  undo puts TID back into the root cpuset and
 *                               restores its affinity (STARTTIME tells reuse)
 *   unmovable-irq N ERRNO       information: writing its affinity failed
 * A last line without its newline (a crash mid-write) is ignored. */
enum jkind { J_WRITE, J_MKDIR, J_TASK, J_UNMOVABLE_IRQ, J_CONFIG };

struct jentry {
	enum jkind kind;
	char path[512];
	char value[1024];   /* write: old value; task: cpulist; config: the line */
	long tid;
	unsigned long long start;
	int irq, err;
};

struct journal {
	int fd;                 /* -1: not open (dry run) */
	struct jentry *e;
	int n, cap;
};

/* Takes the lock that serializes isolate and undo runs (held until exit);
 * the fd, or -1 after an error line. */
int journal_lock(void);
/* Opens ISOLATE_STATE_FILE for appending and loads what it holds; a new file
 * gets its header and config line (CONFIG: the line after "config ") first.
 * 0, or -1 after an error line. */
int journal_open(struct journal *j, const char *config);
/* Loads path; -ENOENT if there is none. */
int journal_load(struct journal *j, const char *path);
void journal_free(struct journal *j);
/* Appends one line (with '\n') and fsyncs; 0 or -errno. */
int journal_append(struct journal *j, const char *line);
bool journal_has_write(const struct journal *j, const char *path);
bool journal_has_mkdir(const struct journal *j, const char *path);
bool journal_has_task(const struct journal *j, long tid);
/* PATH lies inside a cgroup the journal records making (it goes with it). */
bool journal_in_made_dir(const struct journal *j, const char *path);
/* cpus= of the config line, or -ENOENT. */
int journal_config_cpus(const struct journal *j, cpu_set_t *cpus);

#endif
