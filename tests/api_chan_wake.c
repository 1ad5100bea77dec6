/* Description: Linux waiters woken by a detached thread that makes no
 * system call: a Linux thread asleep in dt_chan_get (state S, in the
 * kernel) returns the message a detached put sent, a Linux thread asleep
 * in dt_bell_wait returns when a detached thread rings; a Linux consumer
 * process sees the channel's fd readable in epoll and poll exactly while
 * messages wait, and a bell's fd while it is rung.  The detached thread's
 * kernel counters stay flat over its puts, rings and waits. */
#include "helpers/t_chan.h"

#include <poll.h>
#include <sys/epoll.h>

#define SEC 1000000000ull

static char chan_name[64], bell_name[64], go_name[64], back_name[64];
static struct dt_chan *prod, *cons;
static struct dt_bell *bell;
static pid_t main_tid;
static volatile int returned;
static uint64_t put_at;

static char task_state(pid_t tid)
{
	char buf[512], *p;

	if (t_task_file(tid, "stat", buf, sizeof(buf)) || !(p = strrchr(buf, ')')))
		return '?';
	return p[2];
}

/* Waits (on the detached thread: forwarded reads) until the main thread
 * sleeps in the kernel. */
static bool main_sleeps(void)
{
	uint64_t end = dt_now_ns() + 5 * SEC;

	while (dt_now_ns() < end) {
		if (task_state(main_tid) == 'S')
			return true;
		dt_wait_until(dt_now_ns() + 1000000);
	}
	return false;
}

static void *detached_side(void *arg)
{
	struct t_kernel k0, k1;
	pid_t me = t_gettid();
	uint64_t v = 42, end, t0;

	(void)arg;
	if (t_detach_self())
		return NULL;
	/* 1: a Linux thread asleep in dt_chan_get */
	t_check(main_sleeps(), "the Linux thread did not go to sleep in dt_chan_get");
	t_kernel_read(me, &k0);
	t0 = dt_now_ns();
	put_at = t0;
	t_check(dt_chan_put(prod, &v, sizeof(v)) == 0, "put");
	for (end = dt_now_ns() + 5 * SEC; !__atomic_load_n(&returned, __ATOMIC_ACQUIRE) && dt_now_ns() < end;)
		cpu_relax();
	t_kernel_read(me, &k1);
	t_kernel_flat("detached put waking a Linux dt_chan_get", &k0, &k1, dt_now_ns() - t0);
	/* 2: a Linux thread asleep in dt_bell_wait */
	t_check(main_sleeps(), "the Linux thread did not go to sleep in dt_bell_wait");
	t_kernel_read(me, &k0);
	t0 = dt_now_ns();
	put_at = t0;
	t_check(dt_bell_ring(bell) == 0, "ring");
	for (end = dt_now_ns() + 5 * SEC; __atomic_load_n(&returned, __ATOMIC_ACQUIRE) < 2 && dt_now_ns() < end;)
		cpu_relax();
	t_kernel_read(me, &k1);
	t_kernel_flat("detached ring waking a Linux dt_bell_wait", &k0, &k1, dt_now_ns() - t0);
	dt_attach();
	return NULL;
}

static bool readable_epoll(int ep, int ms)
{
	struct epoll_event e;

	return epoll_wait(ep, &e, 1, ms) == 1;
}

static bool readable_poll(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A Linux consumer process with epoll; it tells the detached thread when
 * to go on through bells (rung by Linux, waited for detached). */
static int poll_child(void)
{
	struct dt_chan *c;
	struct dt_bell *go, *back, *b;
	struct epoll_event ev = { .events = EPOLLIN };
	uint64_t v;
	int fd, bfd, ep, bad = 0;

	if (dt_chan_open(chan_name, DT_CHAN_CONSUMER, 0, &c) || dt_bell_open(go_name, 0, &go) ||
	    dt_bell_open(back_name, 0, &back) || dt_bell_open(bell_name, 0, &b))
		return 2;
	fd = dt_chan_fd(c);
	bfd = dt_bell_fd(b);
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "child: " __VA_ARGS__); fputc('\n', stderr); bad++; } } while (0)
	EXPECT(!readable_epoll(ep, 0) && !readable_poll(fd), "empty channel's fd is readable");
	EXPECT(!readable_poll(bfd), "bell fd readable before any ring");
	dt_bell_ring(go);                                   /* detached: put 3 messages */
	EXPECT(readable_epoll(ep, 5000), "fd not readable in epoll after 3 detached puts");
	EXPECT(dt_chan_get(c, &v, sizeof(v), 0) == 8 && v == 1, "first message");
	EXPECT(readable_epoll(ep, 0) && readable_poll(fd), "fd not readable with 2 messages waiting");
	EXPECT(dt_chan_get(c, &v, sizeof(v), 0) == 8 && v == 2, "second message");
	EXPECT(dt_chan_get(c, &v, sizeof(v), 0) == 8 && v == 3, "third message");
	EXPECT(!readable_epoll(ep, 0) && !readable_poll(fd), "fd readable with the channel empty");
	dt_bell_ring(go);                                   /* detached: ring the bell */
	struct pollfd p = { .fd = bfd, .events = POLLIN };
	EXPECT(poll(&p, 1, 5000) == 1, "bell fd not readable after a detached ring");
	EXPECT(dt_bell_wait(b, 0) == 0, "bell not rung");
	EXPECT(!readable_poll(bfd), "bell fd readable after the ring was taken");
	dt_bell_ring(back);
	return bad ? 1 : 0;
}

static void *detached_poll_side(void *arg)
{
	struct t_kernel k0, k1;
	pid_t me = t_gettid();
	struct dt_bell *go = arg;
	uint64_t t0 = 0;

	if (t_detach_self())
		return NULL;
	t_kernel_read(me, &k0);
	t0 = dt_now_ns();
	if (dt_bell_wait(go, dt_now_ns() + 10 * SEC)) {
		t_check(0, "the poll child did not start");
		return NULL;
	}
	for (uint64_t v = 1; v <= 3; v++)
		t_check(dt_chan_put(prod, &v, sizeof(v)) == 0, "put %llu", (unsigned long long)v);
	t_check(dt_bell_wait(go, dt_now_ns() + 10 * SEC) == 0, "the poll child stopped");
	t_check(dt_bell_ring(bell) == 0, "ring");
	t_kernel_read(me, &k1);
	t_kernel_flat("detached side of poll/epoll", &k0, &k1, dt_now_ns() - t0);
	dt_attach();
	return NULL;
}

int main(void)
{
	pthread_t th;
	struct dt_bell *go, *back;
	uint64_t v = 0;
	long n;
	int st;

	t_chan_setup(chan_name, sizeof(chan_name), "t-wake");
	snprintf(bell_name, sizeof(bell_name), "%s-bell", chan_name);
	snprintf(go_name, sizeof(go_name), "%s-go", chan_name);
	snprintf(back_name, sizeof(back_name), "%s-back", chan_name);
	main_tid = t_gettid();
	dt_chan_unlink(chan_name);
	t_check(dt_chan_open(chan_name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &prod) == 0, "open producer");
	t_check(dt_chan_open(chan_name, DT_CHAN_CONSUMER, 0, &cons) == 0, "open consumer");
	t_check(dt_bell_open(bell_name, DT_CHAN_CREATE, &bell) == 0, "open bell");
	if (t_failures)
		return t_done();

	pthread_create(&th, NULL, detached_side, NULL);
	n = dt_chan_get(cons, &v, sizeof(v), dt_now_ns() + 10 * SEC);
	uint64_t woke = dt_now_ns();
	__atomic_store_n(&returned, 1, __ATOMIC_RELEASE);
	t_check(n == 8 && v == 42, "dt_chan_get returned %ld (%llu)", n, (unsigned long long)v);
	printf("Linux dt_chan_get woken %.1f us after the detached put\n", (double)(woke - put_at) / 1e3);
	st = dt_bell_wait(bell, dt_now_ns() + 10 * SEC);
	woke = dt_now_ns();
	__atomic_store_n(&returned, 2, __ATOMIC_RELEASE);
	t_check(st == 0, "dt_bell_wait: %s", strerror(-st));
	printf("Linux dt_bell_wait woken %.1f us after the detached ring\n", (double)(woke - put_at) / 1e3);
	pthread_join(th, NULL);
	dt_chan_close(cons);

	/* poll and epoll in another process */
	t_check(dt_bell_open(go_name, DT_CHAN_CREATE, &go) == 0 && dt_bell_open(back_name, DT_CHAN_CREATE, &back) == 0,
		"open bells");
	pid_t child = fork();
	if (child == 0)
		_exit(poll_child());
	pthread_create(&th, NULL, detached_poll_side, go);
	pthread_join(th, NULL);
	t_check(dt_bell_wait(back, dt_now_ns() + 10 * SEC) == 0, "the poll child did not finish");
	st = t_wait_child(child);
	t_check(st == 0, "the poll child failed (status %d)", st);

	dt_chan_close(prod);
	dt_bell_close(bell);
	dt_bell_close(go);
	dt_bell_close(back);
	dt_chan_unlink(chan_name);
	dt_bell_unlink(bell_name);
	dt_bell_unlink(go_name);
	dt_bell_unlink(back_name);
	return t_done();
}
