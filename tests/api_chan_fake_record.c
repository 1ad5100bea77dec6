/* Description: a record header faked where the producer will put its next
 * record, taken by the consumer before the producer comes back to a ring
 * it last saw full.  One bit flipped in the marker that a put leaves there
 * makes such a header (a record of 0 bytes), as the random corruptions of
 * tests/api_chan_corrupt.c now and then do.  The consumer's head is then
 * one record beyond the producer's tail, and the header at the tail ends
 * where the head is: what a consumer sees while a producer is between its
 * header and its tail, so it waits.  The producer must not wait for it in
 * turn: both ways (a detached producer and a Linux consumer, a Linux
 * producer and a detached consumer) intact messages flow again.
 * Timeout: 60 */
#include "helpers/t_chan.h"

#include <sys/mman.h>

#define MSG T_MSG_SIZE
#define SEC 1000000000ull

static char down_name[64], up_name[64];          /* detached -> Linux, Linux -> detached */
enum { SETUP, FILL, DRAIN, FAKED, RUN, STOP };
struct shared {                                  /* a dt_shm region between the processes */
	volatile int phase, ready, filled[2], drained[2], taken[2];
	volatile long fake_got[2];
	volatile uint64_t intact[2], badmsg_put[2];
};
static struct shared *sh;

/* Waits (spinning: the detached thread may not sleep) for the phase, 10 s
 * at most. */
static bool phase_at_least(int p)
{
	uint64_t end = dt_now_ns() + 10 * SEC;

	while (sh->phase < p)
		if (dt_now_ns() > end)
			return false;
	return sh->phase != STOP || p == STOP;
}

/* A put until the ring is full (the producer's last look at the head saw
 * it full, so its next put looks at the head again). */
static bool fill(struct dt_chan *p)
{
	struct msg m;
	int err;

	msg_make(&m, 0);
	while ((err = dt_chan_put(p, &m, sizeof(m))) == 0)
		;
	return err == -EAGAIN;
}

/* Gets until the ring is empty, then until the faked record comes (its
 * size: 0). */
static bool drain_then_take(struct dt_chan *c, int i, uint64_t deadline_step)
{
	struct msg m;
	long n;

	while ((n = dt_chan_get(c, &m, sizeof(m), deadline_step ? dt_now_ns() + deadline_step : 0)) == MSG)
		;
	if (n != -EAGAIN && n != -ETIMEDOUT)
		return false;
	sh->drained[i] = 1;
	if (!phase_at_least(FAKED))
		return false;
	uint64_t end = dt_now_ns() + 5 * SEC;
	do
		n = dt_chan_get(c, &m, sizeof(m), deadline_step ? dt_now_ns() + deadline_step : 0);
	while ((n == -EAGAIN || n == -ETIMEDOUT) && dt_now_ns() < end);
	sh->fake_got[i] = n;
	sh->taken[i] = 1;
	return true;
}

static int linux_consumer(void)
{
	struct dt_chan *c;
	struct msg m;

	if (dt_chan_open(down_name, DT_CHAN_CONSUMER, 0, &c))
		return 2;
	__atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
	if (!phase_at_least(DRAIN) || !drain_then_take(c, 0, 1000000) || !phase_at_least(RUN))
		return 3;
	while (sh->phase != STOP)
		if (dt_chan_get(c, &m, MSG, dt_now_ns() + 1000000) == MSG && msg_ok(&m))
			sh->intact[0]++;
	return 0;
}

/* Puts message seq on c and counts it: the next seq once it went, a
 * refusal with -EBADMSG in badmsg_put[dir] (0 detached -> Linux, 1 back).
 * dt_chan_put's result. */
static int put_next(struct dt_chan *c, uint64_t *seq, int dir)
{
	struct msg m;
	int err;

	msg_make(&m, *seq);
	err = dt_chan_put(c, &m, sizeof(m));
	if (err == 0)
		(*seq)++;
	else if (err == -EBADMSG)
		sh->badmsg_put[dir]++;
	return err;
}

static int linux_producer(void)
{
	struct dt_chan *p;
	uint64_t seq = 1;

	if (dt_chan_open(up_name, DT_CHAN_PRODUCER, 0, &p))
		return 2;
	__atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
	if (!phase_at_least(FILL) || !fill(p))
		return 3;
	sh->filled[1] = 1;
	if (!phase_at_least(RUN))
		return 4;
	while (sh->phase != STOP)
		if (put_next(p, &seq, 1))
			usleep(10);
	return 0;
}

static void *detached_side(void *arg)
{
	struct dt_chan *down, *up;
	struct msg in;
	uint64_t seq = 1;

	(void)arg;
	if (dt_chan_open(down_name, DT_CHAN_PRODUCER, 0, &down) || dt_chan_open(up_name, DT_CHAN_CONSUMER, 0, &up)) {
		t_check(0, "detached side: open");
		return NULL;
	}
	if (t_detach_self())
		return NULL;
	__atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
	if (phase_at_least(FILL) && fill(down)) {
		sh->filled[0] = 1;
		if (phase_at_least(DRAIN) && drain_then_take(up, 1, 0) && phase_at_least(RUN)) {
			while (sh->phase != STOP) {
				put_next(down, &seq, 0);
				if (dt_chan_get(up, &in, MSG, 0) == MSG && msg_ok(&in))
					sh->intact[1]++;
			}
		}
	}
	dt_attach();
	dt_chan_close(down);
	dt_chan_close(up);
	return NULL;
}

static pid_t spawn(int (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn());
	return pid;
}

/* The channel file mapped raw, as a corrupter maps it. */
static struct chan_shared *map_raw(const char *name)
{
	char path[256];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s.chan", IPC_DIR, name);
	if ((fd = open(path, O_RDWR)) < 0)
		return NULL;
	p = mmap(NULL, CHAN_HDR_BYTES + 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static bool wait_both(volatile int *flags, const char *what)
{
	uint64_t end = dt_now_ns() + 10 * SEC;

	while (!(flags[0] && flags[1]) && dt_now_ns() < end)
		usleep(1000);
	t_check(flags[0] && flags[1], "%s: down %d, up %d", what, flags[0], flags[1]);
	return flags[0] && flags[1];
}

int main(void)
{
	struct chan_shared *raw[2];
	const char *dir[2] = { "detached -> Linux", "Linux -> detached" };
	pthread_t th;
	pid_t kids[2];
	uint64_t t, h;
	int st;

	t_chan_pair(down_name, up_name, sizeof(down_name), "t-fake", sizeof(*sh), (void **)&sh);
	raw[0] = map_raw(down_name);
	raw[1] = map_raw(up_name);
	t_check(raw[0] && raw[1], "raw maps");
	if (t_failures)
		return t_done();

	/* every fork before the detached thread runs (api_chan_corrupt.c) */
	kids[0] = spawn(linux_consumer);
	kids[1] = spawn(linux_producer);
	pthread_create(&th, NULL, detached_side, NULL);
	uint64_t end = dt_now_ns() + 10 * SEC;
	while (sh->ready < 3 && dt_now_ns() < end)
		usleep(1000);
	t_check(sh->ready == 3, "%d of 3 sides opened", sh->ready);

	/* both producers fill their ring, both consumers then empty it */
	if (!t_failures) {
		sh->phase = FILL;
		if (wait_both(sh->filled, "rings filled")) {
			sh->phase = DRAIN;
			wait_both(sh->drained, "rings drained");
		}
	}
	/* at the tail, where the last put left its marker, the header of a
	 * record of 0 bytes: the marker with bit 32 flipped */
	for (int i = 0; i < 2 && !t_failures; i++) {
		t = __atomic_load_n(&raw[i]->tail, __ATOMIC_ACQUIRE);
		h = __atomic_load_n(&raw[i]->head, __ATOMIC_ACQUIRE);
		uint64_t *at = (uint64_t *)((char *)raw[i] + CHAN_HDR_BYTES + (t & 65535));
		t_check(t == h && t > 0, "%s: empty ring expected, tail %llu head %llu", dir[i], (unsigned long long)t,
			(unsigned long long)h);
		t_check(*at == chan_marker(t), "%s: no marker at the tail", dir[i]);
		t_check((chan_marker(t) ^ 1ull << 32) == chan_header(t, 0), "the flipped marker is no header");
		__atomic_store_n(at, chan_marker(t) ^ 1ull << 32, __ATOMIC_RELEASE);
	}
	if (!t_failures) {
		sh->phase = FAKED;
		if (wait_both(sh->taken, "faked records taken"))
			for (int i = 0; i < 2; i++) {
				t = __atomic_load_n(&raw[i]->tail, __ATOMIC_ACQUIRE);
				h = __atomic_load_n(&raw[i]->head, __ATOMIC_ACQUIRE);
				printf("%s: the consumer got %ld, tail %llu, head %llu\n", dir[i], sh->fake_got[i],
				       (unsigned long long)t, (unsigned long long)h);
				t_check(sh->fake_got[i] == 0 && h == t + 8, "%s: the faked record was not taken", dir[i]);
			}
	}
	/* the producers come back: intact messages must flow both ways */
	if (!t_failures) {
		sh->phase = RUN;
		dt_wait_until(dt_now_ns() + SEC);
	}
	sh->phase = STOP;
	pthread_join(th, NULL);
	for (int i = 0; i < 2; i++) {
		st = t_wait_child(kids[i]);
		t_check(st == 0, "the Linux %s died or failed (%d)", i ? "producer" : "consumer", st);
	}
	for (int i = 0; i < 2; i++)
		printf("%s: %llu intact messages, -EBADMSG %llu on put\n", dir[i], (unsigned long long)sh->intact[i],
		       (unsigned long long)sh->badmsg_put[i]);
	t_check(sh->intact[0] > 1000 && sh->intact[1] > 1000, "the channels did not recover");
	t_chan_pair_remove(down_name, up_name, sh);
	return t_done();
}
