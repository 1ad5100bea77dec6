/* Description: the read-timeout idiom (an alarm whose handler siglongjmps
 * out of a pipe read) followed by a back-off and a retry leaves nothing on
 * the proxy when the first system call after the timeout, the back-off,
 * reaches the runtime by a trap: a byte written into the pipe during the
 * back-off goes to the retry.  The back-off is a different sleep in each
 * round (poll, select, ppoll, pselect, epoll_wait with no descriptor
 * ready), each at a site the program never ran before, so in rewrite mode
 * it traps (the program's other calls are made once first, their sites
 * rewritten; not nanosleep: the writer's naps have rewritten its site); a
 * second thread writes the byte 50 ms into the 200 ms back-off (a read left
 * on the proxy took it, and the retry timed out).  Three roles, each its own
 * program, natively and then under `detach run`, three times:
 *  - in-main: the read with the timeout in main code.  The alarm's
 *    handler leaves the runtime's signal stack disarmed (SS_AUTODISARM;
 *    the siglongjmp skips its rt_sigreturn), so the back-off's trap is
 *    written on the thread's own stack, and the read's wait (on the
 *    runtime's stack) was always judged left.
 *  - in-handler: the same read with the timeout in a SIGUSR1 handler
 *    (raise: the handler runs inside the trampoline's call, on the
 *    runtime's stack, and so does its read's wait), which returns after the
 *    timeout.  Its return arms the signal stack again, so the back-off's
 *    trap is written at the top of the runtime's signal half, below the
 *    trampoline's half that holds the read's wait: judged by that frame,
 *    the trap seemed to run on top of the wait, nothing was cancelled, and
 *    the read took the byte (rewrite mode).  dt_dispatch judges a call by
 *    the calling code's rsp (call.h, forget_abandoned_at).
 *  - in-main-sleep: the read with the timeout in main code, the back-off
 *    a nanosleep, then a sigtimedwait, at sites made before (the
 *    trampoline's sleep path, through dispatch_sleep, one frame deeper
 *    than the read's: judged by that frame, the nanosleep seemed to run on
 *    top of the left read's wait; and the path that saves the vector
 *    state).
 * Timeout: 150 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

#define LIMIT_S 30
#define RUNS 3                  /* of each role: a new program, new sites */
#define KINDS 5                 /* the back-offs at new sites, one site each */
#define WARM_KINDS 2            /* the back-offs at sites made before (in-main-sleep) */
#define BACK_OFF_MS 200
#define WRITE_AFTER_MS 50       /* into the back-off */

static int p[2], ep;
static sigjmp_buf env;
static volatile sig_atomic_t jumped, warming;
static volatile long timeout_us;
static volatile ssize_t read_n;
static volatile char read_c;
static int go_write, writer_stop;       /* main -> writer, __atomic */

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* The other thread: one byte into the pipe WRITE_AFTER_MS after main says
 * the timeout is behind (a flag, not a call: main makes none before its
 * back-off). */
static void *writer(void *arg)
{
	(void)arg;
	for (;;) {
		while (!__atomic_load_n(&go_write, __ATOMIC_ACQUIRE) && !__atomic_load_n(&writer_stop, __ATOMIC_ACQUIRE))
			nap_ms(1);
		if (__atomic_load_n(&writer_stop, __ATOMIC_ACQUIRE))
			return NULL;
		nap_ms(WRITE_AFTER_MS);
		if (write(p[1], "x", 1) != 1)
			_exit(50);
		__atomic_store_n(&go_write, 0, __ATOMIC_RELEASE);
	}
}

static void on_alarm(int s)
{
	(void)s;
	jumped = 1;
	siglongjmp(env, 1);
}

/* The read-timeout idiom: read_n -2 if the alarm ended the read. */
static void read_with_timeout(void)
{
	struct itimerval it = { .it_value = { timeout_us / 1000000, timeout_us % 1000000 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	char c = 0;

	read_n = -2;
	read_c = 0;
	if (sigsetjmp(env, 1) == 0) {
		setitimer(ITIMER_REAL, &it, NULL);
		read_n = read(p[0], &c, 1);
		setitimer(ITIMER_REAL, &off, NULL);
		read_c = c;
	}
}

static void on_usr1(int s)
{
	(void)s;
	if (!warming)
		read_with_timeout();
}

/* kind k's back-off, BACK_OFF_MS */
static void back_off(int k)
{
	struct timespec ts = { 0, BACK_OFF_MS * 1000000L };
	struct timeval tv = { 0, BACK_OFF_MS * 1000L };

	struct epoll_event ev;
	sigset_t usr2;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	switch (k) {
	case KINDS: nanosleep(&ts, NULL); break;
	case KINDS + 1: sigtimedwait(&usr2, NULL, &ts); break;
	case 0: poll(NULL, 0, BACK_OFF_MS); break;
	case 1: select(0, NULL, NULL, NULL, &tv); break;
	case 2: ppoll(NULL, 0, &ts, NULL); break;
	case 3: pselect(0, NULL, NULL, NULL, &ts, NULL); break;
	default: epoll_wait(ep, &ev, 1, BACK_OFF_MS); break;
	}
}

static const char *const kind_name[KINDS + WARM_KINDS] = { "poll", "select", "ppoll", "pselect", "epoll_wait",
							   "nanosleep", "sigtimedwait" };

/* One run of a role: the warm-up, then per kind of back-off a timeout, the
 * back-off and the retry.  0, or 10 * (kind + 1) + what went wrong. */
static int timeouts(bool in_handler, bool warm_back_off)
{
	struct sigaction alarm_sa = { .sa_handler = on_alarm }, usr1_sa = { .sa_handler = on_usr1 };
	sigset_t sigs;
	pthread_t th;

	if (getenv("T_DETACHED") && !t_find_proxy())
		return 1;                       /* under detach run, but not detached */
	if (pipe(p) || (ep = epoll_create1(0)) < 0 || sigaction(SIGALRM, &alarm_sa, NULL) || sigaction(SIGUSR1, &usr1_sa, NULL))
		return 2;
	/* the writer takes neither signal */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGALRM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (pthread_create(&th, NULL, writer, NULL))
		return 3;
	pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
	/* every call of a round but the back-off made once (rewrite mode:
	 * their sites rewritten): a timed read that gets its byte, the
	 * raise */
	timeout_us = 1000000;
	if (write(p[1], "w", 1) != 1)
		return 4;
	read_with_timeout();
	if (read_n != 1 || read_c != 'w')
		return 5;
	warming = 1;
	raise(SIGUSR1);
	warming = 0;
	int k0 = 0, k1 = KINDS;
	if (warm_back_off) {
		/* the back-offs' sites made before (rewrite mode: they come
		 * through the trampoline, nanosleep by dispatch_sleep,
		 * sigtimedwait with the vector state saved) */
		struct timespec zero = { 0, 0 };
		sigset_t usr2;
		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		sigprocmask(SIG_BLOCK, &usr2, NULL);
		nanosleep(&zero, NULL);
		sigtimedwait(&usr2, NULL, &zero);
		k0 = KINDS;
		k1 = KINDS + WARM_KINDS;
	}
	for (int k = k0; k < k1; k++) {
		int first_jumped, first_n;

		jumped = 0;
		timeout_us = 30000;
		if (in_handler)
			raise(SIGUSR1);
		else
			read_with_timeout();
		first_jumped = jumped;
		first_n = (int)read_n;
		/* no system call since the siglongjmp (the handler's return
		 * is none of the program's) */
		__atomic_store_n(&go_write, 1, __ATOMIC_RELEASE);
		back_off(k);
		jumped = 0;
		timeout_us = 1000000;
		read_with_timeout();            /* the retry */
		while (__atomic_load_n(&go_write, __ATOMIC_ACQUIRE))
			__builtin_ia32_pause();
		printf("%s, %s back-off: the read %s (%d); the retry %s (%zd '%c')\n",
		       in_handler ? "in-handler" : warm_back_off ? "in-main-sleep" : "in-main", kind_name[k],
		       first_jumped ? "timed out" : "did not time out", first_n,
		       jumped ? "timed out" : "got", read_n, read_c ? read_c : '-');
		fflush(stdout);
		if (!first_jumped || first_n != -2)
			return 10 * (k + 1) + 1;        /* the first read did not time out */
		if (jumped || read_n != 1 || read_c != 'x')
			return 10 * (k + 1) + 2;        /* the left read took the byte */
	}
	__atomic_store_n(&writer_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	close(p[0]);
	close(p[1]);
	close(ep);
	if (getenv("T_DETACHED"))
		return t_detached_done() ? 6 : 0;    /* rewrite mode really rewrote */
	return 0;
}

/* A role's status: 0 passed; 10 * (round + 1) + 1: round's first read did
 * not time out, + 2: the retry did not get the byte; 1-6: setup, see
 * timeouts(). */
int main(int argc, char **argv)
{
	static const char *const roles[] = { "in-main", "in-handler", "in-main-sleep" };

	if (argc == 2)
		return strcmp(argv[1], "in-main") && strcmp(argv[1], "in-handler") && strcmp(argv[1], "in-main-sleep") ? 7 :
			timeouts(!strcmp(argv[1], "in-handler"), !strcmp(argv[1], "in-main-sleep"));
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	for (int i = 0; i < RUNS; i++)
		for (size_t j = 0; j < sizeof(roles) / sizeof(roles[0]); j++)
			t_role_same(roles[j], 0, LIMIT_S);
	return t_done();
}
