/* A tracing session on one CPU, from the guest kernel's own tracepoints
 * (irq, irq_vectors, nmi, ipi, csd, tlb, sched, workqueue), read in binary
 * form from the per-CPU ring buffers through libtracefs/libtraceevent and
 * turned into typed records on the TSC time line (docs/trace.md).
 *
 * Everything it changes lives in a tracing instance of its own
 * ("detach-PID"), so a trace the user runs meanwhile is not disturbed and
 * the global settings are never written.  Mounting tracefs (only when it is
 * not mounted) and creating the instance are journaled under
 * ISOLATE_STATE_DIR before they happen; a guard process undoes them when the
 * owner dies, even by SIGKILL, and the next session undoes the journal of
 * any dead owner it finds.
 *
 * Functions return 0 or -errno and never print; a failure leaves a message
 * for the user in the caller's err buffer. */
#ifndef DETACH_LIB_TRACE_H
#define DETACH_LIB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsc_clock;

enum trace_type {
	TR_IRQ,        /* device interrupt handler: num = IRQ, name = action */
	TR_SOFTIRQ,    /* num = vector, name = kind ("TIMER", "RCU", ...) */
	TR_VECTOR,     /* system vector: name = "local_timer" (the tick),
			* "call_function", "reschedule", "irq_work", ... */
	TR_NMI,        /* point at the handler's end; arg = its duration, ns */
	TR_TLB,        /* point: num = reason (1 remote shootdown, ...), arg = pages */
	TR_SWITCH,     /* point: pid/comm = previous task, pid2/name = next */
	TR_IPI_SEND,   /* point, on the sending CPU: cpu/pid/comm = sender,
			* num = target (-1: a mask holding it), arg = callback */
	TR_CSD,        /* function run by an IPI on the CPU: arg = function */
	TR_WORK,       /* workqueue item: arg = function */
};

enum trace_phase { TP_ENTRY, TP_EXIT, TP_POINT };

struct trace_rec {
	uint64_t ts;            /* TSC */
	uint64_t arg;
	int32_t num;
	int32_t pid, pid2;
	int16_t cpu;
	uint8_t type, phase;
	char name[24];          /* see enum trace_type */
	char comm[16];          /* TR_SWITCH: previous task; TR_IPI_SEND: sender */
};

struct trace_session;

/* Starts tracing cpu.  Cleans up after dead sessions first, mounts tracefs
 * if needed, creates the instance, enables the events, sets the clock and
 * starts a thread that drains the buffers every few tens of milliseconds
 * on the other CPUs.  On failure *out is NULL, err says why. */
int trace_start(struct trace_session **out, int cpu, char *err, size_t errlen);

/* Stops recording and reads what is left; records stay available. */
int trace_stop(struct trace_session *s);

/* Undoes everything trace_start did and frees the session. */
void trace_close(struct trace_session *s);

/* The records so far, in time order per CPU (the IPI senders' CPUs
 * included); valid until trace_close. */
const struct trace_rec *trace_records(const struct trace_session *s, size_t *n);

/* Events the kernel dropped (buffer full) or the library lost. */
uint64_t trace_lost(const struct trace_session *s);

/* How the trace times were put on the TSC: "x86-tsc" or "mono mapped". */
const char *trace_clock_name(const struct trace_session *s);

/* One record as a line of text (no newline), times in ns from t0. */
void trace_rec_format(struct trace_session *s, const struct trace_rec *r, uint64_t t0,
		      const struct tsc_clock *tsc, char *buf, size_t len);

/* Kernel symbol of a function address (/proc/kallsyms), or NULL. */
const char *trace_symbol(struct trace_session *s, uint64_t addr);

/* Undoes the journals of dead sessions; returns how many. */
int trace_cleanup_stale(void);

#endif
