/* Description: a detached thread consumes its own pending signals as
 * natively: after raise() of a blocked signal, a blocking and a
 * non-blocking signalfd read return it, poll/ppoll/select and an epoll set
 * holding the signalfd see it readable, sigwaitinfo, sigtimedwait and
 * sigpending see it; a dup of the signalfd works as the signalfd.  Checked
 * natively first, then detached. */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>

static sigset_t usr1;

static int read_one(int fd, const char *how)
{
	struct signalfd_siginfo si;
	ssize_t n = read(fd, &si, sizeof(si));

	printf("%s: read %zd, signal %d\n", how, n, n == sizeof(si) ? (int)si.ssi_signo : 0);
	t_check(n == sizeof(si) && si.ssi_signo == SIGUSR1, "%s: read %zd (%s)", how, n, n < 0 ? strerror(errno) : "");
	return n == sizeof(si);
}

int main(int argc, char **argv)
{
	struct pollfd pfd;
	fd_set rd;
	siginfo_t info;
	struct timespec zero = { 0, 0 };
	sigset_t pend;

	t_native_then_detached(argc, argv, NULL);
	printf("%s\n", t_native() ? "natively:" : "detached:");
	if (!t_native() && !t_find_proxy()) {
		fprintf(stderr, "not detached\n");
		return 1;
	}
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);

	int fd = signalfd(-1, &usr1, SFD_CLOEXEC);
	int nb = signalfd(-1, &usr1, SFD_CLOEXEC | SFD_NONBLOCK);
	t_check(fd >= 0 && nb >= 0, "signalfd: %s", strerror(errno));

	raise(SIGUSR1);
	read_one(fd, "blocking read after raise");

	raise(SIGUSR1);
	read_one(nb, "non-blocking read after raise");
	errno = 0;
	struct signalfd_siginfo si;
	ssize_t n = read(nb, &si, sizeof(si));
	t_check(n == -1 && errno == EAGAIN, "non-blocking read of nothing: %zd %s", n, strerror(errno));

	raise(SIGUSR1);
	pfd.fd = fd;
	pfd.events = POLLIN;
	int r = poll(&pfd, 1, 1000);
	printf("poll: %d revents %#x\n", r, pfd.revents);
	t_check(r == 1 && (pfd.revents & POLLIN), "poll %d revents %#x", r, pfd.revents);
	r = ppoll(&pfd, 1, &zero, NULL);
	t_check(r == 1 && (pfd.revents & POLLIN), "ppoll %d revents %#x", r, pfd.revents);
	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	struct timeval tv = { 1, 0 };
	r = select(fd + 1, &rd, NULL, NULL, &tv);
	t_check(r == 1 && FD_ISSET(fd, &rd), "select %d", r);

	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd }, out;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	r = epoll_wait(ep, &out, 1, 1000);
	printf("epoll_wait: %d\n", r);
	t_check(r == 1 && out.data.fd == fd, "epoll_wait %d", r);
	int copy = dup(fd);
	read_one(copy, "read of a dup");
	close(copy);
	close(ep);

	raise(SIGUSR1);
	sigpending(&pend);
	t_check(sigismember(&pend, SIGUSR1) == 1, "sigpending does not show SIGUSR1");
	r = sigtimedwait(&usr1, &info, &zero);
	printf("sigtimedwait: %d\n", r);
	t_check(r == SIGUSR1, "sigtimedwait %d %s", r, strerror(errno));
	raise(SIGUSR1);
	r = sigwaitinfo(&usr1, &info);
	t_check(r == SIGUSR1, "sigwaitinfo %d %s", r, strerror(errno));

	/* a signal another thread sends to this one, then a blocking read */
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
	read_one(fd, "blocking read after tgkill");
	close(fd);
	close(nb);
	return t_native() ? t_done() : t_detached_done();
}
