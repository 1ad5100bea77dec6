/* Shared by `detach isolate` and `detach check`: the state journal, CPU masks
 * in the kernel's hex notation, IRQ names, CPU list validation. */
#ifndef DETACH_CLI_ISOLATION_H
#define DETACH_CLI_ISOLATION_H

#include "lib/partition.h"
#include "lib/util.h"

#include <stdbool.h>

/* ---- the journal ---------------------------------------------------------
 * A text file, one record a line, appended and fsynced before each change:
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

/* Loads ISOLATE_STATE_FILE; -ENOENT if there is none. */
int journal_load(struct journal *j, const char *path);
void journal_free(struct journal *j);
/* Appends one line (with '\n') and fsyncs; 0 or -errno. */
int journal_append(struct journal *j, const char *line);
bool journal_has_write(const struct journal *j, const char *path);
bool journal_has_mkdir(const struct journal *j, const char *path);
bool journal_has_task(const struct journal *j, long tid);
/* cpus= of the config line, or -ENOENT. */
int journal_config_cpus(const struct journal *j, cpu_set_t *cpus);

void value_escape(const char *in, char *out, size_t len);
void value_unescape(const char *in, char *out, size_t len);

/* ---- CPU masks -------------------------------------------------------- */
/* "ffffffff,00000003" <-> set */
int hexmask_parse(const char *s, cpu_set_t *set);
char *hexmask_format(const cpu_set_t *set, char *buf, size_t len);

/* ---- misc ------------------------------------------------------------- */
/* Device name(s) of IRQ n from /proc/interrupts, "?" if unknown. */
void irq_name(int irq, char *buf, size_t len);
/* Local timer interrupts (LOC) of cpu so far, or -1. */
long long loc_count(int cpu);
/* Parses and checks a -c list: well formed, online; prints the error. */
int parse_cpu_option(const char *arg, cpu_set_t *set);
/* Field 22 of /proc/TID/stat (start time in ticks), 0 if gone. */
unsigned long long task_starttime(long tid);
/* "comm" of a task, "?" if gone. */
void task_comm(long tid, char *buf, size_t len);
/* Flags (field 9) of /proc/TID/stat, or 0. */
unsigned long task_flags(long tid);
#define PF_KTHREAD_FLAG        0x00200000UL
#define PF_NO_SETAFFINITY_FLAG 0x04000000UL

#endif
