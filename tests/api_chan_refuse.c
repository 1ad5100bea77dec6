/* Description: every refusal of the channel, doorbell and region API:
 * names, flags and sizes (-EINVAL), a missing name (-ENOENT), another
 * user's channel (-EACCES), a role held by a live process (-EBUSY) and
 * taken over from a dead one, put without a consumer (-EPIPE), into a full
 * ring (-EAGAIN, nothing written), too large (-EMSGSIZE), get of an empty
 * channel (-EAGAIN, -ETIMEDOUT), into a short buffer (-EMSGSIZE, the
 * message stays), without a producer (-EPIPE), a file of an older layout
 * (-EINVAL); a byte stream's all-or-nothing puts and partial gets; the
 * files live in /dev/shm/detach/ipc/ and unlink removes them.  Linked into a plain
 * program the library is inert until a channel is opened: one thread, no
 * SIGSYS handler; the first open adds the watcher thread, nothing else. */
#include "helpers/t_chan.h"

#include <sys/stat.h>

static char name[64], other[80];

#define EXPECT_ERR(call, want) do {                                                  \
	long r_ = (long)(call);                                                      \
	t_check(r_ == (want), "%s gave %ld (%s), expected %s", #call, r_,           \
		r_ < 0 ? strerror((int)-r_) : "ok", #want);                          \
} while (0)

/* A child that holds a role, then waits to be killed. */
static pid_t holder(int flags)
{
	int ready[2];
	char c;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct dt_chan *h;
		c = dt_chan_open(name, flags, 0, &h) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1 || c != 'y')
		pid = -1;
	close(ready[0]);
	return pid;
}

static void names_and_flags(void)
{
	struct dt_chan *c;
	char longname[IPC_NAME_MAX + 8];

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	EXPECT_ERR(dt_chan_open("", DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open("a/b", DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(".hidden", DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(longname, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(NULL, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CREATE, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER | DT_CHAN_CONSUMER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER | 0x100, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, (size_t)2 << 30, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_PRODUCER, 0, NULL), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_PRODUCER, 0, &c), -ENOENT);
	EXPECT_ERR(dt_chan_unlink(name), -ENOENT);
	EXPECT_ERR(dt_chan_unlink("../x"), -EINVAL);
}

static void roles(void)
{
	struct dt_chan *p, *c, *c2;
	char path[256];
	pid_t h;

	t_check(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 4096, &p) == 0, "create");
	snprintf(path, sizeof(path), "/dev/shm/detach/ipc/%s.chan", name);
	t_check(access(path, F_OK) == 0, "%s is missing", path);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_PRODUCER, 0, &c), -EBUSY);           /* this process */
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER | DT_CHAN_STREAM, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER, 8192, &c), -EINVAL);        /* more than it has */
	h = holder(DT_CHAN_CONSUMER);
	t_check(h > 0, "a child could not open the consumer");
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c), -EBUSY);           /* another live process */
	kill(h, SIGKILL);
	t_wait_child(h);
	/* the dead child's role is free again: for the watcher at once (pidfd),
	 * and for an opener, who checks /proc itself */
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c), 0);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c2), -EBUSY);
	EXPECT_ERR(dt_chan_fd(p), -EINVAL);
	EXPECT_ERR(dt_chan_put(c, "x", 1), -EINVAL);
	EXPECT_ERR(dt_chan_get(p, path, 8, 0), -EINVAL);

	/* full: 4096 bytes of ring hold 4096 / (8 + 8) messages of 8 bytes */
	uint64_t v, n = 0;
	int err;
	while ((err = dt_chan_put(p, &n, sizeof(n))) == 0)
		n++;
	EXPECT_ERR(err, -EAGAIN);
	t_check(n == 4096 / 16, "%llu messages fit", (unsigned long long)n);
	EXPECT_ERR(dt_chan_put(p, path, 4096), -EMSGSIZE);
	for (uint64_t i = 0; i < n; i++)
		t_check(dt_chan_get(c, &v, sizeof(v), 0) == 8 && v == i, "message %llu", (unsigned long long)i);
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), 0), -EAGAIN);                     /* the refused put wrote nothing */
	uint64_t t0 = dt_now_ns();
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), t0 + 20000000), -ETIMEDOUT);
	t_check(dt_now_ns() >= t0 + 20000000, "dt_chan_get returned before its deadline");
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), 1), -ETIMEDOUT);                   /* a deadline long past */

	/* a short buffer: refused, and the message stays */
	EXPECT_ERR(dt_chan_put(p, "0123456789", 10), 0);
	EXPECT_ERR(dt_chan_get(c, &v, 4, 0), -EMSGSIZE);
	EXPECT_ERR(dt_chan_get(c, path, sizeof(path), 0), 10);
	EXPECT_ERR(dt_chan_put(p, "", 0), 0);                                        /* empty messages exist */
	EXPECT_ERR(dt_chan_get(c, path, sizeof(path), 0), 0);

	/* no consumer: -EPIPE, nothing written */
	dt_chan_close(c);
	EXPECT_ERR(dt_chan_put(p, &v, sizeof(v)), -EPIPE);
	t_check(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c) == 0, "reopen consumer");
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), 0), -EAGAIN);
	/* no producer: what is there is still read, then -EPIPE */
	EXPECT_ERR(dt_chan_put(p, &v, sizeof(v)), 0);
	dt_chan_close(p);
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), 0), 8);
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), dt_now_ns() + 1000000000), -EPIPE);
	h = holder(DT_CHAN_PRODUCER);
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), 0), -EAGAIN);                      /* a producer again */
	kill(h, SIGKILL);
	t_wait_child(h);
	/* the watcher's pidfd sees it go: a get that waits learns it */
	EXPECT_ERR(dt_chan_get(c, &v, sizeof(v), dt_now_ns() + 5000000000ull), -EPIPE);
	dt_chan_close(c);
	EXPECT_ERR(dt_chan_unlink(name), 0);
	t_check(access(path, F_OK) != 0, "%s outlived unlink", path);
}

/* A channel file of the layout before this one (version 1, magic
 * "\0DTCHAN1", the same size): refused, not misread. */
static void old_layout(void)
{
	struct { uint64_t magic; uint32_t version, flags; uint64_t ring_bytes; } v1 = { 0x314e414843544400ull, 1, 0, 4096 };
	struct dt_chan *c;
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.chan", IPC_DIR, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	t_check(fd >= 0 && ftruncate(fd, CHAN_HDR_BYTES + 4096) == 0 && write(fd, &v1, sizeof(v1)) == sizeof(v1),
		"writing %s", path);
	if (fd >= 0)
		close(fd);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CONSUMER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c), -EINVAL);
	EXPECT_ERR(dt_chan_unlink(name), 0);
}

/* DT_CHAN_STREAM: bytes, RT-FIFO style: a put is all or nothing, a get
 * takes what is there up to len, across puts. */
static void stream(void)
{
	struct dt_chan *p, *c;
	char buf[8192];
	char sname[80];

	snprintf(sname, sizeof(sname), "%s-stream", name);
	t_check(dt_chan_open(sname, DT_CHAN_CREATE | DT_CHAN_PRODUCER | DT_CHAN_STREAM, 4096, &p) == 0, "stream");
	EXPECT_ERR(dt_chan_open(sname, DT_CHAN_CONSUMER, 0, &c), -EINVAL);          /* not a message channel */
	t_check(dt_chan_open(sname, DT_CHAN_CONSUMER | DT_CHAN_STREAM, 0, &c) == 0, "stream consumer");
	EXPECT_ERR(dt_chan_put(p, "0123456789", 10), 0);
	EXPECT_ERR(dt_chan_put(p, "abcde", 5), 0);
	EXPECT_ERR(dt_chan_get(c, buf, 4, 0), 4);
	t_check(!memcmp(buf, "0123", 4), "first bytes");
	EXPECT_ERR(dt_chan_get(c, buf, sizeof(buf), 0), 11);
	t_check(!memcmp(buf, "456789abcde", 11), "the rest, across two puts");
	EXPECT_ERR(dt_chan_put(p, buf, 4097), -EMSGSIZE);
	memset(buf, 'x', sizeof(buf));
	EXPECT_ERR(dt_chan_put(p, buf, 4000), 0);
	EXPECT_ERR(dt_chan_put(p, buf, 97), -EAGAIN);                                /* all or nothing */
	EXPECT_ERR(dt_chan_put(p, buf, 96), 0);
	EXPECT_ERR(dt_chan_get(c, buf, sizeof(buf), 0), 4096);
	dt_chan_close(p);
	dt_chan_close(c);
	EXPECT_ERR(dt_chan_unlink(sname), 0);
}

static void permission(void)
{
	struct dt_chan *c;
	int st;

	snprintf(other, sizeof(other), "%s-other", name);
	t_check(dt_chan_open(other, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c) == 0, "create");
	pid_t pid = fork();
	if (pid == 0) {
		struct dt_chan *x;
		char path[256];
		/* root: become nobody; anybody else: a channel of mode 0 */
		snprintf(path, sizeof(path), "/dev/shm/detach/ipc/%s.chan", other);
		if (geteuid() == 0 ? setresuid(65534, 65534, 65534) != 0 : chmod(path, 0) != 0)
			_exit(3);
		_exit(dt_chan_open(other, DT_CHAN_CONSUMER, 0, &x) == -EACCES ? 0 : 1);
	}
	st = t_wait_child(pid);
	t_check(st == 0, "another user's channel was not refused with -EACCES (status %d)", st);
	dt_chan_close(c);
	dt_chan_unlink(other);
}

static void bells_and_regions(void)
{
	struct dt_bell *b;
	void *a, *a2;

	EXPECT_ERR(dt_bell_open(name, 0, &b), -ENOENT);
	EXPECT_ERR(dt_bell_open(name, DT_CHAN_PRODUCER, &b), -EINVAL);
	EXPECT_ERR(dt_bell_open("x/y", DT_CHAN_CREATE, &b), -EINVAL);
	t_check(dt_bell_open(name, DT_CHAN_CREATE, &b) == 0, "bell");
	EXPECT_ERR(dt_bell_wait(b, 0), -ETIMEDOUT);
	EXPECT_ERR(dt_bell_wait(b, dt_now_ns() + 1000000), -ETIMEDOUT);
	EXPECT_ERR(dt_bell_ring(b), 0);
	EXPECT_ERR(dt_bell_ring(b), 0);
	EXPECT_ERR(dt_bell_wait(b, 0), 0);
	EXPECT_ERR(dt_bell_wait(b, 0), -ETIMEDOUT);                                   /* two rings, one wake */
	dt_bell_close(b);
	EXPECT_ERR(dt_bell_unlink(name), 0);

	EXPECT_ERR(dt_shm_open(name, 0, 4096, &a), -ENOENT);
	EXPECT_ERR(dt_shm_open(name, DT_CHAN_CREATE, 0, &a), -EINVAL);
	EXPECT_ERR(dt_shm_open(name, DT_CHAN_CONSUMER, 4096, &a), -EINVAL);
	t_check(dt_shm_open(name, DT_CHAN_CREATE, 10000, &a) == 0, "region");
	EXPECT_ERR(dt_shm_open(name, 0, 20000, &a2), -EINVAL);                        /* larger than it is */
	t_check(dt_shm_open(name, 0, 0, &a2) == 0 && a2 != a, "second mapping");
	strcpy(a, "shared");
	t_check(!strcmp(a2, "shared"), "the two mappings differ");
	EXPECT_ERR(dt_shm_close(name), -EINVAL);
	EXPECT_ERR(dt_shm_close(a), 0);
	EXPECT_ERR(dt_shm_close(a2), 0);
	EXPECT_ERR(dt_shm_close(a2), -EINVAL);
	EXPECT_ERR(dt_shm_unlink(name), 0);
	EXPECT_ERR(dt_shm_unlink(name), -ENOENT);
}

static int nthreads(void)
{
	return (int)t_task_value(getpid(), "status", "Threads");
}

static void inert(void)
{
	struct sigaction sa;
	struct dt_chan *c;

	sigaction(SIGSYS, NULL, &sa);
	t_check(nthreads() == 1, "%d threads before any open", nthreads());
	t_check(sa.sa_handler == SIG_DFL, "a SIGSYS handler in a plain program");
	t_check(dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &c) == 0, "open");
	t_check(nthreads() == 2, "%d threads after an open", nthreads());
	t_check(t_find_thread("detach-ipc") > 0, "no detach-ipc thread after an open");
	sigaction(SIGSYS, NULL, &sa);
	t_check(sa.sa_handler == SIG_DFL, "a SIGSYS handler after an open");
	dt_chan_close(c);
	dt_chan_unlink(name);
}

int main(void)
{
	t_chan_setup(name, sizeof(name), "t-refuse");
	inert();
	dt_chan_unlink(name);
	names_and_flags();
	roles();
	old_layout();
	stream();
	permission();
	bells_and_regions();
	return t_done();
}
