/* Description: 10,000,000 ordered messages from a detached producer to a
 * Linux consumer process (which blocks in dt_chan_get when the ring is
 * empty and is woken by the housekeeping watcher): none lost, duplicated or
 * reordered, and the producer's kernel counters (syscr, syscw, voluntary
 * switches, stime) flat while it streams. */
#include "helpers/t_chan.h"

#define N 10000000ull
#define WAIT_NS 10000000000ull

static char name[64];
static struct dt_chan *prod;

static int consumer(void)
{
	struct dt_chan *c;
	uint64_t expect = 0, v;
	long n;
	int err = dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c);

	if (err) {
		fprintf(stderr, "consumer: open: %s\n", strerror(-err));
		return 2;
	}
	while (expect < N) {
		n = dt_chan_get(c, &v, sizeof(v), dt_now_ns() + WAIT_NS);
		if (n != sizeof(v)) {
			fprintf(stderr, "consumer: get after %llu: %ld (%s)\n", (unsigned long long)expect, n,
				strerror((int)-n));
			return 1;
		}
		if (v != expect) {
			fprintf(stderr, "consumer: message %llu carries %llu\n", (unsigned long long)expect,
				(unsigned long long)v);
			return 1;
		}
		expect++;
	}
	struct dt_chan_stats st;
	dt_chan_stats(c, &st);
	printf("consumer: %llu messages in order, %llu corrupt\n", (unsigned long long)st.messages,
	       (unsigned long long)st.corrupt);
	dt_chan_close(c);
	return st.corrupt ? 1 : 0;
}

static void *producer(void *arg)
{
	struct t_kernel k0, k1;
	uint64_t seq = 0, full = 0, t0, t1, give_up;
	pid_t me = t_gettid();
	int err = 0;

	(void)arg;
	if (t_detach_self())
		return NULL;
	t_kernel_read(me, &k0);
	give_up = dt_now_ns() + WAIT_NS;
	while ((err = dt_chan_put(prod, &seq, sizeof(seq))) == -EPIPE && dt_now_ns() < give_up)
		cpu_relax();                 /* until the consumer has opened */
	t0 = dt_now_ns();
	for (seq = 1; !err && seq < N;) {
		err = dt_chan_put(prod, &seq, sizeof(seq));
		if (err == -EAGAIN) {
			full++;
			err = 0;
			cpu_relax();
			continue;
		}
		seq++;
	}
	t1 = dt_now_ns();
	t_kernel_read(me, &k1);
	dt_attach();
	t_check(!err, "put of message %llu: %s", (unsigned long long)seq, strerror(-err));
	printf("producer: %llu messages in %.3f s (%.2f M/s), ring full %llu times\n", (unsigned long long)seq,
	       (double)(t1 - t0) / 1e9, (double)seq * 1e3 / (double)(t1 - t0), (unsigned long long)full);
	t_kernel_flat("producer while streaming", &k0, &k1, t1 - t0);
	return NULL;
}

int main(void)
{
	pid_t child;
	int err, st;

	t_chan_setup(name, sizeof(name), "t-stream");
	dt_chan_unlink(name);
	if ((err = dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 256 * 1024, &prod))) {
		fprintf(stderr, "open: %s\n", strerror(-err));
		return 1;
	}
	child = fork();
	if (child == 0)
		_exit(consumer());
	t_run_detached(producer, NULL);
	st = t_wait_child(child);
	t_check(st == 0, "the consumer failed (status %d)", st);
	dt_chan_close(prod);
	dt_chan_unlink(name);
	return t_done();
}
