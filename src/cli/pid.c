/* detach pid: detach a thread of a program that is already running
 * (the paper's section III-B-4: it writes a pid to a control file), or attach it
 * again.  The command line; the work is pid_op.c's (ptrace, remote.c).
 */
#include "cli/cli.h"
#include "cli/pid_op.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "lib/partition.h"

struct pid_opts {
	pid_t pid, tid;
	int cpu;                 /* -1: the first free of the default CPUs */
	const char *mode, *stats;
	bool attach;
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
		"  -c, --cpu CPU        the CPU (default: the first free CPU of the 'detach\n"
		"                       isolate' partition, or else of the online CPUs but\n"
		"                       the first)\n"
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
	while ((c = getopt_long(argc, argv, "c:h", longs, NULL)) != -1) {
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

static int pid_main(int argc, char **argv)
{
	struct pid_opts o;
	struct pid_op op;
	int err;

	if ((err = parse_args(argc, argv, &o)))
		return err;
	memset(&op, 0, sizeof(op));
	op.kind = o.attach ? PID_ATTACH : PID_DETACH;
	op.pid = o.pid;
	op.tid = o.tid;
	op.cpu = o.cpu;
	op.mode = o.mode;
	op.stats = o.stats;
	pid_default_cpus(&op.cpus);
	if (o.cpu >= 0) {
		/* the named CPU, and the partition's for the threads to come */
		cpu_set_t dflt = op.cpus;
		CPU_ZERO(&op.cpus);
		CPU_SET(o.cpu, &op.cpus);
		if (!partition_find(&(struct partition){ 0 }))
			CPU_OR(&op.cpus, &op.cpus, &dflt);
	}
	if ((err = pid_op_run(&op))) {
		cli_err("%s", op.why);
		if (op.note[0])
			cli_note("%s", op.note);
		return 1;
	}
	pid_t tid = o.tid ? o.tid : o.pid;
	if (o.attach)
		printf("detach: thread %d of process %d is an ordinary thread again\n", (int)tid, (int)o.pid);
	else
		printf("detach: thread %d of process %d detached on CPU %d\n", (int)tid, (int)o.pid,
		       pid_detached_cpu(o.pid, tid));
	return 0;
}

DETACH_VERB(verb_pid) = { "pid", "detach a thread of a running program (or --attach it again)", pid_main };
