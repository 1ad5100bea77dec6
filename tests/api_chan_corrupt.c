/* Description: 1,000,000 random corruptions of two channels' shared
 * control words and message headers (indices, role words, waiter counts,
 * the creator's line, record headers in the ring) by a process that maps
 * them raw, while a detached thread keeps producing on one and consuming
 * the other, and Linux processes hold the other ends.  Nobody crashes
 * (buffers end at a guard page), nobody hangs (the detached loop keeps
 * going), the errors are the documented ones, corruption is seen
 * (-EBADMSG counted), the detached thread's kernel counters stay flat, and
 * once the corruption stops both channels carry intact messages again.
 * Timeout: 120 */
#include "helpers/t_chan.h"
#include "lib/util.h"

#include <sys/mman.h>

#define CORRUPTIONS 1000000
#define MSG T_MSG_SIZE
#define SEC 1000000000ull

static char down_name[64], up_name[64];          /* detached -> Linux, Linux -> detached */
struct shared {                                  /* a dt_shm region between the processes */
	volatile int go, corrupting, after, stop;
	volatile uint64_t detached_loops;
	volatile uint64_t valid_after[2], bad_results[3];
	volatile uint64_t calls_after[2];        /* the Linux peers' calls in the recovery window */
};
static struct shared *sh;

/* A buffer of exactly MSG bytes that ends at an inaccessible page. */
static struct msg *guarded_buffer(void)
{
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + 4096, 4096, PROT_NONE))
		return NULL;
	return (struct msg *)(p + 4096 - MSG);
}

static bool get_result_ok(long n)
{
	return (n >= 0 && n <= MSG) || n == -EAGAIN || n == -EPIPE || n == -EBADMSG || n == -EMSGSIZE ||
	       n == -ETIMEDOUT;
}

static int linux_consumer(void)
{
	struct dt_chan *c;
	struct msg *m = guarded_buffer();
	long n;

	if (!m || dt_chan_open(down_name, DT_CHAN_CONSUMER, 0, &c))
		return 2;
	while (!sh->stop) {
		n = dt_chan_get(c, m, MSG, dt_now_ns() + 1000000);
		if (!get_result_ok(n))
			sh->bad_results[0]++;
		if (n == MSG && msg_ok(m) && sh->after)
			sh->valid_after[0]++;
		if (sh->after)
			sh->calls_after[0]++;
	}
	return 0;
}

static int linux_producer(void)
{
	struct dt_chan *p;
	struct msg m;
	uint64_t seq = 0;
	int err;

	if (dt_chan_open(up_name, DT_CHAN_PRODUCER, 0, &p))
		return 2;
	while (!sh->stop) {
		msg_make(&m, seq);
		err = dt_chan_put(p, &m, sizeof(m));
		if (err == 0)
			seq++;
		else if (err != -EAGAIN && err != -EPIPE && err != -EBADMSG)
			sh->bad_results[1]++;
		if (sh->after)
			sh->calls_after[1]++;
		if (err)
			usleep(10);
	}
	return 0;
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	return xorshift64(&rnd_state);
}

/* A value a corrupter would write: anything, or something close enough to
 * the truth to pass a careless check. */
static uint64_t evil(uint64_t was, uint64_t ring)
{
	switch (rnd() % 6) {
	case 0: return rnd();
	case 1: return was + (rnd() % 64) - 32;
	case 2: return was + ring;
	case 3: return was - ring - 8;
	case 4: return 0;
	default: return was ^ (1ull << (rnd() % 64));
	}
}

static int corrupter(void)
{
	char path[2][256];
	uint8_t *map[2];
	const char *names[2] = { down_name, up_name };

	for (int i = 0; i < 2; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%s.chan", IPC_DIR, names[i]);
		int fd = open(path[i], O_RDWR);
		map[i] = fd < 0 ? MAP_FAILED : mmap(NULL, CHAN_HDR_BYTES + 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map[i] == MAP_FAILED)
			return 2;
		close(fd);
	}
	while (!sh->go)
		usleep(1000);
	sh->corrupting = 1;
	uint64_t pace = dt_cycles();
	for (long k = 0; k < CORRUPTIONS; k++) {
		uint8_t *m = map[rnd() & 1];
		struct chan_shared *h = (struct chan_shared *)m;
		uint64_t *w;
		switch (rnd() % 10) {
		case 0: w = &h->tail; break;
		case 1: w = &h->head; break;
		case 2: w = rnd() & 1 ? &h->producer : &h->consumer; break;
		case 3: w = (uint64_t *)&h->wake_wanted; break;
		case 4: w = rnd() & 1 ? &h->ring_bytes : &h->magic; break;
		default: {   /* a record header where one is, or anywhere */
			uint64_t pos = rnd() & 1 ? __atomic_load_n(&h->head, __ATOMIC_RELAXED) : rnd();
			w = (uint64_t *)(m + CHAN_HDR_BYTES + (pos & (65536 - 8)));
		}
		}
		__atomic_store_n(w, evil(__atomic_load_n(w, __ATOMIC_RELAXED), 65536), __ATOMIC_RELAXED);
		/* about 3 s for all of them, so both sides run meanwhile */
		pace += 6000;
		while (dt_cycles() < pace)
			cpu_relax();
	}
	sh->corrupting = 0;
	return 0;
}

static void *detached_loop(void *arg)
{
	struct dt_chan *down, *up;
	struct t_kernel k0, k1;
	struct msg m, *in = guarded_buffer();
	pid_t me = t_gettid();
	uint64_t seq = 0, t0, badmsg_put = 0, badmsg_get = 0;
	long n;
	int err;

	(void)arg;
	if (!in || dt_chan_open(down_name, DT_CHAN_PRODUCER, 0, &down) || dt_chan_open(up_name, DT_CHAN_CONSUMER, 0, &up)) {
		t_check(0, "detached side: open");
		return NULL;
	}
	if (t_detach_self())
		return NULL;
	t_kernel_read(me, &k0);
	t0 = dt_now_ns();
	while (!sh->stop) {
		msg_make(&m, seq);
		err = dt_chan_put(down, &m, sizeof(m));
		if (err == 0)
			seq++;
		else if (err == -EBADMSG)
			badmsg_put++;
		else if (err != -EAGAIN && err != -EPIPE)
			sh->bad_results[2]++;
		n = dt_chan_get(up, in, MSG, 0);
		if (n == -EBADMSG)
			badmsg_get++;
		else if (!get_result_ok(n))
			sh->bad_results[2]++;
		if (n == MSG && msg_ok(in) && sh->after)
			sh->valid_after[1]++;
		sh->detached_loops++;
	}
	t_kernel_read(me, &k1);
	dt_attach();
	printf("detached side: %llu loops, %llu messages put, -EBADMSG %llu on put, %llu on get\n",
	       (unsigned long long)sh->detached_loops, (unsigned long long)seq, (unsigned long long)badmsg_put,
	       (unsigned long long)badmsg_get);
	t_check(badmsg_put + badmsg_get > 0, "no corruption was ever seen");
	t_kernel_flat("detached side under corruption", &k0, &k1, dt_now_ns() - t0);
	dt_chan_close(down);
	dt_chan_close(up);
	return NULL;
}

/* A process's user and system time, in clock ticks (/proc/PID/stat fields
 * 14 and 15); -1 if unreadable. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long u, s;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_text_file(path, buf, sizeof(buf)) || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) != 2)
		return -1;
	return (long long)(u + s);
}

static pid_t spawn(int (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn());
	return pid;
}

int main(void)
{
	pthread_t th;
	pid_t kids[3];
	const char *what[3] = { "consumer", "producer", "corrupter" };
	int st;

	t_chan_pair(down_name, up_name, sizeof(down_name), "t-corrupt", sizeof(*sh), (void **)&sh);
	if (t_failures)
		return t_done();

	/* every fork before the detached thread runs: a fork write-protects
	 * the parent's private pages, and its next store to them faults */
	kids[0] = spawn(linux_consumer);
	kids[1] = spawn(linux_producer);
	kids[2] = spawn(corrupter);
	pthread_create(&th, NULL, detached_loop, NULL);
	dt_wait_until(dt_now_ns() + SEC / 5);
	sh->go = 1;
	/* the detached loop must keep going all along */
	uint64_t last = sh->detached_loops, stalls = 0;
	int raw;
	st = -2;
	for (int i = 0; i < 100 && (i < 5 || st == -2); i++) {
		dt_wait_until(dt_now_ns() + SEC / 10);
		if (sh->detached_loops == last)
			stalls++;
		last = sh->detached_loops;
		if (st == -2 && waitpid(kids[2], &raw, WNOHANG) == kids[2])
			st = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
	}
	if (st == -2)
		st = t_wait_child(kids[2]);
	t_check(st == 0, "the corrupter failed (%d)", st);
	t_check(stalls == 0, "the detached loop stood still for %llu tenths of a second", (unsigned long long)stalls);
	/* recovery: intact messages flow again both ways; the Linux peers'
	 * CPU time over the window tells a starved peer from a stuck channel */
	long long cpu0[2], cpu1[2];
	for (int i = 0; i < 2; i++)
		cpu0[i] = cpu_ticks(kids[i]);
	sh->after = 1;
	dt_wait_until(dt_now_ns() + SEC);
	for (int i = 0; i < 2; i++)
		cpu1[i] = cpu_ticks(kids[i]);
	sh->stop = 1;
	pthread_join(th, NULL);
	for (int i = 0; i < 2; i++) {
		st = t_wait_child(kids[i]);
		t_check(st == 0, "the Linux %s died or failed (%d)", what[i], st);
	}
	printf("after the corruption: %llu intact messages to Linux, %llu to the detached thread\n",
	       (unsigned long long)sh->valid_after[0], (unsigned long long)sh->valid_after[1]);
	for (int i = 0; i < 2; i++)
		printf("the Linux %s in that second: %llu calls, %lld ticks of CPU\n", what[i],
		       (unsigned long long)sh->calls_after[i], cpu1[i] - cpu0[i]);
	t_check(sh->valid_after[0] > 1000 && sh->valid_after[1] > 1000, "the channels did not recover");
	for (int i = 0; i < 3; i++)
		t_check(sh->bad_results[i] == 0, "%llu undocumented results (%d)", (unsigned long long)sh->bad_results[i], i);
	t_chan_pair_remove(down_name, up_name, sh);
	return t_done();
}
