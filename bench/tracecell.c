/* tracecell: the guest's trace of one bench cell.  Traces CPU (src/lib/trace.c)
 * from its start until its standard input closes, then attributes each
 * interval a measurement program wrote (fwq/ctlloop --intervals) with
 * src/lib/stall.c: how much of it guest activity covered, and what.
 *
 *   tracecell -c CPU --intervals FILE --json OUT [--top N]
 *
 * Prints "ready" once tracing runs.  A line "pid N" on standard input names
 * the measuring thread (its own running is not a stall).  The orchestration
 * (tools/detach_tools/bench) computes the guest's share of each statistic
 * from guest_ns and the program's own samples. */
#include "lib/stall.h"
#include "lib/trace.h"
#include "lib/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CAUSES 8

static void usage(int status)
{
	fprintf(status ? stderr : stdout,
"usage: tracecell -c CPU --intervals FILE --json OUT [--top N]\n"
"\n"
"Traces CPU until standard input closes (\"pid N\" lines name the measured\n"
"thread), then writes for every interval of FILE (pairs of u64 TSC start,\n"
"end) the time the guest's own activities covered, the causes of the N\n"
"longest (default 20), and a summary per cause over the longest 1%%.\n");
	exit(status);
}

struct span {
	uint64_t a, b;
};

static int by_length_desc(const void *x, const void *y, void *arg)
{
	const struct span *s = arg;
	uint64_t lx = s[*(const uint32_t *)x].b - s[*(const uint32_t *)x].a;
	uint64_t ly = s[*(const uint32_t *)y].b - s[*(const uint32_t *)y].a;

	return lx > ly ? -1 : lx < ly;
}

static struct span *read_intervals(const char *path, size_t *n)
{
	FILE *f = fopen(path, "re");
	struct stat st;
	struct span *s;

	if (!f || fstat(fileno(f), &st) < 0) {
		if (f)
			fclose(f);
		return NULL;
	}
	*n = (size_t)st.st_size / sizeof(*s);
	s = malloc((*n ? *n : 1) * sizeof(*s));
	if (s && fread(s, sizeof(*s), *n, f) != *n) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

static void summary_json(struct json *j, const char *key, struct stall_summary *sum,
			 const struct tsc_clock *tsc)
{
	stall_summary_sort(sum);
	json_array_begin(j, key);
	for (int k = 0; k < sum->n; k++) {
		json_object_begin(j, NULL);
		json_str(j, "cause", sum->rows[k].label);
		json_str(j, "kind", stall_kind_name[sum->rows[k].kind]);
		json_uint(j, "count", sum->rows[k].count);
		json_uint(j, "total_ns", tsc_cycles_to_ns(tsc, sum->rows[k].total));
		json_uint(j, "max_ns", tsc_cycles_to_ns(tsc, sum->rows[k].max));
		json_object_end(j);
	}
	json_array_end(j);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "intervals", required_argument, NULL, 'i' },
		{ "json", required_argument, NULL, 'j' },
		{ "top", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *intervals = NULL, *out = NULL;
	int cpu = -1, top = 20, pid = -1, c, rc;
	struct trace_session *t;
	struct stall_model *m;
	struct stall_summary all = { 0 }, tail = { 0 };
	struct stall_cause cause[MAX_CAUSES];
	struct tsc_clock tsc;
	struct span *s;
	uint32_t *order;
	uint64_t *guest;
	char err[256], line[64];
	size_t n = 0, ntail;
	struct json j;
	FILE *f;

	while ((c = getopt_long(argc, argv, "c:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c': cpu = atoi(optarg); break;
		case 'i': intervals = optarg; break;
		case 'j': out = optarg; break;
		case 't': top = atoi(optarg); break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (cpu < 0 || !intervals || !out || optind < argc)
		usage(2);
	if (tsc_calibrate(&tsc, 0) < 0) {
		fprintf(stderr, "tracecell: TSC calibration failed\n");
		return 1;
	}
	rc = trace_start(&t, cpu, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "tracecell: cannot trace CPU %d: %s\n", cpu, err);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		sscanf(line, "pid %d", &pid);
	trace_stop(t);

	s = read_intervals(intervals, &n);
	if (!s) {
		fprintf(stderr, "tracecell: cannot read %s: %s\n", intervals, strerror(errno));
		trace_close(t);
		return 1;
	}
	order = malloc((n ? n : 1) * sizeof(*order));
	guest = calloc(n ? n : 1, sizeof(*guest));
	if (!order || !guest || stall_model_build(&m, t, cpu, pid, &tsc) < 0) {
		fprintf(stderr, "tracecell: out of memory\n");
		trace_close(t);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, n, sizeof(*order), by_length_desc, s);
	ntail = n / 100 ? n / 100 : (n ? 1 : 0);

	f = fopen(out, "we");
	if (!f) {
		fprintf(stderr, "tracecell: cannot write %s: %s\n", out, strerror(errno));
		trace_close(t);
		return 1;
	}
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_bool(&j, "traced", true);
	json_int(&j, "cpu", cpu);
	json_int(&j, "pid", pid);
	json_str(&j, "trace_clock", trace_clock_name(t));
	json_uint(&j, "events_lost", trace_lost(t));
	json_uint(&j, "intervals", n);
	json_array_begin(&j, "top");
	for (size_t r = 0; r < n; r++) {
		size_t i = order[r];
		/* host: whatever no activity covered is left to the reader,
		 * who knows which part of the interval is the work itself */
		int nc = stall_attribute(m, s[i].a, s[i].b, UINT64_MAX, cause, MAX_CAUSES, &guest[i]);

		stall_summary_add(&all, cause, nc);
		if (r < ntail)
			stall_summary_add(&tail, cause, nc);
		if (r >= (size_t)top)
			continue;
		json_object_begin(&j, NULL);
		json_uint(&j, "index", i);
		json_uint(&j, "ns", tsc_cycles_to_ns(&tsc, s[i].b - s[i].a));
		json_uint(&j, "guest_ns", tsc_cycles_to_ns(&tsc, guest[i]));
		json_array_begin(&j, "causes");
		for (int k = 0; k < nc; k++)
			stall_cause_json(&j, &cause[k], &tsc);
		json_array_end(&j);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array_begin(&j, "guest_ns");
	for (size_t i = 0; i < n; i++)
		json_uint(&j, NULL, tsc_cycles_to_ns(&tsc, guest[i]));
	json_array_end(&j);
	summary_json(&j, "summary_tail", &tail, &tsc);
	summary_json(&j, "summary", &all, &tsc);
	json_object_end(&j);
	fputc('\n', f);
	rc = fclose(f) ? 1 : 0;
	stall_model_free(m);
	trace_close(t);
	return rc;
}
