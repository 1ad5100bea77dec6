/* evlat: event-response latency, the experiment of section 4 of the L4RTL
 * paper (docs/rtl.md) on detach
 * (`detach bench --program evlat`, docs/bench.md).
 *
 * A ringer on a housekeeping CPU sleeps a random 2 to 30 ms, stamps the TSC
 * and signals an event; the receiver, on the RT CPU, stamps the TSC at its
 * first instruction after the wake-up.  The delay is the difference (the
 * TSC is invariant and synchronised: the run records its flags).
 * Receivers:
 *   same       a detached thread of the ringer's process in dt_bell_wait
 *   process    a detached thread of another process (an RT task in its own
 *              address space) in dt_bell_wait: the L4RTL paper's question
 *   executive  an RT thread under detach-rtl's executive in rtl_bell_wait, in
 *              an RT task of its own (bench/evlat_rt.c, an RTLinux program
 *              using the public API, started for each block)
 *   futex      a SCHED_FIFO Linux thread pinned to the RT CPU in FUTEX_WAIT
 *   eventfd    the same in read() of an eventfd
 * Loads: idle; flood (a flooder on every housekeeping CPU, and the receiver
 * itself after each event for 1.5 ms, as the paper's RT-side flooder
 * between events, writing a buffer of twice the last-level cache at a line
 * stride, so touching every page of it: every cache level dirty, the TLB
 * cold);
 * syscalls (a process on the housekeeping CPUs creating processes, pipes,
 * files and mappings in a loop, as hbench/lmbench do); build (the kernel
 * build of `detach bench`, run by the controller).  Every round runs every
 * load, and under each every receiver in rotated order.
 *
 * With -C (`detach bench --program evlat`, tools/detach_tools/bench/evlat.py)
 * evlat tells its controller on stdout when a load begins and ends
 * ("start LOAD", "stop LOAD") and waits for "ok" on stdin: the controller
 * runs the build load (loads.py, the one the main bench runs) and perf stat
 * over each load.
 *
 * Also the executive's switch (measured by evlat_rt): two RT threads that
 * sched_yield to each other, cycles per switch.
 *
 *   evlat [-c CPU] [-H CPU] [-n EVENTS] [-r ROUNDS] [-l LOADS] [-R RECEIVERS] -j FILE
 *   evlat --child ...   (internal: the `process` receiver)
 *
 * Longer than 500 lines: one program per study, as bench/chan.c, so that
 * receivers, loads and the interleaving of blocks stay in one place. */
#include "evlat.h"
#include "lib/bench.h"
#include "lib/partition.h"
#include "lib/stats.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <libgen.h>
#include <unistd.h>

enum recv { R_SAME, R_PROCESS, R_EXECUTIVE, R_FUTEX, R_EVENTFD, NRECV };
static const char *const recv_name[NRECV] = { "same", "process", "executive", "futex", "eventfd" };
enum load { L_IDLE, L_FLOOD, L_SYSCALLS, L_BUILD, NLOAD };
static const char *const load_name[NLOAD] = { "idle", "flood", "syscalls", "build" };

#define TIMEOUT_NS 200000000ull

static struct {
	int cpu, hk, loads, recvs, told;
	uint64_t events, rounds;
	const char *json;
	char name[64];
	char rt_prog[4096];                  /* evlat_rt, beside this program */
} o = { .cpu = -1, .hk = -1, .events = 200, .rounds = 3, .recvs = (1 << NRECV) - 1 };

static struct ctl *C;
static int efd;
static struct flood_area area;       /* the receivers' of this process */

/* ---- flooding: flood_between (evlat.h) on the RT CPU, these beside ---- */

static void *flooder(void *arg)
{
	size_t bytes = area.bytes;
	char *buf = malloc(bytes);

	(void)arg;
	if (!buf)
		return NULL;
	memset(buf, 1, bytes);
	while (!C->quit && C->flood)
		flood(buf, bytes);
	free(buf);
	return NULL;
}

/* ---- the syscall load: a process of its own ------------------------------ */

static int syscall_load(void)
{
	char path[64];
	int p[2];

	snprintf(path, sizeof(path), "/tmp/evlat-load.%d", (int)getpid());
	for (;;) {
		pid_t c = fork();
		void *m;
		int fd;
		char b[4096] = { 0 };

		if (c == 0)
			_exit(0);
		if (c > 0)
			waitpid(c, NULL, 0);
		if (!pipe(p)) {
			if (write(p[1], b, sizeof(b)) < 0 || read(p[0], b, sizeof(b)) < 0)
				return 1;
			close(p[0]);
			close(p[1]);
		}
		if ((fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600)) >= 0) {
			if (write(fd, b, sizeof(b)) < 0)
				return 1;
			fsync(fd);
			close(fd);
			unlink(path);
		}
		m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (m != MAP_FAILED)
			munmap(m, 1 << 20);
	}
}

/* ---- receivers ----------------------------------------------------------- */

/* A detached thread's loop (same, process): until C->run drops. */
static void serve_bell(struct dt_bell *b)
{
	while (__atomic_load_n(&C->run, __ATOMIC_ACQUIRE)) {
		if (dt_bell_wait(b, dt_now_ns() + 10000000ull))
			continue;
		evlat_record(C);
		if (C->flood)
			flood_between(&area);
	}
}

static void *same_main(void *arg)
{
	struct dt_bell *b;

	if (dt_bell_open(o.name, 0, &b) || dt_detach(o.cpu)) {
		C->ready = -1;
		return NULL;
	}
	C->ready = 1;
	serve_bell(b);
	dt_attach();
	dt_bell_close(b);
	(void)arg;
	return NULL;
}

static void *linux_receiver(void *arg)
{
	enum recv r = (enum recv)(long)arg;
	struct sched_param sp = { .sched_priority = 80 };
	cpu_set_t one;
	uint64_t v;
	uint32_t seen = __atomic_load_n(&C->futex, __ATOMIC_ACQUIRE);

	struct partition part;

	/* into `detach isolate`'s partition when the RT CPU is one, as the
	 * runtime puts a detached thread there */
	if (!partition_find(&part) && CPU_ISSET(o.cpu, &part.cpus))
		partition_add_thread(&part, (pid_t)syscall(SYS_gettid));
	CPU_ZERO(&one);
	CPU_SET(o.cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		C->ready = -1;
		return NULL;
	}
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);   /* as root; else SCHED_OTHER */
	C->ready = 1;
	while (__atomic_load_n(&C->run, __ATOMIC_ACQUIRE)) {
		if (r == R_FUTEX) {
			/* the ringer stores the event's number, then wakes */
			uint32_t f = __atomic_load_n(&C->futex, __ATOMIC_ACQUIRE);
			struct timespec ts = { 0, 10000000 };

			if (f == seen) {
				syscall(SYS_futex, &C->futex, FUTEX_WAIT_PRIVATE, f, &ts, NULL, 0);
				continue;
			}
			seen = f;
		} else if (read(efd, &v, sizeof(v)) != sizeof(v)) {
			continue;
		}
		evlat_record(C);
		if (C->flood)
			flood_between(&area);
	}
	return NULL;
}

/* The `process` receiver: a process of its own, spawned before anything
 * detaches; detached only while its block runs. */
static int child_main(void)
{
	struct dt_bell *b;
	void *map;

	if (dt_shm_open(o.name, 0, 0, &map))
		return 1;
	C = map;
	if (flood_area_init(&area))
		return 1;
	while (!C->quit) {
		struct timespec ms = { 0, 1000000 };

		if (!__atomic_load_n(&C->turn, __ATOMIC_ACQUIRE)) {
			nanosleep(&ms, NULL);
			continue;
		}
		if (dt_bell_open(o.name, 0, &b) || dt_detach(o.cpu)) {
			C->ready = -1;
			return 1;
		}
		C->ready = 1;
		serve_bell(b);
		dt_attach();
		dt_bell_close(b);
		C->turn = 0;
		__atomic_store_n(&C->done, 1, __ATOMIC_RELEASE);
	}
	return 0;
}

/* ---- the ringer ------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;

static uint64_t rand_interval_ns(void)
{
	return 2000000ull + xorshift64(&rng) % 28000001ull;
}

/* One event: 0 and the delay in cycles, or -1 when nobody answered. */
static int ring(enum recv r, struct dt_bell *b, uint64_t *cycles)
{
	struct timespec ts;
	uint64_t wait = rand_interval_ns(), seq = C->seq + 1, t0, one = 1, until;

	ts.tv_sec = (time_t)(wait / 1000000000ull);
	ts.tv_nsec = (long)(wait % 1000000000ull);
	nanosleep(&ts, NULL);
	C->seq = seq;
	t0 = rdtsc();
	switch (r) {
	case R_FUTEX:
		__atomic_store_n(&C->futex, (uint32_t)seq, __ATOMIC_RELEASE);
		syscall(SYS_futex, &C->futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		break;
	case R_EVENTFD:
		if (write(efd, &one, sizeof(one)) != sizeof(one))
			return -1;
		break;
	default:
		dt_bell_ring(b);
		break;
	}
	until = monotonic_ns() + TIMEOUT_NS;
	while (__atomic_load_n(&C->ack, __ATOMIC_ACQUIRE) != seq)
		if (monotonic_ns() > until)
			return -1;
	if (C->t1 < t0)
		return -1;                       /* a TSC out of step: not a delay */
	*cycles = C->t1 - t0;
	return 0;
}

static void flood_on(void);
static void flood_off(void);

struct cell {
	uint64_t *cycles;
	uint64_t n, missed;
};
static struct cell cells[NLOAD][NRECV];

/* A block's events, the receiver ready; under `flood` the flooders run
 * meanwhile. */
static void events(enum load l, enum recv r, struct dt_bell *b, struct cell *c)
{
	uint64_t cy;

	if (l == L_FLOOD)
		flood_on();
	for (uint64_t i = 0; i < o.events; i++) {
		if (ring(r, b, &cy))
			c->missed++;
		else
			c->cycles[c->n++] = cy;
	}
	if (l == L_FLOOD)
		flood_off();
}

/* A helper process (this program again, or evlat_rt), its stdout on
 * stderr and its stdin empty: with -C both are the controller's. */
static int spawn_helper(pid_t *pid, char **args)
{
	posix_spawn_file_actions_t fa;
	extern char **environ;
	int err;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, 2, 1);
	err = posix_spawn(pid, args[0], &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	return err;
}

/* Until the receiver runs (C->ready 1) or cannot (-1), or the RT task
 * ended first: 0 or -1. */
static int wait_ready(enum recv r, pid_t task)
{
	uint64_t until = monotonic_ns() + 60000000000ull;
	int status;

	while (!__atomic_load_n(&C->ready, __ATOMIC_ACQUIRE)) {
		if (task > 0 && waitpid(task, &status, WNOHANG) == task) {
			fprintf(stderr, "evlat: the executive receiver (%s) ended before its thread ran: %s %d\n",
				o.rt_prog, WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			return -1;
		}
		if (monotonic_ns() > until) {
			fprintf(stderr, "evlat: the %s receiver did not start in 60 s\n", recv_name[r]);
			return -1;
		}
		usleep(1000);
	}
	return C->ready < 0 ? -1 : 0;
}

/* The executive receiver: evlat_rt, an RT task of its own, for this block. */
static int start_rt_task(pid_t *task)
{
	char *args[] = { o.rt_prog, NULL };
	char cpu[16];

	snprintf(cpu, sizeof(cpu), "%d", o.cpu);
	setenv("DETACH_RTL_CPU", cpu, 1);
	setenv("EVLAT_NAME", o.name, 1);
	return spawn_helper(task, args) ? -1 : 0;
}

/* Ends it as RTLinux's rmmod did (SIGTERM: cleanup_module): 0 when it
 * exited 0. */
static int stop_rt_task(pid_t task)
{
	int status;

	kill(task, SIGTERM);
	if (waitpid(task, &status, 0) != task || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "evlat: the executive receiver (%s) did not end cleanly on SIGTERM\n", o.rt_prog);
		return -1;
	}
	return 0;
}

static int run_block(enum load l, enum recv r, struct dt_bell *b)
{
	struct cell *c = &cells[l][r];
	pthread_t th;
	pid_t task = -1;
	int err = 0;

	C->ready = 0;
	C->ack = C->seq;
	__atomic_store_n(&C->run, 1, __ATOMIC_RELEASE);
	switch (r) {
	case R_SAME:
		pthread_create(&th, NULL, same_main, NULL);
		break;
	case R_PROCESS:
		C->done = 0;
		__atomic_store_n(&C->turn, 1, __ATOMIC_RELEASE);
		break;
	case R_EXECUTIVE:
		if (start_rt_task(&task))
			return -1;
		break;
	default:
		if (r == R_EVENTFD && (efd = eventfd(0, EFD_CLOEXEC)) < 0)   /* a fresh count per block */
			return -errno;
		pthread_create(&th, NULL, linux_receiver, (void *)(long)r);
		break;
	}
	if (wait_ready(r, task)) {
		if (C->ready < 0)
			fprintf(stderr, "evlat: the %s receiver could not %s CPU %d\n", recv_name[r],
				r == R_FUTEX || r == R_EVENTFD ? "be pinned to" : "detach on", o.cpu);
		if (r == R_EXECUTIVE && C->ready)
			stop_rt_task(task);
		else if (r != R_PROCESS && r != R_EXECUTIVE)
			pthread_join(th, NULL);
		return -EBUSY;
	}
	events(l, r, b, c);
	__atomic_store_n(&C->run, 0, __ATOMIC_RELEASE);
	if (r == R_EXECUTIVE) {
		err = stop_rt_task(task);
	} else if (r == R_PROCESS) {
		while (!__atomic_load_n(&C->done, __ATOMIC_ACQUIRE))
			usleep(1000);
	} else {
		if (r == R_FUTEX)
			syscall(SYS_futex, &C->futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		if (r == R_EVENTFD) {
			uint64_t one = 1;
			if (write(efd, &one, sizeof(one)) < 0)
				return -errno;
		}
		pthread_join(th, NULL);
		if (r == R_EVENTFD)
			close(efd);
	}
	return err;
}

/* ---- loads ------------------------------------------------------------------ */

static pthread_t flooders[CPU_SETSIZE];
static int nflooders;
static pid_t load_pid;

/* -C: one line to the controller, its answer "ok" back; else -1. */
static int tell(const char *what, enum load l)
{
	char line[256];

	if (!o.told)
		return 0;
	printf("%s %s\n", what, load_name[l]);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin)) {
		fprintf(stderr, "evlat: the controller went away at %s %s\n", what, load_name[l]);
		return -1;
	}
	if (strcmp(line, "ok\n")) {
		fprintf(stderr, "evlat: %s %s: %s", what, load_name[l], line);
		return -1;
	}
	return 0;
}

static int load_start(enum load l, char **argv)
{
	if (tell("start", l))
		return -1;
	if (l == L_SYSCALLS) {
		char *args[] = { argv[0], "--syscall-load", NULL };

		if (spawn_helper(&load_pid, args))
			return -1;
	}
	usleep(300000);                          /* settle */
	return 0;
}

/* The flooders run while a block's events do, not while its receiver
 * detaches or attaches: moving a thread into or out of the partition waits
 * for an RCU grace period, which a flooder beside it delayed by seconds. */
static void flood_on(void)
{
	cpu_set_t hk;

	C->flood = 1;
	sched_getaffinity(0, sizeof(hk), &hk);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		cpu_set_t one;
		pthread_attr_t a;

		if (!CPU_ISSET(c, &hk))
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		pthread_attr_init(&a);
		pthread_attr_setaffinity_np(&a, sizeof(one), &one);
		pthread_create(&flooders[nflooders++], &a, flooder, NULL);
	}
	usleep(100000);                          /* settle: the caches full of it */
}

static void flood_off(void)
{
	C->flood = 0;
	while (nflooders)
		pthread_join(flooders[--nflooders], NULL);
}

static int load_stop(enum load l)
{
	if (l == L_SYSCALLS && load_pid > 0) {
		kill(load_pid, SIGKILL);
		waitpid(load_pid, NULL, 0);
		load_pid = 0;
	}
	return tell("stop", l);
}

/* ---- output ------------------------------------------------------------------ */

static void json_cell(struct json *j, const struct tsc_clock *clk, struct cell *c)
{
	uint64_t *ns = calloc(c->n ? c->n : 1, sizeof(*ns));

	for (uint64_t i = 0; i < c->n; i++)
		ns[i] = tsc_cycles_to_ns(clk, c->cycles[i]);
	stats_sort_u64(ns, c->n);
	json_uint(j, "events", c->n);
	json_uint(j, "missed", c->missed);
	if (c->n) {
		json_uint(j, "p50", stats_pct_sorted_u64(ns, c->n, 50));
		json_uint(j, "p99", stats_pct_sorted_u64(ns, c->n, 99));
		json_uint(j, "p99.9", stats_pct_sorted_u64(ns, c->n, 99.9));
		json_uint(j, "max", ns[c->n - 1]);
		json_uint(j, "min", ns[0]);
	}
	json_array_begin(j, "samples_ns");
	for (uint64_t i = 0; i < c->n; i++)
		json_uint(j, NULL, ns[i]);
	json_array_end(j);
	free(ns);
}

/* The bits of the names (of n) that list mentions: -l and -R. */
static int named_mask(const char *list, const char *const *names, int n)
{
	int mask = 0;

	for (int i = 0; i < n; i++)
		if (strstr(list, names[i]))
			mask |= 1 << i;
	return mask;
}

static int usage(const char *msg)
{
	fprintf(stderr, "evlat: %s\nusage: evlat [-c CPU] [-H CPU] [-n EVENTS] [-r ROUNDS] [-C]\n"
		"             [-l idle,flood,syscalls,build] [-R same,process,executive,futex,eventfd] -j FILE\n"
		"  -C  controlled: tell each load's start and stop on stdout, wait for \"ok\" on stdin\n"
		"      (the build load needs it: `detach bench --program evlat` runs it)\n",
		msg);
	return 2;
}

int main(int argc, char **argv)
{
	struct tsc_clock clk;
	struct dt_bell *b;
	struct json j;
	pid_t child = -1;
	cpu_set_t hk, all;
	double sw;
	FILE *f;
	void *map;
	int opt, err = 0;

	if (argc > 1 && !strcmp(argv[1], "--syscall-load"))
		return syscall_load();
	if (argc > 3 && !strcmp(argv[1], "--child")) {
		o.cpu = atoi(argv[2]);
		snprintf(o.name, sizeof(o.name), "%s", argv[3]);
		return child_main();
	}
	while ((opt = getopt(argc, argv, "c:H:n:r:l:R:j:C")) != -1) {
		switch (opt) {
		case 'c': o.cpu = atoi(optarg); break;
		case 'H': o.hk = atoi(optarg); break;
		case 'n': o.events = strtoull(optarg, NULL, 10); break;
		case 'r': o.rounds = strtoull(optarg, NULL, 10); break;
		case 'j': o.json = optarg; break;
		case 'C': o.told = 1; break;
		case 'l':
			if (!(o.loads = named_mask(optarg, load_name, NLOAD)))
				return usage("no known load in -l");
			break;
		case 'R':
			if (!(o.recvs = named_mask(optarg, recv_name, NRECV)))
				return usage("no known receiver in -R");
			break;
		default: return usage("bad option");
		}
	}
	if (!o.json || !o.events || !o.rounds)
		return usage("-j FILE is needed; -n and -r positive");
	if (!o.loads)                            /* every load this run can have */
		o.loads = ((1 << NLOAD) - 1) & ~(o.told ? 0 : 1 << L_BUILD);
	if ((o.loads & (1 << L_BUILD)) && !o.told)
		return usage("the build load is the controller's: -C");
	cpus_online(&all);
	if (o.cpu < 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &all))
				o.cpu = c;
	hk = all;
	CPU_CLR(o.cpu, &hk);
	if (o.hk >= 0) {
		CPU_ZERO(&hk);
		CPU_SET(o.hk, &hk);
	}
	if (!CPU_COUNT(&hk))
		return usage("needs a housekeeping CPU beside the RT CPU");
	{
		char self[sizeof(o.rt_prog)] = "";

		if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
			return usage("cannot read /proc/self/exe");
		snprintf(o.rt_prog, sizeof(o.rt_prog), "%s/evlat_rt", dirname(self));
	}
	if ((o.recvs & (1 << R_EXECUTIVE)) && access(o.rt_prog, X_OK)) {
		fprintf(stderr, "evlat: the executive receiver %s is missing\nNOTE: run 'make'\n", o.rt_prog);
		return 1;
	}
	sched_setaffinity(0, sizeof(hk), &hk);
	tsc_calibrate(&clk, 0);
	if (flood_area_init(&area)) {
		fprintf(stderr, "evlat: no memory for the flood buffer\n");
		return 1;
	}
	snprintf(o.name, sizeof(o.name), "evlat-%d", (int)getpid());
	if ((err = dt_shm_open(o.name, DT_CHAN_CREATE, sizeof(struct ctl), &map)) ||
	    (err = dt_bell_open(o.name, DT_CHAN_CREATE, &b))) {
		fprintf(stderr, "evlat: shared memory: %s\n", strerror(-err));
		return 1;
	}
	C = map;
	for (int l = 0; l < NLOAD; l++)
		for (int r = 0; r < NRECV; r++)
			cells[l][r].cycles = calloc(o.events * o.rounds, sizeof(uint64_t));
	/* the process receiver, before anything here detaches (fork and
	 * detached threads do not mix: docs/ipc.md) */
	{
		char cpu[16];
		char *args[] = { argv[0], "--child", cpu, o.name, NULL };

		snprintf(cpu, sizeof(cpu), "%d", o.cpu);
		if (spawn_helper(&child, args)) {
			fprintf(stderr, "evlat: cannot start the process receiver\n");
			return 1;
		}
	}
	for (uint64_t round = 0; round < o.rounds && !err; round++) {
		for (int l = 0; l < NLOAD && !err; l++) {
			if (!(o.loads & (1 << l)))
				continue;
			if (load_start((enum load)l, argv)) {
				err = -1;
				break;
			}
			for (int k = 0; k < NRECV && !err; k++) {
				enum recv r = (enum recv)((k + round + (uint64_t)l) % NRECV);   /* rotated */

				if (o.recvs & (1 << r))
					err = run_block((enum load)l, r, b);
			}
			if (load_stop((enum load)l) && !err)
				err = -1;
			fprintf(stderr, "evlat: round %llu of %llu, %s: done\n", (unsigned long long)round + 1,
				(unsigned long long)o.rounds, load_name[l]);
		}
	}
	sw = C->switch_cycles;
	C->quit = 1;
	waitpid(child, NULL, 0);
	dt_bell_close(b);
	dt_bell_unlink(o.name);
	dt_shm_close(map);
	dt_shm_unlink(o.name);
	if (err) {
		fprintf(stderr, "evlat: stopped: %s\n", err < 0 ? strerror(-err) : "error");
		return 1;
	}
	if (!(f = fopen(o.json, "w"))) {
		perror(o.json);
		return 1;
	}
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_str(&j, "program", "evlat");
	json_int(&j, "cpu", o.cpu);
	json_uint(&j, "events_per_block", o.events);
	json_uint(&j, "rounds", o.rounds);
	json_uint(&j, "tsc_hz", clk.hz);
	json_uint(&j, "flood_bytes", area.bytes);
	json_double(&j, "executive_switch_cycles", sw);
	json_double(&j, "executive_switch_ns", sw > 0 ? sw * 1e9 / (double)clk.hz : -1);
	json_object_begin(&j, "cells");
	for (int l = 0; l < NLOAD; l++) {
		if (!(o.loads & (1 << l)))
			continue;
		json_object_begin(&j, load_name[l]);
		for (int r = 0; r < NRECV; r++) {
			if (!(o.recvs & (1 << r)))
				continue;
			json_object_begin(&j, recv_name[r]);
			json_cell(&j, &clk, &cells[l][r]);
			json_object_end(&j);
		}
		json_object_end(&j);
	}
	json_object_end(&j);
	json_object_end(&j);
	fputc('\n', f);
	fclose(f);
	return 0;
}
