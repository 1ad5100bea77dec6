/* Description: job control on a detached thread, as natively: a program in
 * a background process group of a terminal's session that reads the
 * terminal is stopped with SIGTTIN (WUNTRACED sees it), and once made the
 * foreground and continued its read returns the line typed; its write under
 * `stty tostop`, and its tcsetattr, stop it with SIGTTOU.  A SIGTTIN handler
 * runs on the detached thread and ends the read with EINTR (without
 * SA_RESTART) or has it entered again (with it: three times here, then the
 * handler ignores SIGTTIN and the read gets EIO; with SA_RESETHAND it runs
 * once, and the next read stops the program); a SIGTTOU handler's own
 * tostop write goes through (its signal is blocked in it), and so does a
 * write, with EIO for a read, made by a SIGUSR1 handler whose sa_mask blocks
 * the signal (a mask the runtime does not see applied), whether or not the
 * signal's own handler has SA_RESTART.  SIGTTIN ignored or
 * blocked: the read gets EIO; SIGTTOU ignored or blocked: the tostop write
 * goes through.  Each case runs natively first, in a session of its own on
 * a pseudo-terminal, and must give the native result there; then the same
 * program runs under `detach run`.  The kernel judges the access by the
 * calling thread's mask (tty_jobctrl.c), and a detached thread's calls run
 * on its proxy: a proxy that blocks the two signals gives EIO and lets the
 * writes through. */
#include "helpers/t_detach.h"

#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>

/* ---- the program: one case, in a background process group ---------------
 * Its exit status: 10 * outcome + the handler's runs (0-9); outcome 1 the
 * call succeeded (a read of "x"), 2 EIO, 3 EINTR, 4 anything else, 5 a
 * handler ran on another thread than the one that made the call, 6 the
 * handler's own write of the terminal failed; 41: run
 * under `detach run` but not detached. */
enum { OK = 1, EIO_ = 2, EINTR_ = 3, OTHER = 4, WRONG_THREAD = 5, NESTED_FAILED = 6 };

static volatile sig_atomic_t runs, bad_thread, nested_bad;
static int restart_runs;            /* with SA_RESTART: ignore after this many */
static int nested_fd = -1;          /* the handler writes the terminal itself */
static pid_t caller;
/* -masked: the call is made by a SIGUSR1 handler whose sa_mask blocks the
 * case's signal (a mask the kernel applies without a call) */
static volatile sig_atomic_t masked_ret, masked_errno;
static int masked_fd = -1, masked_is_read;

static void on_usr1(int s)
{
	char c;
	ssize_t n;

	(void)s;
	errno = 0;
	n = masked_is_read ? read(masked_fd, &c, 1) : write(masked_fd, "y", 1);
	masked_ret = n == 1 ? 1 : -1;
	masked_errno = errno;
}

static void on_sig(int s)
{
	if ((pid_t)syscall(SYS_gettid) != caller)
		bad_thread = 1;
	/* its own signal is blocked in it: natively the write goes through */
	if (nested_fd >= 0 && write(nested_fd, "z", 1) != 1)
		nested_bad = 1;
	if (++runs == restart_runs)
		signal(s, SIG_IGN);
}

static int program(const char *c)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY);
	bool is_read = !strncmp(c, "read", 4), is_tcset = !strncmp(c, "tcsetattr", 9);
	int sig = is_read ? SIGTTIN : SIGTTOU;
	struct sigaction sa = { .sa_handler = on_sig };
	struct termios tio;
	char buf[8];
	ssize_t n;

	if (fd < 0)
		return 40;
	if (getenv("T_DETACHED") && !t_find_proxy())
		return 41;              /* under detach run, but not detached */
	caller = (pid_t)syscall(SYS_gettid);
	if (strstr(c, "-ign"))
		signal(sig, SIG_IGN);
	if (strstr(c, "-blocked")) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	if (strstr(c, "-nested"))
		nested_fd = fd;
	if (strstr(c, "-handler"))
		sigaction(sig, &sa, NULL);
	if (strstr(c, "-resethand")) {
		sa.sa_flags = SA_RESETHAND;
		sigaction(sig, &sa, NULL);
	}
	if (strstr(c, "-restart")) {
		sa.sa_flags = SA_RESTART;
		restart_runs = 3;
		sigaction(sig, &sa, NULL);
	}
	errno = 0;
	if (strstr(c, "-masked")) {
		struct sigaction ua = { .sa_handler = on_usr1 };
		sigaddset(&ua.sa_mask, sig);
		sigaction(SIGUSR1, &ua, NULL);
		masked_fd = fd;
		masked_is_read = is_read;
		raise(SIGUSR1);
		n = masked_ret;
		errno = masked_errno;
	} else if (is_read) {
		n = read(fd, buf, 1);
		if (n < 0 && errno == EINTR && strstr(c, "-resethand"))
			n = read(fd, buf, 1);   /* the default action now: stopped */
		n = n == 1 && buf[0] == 'x' ? 1 : -1;
	} else if (is_tcset) {
		n = tcgetattr(fd, &tio) ? -1 : tcsetattr(fd, TCSANOW, &tio) ? -1 : 1;
	} else {
		n = write(fd, "y", 1);
	}
	int outcome = n == 1 ? OK : errno == EIO ? EIO_ : errno == EINTR ? EINTR_ : OTHER;
	if (nested_bad)
		outcome = NESTED_FAILED;
	if (bad_thread)
		outcome = WRONG_THREAD;
	return outcome * 10 + (runs > 9 ? 9 : runs);
}

/* ---- the judge ------------------------------------------------------------ */

struct job_case {
	const char *name;
	bool tostop;
	int stop_sig;       /* natively stopped by it (then resumed in the foreground) */
	int status;         /* natively its exit status (after the resumption) */
};

static const struct job_case cases[] = {
	{ "read-dfl", false, SIGTTIN, OK * 10 },
	{ "read-handler", false, 0, EINTR_ * 10 + 1 },
	{ "read-handler-restart", false, 0, EIO_ * 10 + 3 },
	/* SA_RESETHAND: the handler once (EINTR), then the default stops it */
	{ "read-handler-resethand", false, SIGTTIN, OK * 10 + 1 },
	{ "read-masked-handler", false, 0, EIO_ * 10 },
	{ "read-ign", false, 0, EIO_ * 10 },
	{ "read-blocked", false, 0, EIO_ * 10 },
	{ "write-dfl", true, SIGTTOU, OK * 10 },
	{ "write-handler", true, 0, EINTR_ * 10 + 1 },
	{ "write-handler-nested", true, 0, EINTR_ * 10 + 1 },
	/* the write is made in a SIGUSR1 handler that blocks SIGTTOU (its
	 * sa_mask): it goes through, no signal raised */
	{ "write-masked-handler", true, 0, OK * 10 },
	{ "write-masked-handler-restart", true, 0, OK * 10 },
	{ "write-ign", true, 0, OK * 10 },
	{ "write-blocked", true, 0, OK * 10 },
	{ "tcsetattr-dfl", false, SIGTTOU, OK * 10 },
};

/* What one case did: the signal that stopped it (0: none) and its exit
 * status (-1: killed after 20 s, or not a normal exit). */
struct outcome {
	int stop_sig, status;
};

static pid_t wait_for(pid_t pid, int *st, int options, int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		pid_t r = waitpid(pid, st, options | WNOHANG);
		if (r != 0)
			return r;
		usleep(10000);
	}
	return 0;
}

/* The session leader: the terminal's controlling process, in the
 * foreground; the case runs in a process group of its own, in the
 * background.  Reports on out: stop signal and status. */
static void session(int master, const char *slave, char **argv, int out)
{
	struct outcome o = { 0, -1 };
	int tty, st;
	pid_t pid;

	setsid();
	if ((tty = open(slave, O_RDWR)) < 0 || ioctl(tty, TIOCSCTTY, 0))
		_exit(2);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		close(tty);
		close(master);
		close(out);
		execv(argv[0], argv);
		_exit(127);
	}
	setpgid(pid, pid);
	if (wait_for(pid, &st, WUNTRACED, 20) == pid && WIFSTOPPED(st)) {
		o.stop_sig = WSTOPSIG(st);
		/* fg: the job becomes the foreground, the line it waits for is
		 * typed, and it is continued */
		if (tcsetpgrp(tty, pid) || write(master, "x\n", 2) != 2)
			_exit(3);
		kill(-pid, SIGCONT);
		if (wait_for(pid, &st, 0, 20) != pid)
			st = -1;
	} else if (!WIFEXITED(st)) {
		st = -1;
	}
	if (st != -1 && WIFEXITED(st))
		o.status = WEXITSTATUS(st);
	if (o.status == -1) {
		t_print_threads(pid);
		kill(-pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	if (write(out, &o, sizeof(o)) != sizeof(o))
		_exit(4);
	_exit(0);
}

static struct outcome run_case(const struct job_case *c, char **argv)
{
	struct outcome o = { -2, -2 };
	char slave[64];
	int master, sl, p[2], st;
	struct termios tio;
	pid_t pid;

	if (openpty(&master, &sl, slave, NULL, NULL) || pipe(p))
		t_skip("no pseudo-terminal: %s", strerror(errno));
	tcgetattr(sl, &tio);
	if (c->tostop)
		tio.c_lflag |= TOSTOP;
	else
		tio.c_lflag &= ~TOSTOP;
	tcsetattr(sl, TCSANOW, &tio);
	close(sl);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		session(master, slave, argv, p[1]);
	}
	close(p[1]);
	if (read(p[0], &o, sizeof(o)) != sizeof(o))
		o.stop_sig = o.status = -3;
	waitpid(pid, &st, 0);
	close(p[0]);
	close(master);
	return o;
}

static void judge(const struct job_case *c, const char *how, struct outcome o)
{
	printf("%-22s %-9s stopped by %-2d exit %d (natively: stopped by %d, exit %d)\n", c->name, how,
	       o.stop_sig, o.status, c->stop_sig, c->status);
	t_check(o.stop_sig == c->stop_sig && o.status == c->status,
		"%s %s: stopped by %d, exit %d, where natively stopped by %d, exit %d", c->name, how,
		o.stop_sig, o.status, c->stop_sig, c->status);
}

int main(int argc, char **argv)
{
	char *args[64], role[64], self[4096];
	ssize_t n;

	if (argc == 2 && !strncmp(argv[1], "case:", 5))
		return program(argv[1] + 5);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(role, sizeof(role), "case:%s", cases[i].name);
		char *native[] = { self, role, NULL };
		judge(&cases[i], "native", run_case(&cases[i], native));
	}
	if (t_failures) {
		fprintf(stderr, "FAIL: the checks fail natively: the test is wrong\n");
		return 1;
	}
	setenv("T_DETACHED", "1", 1);           /* the program checks it has a proxy */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(role, sizeof(role), "case:%s", cases[i].name);
		t_detach_argv(args, NULL, NULL, self, role);
		judge(&cases[i], "detached", run_case(&cases[i], args));
	}
	return t_done();
}
