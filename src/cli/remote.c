/* Calling functions inside another process through ptrace (remote.h).
 *
 * As a debugger calls a function in its inferior: threads are seized
 * (PTRACE_SEIZE, no signal sent) and stopped with PTRACE_INTERRUPT; the
 * chosen thread's general registers and whole xsave state are saved; a call
 * sets rip to the function and the arguments in rdi, rsi, rdx, with a return
 * address that cannot be executed: the `ret` faults (SIGSEGV at a
 * non-canonical address, no memory touched) and the thread stops with the
 * result in rax.  Putting the saved registers back, orig_rax included, lets
 * a thread that was stopped inside a blocking system call restart it, as
 * the kernel does after any stop. */
#include "cli/remote.h"
#include "lib/util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>

/* Non-canonical: a `ret` there faults without touching memory. */
#define RETURN_TRAP 0xdead000000000000ull
#define SCRATCH_MAX 8192      /* strings below the red zone, at most */

/* ---- stops ------------------------------------------------------------------ */

/* Waits for thread i's next stop: 0 with *sig 0 for an interrupt or group
 * stop.  A signal for the program that stops it meanwhile is kept for the
 * release (the first one) and the thread is stopped again without it,
 * unless want_signal (a call we made ended, or a step): then *sig is it. */
static int wait_stop(struct remote *r, int i, bool want_signal, int *sig)
{
	int st;

	for (;;) {
		if (waitpid(r->tids[i], &st, __WALL) < 0)
			return -errno;
		if (!WIFSTOPPED(st))
			return -ESRCH;                /* it ended */
		*sig = 0;
		if (st >> 16 == PTRACE_EVENT_STOP)
			return 0;
		*sig = WSTOPSIG(st);
		if (want_signal)
			return 0;
		if (!r->pending[i])
			r->pending[i] = *sig;
		if (ptrace(PTRACE_INTERRUPT, r->tids[i], 0, 0) < 0 || ptrace(PTRACE_CONT, r->tids[i], 0, 0) < 0)
			return -errno;
	}
}

static bool known(const struct remote *r, pid_t tid)
{
	for (int i = 0; i < r->ntids; i++)
		if (r->tids[i] == tid)
			return true;
	return false;
}

/* Seizes and interrupts the threads of /proc/PID/task not seized yet: how
 * many, or -errno. */
static int seize_new(struct remote *r)
{
	char dir[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)r->pid);
	if (!(d = opendir(dir)))
		return -errno;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || known(r, tid) || (r->skip && r->skip(r->pid, tid)))
			continue;
		if (r->ntids == REMOTE_MAX_THREADS) {
			closedir(d);
			return -E2BIG;
		}
		if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
			if (errno == ESRCH)
				continue;             /* it just ended */
			closedir(d);
			return -errno;
		}
		r->tids[r->ntids] = tid;
		r->stopped[r->ntids] = false;
		r->pending[r->ntids++] = 0;
		n++;
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 && errno != ESRCH) {
			closedir(d);
			return -errno;
		}
	}
	closedir(d);
	return n;
}

int remote_seize(struct remote *r, pid_t pid, bool (*skip)(pid_t pid, pid_t tid))
{
	int n;

	r->pid = pid;
	r->ntids = 0;
	r->cur = -1;
	r->skip = skip;
	n = seize_new(r);
	return n < 0 ? n : n == 0 ? -ESRCH : 0;
}

int remote_stop(struct remote *r)
{
	int n, sig;

	do {
		for (int i = 0; i < r->ntids; i++) {
			if (r->stopped[i] || !r->tids[i])
				continue;
			int err = wait_stop(r, i, false, &sig);
			if (err == -ESRCH && r->tids[i] != r->pid)
				r->tids[i] = 0;       /* a thread that ended meanwhile */
			else if (err)
				return err;
			r->stopped[i] = true;
		}
		/* threads created before their creator stopped */
		if ((n = seize_new(r)) < 0)
			return n;
	} while (n > 0);
	return 0;
}

void remote_release(struct remote *r)
{
	for (int i = 0; i < r->ntids; i++)
		if (r->tids[i])
			ptrace(PTRACE_DETACH, r->tids[i], 0, (void *)(long)r->pending[i]);
	r->ntids = 0;
}

/* ---- registers ----------------------------------------------------------------- */

static int save_regs(struct remote *r)
{
	pid_t tid = r->tids[r->cur];

	if (ptrace(PTRACE_GETREGS, tid, 0, &r->regs) < 0)
		return -errno;
	r->xv.iov_base = r->xstate;
	r->xv.iov_len = sizeof(r->xstate);
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &r->xv) < 0)
		return -errno;
	r->scratch = (r->regs.rsp - 128) & ~(uintptr_t)15;
	return 0;
}

int remote_pick(struct remote *r, pid_t tid)
{
	for (r->cur = 0; r->cur < r->ntids && r->tids[r->cur] != tid; r->cur++)
		;
	if (r->cur == r->ntids || !r->stopped[r->cur]) {
		r->cur = -1;
		return -ESRCH;
	}
	return save_regs(r);
}

int remote_restore(struct remote *r)
{
	pid_t tid = r->tids[r->cur];

	if (ptrace(PTRACE_SETREGS, tid, 0, &r->regs) < 0 ||
	    ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &r->xv) < 0)
		return -errno;
	return 0;
}

/* ---- calls ------------------------------------------------------------------------ */

static int poke(pid_t pid, uintptr_t at, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)at, len };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -errno;
}

uintptr_t remote_string(struct remote *r, const char *s)
{
	size_t len = strlen(s) + 1;
	uintptr_t at = (r->scratch - len) & ~(uintptr_t)15;

	if (r->regs.rsp - at > SCRATCH_MAX || poke(r->pid, at, s, len))
		return 0;
	r->scratch = at;
	return at;
}

int remote_call(struct remote *r, uintptr_t fn, long a0, long a1, long a2, long *ret)
{
	struct user_regs_struct g = r->regs;
	pid_t tid = r->tids[r->cur];
	uintptr_t sp = (r->scratch - 256) & ~(uintptr_t)15;
	uint64_t back = RETURN_TRAP;
	int sig, err;

	sp -= 8;                                  /* as after a call: rsp % 16 == 8 */
	if ((err = poke(r->pid, sp, &back, sizeof(back))))
		return err;
	g.rsp = sp;
	g.rip = fn;
	g.rdi = (uint64_t)a0;
	g.rsi = (uint64_t)a1;
	g.rdx = (uint64_t)a2;
	g.rax = 0;
	g.orig_rax = -1;      /* no system call to restart while we call */
	if (ptrace(PTRACE_SETREGS, tid, 0, &g) < 0 || ptrace(PTRACE_CONT, tid, 0, 0) < 0)
		return -errno;
	for (;;) {
		if ((err = wait_stop(r, r->cur, true, &sig)))
			return err;
		if (sig == SIGSEGV)
			break;
		/* the program's own signal meanwhile: kept for the release */
		if (sig && sig != SIGTRAP && !r->pending[r->cur])
			r->pending[r->cur] = sig;
		if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
			return -errno;
	}
	if (ptrace(PTRACE_GETREGS, tid, 0, &g) < 0)
		return -errno;
	/* the `ret` itself faults on a non-canonical address: rsp still
	 * points at the return address (some kernels report it popped) */
	if (g.rip != RETURN_TRAP && g.rsp != sp && g.rsp != sp + 8)
		return -EFAULT;
	*ret = (long)g.rax;
	return 0;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The end of one single step, or -ETIMEDOUT after the deadline: a step
 * onto a `syscall` that blocks (a restarted rt_sigtimedwait) ends only with
 * the call; the thread is then interrupted (the call restarts when it is
 * let go) and stopped. */
static int wait_step(struct remote *r, const struct timespec *t0, int max_ms, int *sig)
{
	pid_t tid = r->tids[r->cur];
	int st;

	for (;;) {
		pid_t got = waitpid(tid, &st, __WALL | WNOHANG);
		if (got < 0)
			return -errno;
		if (got == tid) {
			if (!WIFSTOPPED(st))
				return -ESRCH;
			*sig = st >> 16 == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st);
			return 0;
		}
		if (ms_since(t0) > max_ms) {
			int err;
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
				return -errno;
			if ((err = wait_stop(r, r->cur, false, sig)))
				return err;
			return -ETIMEDOUT;
		}
		sched_yield();
	}
}

/* The trap flag of x86 (EFLAGS.TF). */
#define TRAP_FLAG 0x100ull

/* A step over a popf (the runtime's trampoline and timed waits restore the
 * program's flags with one) makes the kernel believe the thread set TF
 * itself (arch/x86/kernel/step.c, is_setting_trap_flag): it would stay set
 * after we let go, and the program's next instruction would raise a SIGTRAP
 * that kills it.  Cleared where the thread had none when we stopped it. */
static int drop_step_flag(pid_t tid, struct user_regs_struct *g, bool program_set_tf)
{
	if (program_set_tf || !(g->eflags & TRAP_FLAG))
		return 0;
	g->eflags &= ~TRAP_FLAG;
	return ptrace(PTRACE_SETREGS, tid, 0, g) < 0 ? -errno : 0;
}

int remote_step_until(struct remote *r, bool (*out)(uintptr_t rip, void *arg), void *arg, int max_ms)
{
	pid_t tid = r->tids[r->cur];
	bool program_set_tf = r->regs.eflags & TRAP_FLAG;
	struct user_regs_struct g;
	struct timespec t0;
	int err, sig;

	if ((err = remote_restore(r)))
		return err;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ptrace(PTRACE_GETREGS, tid, 0, &g) < 0)
			return -errno;
		if (out(g.rip, arg)) {
			if ((err = drop_step_flag(tid, &g, program_set_tf)))
				return err;
			return save_regs(r);
		}
		if (ms_since(&t0) > max_ms)
			return drop_step_flag(tid, &g, program_set_tf) || save_regs(r) ? -ESRCH : -ETIMEDOUT;
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
			return -errno;
		if ((err = wait_step(r, &t0, max_ms, &sig)))
			return err == -ETIMEDOUT && save_regs(r) ? -ESRCH : err;
		if (sig && sig != SIGTRAP && !r->pending[r->cur])
			r->pending[r->cur] = sig;     /* delivered at the release */
	}
}

/* ---- the address space ------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

int remote_find_mapping(pid_t pid, const char *suffix, uintptr_t *base, char *path, size_t len)
{
	char maps[64], line[PATH_MAX + 128];
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(maps, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, off;
		char *name = strchr(line, '/');
		if (!name || sscanf(line, "%lx-%*x %*s %lx", &lo, &off) != 2)
			continue;
		name[strcspn(name, "\n")] = '\0';
		if (off == 0 && ends_with(name, suffix)) {
			*base = lo;
			snprintf(path, len, "%s", name);
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

int remote_exec_ranges(pid_t pid, const char *suffix, uintptr_t (*ranges)[2], int max)
{
	char maps[64], line[PATH_MAX + 128], prot[8];
	int n = 0;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(maps, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f) && n < max) {
		unsigned long lo, hi;
		int at = 0;
		/* the name is the sixth field: a path, or [vdso] and the like */
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, prot, &at) != 3 || !at ||
		    prot[2] != 'x')
			continue;
		char *name = line + at;
		name[strcspn(name, "\n")] = '\0';
		if (ends_with(name, suffix)) {
			ranges[n][0] = lo;
			ranges[n++][1] = hi;
		}
	}
	fclose(f);
	return n;
}

int remote_symbol(pid_t pid, void *handle, const char *sym, const char *suffix, uintptr_t *out)
{
	Dl_info info;
	uintptr_t base;
	char path[PATH_MAX];
	void *local = dlsym(handle, sym);

	if (!local || !dladdr(local, &info) || remote_find_mapping(pid, suffix, &base, path, sizeof(path)))
		return -ENOENT;
	*out = base + ((uintptr_t)local - (uintptr_t)info.dli_fbase);
	return 0;
}
