/* detach isolate: make the listed CPUs a partition for detached threads, and
 * put everything back with --undo.  This file is the verb: its options and
 * its checks before anything changes; isolate.h lists the other parts. */
#include "cli/cli.h"
#include "cli/isolate.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: detach isolate -c LIST [--dry-run]\n"
"       detach isolate --undo\n"
"\n"
"Makes the listed CPUs a partition for detached threads: a cpuset of their own\n"
"(cgroup v2 isolated partition, or on cgroup v1 an exclusive cpuset with load\n"
"balancing off at the root), every movable task and kernel thread moved to the\n"
"other (housekeeping) CPUs, movable IRQs, the default IRQ affinity, the workqueue\n"
"cpumasks and the watchdog cpumask moved, RT throttling off\n"
"(sched_rt_runtime_us=-1).  Prints each change.  Needs root.\n"
"\n"
"The previous value of everything it changes is saved first, in\n"
ISOLATE_STATE_FILE " (root only), so --undo restores it even after a crash.\n"
"Running isolate again with the same CPUs is harmless.\n"
"\n"
"  -c, --cpu LIST        CPUs to isolate, like 3 or 2-5,8; at least one online\n"
"                        CPU must stay outside the list for housekeeping\n"
"  -n, --dry-run         print what would change, change nothing (no root needed)\n"
"  -u, --undo            restore every saved value, report what could not be\n"
"                        restored (a task that exited, an IRQ that vanished),\n"
"                        remove the state file\n"
"  -h, --help            this text\n"
"\n"
"Exit status: 0 done; 1 a step failed, or not root (what was changed is saved\n"
"and --undo restores it); 2 bad usage.\n");
	return status;
}

/* Fills *a from the command line; 0, or EXIT_USAGE after printing why. */
static int isolate_parse_args(int argc, char **argv, struct isolate_args *a)
{
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "undo", no_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "c:nuh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': a->cpus = optarg; break;
		case 'n': a->dry = true; break;
		case 'u': a->undo = true; break;
		case 'h': a->help = true; return 0;
		default: return cli_bad_option("isolate", argv);
		}
	}
	if (optind < argc)
		return cli_unexpected_arg("isolate", argv[optind]);
	if (a->undo && (a->cpus || a->dry)) {
		cli_err("--undo takes no other option");
		cli_note("it restores everything the state file records");
		return EXIT_USAGE;
	}
	if (!a->undo && !a->cpus) {
		cli_err("which CPUs? -c LIST is required");
		cli_note("for example 'detach isolate -c 1'; 'detach isolate --help' says more");
		return EXIT_USAGE;
	}
	return 0;
}

static int isolate_main(int argc, char **argv)
{
	struct isolate_args a;
	struct iso s;
	cpu_set_t online;
	int rc;

	if ((rc = isolate_parse_args(argc, argv, &a)))
		return rc;
	if (a.help)
		return usage(0);
	if (a.undo) {
		if (geteuid() != 0) {
			cli_err("detach isolate --undo changes system settings: it must run as root");
			cli_note("run it with sudo");
			return 1;
		}
		return isolate_undo();
	}
	memset(&s, 0, sizeof(s));
	s.j.fd = -1;
	s.dry = a.dry;
	if (cli_parse_cpus("-c", a.cpus, &s.cpus))
		return EXIT_USAGE;
	if (cpus_online(&online)) {
		cli_err("cannot read the online CPUs");
		return 1;
	}
	CPU_XOR(&s.hk, &online, &s.cpus);
	CPU_AND(&s.hk, &s.hk, &online);
	cpulist_format(&s.cpus, s.cpus_s, sizeof(s.cpus_s));
	cpulist_format(&s.hk, s.hk_s, sizeof(s.hk_s));
	if (!CPU_COUNT(&s.hk)) {
		cli_err("CPU list %s leaves no housekeeping CPU", s.cpus_s);
		cli_note("leave at least one online CPU (%s) out of the list for everything else",
			 cpulist_format(&online, s.cpus_s, sizeof(s.cpus_s)));
		return EXIT_USAGE;
	}
	if (!s.dry && geteuid() != 0) {
		cli_err("detach isolate changes system settings: it must run as root");
		cli_note("run it with sudo, or add --dry-run to see what it would change");
		return 1;
	}
	rc = isolate_apply(&s);
	journal_free(&s.j);
	return rc;
}

DETACH_VERB(verb_isolate) = { "isolate", "make CPUs a partition for detached threads (--undo reverts)", isolate_main };
