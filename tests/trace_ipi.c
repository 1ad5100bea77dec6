/* Description: src/lib/trace.c + stall.c name a TLB shootdown: a thread on
 * CPU 0 mprotects a page of the process while another thread spins on the
 * last CPU; the spinner's gaps carry a "tlb shootdown" cause sent from CPU 0
 * by the mprotecting thread (its tid), from the kernel's own tracepoints.
 * Timeout: 60 */
#include "lib/stall.h"
#include "lib/trace.h"
#include "lib/util.h"
#include "helpers/t.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_GAPS 200000

static atomic_bool stop;
static atomic_int sender_tid;
static volatile char *page;
static int probe_cpu;
static int probe_tid;
static uint64_t (*gaps)[2];
static size_t ngaps;

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void *probe(void *arg)
{
	uint64_t prev, now, thr = 400;   /* cycles: any IPI is longer */

	(void)arg;
	pin(probe_cpu);
	probe_tid = (int)gettid();
	prev = rdtsc();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		now = rdtsc();
		(void)page[0];   /* keep this mm's translation of the page live here */
		if (now - prev > thr && ngaps < MAX_GAPS) {
			gaps[ngaps][0] = prev;
			gaps[ngaps++][1] = now;
		}
		prev = now;
	}
	return NULL;
}

static void *sender(void *arg)
{
	struct timespec ms = { 0, 5000000 };

	(void)arg;
	pin(0);
	prctl(PR_SET_NAME, "tlb-sender");
	atomic_store(&sender_tid, (int)gettid());
	for (int i = 0; i < 200; i++) {
		page[0] = (char)i;                          /* writable again */
		mprotect((void *)page, 4096, PROT_READ);    /* shoots down the write mapping */
		mprotect((void *)page, 4096, PROT_READ | PROT_WRITE);
		nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(void)
{
	struct trace_session *t;
	struct stall_model *m;
	struct tsc_clock tsc;
	struct stall_cause c[8];
	pthread_t p, s;
	cpu_set_t on;
	char err[256];
	int found = 0, ipis = 0, rc;

	if (geteuid() != 0)
		t_skip("needs root (tracefs)");
	cpus_online(&on);
	if (CPU_COUNT(&on) < 2 || !CPU_ISSET(0, &on))
		t_skip("needs 2 CPUs");
	probe_cpu = cpuset_nth(&on, CPU_COUNT(&on) - 1);
	t_check(tsc_calibrate(&tsc, 0) == 0, "TSC calibration");
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	gaps = malloc(MAX_GAPS * sizeof(*gaps));
	if (page == MAP_FAILED || !gaps)
		t_skip("out of memory");
	rc = trace_start(&t, probe_cpu, err, sizeof(err));
	if (rc == -ENOENT || rc == -ENODEV)
		t_skip("no tracefs: %s", err);
	t_check(rc == 0, "trace_start: %s", err);
	if (rc)
		return t_done();
	pin(0);
	pthread_create(&p, NULL, probe, NULL);
	usleep(50000);
	pthread_create(&s, NULL, sender, NULL);
	pthread_join(s, NULL);
	atomic_store(&stop, true);
	pthread_join(p, NULL);
	trace_stop(t);

	t_check(stall_model_build(&m, t, probe_cpu, probe_tid, &tsc) == 0, "model");
	for (size_t i = 0; i < ngaps; i++) {
		uint64_t guest;
		int n = stall_attribute(m, gaps[i][0], gaps[i][1], UINT64_MAX, c, 8, &guest);
		for (int k = 0; k < n; k++) {
			char label[160];
			if (c[k].kind != SK_TLB && c[k].kind != SK_IPI)
				continue;
			ipis++;
			if (c[k].kind != SK_TLB || c[k].sender_pid != atomic_load(&sender_tid))
				continue;
			t_check(c[k].sender_cpu == 0, "sender CPU %d", c[k].sender_cpu);
			if (!found++) {
				stall_label(&c[k], true, label, sizeof(label));
				printf("gap of %llu cycles: %s\n", (unsigned long long)(gaps[i][1] - gaps[i][0]), label);
			}
		}
	}
	printf("%zu gaps, %d with an IPI, %d TLB shootdowns from the sender (tid %d); %llu events lost\n",
	       ngaps, ipis, found, atomic_load(&sender_tid), (unsigned long long)trace_lost(t));
	t_check(found > 0, "no gap names a TLB shootdown from tid %d", atomic_load(&sender_tid));
	stall_model_free(m);
	trace_close(t);
	return t_done();
}
