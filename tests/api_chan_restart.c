/* Description: a detached 1 kHz producer and a Linux consumer process that
 * is killed (SIGKILL, five times at random moments while it sleeps in
 * dt_chan_get) and once dies of SIGSEGV in the middle of copying a message
 * out, each time restarted: the stream arrives whole (no message lost,
 * none twice: a get that did not return did not take its message), the
 * producer sees -EPIPE while no consumer lives and never stalls (no put
 * takes a period unless Linux preempted it meanwhile, by the kernel's
 * count; its kernel counters stay flat).
 * Timeout: 120 */
#include "helpers/t_chan.h"

#include <spawn.h>
#include <sys/mman.h>

#define N 3000
#define PERIOD_NS 1000000ull
#define SEC 1000000000ull
#define KILLS 5

static char name[64];
struct log {                                    /* a dt_shm region the consumers share */
	volatile uint64_t next, count, dups, gaps, generations;
};
static struct log *lg;

static int consumer(bool die_in_copy)
{
	struct dt_chan *c;
	uint64_t v;
	long n;
	int err = -EBUSY;

	for (int i = 0; i < 200 && err == -EBUSY; i++)
		if ((err = dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c)) == -EBUSY)
			usleep(10000);
	if (err)
		return 2;
	lg->generations++;
	if (die_in_copy) {
		/* 4 bytes before an inaccessible page: the copy of the next
		 * message faults half way */
		char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED || mprotect(p + 4096, 4096, PROT_NONE))
			return 3;
		dt_chan_get(c, p + 4092, 8, dt_now_ns() + 5 * SEC);
		return 4;                                /* not reached */
	}
	for (;;) {
		n = dt_chan_get(c, &v, sizeof(v), dt_now_ns() + 5 * SEC);
		if (n != sizeof(v))
			continue;
		if (v == lg->next) {
			lg->next = v + 1;
			lg->count++;
		} else if (v < lg->next) {
			lg->dups++;
		} else {
			lg->gaps++;
			lg->next = v + 1;
		}
	}
}

/* A consumer is this program again, started by posix_spawn (a vfork: a
 * fork would write-protect the detached producer's pages, and its next
 * stores would fault). */
static pid_t spawn(bool die_in_copy)
{
	char *args[] = { "api_chan_restart", die_in_copy ? "segv" : "consumer", name, NULL };
	pid_t pid = -1;

	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ))
		return -1;
	return pid;
}

static struct dt_chan *prod;
static volatile int producer_done;

static void *producer(void *arg)
{
	struct t_kernel k0, k1;
	pid_t me = t_gettid();
	uint64_t seq = 0, next, t0, epipe = 0, full = 0, bad = 0, put_max = 0, late_max = 0;
	uint64_t long_puts = 0, stalls = 0;
	long long preempted = t_task_value(me, "status", "nonvoluntary_ctxt_switches"), now_preempted;

	(void)arg;
	if (t_detach_self())
		return NULL;
	t_kernel_read(me, &k0);
	t0 = next = dt_now_ns();
	while (seq < N) {
		next += PERIOD_NS;
		dt_wait_until(next);
		uint64_t a = dt_now_ns();
		int err = dt_chan_put(prod, &seq, sizeof(seq));
		uint64_t b = dt_now_ns();
		if (b - a > put_max)
			put_max = b - a;
		/* A put longer than a period is a stall of ours unless Linux
		 * took the CPU meanwhile (a CPU not isolated, a loaded machine):
		 * the kernel's count of preemptions since the last put says
		 * which (read through the proxy: no call on this CPU). */
		now_preempted = t_task_value(me, "status", "nonvoluntary_ctxt_switches");
		if (b - a >= PERIOD_NS) {
			long_puts++;
			stalls += now_preempted == preempted;
		}
		preempted = now_preempted;
		if (a - next > late_max)
			late_max = a - next;
		if (err == 0)
			seq++;
		else if (err == -EPIPE)
			epipe++;
		else if (err == -EAGAIN)
			full++;
		else
			bad++;
	}
	t_kernel_read(me, &k1);
	dt_attach();
	printf("producer: %d messages, -EPIPE %llu periods, full %llu, longest put %.1f us, latest period start %.1f us, "
	       "%llu puts of a period or more (%llu of them without a preemption)\n",
	       N, (unsigned long long)epipe, (unsigned long long)full, (double)put_max / 1e3, (double)late_max / 1e3,
	       (unsigned long long)long_puts, (unsigned long long)stalls);
	t_check(bad == 0, "%llu undocumented put results", (unsigned long long)bad);
	t_check(epipe > 0, "the producer never saw -EPIPE while its consumer was dead");
	t_check(preempted >= 0, "cannot read the producer's nonvoluntary_ctxt_switches");
	t_check(stalls == 0, "%llu puts took a period or more (longest %.1f us) with no preemption by Linux",
		(unsigned long long)stalls, (double)put_max / 1e3);
	t_kernel_flat("detached producer", &k0, &k1, dt_now_ns() - t0);
	producer_done = 1;
	return NULL;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_text_file(path, buf, sizeof(buf)) || !(p = strrchr(buf, ')')))
		return '?';
	return p[2];
}

int main(int argc, char **argv)
{
	pthread_t th;
	pid_t cons;
	int st;

	if (argc == 3) {                      /* a consumer: the region is the channel's name */
		snprintf(name, sizeof(name), "%s", argv[2]);
		if (dt_shm_open(name, 0, 0, (void **)&lg))
			return 2;
		return consumer(!strcmp(argv[1], "segv"));
	}
	t_chan_setup(name, sizeof(name), "t-restart");
	dt_chan_unlink(name);
	dt_shm_unlink(name);
	t_check(dt_shm_open(name, DT_CHAN_CREATE, sizeof(*lg), (void **)&lg) == 0, "region");
	t_check(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 65536, &prod) == 0, "open");
	if (t_failures)
		return t_done();
	srand((unsigned)getpid());
	cons = spawn(false);
	pthread_create(&th, NULL, producer, NULL);
	for (int k = 0; k <= KILLS; k++) {
		dt_wait_until(dt_now_ns() + (uint64_t)(150 + rand() % 250) * 1000000);
		if (k == 2) {
			/* one generation dies of SIGSEGV inside dt_chan_get */
			kill(cons, SIGKILL);
			waitpid(cons, &st, 0);
			cons = spawn(true);
			waitpid(cons, &st, 0);
			t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "the consumer did not die in its copy (%#x)", st);
		} else {
			/* while it sleeps in dt_chan_get, between messages */
			for (int i = 0; i < 1000 && proc_state(cons) != 'S'; i++)
				usleep(50);
			kill(cons, SIGKILL);
			waitpid(cons, &st, 0);
		}
		dt_wait_until(dt_now_ns() + (uint64_t)(rand() % 50) * 1000000);
		cons = spawn(false);
	}
	pthread_join(th, NULL);
	for (int i = 0; i < 500 && lg->next < N; i++)
		usleep(10000);
	kill(cons, SIGKILL);
	waitpid(cons, &st, 0);
	printf("consumers: %llu generations, %llu messages in order, next %llu, %llu duplicates, %llu gaps\n",
	       (unsigned long long)lg->generations, (unsigned long long)lg->count, (unsigned long long)lg->next,
	       (unsigned long long)lg->dups, (unsigned long long)lg->gaps);
	t_check(lg->next == N && lg->count == N, "the stream did not arrive whole");
	t_check(lg->dups == 0 && lg->gaps == 0, "duplicates or gaps");
	dt_chan_close(prod);
	dt_chan_unlink(name);
	dt_shm_close((void *)lg);
	dt_shm_unlink(name);
	return t_done();
}
