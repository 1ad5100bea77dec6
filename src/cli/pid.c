/* detach pid: detach a thread of a program that is already running (seed
 * 002, III-B-4: the paper writes a pid to a control file).
 *
 * As a debugger calls a function in its inferior: every thread but the
 * runtime's proxies is stopped with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT), the chosen thread's
 * registers (general and the whole xsave state) are saved, and two calls
 * are made on that thread: glibc's dlopen of libdetach.so, then the
 * runtime's __dt_pid_start (src/runtime/init.c) with the contract `detach
 * run` would have put in the environment.  Each call returns to an address
 * that cannot be executed; the fault stops the thread, the result is in
 * rax.  Then the registers are put back exactly, every thread is let go,
 * and a thread that was stopped inside a blocking system call restarts it,
 * as the kernel does after any stop: the restart goes through the runtime
 * (its first trap) and is carried out by the proxy.
 *
 * `--attach` calls the public dt_attach() the same way on the detached
 * thread; while a forwarded call is in flight it says EBUSY, and the
 * thread runs on a little before the next try.
 */
#include "cli/cli.h"
#include "lib/contract.h"
#include "lib/registry.h"
#include "lib/util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 4096
/* Non-canonical: a `ret` there faults (SIGSEGV) without touching memory. */
#define RETURN_TRAP 0xdead000000000000ull

struct pid_opts {
	pid_t pid, tid;
	int cpu;                 /* -1: the last online CPU */
	const char *mode, *stats;
	bool attach;
};

struct target {
	pid_t pid;
	pid_t tids[MAX_THREADS];
	int ntids;
	int pending[MAX_THREADS];   /* a signal that stopped a thread meanwhile */
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
		"usage: detach pid [OPTIONS] PID\n"
		"       detach pid --attach PID\n\n"
		"Detach the first thread (or --tid) of a running, dynamically linked program\n"
		"without restarting it: the runtime is loaded into it through ptrace, as a\n"
		"debugger calls a function, and the thread goes on on CPU of its own.  The\n"
		"detached state survives the program's execve, as with 'detach run'.\n\n"
		"options:\n"
		"  -c, --cpu CPU        the CPU (default: the last online CPU)\n"
		"      --tid TID        the thread to detach (default: the first)\n"
		"      --mode MODE      sud, rewrite or auto (default auto, as 'detach run')\n"
		"      --stats FILE     statistics as JSON when the program exits\n"
		"      --attach         put the detached thread back: an ordinary thread again\n"
		"  -h, --help           this text\n\n"
		"Refused: static programs, a program already traced, another user's program\n"
		"without CAP_SYS_PTRACE, kernel.yama.ptrace_scope 3, a thread already detached.\n\n"
		"exit status: 0 done, 1 failed, 2 bad usage\n");
	return status;
}

static int parse_args(int argc, char **argv, struct pid_opts *o)
{
	static const struct option longs[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "tid", required_argument, NULL, 't' },
		{ "mode", required_argument, NULL, 'm' },
		{ "stats", required_argument, NULL, 's' },
		{ "attach", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->cpu = -1;
	o->mode = "auto";
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+c:h", longs, NULL)) != -1) {
		switch (c) {
		case 'c': {
			cpu_set_t set;
			if (cli_parse_cpus("-c", optarg, &set))
				return EXIT_USAGE;
			if (CPU_COUNT(&set) != 1) {
				cli_err("-c takes one CPU for one thread, not '%s'", optarg);
				cli_note("name one CPU, e.g. -c 3");
				return EXIT_USAGE;
			}
			for (o->cpu = 0; !CPU_ISSET(o->cpu, &set); o->cpu++)
				;
			break;
		}
		case 't':
			o->tid = (pid_t)strtol(optarg, &end, 10);
			if (*end || o->tid <= 0) {
				cli_err("--tid takes a thread id, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'm':
			if (strcmp(optarg, "sud") && strcmp(optarg, "rewrite") && strcmp(optarg, "auto")) {
				cli_err("unknown mode '%s'", optarg);
				cli_note("--mode takes sud, rewrite or auto");
				return EXIT_USAGE;
			}
			o->mode = optarg;
			break;
		case 's':
			o->stats = optarg;
			break;
		case 'a':
			o->attach = true;
			break;
		case 'h':
			exit(usage(0));
		default:
			return cli_bad_option("pid", argv);
		}
	}
	if (optind >= argc) {
		cli_err("which process? a PID is missing");
		cli_note("detach pid [-c CPU] PID");
		return EXIT_USAGE;
	}
	o->pid = (pid_t)strtol(argv[optind], &end, 10);
	if (*end || o->pid <= 0) {
		cli_err("'%s' is not a process id", argv[optind]);
		cli_note("detach pid [-c CPU] PID");
		return EXIT_USAGE;
	}
	if (optind + 1 < argc)
		return cli_unexpected_arg("pid", argv[optind + 1]);
	return 0;
}

/* ---- what can be known from /proc before touching the process ----------- */

static long status_field(pid_t pid, const char *key)
{
	char path[64], buf[8192], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_text_file(path, buf, sizeof(buf)) || !(p = strstr(buf, key)))
		return -1;
	return strtol(p + strlen(key), NULL, 10);
}

/* The lowest mapping of a file whose name ends in `suffix` (or is `path`)
 * in PID's address space: its start and full path. */
static int find_mapping(pid_t pid, const char *suffix, uintptr_t *base, char *path, size_t len)
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
		size_t n = strlen(name), s = strlen(suffix);
		if (off == 0 && n >= s && !strcmp(name + n - s, suffix)) {
			*base = lo;
			snprintf(path, len, "%s", name);
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

/* The address in PID of `sym`, which this process finds in the same file:
 * its offset from the file's first mapping is the same in both. */
static int remote_symbol(pid_t pid, void *handle, const char *sym, const char *suffix, uintptr_t *out)
{
	Dl_info info;
	uintptr_t base;
	char path[PATH_MAX];
	void *local = dlsym(handle, sym);

	if (!local || !dladdr(local, &info) || find_mapping(pid, suffix, &base, path, sizeof(path)))
		return -ENOENT;
	*out = base + ((uintptr_t)local - (uintptr_t)info.dli_fbase);
	return 0;
}

static int refuse(const struct pid_opts *o, pid_t tid)
{
	char path[64], exe[PATH_MAX], libc[PATH_MAX];
	uintptr_t base;
	long v;

	snprintf(path, sizeof(path), "/proc/%d", (int)o->pid);
	if (access(path, F_OK)) {
		cli_err("no process %d", (int)o->pid);
		return 1;
	}
	if (read_long_file("/proc/sys/kernel/yama/ptrace_scope", &v) == 0 && v >= 3) {
		cli_err("kernel.yama.ptrace_scope is 3: no process may be traced, so none can be detached");
		cli_note("the setting cannot be lowered until a reboot; boot with kernel.yama.ptrace_scope=1 or less");
		return 1;
	}
	if ((v = status_field(o->pid, "\nUid:")) >= 0 && v != (long)geteuid() && geteuid() != 0) {
		cli_err("process %d belongs to uid %ld: detaching it needs CAP_SYS_PTRACE", (int)o->pid, v);
		cli_note("run detach pid as that user or as root");
		return 1;
	}
	if ((v = status_field(o->pid, "\nTracerPid:")) > 0) {
		cli_err("process %d is being traced by process %ld (a debugger?): a process has one tracer",
			(int)o->pid, v);
		cli_note("detach the debugger first");
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)o->pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (find_mapping(o->pid, "/libc.so.6", &base, libc, sizeof(libc))) {
		cli_err("process %d (%s) is not dynamically linked with glibc: the runtime cannot be loaded into it",
			(int)o->pid, exe);
		cli_note("a static program can only be started detached: nothing loads a library into it");
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)o->pid, (int)tid);
	if (access(path, F_OK)) {
		cli_err("process %d has no thread %d", (int)o->pid, (int)tid);
		return 1;
	}
	return 0;
}

/* The registry the runtime publishes for `detach ps`: is tid detached? */
static int registry_state(pid_t pid, pid_t tid, int *cpu)
{
	char path[128];
	struct dt_registry r;
	int fd, state = -1;

	snprintf(path, sizeof(path), "%s/%d", REGISTRY_DIR, (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r) && r.magic == REGISTRY_MAGIC && r.pid == pid)
		for (int i = 0; i < r.nthreads && i < DT_MAX_THREADS; i++)
			if (r.threads[i].tid == tid && !r.threads[i].ended) {
				state = r.threads[i].state;
				*cpu = r.threads[i].cpu;
			}
	close(fd);
	return state;
}

/* ---- stopping and resuming the process ------------------------------------ */

static bool seized(const struct target *tg, pid_t tid)
{
	for (int i = 0; i < tg->ntids; i++)
		if (tg->tids[i] == tid)
			return true;
	return false;
}

/* Waits for tid's stop; a signal that stopped it meanwhile is kept for the
 * release (the program must not lose it). */
static int wait_stop(struct target *tg, int i, int *sig_out)
{
	int st;

	for (;;) {
		if (waitpid(tg->tids[i], &st, __WALL) < 0)
			return -errno;
		if (!WIFSTOPPED(st))
			return -ESRCH;
		int sig = WSTOPSIG(st);
		if (st >> 16 == PTRACE_EVENT_STOP)
			return 0;                     /* our interrupt, or a group stop */
		if (sig_out) {                        /* a call we made ended */
			*sig_out = sig;
			return 0;
		}
		if (!tg->pending[i])
			tg->pending[i] = sig;
		if (ptrace(PTRACE_INTERRUPT, tg->tids[i], 0, 0) < 0 ||
		    ptrace(PTRACE_CONT, tg->tids[i], 0, 0) < 0)
			return -errno;
	}
}

/* Every thread stopped, including those created while we stop them. */
static int stop_all(struct target *tg)
{
	char dir[64];
	bool more = true;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)tg->pid);
	while (more) {
		DIR *d = opendir(dir);
		struct dirent *e;

		if (!d)
			return -errno;
		more = false;
		while ((e = readdir(d))) {
			pid_t tid = (pid_t)atoi(e->d_name);
			char comm[64], path[96];
			if (tid <= 0 || seized(tg, tid) || tg->ntids == MAX_THREADS)
				continue;
			/* A proxy runs no program code, and the calls we make on a
			 * detached thread (dt_attach) need it running. */
			snprintf(path, sizeof(path), "%s/%d/comm", dir, (int)tid);
			if (!read_text_file(path, comm, sizeof(comm)) && !strncmp(comm, "detach-proxy", 12))
				continue;
			if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
				if (errno == ESRCH)
					continue;     /* it just ended */
				closedir(d);
				return -errno;
			}
			tg->tids[tg->ntids] = tid;
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || wait_stop(tg, tg->ntids, NULL) < 0) {
				closedir(d);
				return -errno;
			}
			tg->ntids++;
			more = true;
		}
		closedir(d);
	}
	return 0;
}

static void release_all(struct target *tg)
{
	for (int i = 0; i < tg->ntids; i++)
		ptrace(PTRACE_DETACH, tg->tids[i], 0, (void *)(long)tg->pending[i]);
}

/* ---- calling a function in the stopped thread ------------------------------ */

struct saved_regs {
	struct user_regs_struct g;
	char xstate[16384];
	struct iovec xv;
};

static int save_regs(pid_t tid, struct saved_regs *s)
{
	if (ptrace(PTRACE_GETREGS, tid, 0, &s->g) < 0)
		return -errno;
	s->xv.iov_base = s->xstate;
	s->xv.iov_len = sizeof(s->xstate);
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &s->xv) < 0)
		return -errno;
	return 0;
}

/* Exactly as found: general registers (orig_rax included, so that a call
 * interrupted by our stop is restarted) and the whole xsave state. */
static int restore_regs(pid_t tid, struct saved_regs *s)
{
	if (ptrace(PTRACE_SETREGS, tid, 0, &s->g) < 0 ||
	    ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &s->xv) < 0)
		return -errno;
	return 0;
}

static int poke(pid_t pid, uintptr_t at, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)at, len };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -errno;
}

/* fn(a0, a1) on thread i, its strings s0/s1 (may be NULL) copied below the
 * red zone of its stack; the result in *ret. */
static int call_remote(struct target *tg, int i, const struct saved_regs *s, uintptr_t fn,
		       const char *s0, const char *s1, long a1, long *ret)
{
	struct user_regs_struct r = s->g;
	pid_t tid = tg->tids[i];
	uintptr_t sp = (s->g.rsp - 128 - 4096) & ~(uintptr_t)15;
	uintptr_t p0 = sp, p1 = sp + 2048;
	uint64_t back = RETURN_TRAP;
	int sig = 0, err;

	if ((s0 && strlen(s0) >= 2048) || (s1 && strlen(s1) >= 2048))
		return -ENAMETOOLONG;
	if ((s0 && (err = poke(tg->pid, p0, s0, strlen(s0) + 1))) ||
	    (s1 && (err = poke(tg->pid, p1, s1, strlen(s1) + 1))))
		return err;
	sp -= 8;                                  /* as after a call: rsp % 16 == 8 */
	if ((err = poke(tg->pid, sp, &back, sizeof(back))))
		return err;
	r.rsp = sp;
	r.rip = fn;
	r.rdi = s0 ? p0 : 0;
	r.rsi = s1 ? p1 : (uint64_t)a1;
	r.rax = 0;
	r.orig_rax = -1;      /* no system call to restart while we call */
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) < 0 || ptrace(PTRACE_CONT, tid, 0, 0) < 0)
		return -errno;
	for (;;) {
		if ((err = wait_stop(tg, i, &sig)))
			return err;
		if (sig == SIGSEGV)
			break;
		/* the program's own signal meanwhile: kept for the release */
		if (!tg->pending[i] && sig != SIGTRAP)
			tg->pending[i] = sig;
		if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
			return -errno;
	}
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0)
		return -errno;
	if (r.rip != RETURN_TRAP && r.rsp != sp + 8 && r.rsp != sp) {
		fprintf(stderr, "detach: error: the call in thread %d faulted at %#llx\n", (int)tid, r.rip);
		return -EFAULT;
	}
	*ret = (long)r.rax;
	return 0;
}

/* ---- the verb ---------------------------------------------------------------- */

static void contract(const struct pid_opts *o, int cpu, char *buf, size_t len)
{
	cpu_set_t one, online, hk;
	char a[256], b[256];
	int n;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	cpus_online(&online);
	CPU_XOR(&hk, &online, &one);
	n = snprintf(buf, len, ENV_PID "=%d\n" ENV_CPUS "=%s\n" ENV_HOUSEKEEPING "=%s\n" ENV_POLICY "=o\n"
		     ENV_MODE "=%s\n" ENV_SELECT "=first\n", (int)o->pid, cpulist_format(&one, a, sizeof(a)),
		     cpulist_format(&hk, b, sizeof(b)), o->mode);
	if (o->stats && n > 0 && (size_t)n < len) {
		char abs[PATH_MAX];
		snprintf(buf + n, len - n, ENV_STATS "=%s\n", realpath(o->stats, abs) ? abs : o->stats);
	}
}

static int pid_main(int argc, char **argv)
{
	struct pid_opts o;
	static struct target tg;
	static struct saved_regs regs;
	char lib[PATH_MAX], text[4096];
	uintptr_t fn;
	void *local;
	long ret = -1;
	int err, i, cpu = -1;

	if ((err = parse_args(argc, argv, &o)))
		return err;
	pid_t tid = o.tid ? o.tid : o.pid;
	if ((err = refuse(&o, tid)))
		return err;
	int state = registry_state(o.pid, tid, &cpu);
	if (!o.attach && state == 1) {
		cli_err("thread %d of process %d is already detached (on CPU %d)", (int)tid, (int)o.pid, cpu);
		cli_note("'detach pid --attach %d' puts it back", (int)o.pid);
		return 1;
	}
	if (o.attach && state != 1) {
		cli_err("thread %d of process %d is not detached", (int)tid, (int)o.pid);
		cli_note("'detach ps' lists the detached threads");
		return 1;
	}
	if (cli_find_runtime(lib, sizeof(lib))) {
		cli_err("cannot find libdetach.so beside the detach command");
		cli_note("set DETACH_LIB to its path");
		return 1;
	}
	if (!o.attach && o.cpu < 0) {
		cpu_set_t online;
		cpus_online(&online);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &online))
				o.cpu = c;
	}
	/* Our own copy of the runtime tells the offsets of its entry points. */
	if (!(local = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
		cli_err("cannot load %s: %s", lib, dlerror());
		return 1;
	}
	tg.pid = o.pid;
	if ((err = stop_all(&tg))) {
		cli_err("cannot stop process %d with ptrace: %s", (int)o.pid, strerror(-err));
		if (err == -EPERM)
			cli_note("kernel.yama.ptrace_scope 1 or 2 lets only root (CAP_SYS_PTRACE) attach to a process that is not a child");
		release_all(&tg);
		return 1;
	}
	for (i = 0; i < tg.ntids && tg.tids[i] != tid; i++)
		;
	if (i == tg.ntids || (err = save_regs(tid, &regs))) {
		cli_err("cannot read the registers of thread %d", (int)tid);
		release_all(&tg);
		return 1;
	}
	if (o.attach) {
		/* dt_attach says EBUSY while a forwarded call is in flight: let
		 * the thread run on a little and try again (about 2 s in all). */
		err = remote_symbol(o.pid, local, "dt_attach", "/libdetach.so", &fn);
		for (int n = 0; !err && n < 1000; n++) {
			struct timespec ms2 = { 0, 2000000 };
			if ((err = call_remote(&tg, i, &regs, fn, NULL, NULL, 0, &ret)) || ret != -EBUSY)
				break;
			if ((err = restore_regs(tid, &regs)) || ptrace(PTRACE_CONT, tid, 0, 0) < 0)
				break;
			nanosleep(&ms2, NULL);
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || (err = wait_stop(&tg, i, NULL)) ||
			    (err = save_regs(tid, &regs)))
				break;
		}
	} else {
		uintptr_t dlopen_at;
		/* glibc's dlopen, found through our own libc: the same file */
		err = remote_symbol(o.pid, RTLD_DEFAULT, "dlopen", "/libc.so.6", &dlopen_at);
		if (!err)
			err = call_remote(&tg, i, &regs, dlopen_at, lib, NULL, RTLD_NOW, &ret);
		if (!err && !ret)
			err = -ENOENT;
		if (!err)
			err = remote_symbol(o.pid, local, "__dt_pid_start", "/libdetach.so", &fn);
		contract(&o, o.cpu, text, sizeof(text));
		if (!err)
			err = call_remote(&tg, i, &regs, fn, text, lib, 0, &ret);
	}
	int rerr = restore_regs(tid, &regs);
	release_all(&tg);
	if (err || rerr) {
		cli_err("could not %s thread %d of process %d: %s", o.attach ? "attach" : "detach", (int)tid,
			(int)o.pid, strerror(-(err ? err : rerr)));
		return 1;
	}
	if (ret < 0) {
		cli_err("the runtime in process %d refused: %s", (int)o.pid, strerror((int)-ret));
		if (ret == -EBUSY && o.attach)
			cli_note("the thread stayed inside a forwarded system call: try again when it returns");
		else if (ret == -EBUSY)
			cli_note("CPU %d is taken by another detached thread of the process: choose one with -c", o.cpu);
		return 1;
	}
	if (o.attach)
		printf("detach: thread %d of process %d is an ordinary thread again\n", (int)tid, (int)o.pid);
	else
		printf("detach: thread %d of process %d detached on CPU %d\n", (int)tid, (int)o.pid, o.cpu);
	return 0;
}

DETACH_VERB(verb_pid) = { "pid", "detach a thread of a running program (or --attach it again)", pid_main };
