/* What `detach isolate` and `detach check` read from the kernel beyond
 * lib/util.h: CPU masks in the kernel's hex notation, IRQ names and timer
 * counts from /proc/interrupts, fields of /proc/TID/stat. */
#ifndef DETACH_CLI_PROCFS_H
#define DETACH_CLI_PROCFS_H

#include "lib/util.h"

/* ---- CPU masks -------------------------------------------------------- */
/* "ffffffff,00000003" <-> set */
int hexmask_parse(const char *s, cpu_set_t *set);
char *hexmask_format(const cpu_set_t *set, char *buf, size_t len);

/* ---- IRQs and tasks, from /proc ----------------------------------------- */
/* Device name(s) of IRQ n from /proc/interrupts, "?" if unknown. */
void irq_name(int irq, char *buf, size_t len);
/* Local timer interrupts (LOC) of cpu so far, or -1. */
long long loc_count(int cpu);
/* State (field 3) of /proc/TID/stat: 'R', 'S', 'Z' ...; 0 if gone. */
char task_state(long tid);
/* Field 22 of /proc/TID/stat (start time in ticks), 0 if gone. */
unsigned long long task_starttime(long tid);
/* "comm" of a task, "?" if gone. */
void task_comm(long tid, char *buf, size_t len);
/* Flags (field 9) of /proc/TID/stat, or 0. */
unsigned long task_flags(long tid);
#define PF_KTHREAD_FLAG        0x00200000UL
#define PF_NO_SETAFFINITY_FLAG 0x04000000UL

#endif
