/* chan: what a message costs between a detached thread and Linux, beside
 * what it costs between two Linux threads on the same two CPUs (a pipe, an
 * eventfd) and the floor, a bare cache line bounced between them.  Every
 * configuration runs in every round, in rotated order, so drift and noise
 * fall on all of them alike (docs/ipc.md, `detach bench --program chan`).
 *
 * Latency: a ping-pong of 64-byte messages, the near side on CPU -c (the
 * detached thread where the configuration says so), the far side a Linux
 * thread on -H.  Each sender stamps dt_now_ns() (the TSC) into a line of
 * its own before sending, each receiver subtracts it from its own
 * dt_now_ns() after receiving: one-way near->far and far->near.  Those
 * two are read on two CPUs' TSCs, so each carries the offset between them
 * (with opposite signs) and may come out negative: they are kept signed,
 * and only their sum is free of the offset.  The round trip is the near
 * side's own TSC before its send and after its receive.
 *   cacheline   two plain threads, a store and a spin on each side
 *   cacheline-2 the same with 64 bytes on a second line, written before
 *               the flag and read after it: the fewest lines a 64-byte
 *               message and the word that says it is there can take
 *   ring-bare   a channel's records (header word, 64 bytes, the marker:
 *               lib/ipc.h) through a plain ring of the channels' size, a
 *               spin on the header: what the layout costs, on lines that
 *               move on with every message, without the library's checks
 *   chan-poll   detached near side; the Linux side polls dt_chan_get (deadline 0)
 *   chan-block  detached near side; the Linux side sleeps in dt_chan_get,
 *               woken by the watcher
 *   pipe        two plain threads, blocking pipes
 *   eventfd     two plain threads, blocking eventfds
 * Throughput: N messages of 64 bytes one way, the receiver spinning (chan)
 * or blocking (pipe, eventfd): detached -> Linux and Linux -> detached. */
#include "lib/bench.h"
#include "lib/ipc.h"
#include "lib/stats.h"

#include <detach/detach.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define MSG 64
#define SETTLE_NS 20000000ull    /* after dt_detach: twice the proxy's 10 ms of short polls */
enum cfg { CACHELINE, CACHELINE2, RING_BARE, CHAN_POLL, CHAN_BLOCK, PIPE, EVENTFD, NCFG };
static const char *const cfg_name[NCFG] = { "cacheline", "cacheline-2", "ring-bare", "chan-poll", "chan-block",
					    "pipe", "eventfd" };
enum dir { NEAR_TO_FAR, FAR_TO_NEAR, ROUND_TRIP, NDIR };
static const char *const dir_name[NDIR] = { "detached_to_linux", "linux_to_detached", "round_trip" };
enum tput { T_CHAN_D2L, T_CHAN_L2D, T_PIPE, T_EVENTFD, NTPUT };
static const char *const tput_name[NTPUT] = { "chan detached->linux", "chan linux->detached",
					      "pipe (linux->linux)", "eventfd (linux->linux)" };

static struct {
	int cpu, hk;
	cpu_set_t home;                 /* the affinity we started with */
	uint64_t samples, rounds, msgs;
	uint64_t ring;                  /* bytes of the channels' rings, and ring-bare's */
	const char *json;
} o = { .cpu = -1, .hk = -1, .samples = 20000, .rounds = 5, .msgs = 2000000, .ring = 1 << 20 };

/* One direction of a link: down is near -> far, up is far -> near. */
enum way { DOWN, UP };
struct way_state {
	struct dt_chan *p, *c;
	int pipe[2], ev;
	uint64_t ev_credit;             /* eventfd: writes counted by a read, not yet taken */
	bool block;                     /* the receiver sleeps in dt_chan_get (chan-block, down) */
	_Alignas(64) volatile uint64_t line;    /* cacheline: the sequence number */
	_Alignas(64) char data[MSG];            /* cacheline-2: the message */
	uint8_t *ring;                          /* ring-bare: o.ring bytes */
	_Alignas(64) uint64_t sent;             /* ring-bare: the sender's position */
	_Alignas(64) uint64_t taken;            /* ring-bare: the receiver's */
	_Alignas(64) volatile uint64_t stamp;   /* dt_now_ns() at the send */
};

/* what the two sides share for one configuration */
static struct link {
	enum cfg cfg;
	bool tput, far_sends;           /* throughput run, and which way */
	uint64_t n;
	_Alignas(64) volatile int far_ready;
	uint64_t t_end;
	struct way_state w[2];
	int64_t *lat[NDIR];
} L;

/* ring-bare: MSG bytes to or from position pos of an o.ring-byte ring, as a
 * channel copies them (the bytes may wrap around its end). */
static void ring_copy(uint8_t *ring, uint64_t pos, char *m, bool in)
{
	size_t at = pos & (o.ring - 1), first = o.ring - at < MSG ? o.ring - at : MSG;

	if (in)
		memcpy(ring + at, m, first), memcpy(ring, m + first, MSG - first);
	else
		memcpy(m, ring + at, first), memcpy(m + first, ring, MSG - first);
}

static void way_send(enum way d, uint64_t i, char *m)
{
	struct way_state *w = &L.w[d];
	uint64_t one = 1;

	w->stamp = dt_now_ns();
	switch (L.cfg) {
	case CACHELINE: w->line = i + 1; break;
	case CACHELINE2:
		memcpy(w->data, m, MSG);
		/* release: the bytes before the flag, as a put's header */
		__atomic_store_n(&w->line, i + 1, __ATOMIC_RELEASE);
		break;
	case RING_BARE: {
		uint64_t at = w->sent, next = at + chan_record_bytes(MSG);
		ring_copy(w->ring, at + 8, m, true);
		__atomic_store_n((uint64_t *)(w->ring + (next & (o.ring - 1))), chan_marker(next), __ATOMIC_RELAXED);
		__atomic_store_n((uint64_t *)(w->ring + (at & (o.ring - 1))), chan_header(at, MSG), __ATOMIC_RELEASE);
		w->sent = next;
		break;
	}
	case CHAN_POLL:
	case CHAN_BLOCK: while (dt_chan_put(w->p, m, MSG) == -EAGAIN) cpu_relax(); break;
	case PIPE: if (write(w->pipe[1], m, MSG) != MSG) abort(); break;
	case EVENTFD: if (write(w->ev, &one, 8) != 8) abort(); break;
	default: break;
	}
}

static void way_recv(enum way d, uint64_t i, char *m)
{
	struct way_state *w = &L.w[d];
	uint64_t v;

	switch (L.cfg) {
	case CACHELINE: while (w->line != i + 1) cpu_relax(); break;
	case CACHELINE2:
		while (__atomic_load_n(&w->line, __ATOMIC_ACQUIRE) != i + 1)
			cpu_relax();
		memcpy(m, w->data, MSG);
		break;
	case RING_BARE:
		while (__atomic_load_n((uint64_t *)(w->ring + (w->taken & (o.ring - 1))), __ATOMIC_ACQUIRE) !=
		       chan_header(w->taken, MSG))
			cpu_relax();
		ring_copy(w->ring, w->taken + 8, m, false);
		w->taken += chan_record_bytes(MSG);
		break;
	case CHAN_POLL:
	case CHAN_BLOCK:
		if (w->block)
			while (dt_chan_get(w->c, m, MSG, dt_now_ns() + 1000000000ull) < 0) ;
		else
			while (dt_chan_get(w->c, m, MSG, 0) == -EAGAIN) cpu_relax();
		break;
	case PIPE: if (read(w->pipe[0], m, MSG) != MSG) abort(); break;
	case EVENTFD:
		/* writes made before one read add up in its counter: one read
		 * may stand for several messages */
		if (!w->ev_credit) {
			if (read(w->ev, &v, 8) != 8)
				abort();
			w->ev_credit = v;
		}
		w->ev_credit--;
		break;
	default: break;
	}
}

static void *far_side(void *arg)
{
	char m[MSG] = { 0 };

	(void)arg;
	bench_pin(o.hk);
	L.far_ready = 1;
	if (L.tput) {
		for (uint64_t i = 0; i < L.n; i++) {
			if (L.far_sends)
				way_send(UP, i, m);
			else
				way_recv(DOWN, i, m);
		}
		L.t_end = dt_now_ns();
		return NULL;
	}
	for (uint64_t i = 0; i < L.n; i++) {
		way_recv(DOWN, i, m);
		L.lat[NEAR_TO_FAR][i] = (int64_t)(dt_now_ns() - L.w[DOWN].stamp);
		way_send(UP, i, m);
	}
	return NULL;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "chan: error: %s: %s\n", what, strerror(err));
	exit(1);
}

/* Sets the link up for cfg; the chan configurations get fresh channels. */
static void link_open(enum cfg cfg)
{
	static int seq;
	char name[64];
	int err;

	memset(&L, 0, offsetof(struct link, lat));
	L.cfg = cfg;
	L.w[DOWN].block = cfg == CHAN_BLOCK;
	for (int d = DOWN; d <= UP; d++) {
		struct way_state *w = &L.w[d];
		if (cfg == CHAN_POLL || cfg == CHAN_BLOCK) {
			snprintf(name, sizeof(name), "bench-%d-%d", (int)getpid(), seq++);
			if ((err = dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, o.ring, &w->p)) ||
			    (err = dt_chan_open(name, DT_CHAN_CONSUMER, 0, &w->c)))
				die("dt_chan_open", -err);
			dt_chan_unlink(name);    /* the open handles keep it */
		} else if (cfg == RING_BARE) {
			/* zeros: no header of position 0; shared, as a channel's */
			w->ring = mmap(NULL, o.ring, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (w->ring == MAP_FAILED)
				die("mmap", errno);
		} else if (cfg == PIPE && pipe(w->pipe)) {
			die("pipe", errno);
		} else if (cfg == EVENTFD && (w->ev = eventfd(0, 0)) < 0) {
			die("eventfd", errno);
		}
	}
}

static void link_close(void)
{
	for (int d = DOWN; d <= UP; d++) {
		struct way_state *w = &L.w[d];
		if (w->p)
			dt_chan_close(w->p), dt_chan_close(w->c);
		if (L.cfg == PIPE)
			close(w->pipe[0]), close(w->pipe[1]);
		if (L.cfg == RING_BARE)
			munmap(w->ring, o.ring);
		if (L.cfg == EVENTFD)
			close(w->ev);
	}
}

/* One run of cfg; the near side is this thread, detached for chan. */
static uint64_t run_one(enum cfg cfg, bool tput, bool far_sends, uint64_t n, int64_t *lat[NDIR])
{
	pthread_t far;
	char m[MSG] = { 0 };
	uint64_t t0, result = 0;
	bool detached = cfg == CHAN_POLL || cfg == CHAN_BLOCK;
	int err;

	link_open(cfg);
	L.tput = tput;
	L.far_sends = far_sends;
	L.n = n;
	for (int d = 0; d < NDIR; d++)
		L.lat[d] = lat ? lat[d] : NULL;
	pthread_create(&far, NULL, far_side, NULL);
	while (!L.far_ready)
		cpu_relax();
	/* a run of a Linux configuration pinned this thread to o.cpu: the
	 * runtime takes its housekeeping CPUs from the affinity dt_detach finds */
	if (detached && sched_setaffinity(0, sizeof(o.home), &o.home))
		die("sched_setaffinity", errno);
	if (detached && (err = dt_detach(o.cpu)))
		die("dt_detach", -err);
	/* dt_detach forwarded calls: with one housekeeping CPU the proxy then
	 * polls every 50 us for 10 ms (docs/runtime.md) on the far side's CPU,
	 * and a far side that spins is preempted by it (about 30 us, seen on
	 * sched_switch).  The measurement starts in the steady state of a
	 * detached loop that makes no call, as the ring-bare runs do. */
	for (uint64_t settle = dt_now_ns() + SETTLE_NS; detached && dt_now_ns() < settle;)
		cpu_relax();
	if (!detached)
		bench_pin(o.cpu);
	t0 = dt_now_ns();
	if (tput) {
		for (uint64_t i = 0; i < n; i++) {
			if (far_sends)
				way_recv(UP, i, m);
			else
				way_send(DOWN, i, m);
		}
	} else {
		for (uint64_t i = 0; i < n; i++) {
			uint64_t a = dt_now_ns();
			way_send(DOWN, i, m);
			way_recv(UP, i, m);
			uint64_t b = dt_now_ns();
			lat[FAR_TO_NEAR][i] = (int64_t)(b - L.w[UP].stamp);
			lat[ROUND_TRIP][i] = (int64_t)(b - a);
		}
	}
	uint64_t t_near = dt_now_ns();
	if (detached)
		dt_attach();
	pthread_join(far, NULL);
	if (tput) {
		uint64_t end = far_sends ? t_near : L.t_end;
		result = (uint64_t)((double)n * 1e9 / (double)(end - t0));
	}
	link_close();
	return result;
}

static void usage(int st)
{
	fprintf(st ? stderr : stdout,
		"usage: chan [-c CPU] [-H CPU] [-s SAMPLES] [-r ROUNDS] [-n MESSAGES] [-R BYTES] [-j FILE]\n"
		"  -c CPU       the detached (near) side (default: the last online CPU)\n"
		"  -H CPU       the Linux (far) side (default: the first other online CPU)\n"
		"  -s SAMPLES   ping-pongs per configuration and round (default 20000)\n"
		"  -r ROUNDS    rounds, every configuration in each (default 5)\n"
		"  -n MESSAGES  messages per throughput run (default 2000000; pipe and eventfd a tenth)\n"
		"  -R BYTES     ring of the channels and of ring-bare, a power of two from 4096 (default 1 MiB)\n"
		"  -j FILE      JSON results\n");
	exit(st);
}

int main(int argc, char **argv)
{
	static int64_t *all[NCFG][NDIR];
	static uint64_t tputs[NTPUT][64];
	struct run_header h;
	int c;

	run_header_init(&h, argc, argv);
	while ((c = getopt(argc, argv, "c:H:s:r:n:R:j:h")) != -1) {
		switch (c) {
		case 'c': o.cpu = atoi(optarg); break;
		case 'H': o.hk = atoi(optarg); break;
		case 's': if (bench_parse_count(optarg, &o.samples) || !o.samples) usage(2); break;
		case 'r': if (bench_parse_count(optarg, &o.rounds) || !o.rounds || o.rounds > 64) usage(2); break;
		case 'n': if (bench_parse_count(optarg, &o.msgs) || o.msgs < 10) usage(2); break;
		case 'R':
			if (bench_parse_count(optarg, &o.ring) || o.ring < CHAN_RING_MIN || o.ring > CHAN_RING_MAX ||
			    (o.ring & (o.ring - 1)))
				usage(2);
			break;
		case 'j': o.json = optarg; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind < argc)
		usage(2);
	cpu_set_t online;
	cpus_online(&online);
	if (sched_getaffinity(0, sizeof(o.home), &o.home))
		die("sched_getaffinity", errno);
	if (CPU_COUNT(&online) < 2) {
		fprintf(stderr, "chan: error: needs 2 CPUs\n");
		return 1;
	}
	if (o.cpu < 0)
		o.cpu = cpuset_nth(&online, CPU_COUNT(&online) - 1);
	for (int i = 0; o.hk < 0 && i < CPU_COUNT(&online); i++)
		if (cpuset_nth(&online, i) != o.cpu)
			o.hk = cpuset_nth(&online, i);
	bench_mlock();
	for (int k = 0; k < NCFG; k++)
		for (int d = 0; d < NDIR; d++)
			if (!(all[k][d] = calloc(o.samples * o.rounds, sizeof(int64_t))))
				die("calloc", ENOMEM);
	for (uint64_t r = 0; r < o.rounds; r++) {
		for (int i = 0; i < NCFG; i++) {
			enum cfg k = (enum cfg)((i + r) % NCFG);
			int64_t *lat[NDIR];
			for (int d = 0; d < NDIR; d++)
				lat[d] = all[k][d] + r * o.samples;
			run_one(k, false, false, o.samples, lat);
		}
		for (int i = 0; i < NTPUT; i++) {
			int t = (int)((i + r) % NTPUT);
			if (t == T_CHAN_D2L || t == T_CHAN_L2D)
				tputs[t][r] = run_one(CHAN_POLL, true, t == T_CHAN_L2D, o.msgs, NULL);
			else
				tputs[t][r] = run_one(t == T_PIPE ? PIPE : EVENTFD, true, false, o.msgs / 10, NULL);
		}
		if (!o.json || strcmp(o.json, "-"))
			fprintf(stderr, "chan: round %llu of %llu done\n", (unsigned long long)r + 1,
				(unsigned long long)o.rounds);
	}

	FILE *f = o.json ? bench_open_out(o.json) : NULL;
	struct json j;
	size_t n = o.samples * o.rounds;
	int64_t floor[3] = { 0 };            /* the cache line's round trip, p50 p99 p99.9 */
	if (f) {
		clock_gettime(CLOCK_REALTIME, &h.end);
		json_init(&j, f);
		json_object_begin(&j, NULL);
		json_common_header(&j, &h, 0);
		json_int(&j, "cpu", o.cpu);
		json_int(&j, "housekeeping_cpu", o.hk);
		json_uint(&j, "samples", o.samples);
		json_uint(&j, "rounds", o.rounds);
		json_uint(&j, "message_bytes", MSG);
		json_uint(&j, "ring_bytes", o.ring);
		json_object_begin(&j, "latency_ns");
	}
	printf("latency, ns (%llu ping-pongs x %llu rounds, %d-byte messages, %llu-byte rings, near CPU %d, far CPU %d)\n",
	       (unsigned long long)o.samples, (unsigned long long)o.rounds, MSG, (unsigned long long)o.ring, o.cpu,
	       o.hk);
	printf("one way: the receiver's TSC minus the sender's, two CPUs' clocks (signed; only their sum is\n"
	       "free of the offset between them); round trip: the near side's own clock; x floor: round trip over\n"
	       "the cache line's at the same percentile\n");
	printf("%-11s %-18s %8s %8s %8s %10s %6s %6s %6s\n", "config", "direction", "p50", "p99", "p99.9", "max",
	       "xfloor", "p99", "p99.9");
	for (int k = 0; k < NCFG; k++) {
		if (f)
			json_object_begin(&j, cfg_name[k]);
		for (int d = 0; d < NDIR; d++) {
			static const double pct[3] = { 50, 99, 99.9 };
			static const char *const pct_name[3] = { "p50", "p99", "p99.9" };
			static const char *const ratio_name[3] = { "p50_over_floor", "p99_over_floor", "p99.9_over_floor" };
			int64_t *v = all[k][d], q[3], max;
			stats_sort_i64(v, n);
			for (int i = 0; i < 3; i++)
				q[i] = stats_pct_sorted_i64(v, n, pct[i]);
			max = v[n - 1];
			if (k == CACHELINE && d == ROUND_TRIP)
				memcpy(floor, q, sizeof(floor));
			printf("%-11s %-18s %8lld %8lld %8lld %10lld", cfg_name[k], dir_name[d], (long long)q[0],
			       (long long)q[1], (long long)q[2], (long long)max);
			if (f) {
				json_object_begin(&j, dir_name[d]);
				for (int i = 0; i < 3; i++)
					json_int(&j, pct_name[i], q[i]);
				json_int(&j, "max", max);
			}
			for (int i = 0; d == ROUND_TRIP && floor[0] > 0 && i < 3; i++) {
				double ratio = (double)q[i] / (double)(floor[i] > 0 ? floor[i] : 1);
				printf(" %6.2f", ratio);
				if (f)
					json_double(&j, ratio_name[i], ratio);
			}
			printf("\n");
			if (f)
				json_object_end(&j);
		}
		if (f)
			json_object_end(&j);
	}
	if (f) {
		json_object_end(&j);
		json_object_begin(&j, "throughput_msgs_per_s");
	}
	printf("\nthroughput, messages/s of %d bytes (median, min, max of %llu rounds)\n", MSG,
	       (unsigned long long)o.rounds);
	for (int t = 0; t < NTPUT; t++) {
		stats_sort_u64(tputs[t], o.rounds);
		uint64_t med = stats_pct_sorted_u64(tputs[t], o.rounds, 50);
		printf("%-24s %12llu %12llu %12llu\n", tput_name[t], (unsigned long long)med,
		       (unsigned long long)tputs[t][0], (unsigned long long)tputs[t][o.rounds - 1]);
		if (f) {
			json_object_begin(&j, tput_name[t]);
			json_uint(&j, "median", med);
			json_uint(&j, "min", tputs[t][0]);
			json_uint(&j, "max", tputs[t][o.rounds - 1]);
			json_object_end(&j);
		}
	}
	if (f) {
		json_object_end(&j);
		json_object_end(&j);
		fputc('\n', f);
		if (f != stdout)
			fclose(f);
	}
	return 0;
}
