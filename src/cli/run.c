/* detach run: check the request, then exec the program with the runtime
 * preloaded.  The command itself changes no system state: the runtime, in
 * the program, pins, locks and detaches its first thread (src/runtime/init.c).
 * About 550 lines: the options and their checks, each with its error and
 * NOTE, read top to bottom as the request is checked. */
#include "cli/cli.h"
#include "cli/mpi_rank.h"
#include "lib/liveness.h"
#include "lib/elf.h"
#include "lib/contract.h"
#include "lib/partition.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

struct run_opts {
	cpu_set_t cpus;          /* detached threads */
	cpu_set_t housekeeping;  /* proxies and every other thread */
	bool have_hk;
	char policy[16];         /* o | f:N | r:N */
	const char *mlock;       /* thread | all | none */
	const char *stats;
	const char *mode;
	const char *proxy;       /* NULL: chosen by the runtime's default rule */
	bool verbose;
	bool keep_policy;        /* the program's scheduling requests for real */
	bool oversubscribe;      /* MPI ranks beyond the detached CPUs run undetached */
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: detach run [OPTIONS] -- CMD [ARGS...]\n"
"\n"
"Runs CMD with its first thread (or those --select chooses) detached: pinned\n"
"alone on a CPU, its system calls carried out by a proxy thread on the\n"
"housekeeping CPUs, timed waits served in user space against the TSC.\n"
"\n"
"  -c, --cpu LIST          CPUs for detached threads (default: the first CPU of\n"
"                          the `detach isolate` partition, else the last CPU of\n"
"                          the caller's affinity); the first thread takes the first\n"
"  -H, --housekeeping LIST CPUs for proxies and all other threads (default: every\n"
"                          other CPU of the caller's affinity outside the partition)\n"
"  -P, --priority POLICY   policy of detached threads: o (SCHED_OTHER, default),\n"
"                          f:N (SCHED_FIFO N), r:N (SCHED_RR N)\n"
"      --keep-policy       apply a detached thread's own scheduling requests\n"
"                          (policy, priority, nice, affinity) for real; by\n"
"                          default the runtime keeps them and reports them back\n"
"                          to the thread alone, while the kernel keeps the thread\n"
"                          where detach put it.  Not hidden from anyone else:\n"
"                          other processes, the program's own children (a\n"
"                          shell's `chrt -p $$`, `taskset -p $$`), its other\n"
"                          threads, ps and /proc see the kernel's settings:\n"
"                          -P's policy with SCHED_RESET_ON_FORK (default\n"
"                          SCHED_OTHER|SCHED_RESET_ON_FORK) and the detached CPU\n"
"      --mlock WHAT        memory locked against page faults on the detached CPU:\n"
"                          thread (default): the detached thread's stack\n"
"                          (prefaulted), its state and the runtime's code and data;\n"
"                          the program's other memory behaves as natively.\n"
"                          all: mlockall(MCL_CURRENT|MCL_FUTURE), every page of the\n"
"                          program now and later: madvise(MADV_DONTNEED) on it fails\n"
"                          (Node.js/V8 abort), MAP_NORESERVE reservations are\n"
"                          populated in full, and without root memory beyond\n"
"                          RLIMIT_MEMLOCK cannot be had (malloc fails).\n"
"                          none: nothing locked or prefaulted\n"
"      --no-mlock          the same as --mlock none\n"
"      --stats FILE        write per-thread statistics as JSON at exit\n"
"      --mode MODE         sud: every call traps (Syscall User Dispatch);\n"
"                          rewrite: a site that trapped once jumps to a stub near\n"
"                          the code that calls the runtime directly (no privilege;\n"
"                          sites with no instruction to move keep trapping);\n"
"                          auto (default, or $DETACH_MODE): rewrite where it can\n"
"                          run (membarrier SYNC_CORE, xsave), else sud\n"
"      --proxy WAIT        spin: proxies poll continuously; adaptive: spin ~100 us\n"
"                          after each call, then poll with short sleeps, after\n"
"                          100 ms idle sleep until the next call wakes them;\n"
"                          sleep: spin 5 us after each call, then sleep until\n"
"                          called (the first call after each pause enters the\n"
"                          kernel on the detached CPU to wake the proxy; for\n"
"                          housekeeping CPUs that run other work)\n"
"                          (default: spin with 2 or more housekeeping CPUs, else\n"
"                          adaptive; sleep for an MPI rank whose node runs ranks\n"
"                          undetached, --oversubscribe)\n"
"  -s, --select RULES      which threads are detached, a comma list (default:\n"
"                          first,pinned): first (the program's first thread),\n"
"                          order:N (the N-th thread it creates), name:GLOB (a\n"
"                          thread that names itself so), pinned (a thread pinned\n"
"                          to exactly one CPU of -c: it takes that CPU over from\n"
"                          the first thread, as cyclictest -a and oslat -c want),\n"
"                          fork (the thread of each process the program forks\n"
"                          with fork(): a test harness's test body, as LTP's; the\n"
"                          child is a detached program of its own, --stats goes\n"
"                          to FILE.PID, and its own children are ordinary);\n"
"                          each chosen thread takes a CPU of -c; `first` alone\n"
"                          detaches the first thread only, other threads untouched\n"
"      --oversubscribe     as an MPI rank (mpirun -np N detach run ...), run the\n"
"                          ranks beyond the CPUs of -c undetached (with one\n"
"                          warning) instead of refusing; docs/mpi.md\n"
"  -v, --verbose           the runtime reports what it sets up\n"
"  -h, --help              this text\n"
"\n"
"Exit status: that of CMD (128+N if it was killed by signal N, as a shell\n"
"reports it); 127 if CMD is not found, 126 if it cannot be executed, 2 for\n"
"bad usage, 1 for other errors.\n"
"\n"
"As an MPI rank (the launcher sets OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,\n"
"PMI_LOCAL_RANK or SLURM_LOCALID) each rank detaches on its own CPU of -c (or\n"
"the partition, or all CPUs but the last): the core the launcher bound it to,\n"
"else by local rank; proxies and MPI's own threads on -H (default: the rest).\n"
"\n"
"Where CMD behaves otherwise than natively, and why: docs/runtime.md, \"Known\n"
"limits\" (share/doc/detach/runtime.md when installed).\n");
	return status;
}

/* A CPU list for option OPT (cli_parse_cpus) that this process may also use. */
static int parse_cpus(const char *opt, const char *arg, cpu_set_t *set, const cpu_set_t *allowed)
{
	char out_s[256], allowed_s[256];
	cpu_set_t out;

	if (cli_parse_cpus(opt, arg, set))
		return -1;
	CPU_XOR(&out, set, allowed);
	CPU_AND(&out, &out, set);
	if (CPU_COUNT(&out)) {
		cli_err("%s: CPU %s is outside this process's affinity (%s)", opt,
			cpulist_format(&out, out_s, sizeof(out_s)), cpulist_format(allowed, allowed_s, sizeof(allowed_s)));
		cli_note("run detach from a shell allowed on those CPUs (taskset -p $$)");
		return -1;
	}
	return 0;
}

static int parse_policy(const char *arg, char *out, size_t len)
{
	char *end;
	long prio;

	if (!strcmp(arg, "o")) {
		snprintf(out, len, "o");
		return 0;
	}
	if ((arg[0] != 'f' && arg[0] != 'r') || arg[1] != ':')
		goto bad;
	errno = 0;
	prio = strtol(arg + 2, &end, 10);
	if (errno || *end || end == arg + 2 || prio < 1 || prio > 99)
		goto bad;
	snprintf(out, len, "%c:%ld", arg[0], prio);
	return 0;
bad:
	cli_err("bad policy '%s'", arg);
	cli_note("use o, f:PRIO or r:PRIO with PRIO from 1 to 99");
	return -1;
}

/* contract_encode's way into our environment, which the program inherits */
static int contract_setenv(const char *name, const char *value, void *ctx)
{
	(void)ctx;
	return value ? setenv(name, value, 1) : unsetenv(name);
}

/* --select first,order:N,name:GLOB,pinned,fork */
static int check_select(const char *arg)
{
	const char *p = arg;

	while (*p) {
		size_t n = strcspn(p, ",");
		bool ok = (n == 5 && !strncmp(p, "first", 5)) || (n == 6 && !strncmp(p, "pinned", 6)) ||
			  (n == 4 && !strncmp(p, "fork", 4)) ||
			  (n > 5 && !strncmp(p, "name:", 5) && n - 5 < 16);
		if (n > 6 && !strncmp(p, "order:", 6)) {
			char *end;
			long v = strtol(p + 6, &end, 10);
			ok = v >= 1 && end == p + n;
		}
		if (!ok) {
			cli_err("bad thread rule '%.*s' in --select %s", (int)n, p, arg);
			cli_note("rules: first, order:N (N >= 1), name:GLOB (up to 15 characters), pinned, fork");
			return -1;
		}
		p += n + (p[n] == ',');
	}
	if (!*arg) {
		cli_err("--select needs at least one rule");
		return -1;
	}
	return 0;
}

/* out = a without the CPUs of b */
static void cpu_minus(cpu_set_t *out, const cpu_set_t *a, const cpu_set_t *b)
{
	cpu_set_t both;

	CPU_AND(&both, a, b);
	CPU_XOR(out, a, &both);
}

/* Finds CMD as execvp would; returns 0, or 127 (not found) / 126. */
static int resolve_command(const char *cmd, char *path, size_t len)
{
	const char *p;

	if (strchr(cmd, '/')) {
		snprintf(path, len, "%s", cmd);
		if (access(path, F_OK))
			return 127;
		return access(path, X_OK) ? 126 : 0;
	}
	p = getenv("PATH");
	if (!p)
		p = "/usr/local/bin:/usr/bin:/bin";
	while (*p) {
		size_t n = strcspn(p, ":");
		struct stat st;

		snprintf(path, len, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return 0;
		p += n;
		if (*p == ':')
			p++;
	}
	return 127;
}

static long plain_open(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static long plain_pread(long fd, void *buf, size_t len, long off)
{
	ssize_t n = pread((int)fd, buf, len, off);

	return n < 0 ? -errno : n;
}

static void plain_close(long fd)
{
	close((int)fd);
}

static const struct file_ops plain_file = { plain_open, plain_pread, plain_close };

/* The runtime: $DETACH_LIB, else beside the command (build tree), else
 * ../lib/ by its soname (installed: the soname is the runtime package's,
 * libdetach.so the development package's). */
int cli_find_runtime(char *path, size_t len)
{
	char self[PATH_MAX];
	ssize_t n;
	const char *env = getenv("DETACH_LIB");

	if (env && *env) {
		snprintf(path, len, "%s", env);
		return access(path, R_OK) ? -1 : 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(path, len, "%s/libdetach.so", self);
	if (!access(path, R_OK))
		return 0;
	snprintf(path, len, "%s/../lib/" DETACH_SONAME, self);
	return access(path, R_OK) ? -1 : 0;
}

static void warn_risks(const struct run_opts *o, int first_cpu)
{
	long rt_runtime = 0;
	bool throttled = read_long_file("/proc/sys/kernel/sched_rt_runtime_us", &rt_runtime) == 0 && rt_runtime >= 0;

	if (o->policy[0] != 'o') {
		if (throttled)
			cli_warn("a real-time detached thread that spins is throttled while sched_rt_runtime_us=%ld "
			     "(up to %ld ms of every second when other tasks want CPU %d); -P o avoids it",
			     rt_runtime, (1000000 - rt_runtime) / 1000, first_cpu);
		else
			cli_warn("a real-time detached thread that spins with RT throttling off starves CPU %d's "
			     "kernel threads unless the CPU is isolated (detach isolate)", first_cpu);
	}
	if (o->proxy && !strcmp(o->proxy, "spin") && CPU_COUNT(&o->housekeeping) == 1)
		cli_warn("--proxy spin on the single housekeeping CPU keeps it busy for the program's lifetime");
}

/* An MPI rank left without a detached CPU (--oversubscribe): the program as
 * is, kept off every detached CPU. */
static int run_undetached(const cpu_set_t *housekeeping, char **cmd)
{
	if (sched_setaffinity(0, sizeof(*housekeeping), housekeeping))
		cli_warn("cannot move the undetached rank to the housekeeping CPUs: %s", strerror(errno));
	execvp(cmd[0], cmd);
	int err = errno;
	cli_err("%s: %s", cmd[0], strerror(err));
	return err == ENOENT ? 127 : 126;
}

static int run_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "housekeeping", required_argument, NULL, 'H' },
		{ "priority", required_argument, NULL, 'P' },
		{ "no-mlock", no_argument, NULL, 'M' },
		{ "mlock", required_argument, NULL, 'L' },
		{ "stats", required_argument, NULL, 'S' },
		{ "mode", required_argument, NULL, 'm' },
		{ "proxy", required_argument, NULL, 'p' },
		{ "select", required_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "keep-policy", no_argument, NULL, 'K' },
		{ "oversubscribe", no_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o = { .policy = "o", .mlock = "thread", .mode = "auto" };
	const char *cpu_arg = NULL, *hk_arg = NULL, *select = "first,pinned";
	cpu_set_t allowed;
	char cmdpath[PATH_MAX], lib[PATH_MAX], buf[1024];
	int c, rc;

	/* Detached threads may go where this process may, and into the
	 * partition of `detach isolate`, which the runtime joins. */
	struct partition part;
	bool have_part = partition_find(&part) == 0;
	cpu_set_t own;
	sched_getaffinity(0, sizeof(own), &own);
	/* the default mode may come from the environment (tests run twice) */
	const char *env_mode = getenv(ENV_MODE);
	if (env_mode && (!strcmp(env_mode, "sud") || !strcmp(env_mode, "rewrite") || !strcmp(env_mode, "auto")))
		o.mode = env_mode;
	CPU_OR(&allowed, &own, have_part ? &part.cpus : &own);
	/* An MPI rank may use the node's CPUs, not only the core it was bound to. */
	struct mpi_rank rank;
	bool is_rank = mpi_rank_find(&rank) == 0;
	if (is_rank) {
		mpi_node_cpus(&own);
		CPU_OR(&allowed, &own, have_part ? &part.cpus : &own);
	}
	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, the command. */
	while ((c = getopt_long(argc, argv, "+c:H:P:s:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': cpu_arg = optarg; break;
		case 'H': hk_arg = optarg; break;
		case 'P':
			if (parse_policy(optarg, o.policy, sizeof(o.policy)))
				return EXIT_USAGE;
			break;
		case 'M': o.mlock = "none"; break;
		case 'L':
			if (strcmp(optarg, "thread") && strcmp(optarg, "all") && strcmp(optarg, "none")) {
				cli_err("unknown --mlock '%s'", optarg);
				cli_note("--mlock thread (default), all or none");
				return EXIT_USAGE;
			}
			o.mlock = optarg;
			break;
		case 'S': o.stats = optarg; break;
		case 'm':
			if (cli_choice("mode", optarg, (const char *const[]){ "sud", "rewrite", "auto", NULL }))
				return EXIT_USAGE;
			o.mode = optarg;
			break;
		case 'p':
			if (cli_choice("proxy wait", optarg, contract_proxies))
				return EXIT_USAGE;
			o.proxy = optarg;
			break;
		case 's':
			if (check_select(optarg))
				return EXIT_USAGE;
			select = optarg;
			break;
		case 'v': o.verbose = true; break;
		case 'K': o.keep_policy = true; break;
		case 'O': o.oversubscribe = true; break;
		case 'h': return usage(0);
		default: return cli_bad_option("run", argv);
		}
	}
	if (optind >= argc) {
		cli_err("no command given");
		cli_note("usage: detach run [OPTIONS] -- CMD [ARGS...]");
		return EXIT_USAGE;
	}
	if (cpu_arg) {
		if (parse_cpus("--cpu", cpu_arg, &o.cpus, &allowed))
			return EXIT_USAGE;
	}
	if (hk_arg && parse_cpus("--housekeeping", hk_arg, &o.housekeeping, &allowed))
		return EXIT_USAGE;
	if (is_rank) {
		struct mpi_place_in in = { cpu_arg ? &o.cpus : NULL, hk_arg ? &o.housekeeping : NULL,
					   have_part ? &part.cpus : NULL, &allowed, o.oversubscribe };
		int cpu;
		bool hk_runs_ranks;
		switch (mpi_rank_place(&rank, &in, &cpu, &o.housekeeping, &hk_runs_ranks)) {
		case MPI_PLACE_REFUSED:
			return EXIT_USAGE;
		case MPI_PLACE_UNDETACHED:
			return run_undetached(&o.housekeeping, argv + optind);
		case MPI_PLACE_DETACHED:
			CPU_ZERO(&o.cpus);
			CPU_SET(cpu, &o.cpus);
			hk_arg = "";
			/* ranks that compute on the proxies' CPUs: no proxy polls
			 * there between calls (docs/mpi.md) */
			if (hk_runs_ranks && !o.proxy)
				o.proxy = "sleep";
			break;
		}
	} else if (!cpu_arg) {
		/* the partition's first CPU, else the last one we may use */
		int cpu = have_part ? cpuset_nth(&part.cpus, 0) : -1;
		for (int i = 0; cpu < 0 && i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &allowed) && (i == CPU_SETSIZE - 1 || !CPU_ISSET(i + 1, &allowed)))
				cpu = i;
		CPU_ZERO(&o.cpus);
		CPU_SET(cpu, &o.cpus);
	}
	if (hk_arg) {
		cpu_set_t both;
		CPU_AND(&both, &o.housekeeping, &o.cpus);
		if (CPU_COUNT(&both)) {
			cli_err("CPU %s is both detached (-c) and housekeeping (-H)", cpulist_format(&both, buf, sizeof(buf)));
			return EXIT_USAGE;
		}
	} else {
		/* our own CPUs, less the detached ones and the partition's */
		cpu_minus(&o.housekeeping, &own, &o.cpus);
		if (have_part)
			cpu_minus(&o.housekeeping, &o.housekeeping, &part.cpus);
	}
	if (CPU_COUNT(&o.housekeeping) == 0) {
		cli_err("no housekeeping CPU left for the proxies (detached: %s)", cpulist_format(&o.cpus, buf, sizeof(buf)));
		cli_note("leave at least one CPU of the affinity out of -c, or name one with -H");
		return EXIT_USAGE;
	}

	int held_cpu;
	pid_t holder;
	if (cpus_all_held(&o.cpus, getpid(), &held_cpu, &holder)) {
		char who[64];
		cli_err("CPU %d already holds a detached thread of %s", held_cpu, pid_describe(holder, who, sizeof(who)));
		cli_note("one detached thread per CPU: wait for it to end ('detach ps' lists it), or choose another CPU with -c");
		return 1;
	}

	rc = resolve_command(argv[optind], cmdpath, sizeof(cmdpath));
	if (rc) {
		cli_err("%s: %s", argv[optind], rc == 127 ? "command not found" : "permission denied");
		return rc;
	}
	if (exec_is_static(AT_FDCWD, cmdpath, &plain_file)) {
		cli_err("%s is statically linked: the runtime cannot be preloaded into it", cmdpath);
		cli_note("detach needs a dynamically linked program (LD_PRELOAD); rebuild it without -static");
		return 1;
	}
	if (cli_find_runtime(lib, sizeof(lib))) {
		cli_err("cannot find libdetach.so beside the command or " DETACH_SONAME " in ../lib");
		cli_note("set DETACH_LIB to its path");
		return 1;
	}

	if (geteuid() != 0) {
		struct rlimit rl;
		cpu_set_t in_part;
		if (have_part) {
			CPU_AND(&in_part, &o.cpus, &part.cpus);
			if (CPU_COUNT(&in_part)) {
				cli_err("CPU %s is in the detach partition: only root can place threads there",
					cpulist_format(&in_part, buf, sizeof(buf)));
				cli_note("run as root, or pick a CPU outside the partition");
				return 1;
			}
		}
		bool rt = o.policy[0] != 'o';
		getrlimit(RLIMIT_RTPRIO, &rl);
		if (rt && rl.rlim_cur < (rlim_t)atoi(o.policy + 2)) {
			cli_err("-P %s needs root or RLIMIT_RTPRIO >= %s", o.policy, o.policy + 2);
			cli_note("run as root, raise the limit (ulimit -r), or use -P o");
			return 1;
		}
		getrlimit(RLIMIT_MEMLOCK, &rl);
		if (!strcmp(o.mlock, "all") && rl.rlim_cur != RLIM_INFINITY)
			cli_warn("not root: --mlock all can lock only RLIMIT_MEMLOCK (%llu KiB): the program "
			     "cannot have more memory than that", (unsigned long long)rl.rlim_cur / 1024);
	}
	for (int i = 0, cpu; (cpu = cpuset_nth(&o.cpus, i)) >= 0; i++)
		if (!have_part || !CPU_ISSET(cpu, &part.cpus))
			cli_warn("CPU %d is not isolated: Linux may run other work there (detach isolate -c %d)", cpu, cpu);
	warn_risks(&o, cpuset_nth(&o.cpus, 0));

	/* The contract with the runtime (src/lib/contract.h). */
	struct run_contract ct;
	contract_defaults(&ct);
	ct.pid = getpid();               /* exec keeps the pid */
	ct.cpus = o.cpus;
	ct.housekeeping = o.housekeeping;
	snprintf(ct.policy, sizeof(ct.policy), "%s", o.policy);
	snprintf(ct.mlock, sizeof(ct.mlock), "%s", o.mlock);
	snprintf(ct.mode, sizeof(ct.mode), "%s", o.mode);
	snprintf(ct.proxy, sizeof(ct.proxy), "%s", o.proxy ? o.proxy : "");
	snprintf(ct.select, sizeof(ct.select), "%s", select);
	if (o.stats && contract_set_stats(&ct, o.stats)) {
		cli_err("--stats %s: the path is too long", o.stats);
		return 1;
	}
	/* Where threads that are not detached belong, even after the detached
	 * thread, in the partition, execs a new image. */
	if (read_text_file("/proc/self/cpuset", buf, sizeof(buf)) == 0)
		snprintf(ct.home_cpuset, sizeof(ct.home_cpuset), "%s", buf);
	ct.keep_policy = o.keep_policy;
	ct.verbose = o.verbose;
	contract_encode(&ct, contract_setenv, NULL);
	const char *was = getenv("LD_PRELOAD");
	if (was && *was) {
		setenv(ENV_PRELOAD_WAS, was, 1);
		char *both = malloc(strlen(lib) + strlen(was) + 2);
		if (!both)
			return 1;
		sprintf(both, "%s:%s", lib, was);
		setenv("LD_PRELOAD", both, 1);
	} else {
		unsetenv(ENV_PRELOAD_WAS);
		setenv("LD_PRELOAD", lib, 1);
	}

	execv(cmdpath, argv + optind);
	rc = errno;
	cli_err("%s: %s", cmdpath, strerror(rc));
	return rc == ENOENT ? 127 : 126;
}

DETACH_VERB(verb_run) = { "run", "run a program with its first thread detached", run_main };
