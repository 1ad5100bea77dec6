/* Stall attribution (stall.h): activities from trace records, their overlap
 * with an interval, summaries. */
#include "lib/stall.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const stall_kind_name[SK_N] = {
	"tick", "irq", "softirq", "ipi", "tlb", "vector", "nmi", "task", "host"
};

struct activity {
	uint64_t start, end;
	struct stall_cause c;
};

struct stall_model {
	struct activity *a;     /* sorted by start */
	size_t n, cap;
	uint64_t longest;       /* the longest activity: how far back to look */
};

static struct activity *add(struct stall_model *m, uint64_t start, uint8_t kind)
{
	struct activity *a;

	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4096;
		void *p = realloc(m->a, cap * sizeof(*m->a));
		if (!p)
			return NULL;
		m->a = p;
		m->cap = cap;
	}
	a = &m->a[m->n++];
	memset(a, 0, sizeof(*a));
	a->start = start;
	a->end = start;
	a->c.kind = kind;
	a->c.sender_cpu = -1;
	return a;
}

static int by_ts(const void *x, const void *y)
{
	const struct trace_rec *a = *(const struct trace_rec *const *)x;
	const struct trace_rec *b = *(const struct trace_rec *const *)y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a < b ? -1 : a > b;    /* stable: the reader's order */
}

static int by_start(const void *x, const void *y)
{
	const struct activity *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static void set_func(struct trace_session *t, char *func, size_t len, uint64_t addr)
{
	const char *sym;

	if (func[0] || !addr)
		return;
	sym = trace_symbol(t, addr);
	if (sym)
		snprintf(func, len, "%s", sym);
	else
		snprintf(func, len, "0x%llx", (unsigned long long)addr);
}

static uint8_t vector_kind(const char *name)
{
	if (!strcmp(name, "local_timer"))
		return SK_TICK;
	if (!strncmp(name, "call_function", 13) || !strcmp(name, "reschedule"))
		return SK_IPI;
	return SK_VECTOR;
}

/* Spans are opened by an entry and closed by the matching exit; the index
 * (not a pointer) is kept since the array grows.  -1: none open. */
struct open_spans {
	long irq, softirq, task;
	long vec[4];
	int nvec;
	const struct trace_rec *sends[16];   /* latest IPI sends to the CPU */
	int nsend;
};

static void close_span(struct stall_model *m, long *i, uint64_t ts)
{
	if (*i >= 0)
		m->a[*i].end = ts;
	*i = -1;
}

int stall_model_build(struct stall_model **out, struct trace_session *t, int cpu, int probe_tid,
		      const struct tsc_clock *tsc)
{
	struct stall_model *m = calloc(1, sizeof(*m));
	struct open_spans o = { .irq = -1, .softirq = -1, .task = -1 };
	const struct trace_rec *r, **v;
	size_t n;

	*out = NULL;
	r = trace_records(t, &n);
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!m || !v) {
		free(m);
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = &r[i];
	qsort(v, n, sizeof(*v), by_ts);

	for (size_t i = 0; i < n; i++) {
		const struct trace_rec *e = v[i];
		struct activity *a;

		if (e->type == TR_IPI_SEND) {
			if (o.nsend == 16)
				memmove(o.sends, o.sends + 1, 15 * sizeof(o.sends[0])), o.nsend--;
			o.sends[o.nsend++] = e;
			continue;
		}
		if (e->cpu != cpu)
			continue;
		switch (e->type) {
		case TR_IRQ:
		case TR_SOFTIRQ: {
			long *slot = e->type == TR_IRQ ? &o.irq : &o.softirq;
			if (e->phase == TP_EXIT) {
				close_span(m, slot, e->ts);
				break;
			}
			close_span(m, slot, e->ts);     /* an exit the buffer lost */
			if (!(a = add(m, e->ts, e->type == TR_IRQ ? SK_IRQ : SK_SOFTIRQ)))
				goto nomem;
			a->c.num = e->num;
			snprintf(a->c.name, sizeof(a->c.name), "%s", e->name);
			*slot = (long)(a - m->a);
			break;
		}
		case TR_VECTOR:
			if (e->phase == TP_EXIT) {
				if (o.nvec > 0)
					close_span(m, &o.vec[--o.nvec], e->ts);
				break;
			}
			if (!(a = add(m, e->ts, vector_kind(e->name))))
				goto nomem;
			a->c.num = e->num;
			snprintf(a->c.name, sizeof(a->c.name), "%s", e->name);
			if (a->c.kind == SK_IPI && o.nsend > 0) {
				/* the latest send to this CPU raised it */
				const struct trace_rec *s = o.sends[--o.nsend];
				a->c.sender_cpu = s->cpu;
				a->c.sender_pid = s->pid;
				snprintf(a->c.sender, sizeof(a->c.sender), "%s", s->comm);
				set_func(t, a->c.func, sizeof(a->c.func), s->arg);
			}
			if (o.nvec < 4)
				o.vec[o.nvec++] = (long)(a - m->a);
			break;
		case TR_CSD:
			if (e->phase == TP_ENTRY && o.nvec > 0) {
				struct activity *in = &m->a[o.vec[o.nvec - 1]];
				in->c.func[0] = '\0';   /* what ran beats what was asked */
				set_func(t, in->c.func, sizeof(in->c.func), e->arg);
			}
			break;
		case TR_TLB:
			/* TLB_REMOTE_SHOOTDOWN, or TLB_REMOTE_WRONG_CPU: a shootdown
			 * that found another mm loaded, its cost paid all the same */
			if ((e->num == 1 || e->num == 5) && o.nvec > 0)
				m->a[o.vec[o.nvec - 1]].c.kind = SK_TLB;
			break;
		case TR_NMI: {
			uint64_t d = ns_to_tsc_cycles(tsc, e->arg);
			if (!(a = add(m, e->ts - (d < e->ts ? d : 0), SK_NMI)))
				goto nomem;
			a->end = e->ts;
			break;
		}
		case TR_WORK:
			if (e->phase == TP_ENTRY && o.task >= 0)
				set_func(t, m->a[o.task].c.func, sizeof(m->a[o.task].c.func), e->arg);
			break;
		case TR_SWITCH:
			close_span(m, &o.task, e->ts);
			/* the probe itself, or the idle task while it sleeps */
			if (e->pid2 == probe_tid || e->pid2 == 0)
				break;
			if (!(a = add(m, e->ts, SK_TASK)))
				goto nomem;
			a->c.pid = e->pid2;
			snprintf(a->c.name, sizeof(a->c.name), "%s", e->name);
			o.task = (long)(a - m->a);
			break;
		}
	}
	/* spans still open at the end run to the last record */
	if (n) {
		uint64_t last = v[n - 1]->ts;
		close_span(m, &o.irq, last);
		close_span(m, &o.softirq, last);
		close_span(m, &o.task, last);
		while (o.nvec > 0)
			close_span(m, &o.vec[--o.nvec], last);
	}
	free(v);
	qsort(m->a, m->n, sizeof(*m->a), by_start);
	for (size_t i = 0; i < m->n; i++)
		if (m->a[i].end - m->a[i].start > m->longest)
			m->longest = m->a[i].end - m->a[i].start;
	*out = m;
	return 0;
nomem:
	free(v);
	stall_model_free(m);
	return -ENOMEM;
}

void stall_model_free(struct stall_model *m)
{
	if (!m)
		return;
	free(m->a);
	free(m);
}

static bool same_cause(const struct stall_cause *x, const struct stall_cause *y)
{
	return x->kind == y->kind && x->num == y->num && x->pid == y->pid &&
	       !strcmp(x->name, y->name) && !strcmp(x->func, y->func) &&
	       x->sender_cpu == y->sender_cpu && x->sender_pid == y->sender_pid;
}

static int by_cycles(const void *x, const void *y)
{
	const struct stall_cause *a = x, *b = y;

	return a->cycles > b->cycles ? -1 : a->cycles < b->cycles;
}

int stall_attribute(const struct stall_model *m, uint64_t a, uint64_t b, uint64_t host_min,
		    struct stall_cause *out, int max, uint64_t *guest)
{
	size_t lo = 0, hi = m->n;
	uint64_t covered = 0, reach = a;
	int n = 0;

	/* the first activity that may overlap: starts no earlier than
	 * a - longest (binary search over the starts) */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->a[mid].start + m->longest < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < m->n && m->a[i].start < b; i++) {
		const struct activity *x = &m->a[i];
		uint64_t s = x->start > a ? x->start : a;
		uint64_t e = x->end < b ? x->end : b;
		int k;

		if (e <= s)
			continue;
		/* union of the covered spans, in order of start */
		if (e > reach) {
			covered += e - (s > reach ? s : reach);
			reach = e;
		}
		for (k = 0; k < n && !same_cause(&out[k], &x->c); k++)
			;
		if (k == n) {
			if (n == max)
				continue;
			out[n] = x->c;
			out[n++].cycles = 0;
		}
		out[k].cycles += e - s;
	}
	if (b - a > covered && b - a - covered >= host_min && n < max) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].kind = SK_HOST;
		out[n].sender_cpu = -1;
		out[n++].cycles = b - a - covered;
	}
	qsort(out, (size_t)n, sizeof(*out), by_cycles);
	*guest = covered;
	return n;
}

void stall_label(const struct stall_cause *c, bool detail, char *buf, size_t len)
{
	const char *k = stall_kind_name[c->kind];
	int l = 0;

	switch (c->kind) {
	case SK_IRQ:
		l = snprintf(buf, len, "irq %d %s", c->num, c->name);
		break;
	case SK_SOFTIRQ:
	case SK_VECTOR:
		l = snprintf(buf, len, "%s %s", k, c->name);
		break;
	case SK_IPI:
	case SK_TLB:
		l = snprintf(buf, len, c->kind == SK_TLB ? "tlb shootdown" : "ipi %s", c->name);
		if (c->func[0] && (size_t)l < len)
			l += snprintf(buf + l, len - l, " (%s)", c->func);
		if (detail && c->sender_cpu >= 0 && (size_t)l < len)
			snprintf(buf + l, len - l, " from CPU %d %s[%d]", c->sender_cpu, c->sender, c->sender_pid);
		break;
	case SK_TASK:
		l = snprintf(buf, len, "task %s[%d]", c->name, c->pid);
		if (c->func[0] && (size_t)l < len)
			snprintf(buf + l, len - l, " (%s)", c->func);
		break;
	default:
		snprintf(buf, len, "%s", k);
	}
}

void stall_cause_json(struct json *j, const struct stall_cause *c, const struct tsc_clock *tsc)
{
	char label[160];

	stall_label(c, true, label, sizeof(label));
	json_object_begin(j, NULL);
	json_str(j, "kind", stall_kind_name[c->kind]);
	json_str(j, "label", label);
	json_uint(j, "ns", tsc_cycles_to_ns(tsc, c->cycles));
	switch (c->kind) {
	case SK_IRQ:
	case SK_SOFTIRQ:
	case SK_VECTOR:
		json_int(j, "num", c->num);
		json_str(j, "name", c->name);
		break;
	case SK_IPI:
	case SK_TLB:
		json_str(j, "name", c->name);
		if (c->func[0])
			json_str(j, "function", c->func);
		if (c->sender_cpu >= 0) {
			json_int(j, "sender_cpu", c->sender_cpu);
			json_int(j, "sender_pid", c->sender_pid);
			json_str(j, "sender_comm", c->sender);
		}
		break;
	case SK_TASK:
		json_int(j, "pid", c->pid);
		json_str(j, "comm", c->name);
		if (c->func[0])
			json_str(j, "function", c->func);
		break;
	}
	json_object_end(j);
}

void stall_summary_add(struct stall_summary *s, const struct stall_cause *c, int n)
{
	for (int i = 0; i < n; i++) {
		char label[96];
		int k;

		stall_label(&c[i], false, label, sizeof(label));
		for (k = 0; k < s->n && strcmp(s->rows[k].label, label); k++)
			;
		if (k == s->n) {
			if (s->n == s->cap) {
				int cap = s->cap ? s->cap * 2 : 32;
				void *p = realloc(s->rows, (size_t)cap * sizeof(*s->rows));
				if (!p)
					return;
				s->rows = p;
				s->cap = cap;
			}
			memset(&s->rows[k], 0, sizeof(s->rows[k]));
			snprintf(s->rows[k].label, sizeof(s->rows[k].label), "%s", label);
			s->rows[k].kind = c[i].kind;
			s->n++;
		}
		s->rows[k].count++;
		s->rows[k].total += c[i].cycles;
		if (c[i].cycles > s->rows[k].max)
			s->rows[k].max = c[i].cycles;
	}
}

static int by_total(const void *x, const void *y)
{
	const struct stall_row *a = x, *b = y;

	return a->total > b->total ? -1 : a->total < b->total;
}

void stall_summary_sort(struct stall_summary *s)
{
	qsort(s->rows, (size_t)s->n, sizeof(*s->rows), by_total);
}

void stall_summary_free(struct stall_summary *s)
{
	free(s->rows);
	memset(s, 0, sizeof(*s));
}
