/* Description: an SA_ONSTACK handler whose alternate stack lies above the
 * runtime's own stack (a buffer in main's frame: the main stack is above
 * the mmap area) makes a system call while a forwarded pipe read waits: the
 * read goes on (SA_RESTART) and returns the byte written later, as
 * natively.  The runtime once compared the handler's frame with the
 * wait's across the two stacks, took the handler's call for one made after
 * the wait was abandoned, cancelled the read and gave the call the read's
 * place; the handler's return then spun for good in a wait for a reply that
 * had gone to its own call.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <sys/time.h>

static int p[2], devnull;
static volatile int ran, read_done;

static void on_alarm(int s)
{
	(void)s;
	ran++;
	if (write(devnull, "x", 1) != 1)        /* a call of its own, on the alternate stack */
		_exit(5);
}

static void *writer(void *a)
{
	(void)a;
	usleep(300000);
	if (write(p[1], "b", 1) != 1)
		_exit(6);
	for (int i = 0; i < 300 && !read_done; i++)
		usleep(10000);
	if (!read_done) {
		fprintf(stderr, "FAIL: the read did not return within 3 s of the write\n");
		_exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char ss[64 * 1024];
	stack_t st = { .ss_sp = ss, .ss_size = sizeof(ss) }, off = { .ss_flags = SS_DISABLE };
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_ONSTACK | SA_RESTART };
	struct itimerval once = { { 0, 0 }, { 0, 50000 } };
	pthread_t th;
	char c = 0;

	t_native_then_detached(argc, argv, NULL);
	devnull = open("/dev/null", O_WRONLY);
	t_check(sigaltstack(&st, NULL) == 0, "sigaltstack: %s", strerror(errno));
	sigaction(SIGALRM, &sa, NULL);
	if (pipe(p))
		return 2;
	pthread_create(&th, NULL, writer, NULL);
	setitimer(ITIMER_REAL, &once, NULL);
	ssize_t n = read(p[0], &c, 1);
	read_done = 1;
	pthread_join(th, NULL);
	printf("read %zd '%c' with the alternate stack at %p (main's frame, above the runtime's stack): the handler ran %d time(s)\n",
	       n, n == 1 ? c : '?', (void *)ss, ran);
	t_check(n == 1 && c == 'b', "read %zd, natively 1 ('b')", n);
	t_check(ran == 1, "the handler ran %d times, natively once", ran);
	/* the stack is main's frame: off before main returns (the runtime's
	 * traps at exit would be written there) */
	sigaltstack(&off, NULL);
	return t_detached_done();
}
