/* Description: a consumer that opens before its producer exists (a logger
 * started before the RT task) waits for it, as a FIFO's reader waits for
 * its writer: before any producer a get without a deadline says -EAGAIN
 * and one with a deadline -ETIMEDOUT at the deadline, never -EPIPE; a get
 * with a 5 s deadline made before the producer starts returns its first
 * message; once that producer has died with the ring empty, a get says
 * -EPIPE at once, not at its deadline.  Both for a Linux consumer (asleep
 * in the kernel) and a detached one (polling).  A producer that died
 * before the consumer opened is none it had: the get waits.
 * Timeout: 60 */
#include "helpers/t_chan.h"

#include <spawn.h>
#include <sys/mman.h>

#define MS 1000000ull
#define SEC 1000000000ull

static char name[64];

/* The producer, another process (this program again): after delay_ms it
 * opens the channel, puts msg (none if empty), waits linger_ms and dies
 * of SIGKILL, as a crashing RT task does. */
static int producer(int delay_ms, const char *msg, int linger_ms)
{
	struct dt_chan *p;
	int err;

	usleep((useconds_t)delay_ms * 1000);
	if ((err = dt_chan_open(name, DT_CHAN_PRODUCER, 0, &p)))
		return 2;
	if (*msg && dt_chan_put(p, msg, strlen(msg)))
		return 3;
	usleep((useconds_t)linger_ms * 1000);
	raise(SIGKILL);
	return 4;
}

/* posix_spawn (a vfork): a fork would write-protect the pages of a
 * detached thread (docs/ipc.md, Limits). */
static pid_t spawn_producer(const char *delay_ms, const char *msg, const char *linger_ms)
{
	char *args[] = { "api_chan_first", "producer", name, (char *)delay_ms, (char *)msg, (char *)linger_ms, NULL };
	pid_t pid = -1;

	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ))
		return -1;
	return pid;
}

/* What a consumer saw; filled by the thread that consumes. */
struct seen {
	bool detached;
	int detach_err;
	long nowait, before, first, after;
	uint64_t before_ns, after_ns;
	char msg[32];
	volatile int ready;             /* the consumer waits: start the producer */
};

static struct dt_chan *cons;

static void *consume(void *arg)
{
	struct seen *s = arg;
	uint64_t t0;

	if (s->detached && (s->detach_err = t_detach_self()))
		return NULL;
	s->nowait = dt_chan_get(cons, s->msg, sizeof(s->msg), 0);
	t0 = dt_now_ns();
	s->before = dt_chan_get(cons, s->msg, sizeof(s->msg), t0 + 50 * MS);
	s->before_ns = dt_now_ns() - t0;
	__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
	s->first = dt_chan_get(cons, s->msg, sizeof(s->msg) - 1, dt_now_ns() + 5 * SEC);
	t0 = dt_now_ns();
	s->after = dt_chan_get(cons, s->msg + 16, 16, t0 + 5 * SEC);
	s->after_ns = dt_now_ns() - t0;
	if (s->detached)
		dt_attach();
	return NULL;
}

static void consumer_first(bool detached)
{
	const char *who = detached ? "detached consumer" : "Linux consumer";
	struct seen s = { .detached = detached };
	pthread_t th;
	pid_t pid;
	int st;

	dt_chan_unlink(name);
	if (dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_CONSUMER, 4096, &cons)) {
		t_check(0, "%s: cannot create the channel", who);
		return;
	}
	pthread_create(&th, NULL, consume, &s);
	while (!__atomic_load_n(&s.ready, __ATOMIC_ACQUIRE) && !s.detach_err)
		usleep(1000);
	/* the producer opens 100 ms after the consumer began its wait, puts
	 * one message and dies 200 ms later */
	pid = s.detach_err ? -1 : spawn_producer("100", "hello", "200");
	pthread_join(th, NULL);
	if (pid > 0) {
		waitpid(pid, &st, 0);
		t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s: the producer ended with %#x", who, st);
	}
	t_check(s.detach_err == 0, "%s: dt_detach: %s", who, strerror(-s.detach_err));
	if (s.detach_err) {
		dt_chan_close(cons);
		return;
	}
	s.msg[s.first > 0 && s.first < 16 ? s.first : 0] = '\0';
	printf("%s: no producer yet: %ld without a deadline, %ld after %.1f ms with one; first get %ld ('%s'); "
	       "after the producer died %ld within %.1f ms\n", who, s.nowait, s.before, (double)s.before_ns / 1e6,
	       s.first, s.msg, s.after, (double)s.after_ns / 1e6);
	t_check(s.nowait == -EAGAIN, "%s: a get without a deadline before any producer gave %ld, not -EAGAIN", who,
		s.nowait);
	t_check(s.before == -ETIMEDOUT && s.before_ns >= 50 * MS,
		"%s: a get with a 50 ms deadline before any producer gave %ld after %.1f ms, not -ETIMEDOUT at it", who,
		s.before, (double)s.before_ns / 1e6);
	t_check(s.first == 5 && !strcmp(s.msg, "hello"), "%s: the get made before the producer started gave %ld", who,
		s.first);
	/* the watcher learns the death from the pidfd at once; a Linux
	 * waiter's sleeps last 100 ms at most */
	t_check(s.after == -EPIPE && s.after_ns < 2 * SEC,
		"%s: after the producer died, an empty get gave %ld after %.1f ms, not -EPIPE at once", who, s.after,
		(double)s.after_ns / 1e6);
	dt_chan_close(cons);
}

/* The role word the channel's header holds for its producer. */
static uint64_t producer_word(void)
{
	char path[256];
	uint64_t w = 0;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/detach/ipc/%s.chan", name);
	fd = open(path, O_RDONLY);
	if (fd >= 0 && pread(fd, &w, sizeof(w), offsetof(struct chan_shared, producer)) != sizeof(w))
		w = 0;
	if (fd >= 0)
		close(fd);
	return w;
}

/* A producer that died before the consumer opened (its role word left
 * behind, no watcher of ours to clear it): the consumer waits for the next. */
static void producer_dead_before(void)
{
	pid_t pid;
	long r;
	int st;
	uint64_t t0;

	dt_chan_unlink(name);
	t_check(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_CONSUMER, 4096, &cons) == 0, "create");
	dt_chan_close(cons);
	pid = spawn_producer("0", "", "0");
	waitpid(pid, &st, 0);
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the early producer ended with %#x", st);
	t_check(producer_word() != 0, "the dead producer left no role word: the case is not tested");
	t_check(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &cons) == 0, "open the consumer");
	t0 = dt_now_ns();
	r = dt_chan_get(cons, name, 0, t0 + 100 * MS);
	printf("producer dead before the consumer opened: a get with a 100 ms deadline gave %ld after %.1f ms\n", r,
	       (double)(dt_now_ns() - t0) / 1e6);
	t_check(r == -ETIMEDOUT, "a producer that died before the consumer opened gave %ld, not -ETIMEDOUT", r);
	t_check(producer_word() == 0, "the dead producer's role word outlived the consumer's open");
	dt_chan_close(cons);
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "producer")) {
		snprintf(name, sizeof(name), "%s", argv[2]);
		return producer(atoi(argv[3]), argv[4], atoi(argv[5]));
	}
	t_chan_setup(name, sizeof(name), "t-first");
	consumer_first(false);
	consumer_first(true);
	producer_dead_before();
	dt_chan_unlink(name);
	return t_done();
}
