/* Detaching a thread of a running program, attaching it again and moving
 * it, from outside (pid_op.h; docs/runtime.md, "Detaching a running
 * program").
 *
 * Every thread but the runtime's proxies is stopped with ptrace, and
 * functions are called on the chosen thread (remote.c): to detach, glibc's
 * dlopen of libdetach.so and then the runtime's __dt_pid_start
 * (src/runtime/init.c) with the contract `detach run` would have put in the
 * environment; to attach, the public dt_attach(); to move, both.  Then the
 * registers are put back exactly and every thread is let go.
 *
 * A detached thread is called only where it runs the program's own code:
 * stopped inside the runtime (its trap handler, its wait for the proxy) it
 * would come back from our call into a runtime whose proxy is gone.  It
 * is stepped out first, one instruction at a time, and dt_attach says
 * EBUSY where a forwarded call is still under way below a handler of the
 * program; then it is stepped on until it leaves the runtime again. */
#include "cli/cli.h"
#include "cli/pid_op.h"
#include "lib/liveness.h"
#include "cli/remote.h"
#include "lib/contract.h"
#include "lib/partition.h"
#include "lib/registry.h"
#include "lib/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEAVE_RUNTIME_MS 2000   /* how long a thread may stay inside a forwarded call */

/* The runtime's file as /proc/PID/maps names it: "/" and the name of the
 * file itself, after symbolic links (libdetach.so in a build tree,
 * libdetach.so.0.1.0 installed, where DETACH_LIB or the soname is a link to
 * it).  Set by pid_op_run. */
static char runtime_file[NAME_MAX + 2];

static int fail(struct pid_op *op, int err, const char *note, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(struct pid_op *op, int err, const char *note, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(op->why, sizeof(op->why), fmt, ap);
	va_end(ap);
	snprintf(op->note, sizeof(op->note), "%s", note ? note : "");
	return err;
}

/* ---- what /proc and the registry tell ----------------------------------------- */

static long status_field(pid_t pid, const char *key)
{
	char path[64], buf[8192], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_text_file(path, buf, sizeof(buf)) || !(p = strstr(buf, key)))
		return -1;
	return strtol(p + strlen(key), NULL, 10);
}

int pid_detached_cpu(pid_t pid, pid_t tid)
{
	char path[128];
	struct dt_registry *r = malloc(sizeof(*r));
	int fd, cpu = -1;

	snprintf(path, sizeof(path), "%s/%d", REGISTRY_DIR, (int)pid);
	if (r && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (read(fd, r, sizeof(*r)) == (ssize_t)sizeof(*r) && r->magic == REGISTRY_MAGIC && r->pid == pid)
			for (int i = 0; i < r->nthreads && i < DT_MAX_THREADS; i++)
				if (r->threads[i].tid == tid && !r->threads[i].ended && r->threads[i].state == 1)
					cpu = r->threads[i].cpu;
		close(fd);
	}
	free(r);
	return cpu;
}

void pid_default_cpus(cpu_set_t *cpus)
{
	struct partition p;
	int first = -1;

	if (!partition_find(&p) && CPU_COUNT(&p.cpus)) {
		*cpus = p.cpus;
		return;
	}
	cpus_online(cpus);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, cpus))
			first = c;
	if (first >= 0 && CPU_COUNT(cpus) > 1)
		CPU_CLR(first, cpus);
}

int pid_op_check(struct pid_op *op)
{
	char path[64], exe[PATH_MAX], libc[PATH_MAX];
	pid_t tid = op->tid ? op->tid : op->pid;
	uintptr_t base;
	long v;

	if (!pid_alive(op->pid))
		return fail(op, -ESRCH, "'ps -e' lists the running processes", "no process %d", (int)op->pid);
	if (read_long_file("/proc/sys/kernel/yama/ptrace_scope", &v) == 0 && v >= 3)
		return fail(op, -EPERM, "the setting cannot be lowered until a reboot; boot with "
			    "kernel.yama.ptrace_scope=1 or less",
			    "kernel.yama.ptrace_scope is 3: no process may be traced, so none can be detached");
	if ((v = status_field(op->pid, "\nUid:")) >= 0 && v != (long)geteuid() && geteuid() != 0)
		return fail(op, -EPERM, "run it as that user or as root",
			    "process %d belongs to uid %ld: detaching it needs CAP_SYS_PTRACE", (int)op->pid, v);
	if ((v = status_field(op->pid, "\nTracerPid:")) > 0)
		return fail(op, -EPERM, "detach the debugger first",
			    "process %d is being traced by process %ld (a debugger?): a process has one tracer",
			    (int)op->pid, v);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)op->pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (remote_find_mapping(op->pid, "/libc.so.6", &base, libc, sizeof(libc)))
		return fail(op, -ENOEXEC, "a static program can only be started detached: nothing loads a library into it",
			    "process %d (%s) is not dynamically linked with glibc: the runtime cannot be loaded into it",
			    (int)op->pid, exe);
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)op->pid, (int)tid);
	if (access(path, F_OK))
		return fail(op, -ESRCH, "its threads are in /proc/PID/task", "process %d has no thread %d",
			    (int)op->pid, (int)tid);
	cpu_set_t online, hk;
	cpus_online(&online);
	CPU_XOR(&hk, &online, &op->cpus);
	CPU_AND(&hk, &hk, &online);
	if (op->kind == PID_DETACH && !CPU_COUNT(&hk))
		return fail(op, -EINVAL, "leave one online CPU out of the detached ones",
			    "no housekeeping CPU left for the proxies (detached: %s)",
			    cpulist_format(&op->cpus, (char[256]){ 0 }, 256));
	int cpu = pid_detached_cpu(op->pid, tid);
	pid_t holder;
	if (op->kind != PID_ATTACH && cpus_all_held(&op->cpus, op->pid, &cpu, &holder)) {
		char who[64];
		return fail(op, -EBUSY, "one detached thread per CPU: wait for it to end ('detach ps' lists it), "
			    "or choose another CPU with -c", "CPU %d already holds a detached thread of %s", cpu,
			    pid_describe(holder, who, sizeof(who)));
	}
	cpu = pid_detached_cpu(op->pid, tid);
	if (op->kind == PID_DETACH && cpu >= 0) {
		char note[96];
		snprintf(note, sizeof(note), "'detach pid --attach %d' puts it back", (int)op->pid);
		return fail(op, -EBUSY, note, "thread %d of process %d is already detached (on CPU %d)",
			    (int)tid, (int)op->pid, cpu);
	}
	if (op->kind != PID_DETACH && cpu < 0)
		return fail(op, -EINVAL, "'detach ps' lists the detached threads",
			    "thread %d of process %d is not detached", (int)tid, (int)op->pid);
	return 0;
}

/* ---- the operations ------------------------------------------------------------- */

/* A proxy runs no program code, and the calls we make on a detached
 * thread (dt_attach) need it running. */
static bool is_proxy(pid_t pid, pid_t tid)
{
	char path[96], comm[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	return !read_text_file(path, comm, sizeof(comm)) && !strncmp(comm, "detach-proxy", 12);
}

struct text { char *buf; size_t len, at; };

/* contract_encode into "NAME=VALUE\n" lines, which the runtime adopts as
 * its environment's contract (runtime/env.c) */
static int put_line(const char *name, const char *value, void *ctx)
{
	struct text *t = ctx;
	int n;

	if (!value)
		return 0;
	n = snprintf(t->buf + t->at, t->len - t->at, "%s=%s\n", name, value);
	if (n < 0 || (size_t)n >= t->len - t->at)
		return -ENOSPC;
	t->at += (size_t)n;
	return 0;
}

/* The contract `detach run` would have put in the environment. */
static void contract(const struct pid_op *op, char *buf, size_t len)
{
	struct run_contract c;
	struct text t = { buf, len, 0 };
	cpu_set_t online;

	contract_defaults(&c);
	c.pid = op->pid;
	c.cpus = op->cpus;
	cpus_online(&online);
	CPU_XOR(&c.housekeeping, &online, &op->cpus);
	CPU_AND(&c.housekeeping, &c.housekeeping, &online);
	if (op->mode)
		snprintf(c.mode, sizeof(c.mode), "%s", op->mode);
	if (op->stats)
		contract_set_stats(&c, op->stats);
	buf[0] = '\0';
	contract_encode(&c, put_line, &t);
}

struct runtime_text {
	uintptr_t ranges[8][2];
	int n;
};

/* Outside the runtime's code, and off the page of rewrite mode's
 * trampoline sled (address 0, rewrite.c). */
static bool in_program(uintptr_t rip, void *arg)
{
	const struct runtime_text *t = arg;

	if (rip < 4096)
		return false;
	for (int i = 0; i < t->n; i++)
		if (rip >= t->ranges[i][0] && rip < t->ranges[i][1])
			return false;
	return true;
}

static bool in_runtime(uintptr_t rip, void *arg)
{
	return !in_program(rip, arg);
}

/* dt_attach() on the picked thread, where it runs the program's code. */
static int attach(struct pid_op *op, struct remote *r, void *local)
{
	struct runtime_text text;
	uintptr_t fn;
	long ret;
	int err;

	if (remote_symbol(op->pid, local, "dt_attach", runtime_file, &fn) ||
	    (text.n = remote_exec_ranges(op->pid, runtime_file, text.ranges, 7)) <= 0)
		return fail(op, -ENOENT, NULL, "process %d has no detach runtime loaded", (int)op->pid);
	/* The runtime's timed waits read the clock in the vDSO: a thread
	 * stepped out of a wait reaches it before any code of the program, and
	 * dt_attach called there would pull the runtime from under the wait.
	 * The program's own vDSO calls are stepped through to their return. */
	int vdso = remote_exec_ranges(op->pid, "[vdso]", text.ranges + text.n, 1);
	if (vdso > 0)
		text.n += vdso;
	for (;;) {
		if ((err = remote_step_until(r, in_program, &text, LEAVE_RUNTIME_MS)))
			break;
		if ((err = remote_call(r, fn, 0, 0, 0, &ret)))
			return fail(op, err, NULL, "the call of dt_attach in process %d failed: %s", (int)op->pid,
				    strerror(-err));
		if ((int)ret != -EBUSY)
			return (int)ret;
		/* a handler of the program runs on top of a forwarded call:
		 * on until the call has returned */
		if ((err = remote_step_until(r, in_runtime, &text, LEAVE_RUNTIME_MS)))
			break;
	}
	if (err == -ETIMEDOUT)
		return fail(op, -EBUSY, "try again when the call has returned",
			    "thread %d of process %d stayed inside a forwarded system call for %d ms",
			    (int)r->tids[r->cur], (int)op->pid, LEAVE_RUNTIME_MS);
	return fail(op, err, NULL, "thread %d of process %d: %s", (int)r->tids[r->cur], (int)op->pid, strerror(-err));
}

static int start(struct pid_op *op, struct remote *r, void *local, const char *text, const char *lib, int cpu)
{
	uintptr_t fn, a0 = 0, a1 = 0;
	long ret;
	int err;

	if (remote_symbol(op->pid, local, "__dt_pid_start", runtime_file, &fn))
		return fail(op, -ENOENT, NULL, "process %d has no detach runtime loaded", (int)op->pid);
	if ((text && !(a0 = remote_string(r, text))) || (lib && !(a1 = remote_string(r, lib))))
		return fail(op, -EFAULT, NULL, "cannot write below the stack of process %d", (int)op->pid);
	if ((err = remote_call(r, fn, (long)a0, (long)a1, cpu, &ret)))
		return fail(op, err, NULL, "the call of the runtime in process %d failed: %s", (int)op->pid,
			    strerror(-err));
	return (int)ret;      /* an int: rax's upper half is undefined */
}

static int detach(struct pid_op *op, struct remote *r, void *local, const char *lib)
{
	char text[4096];
	uintptr_t dlopen_at, at;
	long handle;
	int err;

	/* glibc's dlopen, found through our own libc: the same file */
	if (remote_symbol(op->pid, RTLD_DEFAULT, "dlopen", "/libc.so.6", &dlopen_at))
		return fail(op, -ENOENT, NULL, "no dlopen in the libc of process %d", (int)op->pid);
	if (!(at = remote_string(r, lib)))
		return fail(op, -EFAULT, NULL, "cannot write below the stack of process %d", (int)op->pid);
	if ((err = remote_call(r, dlopen_at, (long)at, RTLD_NOW, 0, &handle)))
		return fail(op, err, NULL, "the call of dlopen in process %d failed: %s", (int)op->pid, strerror(-err));
	if (!handle)
		return fail(op, -ENOENT, "is the library readable by the process's user?",
			    "process %d could not load %s", (int)op->pid, lib);
	r->scratch = (r->regs.rsp - 128) & ~(uintptr_t)15;     /* the strings are free again */
	contract(op, text, sizeof(text));
	return start(op, r, local, text, lib, op->cpu);
}

/* Attach, then detach on the new CPU; its execve keeps the new CPU.  Back
 * where it was when the runtime refuses the new one.  The CPU it is on
 * already: detached there anew, with a new proxy. */
static int move(struct pid_op *op, struct remote *r, void *local)
{
	char text[64];
	int old = pid_detached_cpu(op->pid, r->tids[r->cur]), err;

	if ((err = attach(op, r, local)))
		return err;
	snprintf(text, sizeof(text), ENV_CPUS "=%d\n", op->cpu);
	if ((err = start(op, r, local, text, NULL, op->cpu)) == 0)
		return 0;
	snprintf(text, sizeof(text), ENV_CPUS "=%d\n", old);
	start(op, r, local, text, NULL, old);
	return err;
}

int pid_op_run(struct pid_op *op)
{
	pid_t tid = op->tid ? op->tid : op->pid;
	char lib[PATH_MAX];
	struct remote *r;
	void *local;
	int err, rerr;

	op->why[0] = op->note[0] = '\0';
	if ((err = pid_op_check(op)))
		return err;
	if (cli_find_runtime(lib, sizeof(lib)))
		return fail(op, -ENOENT, "set DETACH_LIB to its path", "cannot find libdetach.so beside the detach command");
	char real[PATH_MAX];
	if (!realpath(lib, real))
		return fail(op, -errno, "set DETACH_LIB to its path", "cannot resolve %s: %s", lib, strerror(errno));
	snprintf(runtime_file, sizeof(runtime_file), "%s", strrchr(real, '/'));
	/* our own copy of the runtime tells the offsets of its entry points */
	if (!(local = dlopen(lib, RTLD_NOW | RTLD_LOCAL)))
		return fail(op, -ENOENT, NULL, "cannot load %s: %s", lib, dlerror());
	if (!(r = calloc(1, sizeof(*r)))) {
		dlclose(local);
		return fail(op, -ENOMEM, NULL, "out of memory");
	}
	/* From the first seize to the release the program must not be left
	 * half-way (its registers on one of our calls): a Ctrl-C or a SIGTERM
	 * for us waits until it is let go. */
	sigset_t stop_sigs, old_sigs;
	sigemptyset(&stop_sigs);
	for (int s = 0; s < 5; s++)
		sigaddset(&stop_sigs, (int[]){ SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP }[s]);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_sigs);
	if (!(err = remote_seize(r, op->pid, is_proxy)) && op->seized)
		op->seized(op->arg);
	if (!err)
		err = remote_stop(r);
	if (err) {
		fail(op, err, err == -EPERM ? "kernel.yama.ptrace_scope 1 or 2 lets only root (CAP_SYS_PTRACE) "
			  "attach to a process that is not a child" : NULL,
		     "cannot stop process %d with ptrace: %s", (int)op->pid, strerror(-err));
		goto out;
	}
	if ((err = remote_pick(r, tid))) {
		fail(op, err, NULL, "cannot read the registers of thread %d", (int)tid);
		goto out;
	}
	err = op->kind == PID_DETACH ? detach(op, r, local, lib) : op->kind == PID_ATTACH ? attach(op, r, local)
									   : move(op, r, local);
	if ((rerr = remote_restore(r)) && !err)
		err = fail(op, rerr, NULL, "cannot put back the registers of thread %d: %s", (int)tid, strerror(-rerr));
	if (err && !op->why[0]) {
		if (err == -EBUSY && op->kind == PID_DETACH)
			fail(op, err, "choose another one with -c", "the runtime in process %d refused: no free CPU of %s",
			     (int)op->pid, cpulist_format(&op->cpus, (char[256]){ 0 }, 256));
		else
			fail(op, err, NULL, "the runtime in process %d refused: %s", (int)op->pid, strerror(-err));
	}
out:
	remote_release(r);
	pthread_sigmask(SIG_SETMASK, &old_sigs, NULL);
	free(r);
	dlclose(local);
	return err;
}
