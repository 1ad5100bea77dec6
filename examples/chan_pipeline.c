/* A detached 1 kHz control loop that sends one sample per period to a
 * Linux logger process through a channel, and a supervisor that kills and
 * restarts the logger at will: the loop never notices more than -EPIPE
 * (samples it could not hand to anyone), and each new logger continues
 * with the first sample the previous one had not taken (docs/ipc.md).
 *
 *   chan_pipeline loop [-c CPU] [-n PERIODS]    the control loop (detaches itself)
 *   chan_pipeline logger                        prints one line per 1000 samples
 *   chan_pipeline supervise [-k KILL_MS] [-n PERIODS] [-c CPU]
 *                                               runs both, kills the logger every
 *                                               KILL_MS ms and starts a new one
 */
#include <detach/detach.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHANNEL "chan_pipeline"
#define PERIOD_NS 1000000ull

struct sample {
	uint64_t seq;          /* period number */
	uint64_t t_ns;         /* when the period started (dt_now_ns) */
	int64_t late_ns;       /* how far the wake-up strayed from the period */
};

static int loop(int cpu, uint64_t periods)
{
	struct dt_chan *c;
	struct sample s = { 0 };
	uint64_t sent = 0, no_logger = 0, full = 0, next;
	int64_t worst = 0;
	int err;

	if ((err = dt_chan_open(CHANNEL, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 64 * 1024, &c))) {
		fprintf(stderr, "chan_pipeline: cannot open channel %s: %s\n", CHANNEL, strerror(-err));
		return 1;
	}
	if (!dt_is_detached() && (err = dt_detach(cpu))) {
		fprintf(stderr, "chan_pipeline: cannot detach on CPU %d: %s\n", cpu, strerror(-err));
		return 1;
	}
	next = dt_now_ns() + PERIOD_NS;
	for (uint64_t i = 0; i < periods; i++, next += PERIOD_NS) {
		dt_wait_until(next);
		s.t_ns = dt_now_ns();
		s.late_ns = (int64_t)(s.t_ns - next);
		worst = s.late_ns > worst ? s.late_ns : worst;
		/* the control work would go here; then the sample, never waiting */
		err = dt_chan_put(c, &s, sizeof(s));
		if (err == 0) {
			s.seq++;
			sent++;
		} else if (err == -EPIPE) {
			no_logger++;           /* kept: the next logger gets it */
		} else {
			full++;
		}
	}
	dt_attach();
	printf("loop: %llu periods of 1000 us, %llu samples sent, %llu periods without a logger, %llu full, "
	       "worst wake-up %.1f us late\n", (unsigned long long)periods, (unsigned long long)sent,
	       (unsigned long long)no_logger, (unsigned long long)full, (double)worst / 1e3);
	dt_chan_close(c);
	return 0;
}

static int logger(void)
{
	struct dt_chan *c;
	struct sample s;
	uint64_t got = 0, first = 0, expect = 0;
	long n;
	int err = -EBUSY;

	/* the previous logger may still be dying */
	for (int i = 0; i < 100 && (err == -EBUSY || err == -ENOENT); i++)
		if ((err = dt_chan_open(CHANNEL, DT_CHAN_CONSUMER, 0, &c)) == -EBUSY || err == -ENOENT)
			usleep(10000);
	if (err) {
		fprintf(stderr, "chan_pipeline: logger cannot open %s: %s\n", CHANNEL, strerror(-err));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		n = dt_chan_get(c, &s, sizeof(s), dt_now_ns() + 1000000000ull);
		/* before the loop starts a get waits for it; -EPIPE: it had
		 * started and is over */
		if (n == -EPIPE)
			break;
		if (n != sizeof(s))
			continue;
		if (!got++)
			first = expect = s.seq;
		if (s.seq != expect)
			printf("logger %d: sample %llu where %llu was due\n", (int)getpid(), (unsigned long long)s.seq,
			       (unsigned long long)expect);
		expect = s.seq + 1;
		if (got == 1 || s.seq % 1000 == 999)
			printf("logger %d: samples %llu..%llu, last %.1f us late\n", (int)getpid(),
			       (unsigned long long)first, (unsigned long long)s.seq, (double)s.late_ns / 1e3);
	}
	printf("logger %d: done after sample %llu\n", (int)getpid(), (unsigned long long)(expect - 1));
	dt_chan_close(c);
	return 0;
}

static pid_t start(const char *self, char *const *args)
{
	pid_t pid = fork();

	if (pid == 0) {
		execv(self, args);
		_exit(127);
	}
	return pid;
}

static int supervise(const char *self, int cpu, uint64_t periods, unsigned kill_ms)
{
	char cpu_s[16], n_s[32];
	char *loop_args[] = { "chan_pipeline", "loop", "-c", cpu_s, "-n", n_s, NULL };
	char *log_args[] = { "chan_pipeline", "logger", NULL };
	pid_t lp, lg;
	int st, restarts = 0;

	snprintf(cpu_s, sizeof(cpu_s), "%d", cpu);
	snprintf(n_s, sizeof(n_s), "%llu", (unsigned long long)periods);
	dt_chan_unlink(CHANNEL);
	lp = start(self, loop_args);
	lg = start(self, log_args);
	while (waitpid(lp, &st, WNOHANG) == 0) {
		usleep(kill_ms * 1000);
		if (waitpid(lp, &st, WNOHANG) == lp)
			break;
		kill(lg, SIGKILL);
		waitpid(lg, NULL, 0);
		printf("supervisor: logger %d killed, starting another\n", (int)lg);
		fflush(stdout);
		lg = start(self, log_args);
		restarts++;
	}
	/* the logger ends once it has read what the loop left */
	for (int i = 0; i < 300 && waitpid(lg, NULL, WNOHANG) == 0; i++)
		usleep(10000);
	kill(lg, SIGKILL);
	waitpid(lg, NULL, 0);
	printf("supervisor: %d restarts\n", restarts);
	dt_chan_unlink(CHANNEL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1, c;
	uint64_t periods = 5000;
	unsigned kill_ms = 700;

	optind = 2;
	while ((c = getopt(argc, argv, "c:n:k:h")) != -1) {
		switch (c) {
		case 'c': cpu = atoi(optarg); break;
		case 'n': periods = strtoull(optarg, NULL, 10); break;
		case 'k': kill_ms = (unsigned)atoi(optarg); break;
		default: mode = ""; break;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "loop"))
		return loop(cpu, periods);
	if (!strcmp(mode, "logger"))
		return logger();
	if (!strcmp(mode, "supervise"))
		return supervise("/proc/self/exe", cpu, periods, kill_ms);
	fprintf(stderr, "usage: chan_pipeline loop [-c CPU] [-n PERIODS] | logger | "
		"supervise [-c CPU] [-n PERIODS] [-k KILL_MS]\n");
	return 2;
}
