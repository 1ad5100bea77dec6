/* Stall attribution: what the guest kernel did on a CPU inside a given
 * interval (a probe's gap, a benchmark's sample), from a trace session's
 * records (trace.h), and what it did not see ("host").  Used by
 * `detach check --measure` and by the benchmarks' traced cells.
 *
 * An activity is a span on the traced CPU: an IRQ handler, a softirq, a
 * system vector (the tick, an IPI), an NMI, or another task running.  The
 * causes of an interval are the activities that overlap it, with the length
 * of the overlap, merged by label; an IPI carries its sender (CPU, task) and
 * the function it ran, a TLB shootdown is an IPI that flushed the TLB.
 * What no activity covers is "host" when it is at least host_min long:
 * time the guest did not see (the hypervisor, or hardware). */
#ifndef DETACH_LIB_STALL_H
#define DETACH_LIB_STALL_H

#include "lib/trace.h"
#include "lib/util.h"

enum stall_kind { SK_TICK, SK_IRQ, SK_SOFTIRQ, SK_IPI, SK_TLB, SK_VECTOR, SK_NMI, SK_TASK, SK_HOST, SK_N };
extern const char *const stall_kind_name[SK_N];

struct stall_cause {
	uint8_t kind;
	int16_t sender_cpu;     /* ipi, tlb: -1 if no send was traced */
	int32_t num;            /* irq: number; softirq: vector; vector: number */
	int32_t pid;            /* task: its pid */
	int32_t sender_pid;
	uint64_t cycles;        /* overlap with the interval, TSC cycles */
	char name[24];          /* irq action, softirq kind, vector name, task comm */
	char sender[16];        /* comm of the sender */
	char func[48];          /* function an IPI or a kworker ran, or "" */
};

struct stall_model;

/* Activities on cpu from the session's records; probe_tid is the thread
 * whose running is not a stall.  -ENOMEM or 0. */
int stall_model_build(struct stall_model **out, struct trace_session *t, int cpu, int probe_tid,
		      const struct tsc_clock *tsc);
void stall_model_free(struct stall_model *m);

/* The causes of [a, b) (TSC), longest first, at most max; *guest gets the
 * cycles some activity covered (their union).  Returns the count. */
int stall_attribute(const struct stall_model *m, uint64_t a, uint64_t b, uint64_t host_min,
		    struct stall_cause *out, int max, uint64_t *guest);

/* "tick", "irq 36 virtio1-req.0", "softirq RCU", "ipi call_function_single
 * (flush_tlb_func)", "task kworker/1:1[123]", "host".  detail adds the
 * sender of an IPI: " from CPU 0 git[3737]". */
void stall_label(const struct stall_cause *c, bool detail, char *buf, size_t len);

/* One cause object: kind, label, ns, and the fields its kind has. */
void stall_cause_json(struct json *j, const struct stall_cause *c, const struct tsc_clock *tsc);

/* Per label over many intervals: in how many it appeared, total and
 * largest overlap (cycles). */
struct stall_row {
	char label[96];
	uint8_t kind;
	uint64_t count, total, max;
};
struct stall_summary {
	struct stall_row *rows;
	int n, cap;
};
void stall_summary_add(struct stall_summary *s, const struct stall_cause *c, int n);
/* Sorts by total, largest first. */
void stall_summary_sort(struct stall_summary *s);
void stall_summary_free(struct stall_summary *s);

#endif
