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
 * writes through.  The proxy's kernel sends the signal to the process
 * group, which the kernel offers to the detached thread first; a proxy
 * slow to take it at its exit from the call (a loaded CPU) let the
 * detached thread run the handler, and entered the call again, which
 * raised the signal again: the handler ran twice.  read- and
 * write-handler-traced make that every time: detached, the judge traces
 * the proxy (ptrace, PTRACE_SYSCALL), holds it at the end of the call
 * that returns -ERESTARTSYS until the signal is no longer pending on the
 * process (ShdPnd: the detached thread took it), then detaches; their
 * handler takes 100 ms, so the proxy enters the call again before the
 * interrupt the handler's return sends (before the fix: exit 32, handler
 * twice); read-handler-restart-traced, the same with SA_RESTART, must run
 * it three times, as natively.  write-handler-pipe: another process of the group writes the
 * terminal while the program reads a pipe: the read gets EINTR (a runtime
 * that held the signal until the read ended: exit 11). */
#include "helpers/t_detach.h"

#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <termios.h>
#include <time.h>

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
static bool slow_handler;           /* -traced: the handler takes 100 ms */

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
	if (slow_handler) {
		/* no system call: the vDSO's clock */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000000L);
	}
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
	if (strstr(c, "-traced"))
		slow_handler = true;
	if (getenv("T_GO_FD")) {
		/* the judge traces the proxy from now on */
		char go;
		if (read(atoi(getenv("T_GO_FD")), &go, 1) != 1)
			return 42;
	}
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
	} else if (strstr(c, "-pipe")) {
		/* another process of the group writes the terminal while this
		 * one reads a pipe: the group's signal interrupts the read */
		int pp[2];
		pid_t child;
		if (pipe(pp) || (child = fork()) < 0)
			return 40;
		if (child == 0) {
			close(pp[0]);
			usleep(200000);
			if (write(fd, "y", 1) == 1)     /* its own handler: EINTR */
				_exit(1);
			usleep(300000);
			_exit(write(pp[1], "x", 1) == 1 ? 0 : 1);
		}
		close(pp[1]);
		n = read(pp[0], buf, 1);
		int e = errno;
		waitpid(child, NULL, 0);
		errno = e;
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
	/* detached: the judge makes the detached thread take the SIGTTIN
	 * (trace_proxy) */
	{ "read-handler-traced", false, 0, EINTR_ * 10 + 1 },
	{ "read-handler-restart", false, 0, EIO_ * 10 + 3 },
	{ "read-handler-restart-traced", false, 0, EIO_ * 10 + 3 },
	/* SA_RESETHAND: the handler once (EINTR), then the default stops it */
	{ "read-handler-resethand", false, SIGTTIN, OK * 10 + 1 },
	{ "read-masked-handler", false, 0, EIO_ * 10 },
	{ "read-ign", false, 0, EIO_ * 10 },
	{ "read-blocked", false, 0, EIO_ * 10 },
	{ "write-dfl", true, SIGTTOU, OK * 10 },
	{ "write-handler", true, 0, EINTR_ * 10 + 1 },
	{ "write-handler-traced", true, 0, EINTR_ * 10 + 1 },
	/* another process of the group writes the terminal: the program's
	 * read of a pipe gets EINTR */
	{ "write-handler-pipe", true, 0, EINTR_ * 10 + 1 },
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
 * status (-1: killed after 20 s, or not a normal exit); for a traced one,
 * what the tracer saw (enum window). */
struct outcome {
	int stop_sig, status, window;
};

enum window {
	UNTRACED,
	MADE,           /* the call's end held, the signal taken meanwhile */
	NOT_TAKEN,      /* it stayed pending for 2 s */
	NO_END,         /* no end with -ERESTARTSYS within 10 s */
	NO_PROXY,       /* no proxy within 10 s, or it cannot be traced */
};

static const char *const window_names[] = {
	"untraced", "the signal taken while the proxy was held at the call's end",
	"the signal stayed pending for 2 s at the call's end", "no end of the call with -ERESTARTSYS", "no proxy to trace",
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

/* The thread of process pid named "detach-proxy", waited for up to 10 s
 * (0: none). */
static pid_t proxy_of(pid_t pid)
{
	for (int i = 0; i < 1000; i++) {
		char dir[64], path[320], comm[32];
		struct dirent *e;
		pid_t found = 0;
		DIR *d;

		snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
		if (!(d = opendir(dir)))
			return 0;
		while (!found && (e = readdir(d))) {
			snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
			int fd = open(path, O_RDONLY);
			ssize_t n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
			if (fd >= 0)
				close(fd);
			comm[n > 0 ? n : 0] = '\0';
			if (!strcmp(comm, "detach-proxy\n"))
				found = atoi(e->d_name);
		}
		closedir(d);
		if (found)
			return found;
		usleep(10000);
	}
	return 0;
}

/* Whether sig is pending on process pid, for the whole process (ShdPnd:
 * a signal sent to the process group, not yet taken by any thread). */
static bool shared_pending(pid_t pid, int sig)
{
	char path[64], buf[4096], *p;
	unsigned long long set = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if ((p = strstr(buf, "ShdPnd:")))
		set = strtoull(p + 7, NULL, 16);
	return set & (1ull << (sig - 1));
}

/* Detached, the call runs on the proxy, whose kernel sends the terminal's
 * signal to the process group and ends the call with -ERESTARTSYS; the
 * kernel offers the signal to the main thread first, the detached one, and
 * the proxy, already in the kernel, normally takes it first, at its exit
 * from the call.  A slow proxy (a loaded CPU) lets the detached thread take
 * it, and the proxy's kernel, with no signal taken there, enters the call
 * again.  This makes that every time: it traces the proxy of process pid
 * (PTRACE_SYSCALL), holds it at the end of its call nr that returns
 * -ERESTARTSYS, waits until the signal is no longer pending on the process
 * (ShdPnd: the proxy stopped, the detached thread took it) and lets the
 * proxy go on, untraced from then on.  The case's handler takes 100 ms: the
 * proxy enters the call again long before it returns (and before the
 * interrupt its return sends, which would end the call with EINTR).  Then
 * writes a byte on go, which the program waits for before its call. */
static enum window trace_proxy(pid_t pid, int go, int sig, long nr)
{
	enum window w = NO_END;
	struct user_regs_struct r;
	pid_t proxy = proxy_of(pid);
	int ws, i;

	if (!proxy || ptrace(PTRACE_SEIZE, proxy, NULL, (void *)PTRACE_O_TRACESYSGOOD))
		return NO_PROXY;
	/* stopped, to be resumed with PTRACE_SYSCALL */
	if (ptrace(PTRACE_INTERRUPT, proxy, NULL, NULL) || waitpid(proxy, &ws, __WALL) != proxy ||
	    !WIFSTOPPED(ws) || ptrace(PTRACE_SYSCALL, proxy, NULL, NULL))
		return NO_PROXY;        /* the proxy is gone: nothing left to detach */
	if (write(go, "g", 1) != 1)
		_exit(5);
	for (i = 0; i < 100000; i++) {
		pid_t got = waitpid(proxy, &ws, __WALL | WNOHANG);
		int stop_sig = 0;

		if (got == 0) {
			usleep(100);
			continue;
		}
		if (got != proxy || !WIFSTOPPED(ws))
			return w;       /* gone (the program ended), reaped */
		if (WSTOPSIG(ws) == (SIGTRAP | 0x80)) {
			if (!ptrace(PTRACE_GETREGS, proxy, NULL, &r) && (long)r.orig_rax == nr &&
			    (long)r.rax == -512 /* ERESTARTSYS */) {
				/* the proxy takes its signals after this stop:
				 * not pending, it was the detached thread */
				w = NOT_TAKEN;
				for (int j = 0; w == NOT_TAKEN && j < 20000; j++) {
					if (!shared_pending(pid, sig))
						w = MADE;
					else
						usleep(100);
				}
				break;
			}
		} else if (ws >> 16 != PTRACE_EVENT_STOP) {
			stop_sig = WSTOPSIG(ws);        /* a signal-delivery-stop */
		}
		ptrace(PTRACE_SYSCALL, proxy, NULL, (void *)(long)stop_sig);
	}
	if (i == 100000) {
		/* not stopped: stopped now, to be detached */
		ptrace(PTRACE_INTERRUPT, proxy, NULL, NULL);
		while (waitpid(proxy, &ws, __WALL) == proxy && WIFSTOPPED(ws) &&
		       ptrace(PTRACE_DETACH, proxy, NULL, NULL))
			ptrace(PTRACE_CONT, proxy, NULL, NULL);
		return w;
	}
	ptrace(PTRACE_DETACH, proxy, NULL, NULL);
	return w;
}

/* The session leader: the terminal's controlling process, in the
 * foreground; the case runs in a process group of its own, in the
 * background.  Reports on out: stop signal and status. */
static void session(const struct job_case *c, int master, const char *slave, char **argv, int out, bool trace)
{
	struct outcome o = { 0, -1, UNTRACED };
	int tty, st, go[2] = { -1, -1 };
	char num[16];
	pid_t pid;

	setsid();
	if ((tty = open(slave, O_RDWR)) < 0 || ioctl(tty, TIOCSCTTY, 0))
		_exit(2);
	if (trace) {
		if (pipe(go))
			_exit(2);
		snprintf(num, sizeof(num), "%d", go[0]);
		setenv("T_GO_FD", num, 1);
	}
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		close(tty);
		close(master);
		close(out);
		if (trace)
			close(go[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	setpgid(pid, pid);
	if (trace) {
		bool is_read = !strncmp(c->name, "read", 4);
		close(go[0]);
		o.window = trace_proxy(pid, go[1], is_read ? SIGTTIN : SIGTTOU, is_read ? SYS_read : SYS_write);
		close(go[1]);   /* the program goes on without it */
	}
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

static struct outcome run_case(const struct job_case *c, char **argv, bool detached)
{
	struct outcome o = { -2, -2, UNTRACED };
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
		session(c, master, slave, argv, p[1], detached && strstr(c->name, "-traced"));
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
	if (o.window != UNTRACED) {
		printf("%-22s %-9s the tracer: %s\n", c->name, how,
		       o.window >= 0 && o.window <= NO_PROXY ? window_names[o.window] : "?");
		t_check(o.window == MADE, "%s %s: the window was not made: %s", c->name, how,
			o.window >= 0 && o.window <= NO_PROXY ? window_names[o.window] : "?");
	}
}

int main(int argc, char **argv)
{
	char *args[64], role[64], self[4096];

	if (argc == 2 && !strncmp(argv[1], "case:", 5))
		return program(argv[1] + 5);
	if (!t_self_exe(self, sizeof(self)))
		return 1;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(role, sizeof(role), "case:%s", cases[i].name);
		char *native[] = { self, role, NULL };
		judge(&cases[i], "native", run_case(&cases[i], native, false));
	}
	if (t_failures) {
		fprintf(stderr, "FAIL: the checks fail natively: the test is wrong\n");
		return 1;
	}
	setenv("T_DETACHED", "1", 1);           /* the program checks it has a proxy */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(role, sizeof(role), "case:%s", cases[i].name);
		t_detach_argv(args, NULL, NULL, self, role);
		judge(&cases[i], "detached", run_case(&cases[i], args, true));
	}
	return t_done();
}
