/* What every verb of the command parses the same way (cli.h): refused
 * options and stray arguments, CPU lists. */
#include "cli/cli.h"
#include "lib/util.h"

#include <getopt.h>
#include <string.h>

int cli_bad_option(const char *verb, char **argv)
{
	/* unknown, or missing its value: getopt_long has stepped over it */
	cli_err("bad option '%s'", argv[optind - 1]);
	cli_note("'detach %s --help' lists the options", verb);
	return EXIT_USAGE;
}

int cli_unexpected_arg(const char *verb, const char *arg)
{
	cli_err("unexpected argument '%s'", arg);
	cli_note("'detach %s --help' lists the options", verb);
	return EXIT_USAGE;
}

int cli_parse_cpus(const char *opt, const char *arg, cpu_set_t *set)
{
	cpu_set_t online, off;
	char buf[256];

	if (cpulist_parse(arg, set)) {
		cli_err("malformed CPU list for %s: '%s'", opt, arg);
		cli_note("a CPU list looks like 3 or 2-5,8");
		return -1;
	}
	if (cpus_online(&online) == 0) {
		CPU_XOR(&off, set, &online);
		CPU_AND(&off, &off, set);
		if (CPU_COUNT(&off)) {
			cli_err("%s: CPU %s is not online", opt, cpulist_format(&off, buf, sizeof(buf)));
			cli_note("online CPUs: %s", cpulist_format(&online, buf, sizeof(buf)));
			return -1;
		}
	}
	return 0;
}

int cli_choice(const char *what, const char *arg, const char *const *choices)
{
	char list[256] = "";
	size_t o = 0;

	for (int i = 0; choices[i]; i++) {
		if (!strcmp(arg, choices[i]))
			return 0;
		o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%s", i ? ", " : "", choices[i]);
	}
	cli_err("unknown %s '%s'", what, arg);
	cli_note("%ss: %s", what, list);
	return EXIT_USAGE;
}
