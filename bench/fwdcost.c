/* fwdcost: the cost of one system call, as the program sees it.
 *
 * Times N back-to-back calls with the TSC, one sample per call: getppid
 * (the round trip alone) and write of 4 KiB to /dev/null (a call with a
 * payload).  Run it plain for the native cost, under `detach run` for the
 * forwarded one; detach-fwdcost (tools/detach_tools/fwdcost.py) runs the
 * configurations interleaved.
 *
 * gettid and plaincall: the cost of reaching the runtime.  gettid is glibc's
 * wrapper (its own `syscall` site), which the runtime answers without the
 * kernel (an emulated call); plaincall is a function of the same shape, a
 * call through a pointer that returns a number kept in memory.  Their
 * difference is what interception adds to a call that does nothing.  Both
 * are short: a sample times BATCH calls.
 *
 * --mailbox CPU: the floor of any forwarding design.  No interception: each
 * call is handed to a thread spinning on CPU over the runtime's own mailbox
 * (struct mailbox, the same cache-line layout), which runs it and replies;
 * the caller spins on the reply line as a detached thread does.
 *
 * --seccomp N: first installs a seccomp filter of N instructions that
 * allows every call after N - 2 compares of the call's number (an
 * allowlist's linear scan): natively the kernel runs it at every call,
 * under detach the runtime does (src/runtime/sandbox.c).
 *
 *   fwdcost [-n SAMPLES] [-c CPU] [--mailbox CPU] [--seccomp N] [--json FILE]
 */
#include "runtime/thread.h"
#include "lib/stats.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* calls_per_sample: one TSC sample times that many calls back to back (the
 * TSC of a VM may tick in steps of 10 ns, as long as a short call) */
struct result { const char *name; unsigned calls_per_sample; uint64_t *cycles; };

/* plaincall: what gettid would be without the kernel or the runtime.  The
 * pointer is volatile so that the call stays a call (glibc's gettid is
 * reached through the PLT, an indirect jump). */
static pid_t cached_tid;
static __attribute__((noinline)) pid_t plain_gettid(void)
{
	return *(volatile pid_t *)&cached_tid;
}
static pid_t (*volatile plaincall)(void) = plain_gettid;

/* ---- --mailbox: a bare request/reply, no interception -------------------- */
static struct mailbox mb;
static int server_cpu = -1;

static void *server(void *arg)
{
	uint64_t seen = 0, seq;

	(void)arg;
	for (;;) {
		while ((seq = __atomic_load_n(&mb.req_seq, __ATOMIC_ACQUIRE)) == seen)
			cpu_relax();
		seen = seq;
		mb.ret = syscall(mb.nr, mb.args[0], mb.args[1], mb.args[2], mb.args[3], mb.args[4], mb.args[5]);
		__atomic_store_n(&mb.done_seq, seq, __ATOMIC_RELEASE);
	}
	return NULL;
}

static long call(long nr, long a0, long a1, long a2)
{
	if (server_cpu < 0)
		return syscall(nr, a0, a1, a2);
	uint64_t seq = mb.req_seq + 1;
	mb.nr = nr;
	mb.args[0] = a0;
	mb.args[1] = a1;
	mb.args[2] = a2;
	__atomic_store_n(&mb.req_seq, seq, __ATOMIC_RELEASE);
	while (__atomic_load_n(&mb.done_seq, __ATOMIC_ACQUIRE) != seq)
		cpu_relax();
	return mb.ret;
}

static void start_server(void)
{
	pthread_attr_t attr;
	cpu_set_t set;
	pthread_t th;

	CPU_ZERO(&set);
	CPU_SET(server_cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, server, NULL)) {
		fprintf(stderr, "fwdcost: error: cannot start the mailbox thread on CPU %d\n", server_cpu);
		exit(1);
	}
	pthread_attr_destroy(&attr);
}

enum { GETPPID, WRITE4K, GETTID, PLAINCALL, NCALLS };
#define BATCH 16

static void measure(struct result *r, int which, size_t n, int fd, const char *buf)
{
	for (size_t i = 0; i < n + n / 10; i++) {       /* first tenth: warm-up */
		uint64_t t0 = rdtscp(), t1;
		switch (which) {
		case GETPPID:
			call(SYS_getppid, 0, 0, 0);
			break;
		case WRITE4K:
			if (call(SYS_write, fd, (long)buf, 4096) != 4096)
				abort();
			break;
		case GETTID:                    /* never through the mailbox */
			for (int k = 0; k < BATCH; k++)
				if (gettid() != cached_tid)
					abort();
			break;
		case PLAINCALL:
			for (int k = 0; k < BATCH; k++)
				if (plaincall() != cached_tid)
					abort();
			break;
		}
		t1 = rdtscp();
		if (i >= n / 10)
			r->cycles[i - n / 10] = t1 - t0;
	}
}

static void summary(struct json *j, const struct result *r, size_t n, const struct tsc_clock *c)
{
	uint64_t *s = malloc(n * sizeof(*s));
	const double pct[] = { 50, 99, 99.9, 100 };
	const char *key[] = { "p50_ns", "p99_ns", "p999_ns", "max_ns" };

	memcpy(s, r->cycles, n * sizeof(*s));
	stats_sort_u64(s, n);
	printf("%-9s", r->name);
	json_object_begin(j, r->name);
	json_uint(j, "calls_per_sample", r->calls_per_sample);
	for (int k = 0; k < 4; k++) {
		double ns = (double)tsc_cycles_to_ns(c, stats_pct_sorted_u64(s, n, pct[k])) / r->calls_per_sample;
		printf("  %s %9.1f", key[k], ns);
		json_double(j, key[k], ns);
	}
	json_array_begin(j, "cycles");
	for (size_t i = 0; i < n; i++)
		json_uint(j, NULL, r->cycles[i]);
	json_array_end(j);
	json_object_end(j);
	putchar('\n');
	free(s);
}

/* An allow-all filter of n instructions: the call's number, n - 2 compares
 * that never match, ALLOW. */
static int install_filter(unsigned n)
{
	struct sock_filter *f = calloc(n, sizeof(*f));
	struct sock_fprog p = { .len = (unsigned short)n, .filter = f };
	int r;

	if (!f)
		return -1;
	f[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (unsigned i = 1; i + 1 < n; i++)
		f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 100000 + i, 0, 0);
	f[n - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p);
	free(f);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "samples", required_argument, NULL, 'n' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "mailbox", required_argument, NULL, 'm' },
		{ "json", required_argument, NULL, 'j' },
		{ "seccomp", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_header h;
	struct tsc_clock clk;
	struct result res[NCALLS] = {
		[GETPPID] = { "getppid", 1, NULL }, [WRITE4K] = { "write4k", 1, NULL },
		[GETTID] = { "gettid", BATCH, NULL }, [PLAINCALL] = { "plaincall", BATCH, NULL },
	};
	const char *json_path = NULL;
	size_t n = 100000;
	int c, cpu = -1, fd;
	unsigned filter_len = 0;
	static char buf[4096];

	run_header_init(&h, argc, argv);
	while ((c = getopt_long(argc, argv, "n:c:m:j:s:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': n = strtoul(optarg, NULL, 10); break;
		case 'c': cpu = atoi(optarg); break;
		case 'm': server_cpu = atoi(optarg); break;
		case 'j': json_path = optarg; break;
		case 's': filter_len = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h':
			printf("usage: fwdcost [-n SAMPLES] [-c CPU] [--mailbox CPU] [--seccomp N] [--json FILE]\n"
			       "Times getppid and a 4 KiB write to /dev/null, one TSC sample per call;\n"
			       "then gettid and a plain function call of the same shape (the cost of\n"
			       "reaching an emulated call), 16 calls a sample.\n"
			       "--mailbox CPU: getppid and write run on a thread spinning on CPU, handed\n"
			       "over through the runtime's mailbox layout (the floor of forwarding).\n"
			       "--seccomp N: an allow-all seccomp filter of N instructions (N-2 compares)\n"
			       "judges every call.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (filter_len && (filter_len < 2 || filter_len > BPF_MAXINSNS)) {
		fprintf(stderr, "fwdcost: error: --seccomp wants 2 to %d instructions\n", BPF_MAXINSNS);
		return 2;
	}
	if (n < 10) {
		fprintf(stderr, "fwdcost: error: --samples must be at least 10\n");
		return 2;
	}
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "fwdcost: error: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
			return 1;
		}
	}
	if (tsc_calibrate(&clk, 0)) {
		fprintf(stderr, "fwdcost: error: TSC calibration failed\n");
		return 1;
	}
	h.tsc_hz = clk.hz;
	if (server_cpu >= 0)
		start_server();
	if (filter_len && install_filter(filter_len)) {
		fprintf(stderr, "fwdcost: error: cannot install a seccomp filter: %s\n", strerror(errno));
		return 1;
	}
	fd = open("/dev/null", O_WRONLY);
	cached_tid = gettid();
	for (int i = 0; i < NCALLS; i++) {
		res[i].cycles = calloc(n, sizeof(uint64_t));
		if (!res[i].cycles)
			return 1;
		measure(&res[i], i, n, fd, buf);
	}
	close(fd);

	FILE *f = json_path ? fopen(json_path, "w") : NULL;
	struct json j;
	if (json_path && !f) {
		fprintf(stderr, "fwdcost: error: cannot write %s: %s\n", json_path, strerror(errno));
		return 1;
	}
	json_init(&j, f ? f : fopen("/dev/null", "w"));
	json_object_begin(&j, NULL);
	json_common_header(&j, &h, 0);
	json_uint(&j, "samples", n);
	json_uint(&j, "seccomp_insns", filter_len);
	for (int i = 0; i < NCALLS; i++)
		summary(&j, &res[i], n, &clk);
	json_object_end(&j);
	if (f)
		fclose(f);
	return 0;
}
