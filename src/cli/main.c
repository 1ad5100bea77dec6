/* detach: the command.  Dispatches to the verb files (run.c, ps.c, ...). */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_argc;
char **cli_argv;

extern const struct verb __start_detach_verbs[], __stop_detach_verbs[];

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void cli_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("detach: error: ", fmt, ap);
	va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("detach: warning: ", fmt, ap);
	va_end(ap);
}

void cli_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("NOTE: ", fmt, ap);
	va_end(ap);
}

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f, "usage: detach VERB [OPTIONS] ...\n\n"
		"Run one thread of an unmodified program on a CPU of its own; its system\n"
		"calls are carried out by a proxy thread on the other CPUs.\n\nverbs:\n");
	for (const struct verb *v = __start_detach_verbs; v < __stop_detach_verbs; v++)
		fprintf(f, "  %-9s %s\n", v->name, v->summary);
	fprintf(f, "\n'detach VERB --help' describes each verb.  detach %s\n", DETACH_VERSION);
	return status;
}

int main(int argc, char **argv)
{
	cli_argc = argc;
	cli_argv = argv;
	if (argc < 2)
		return usage(EXIT_USAGE);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help"))
		return usage(0);
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("detach %s\n", DETACH_VERSION);
		return 0;
	}
	for (const struct verb *v = __start_detach_verbs; v < __stop_detach_verbs; v++)
		if (!strcmp(argv[1], v->name))
			return v->main(argc - 1, argv + 1);
	cli_err("unknown verb '%s'", argv[1]);
	cli_note("'detach --help' lists the verbs");
	return EXIT_USAGE;
}
