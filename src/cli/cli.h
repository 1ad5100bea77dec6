/* The `detach` command: one file per verb, each registering itself with
 * DETACH_VERB so that main.c needs no list of them. */
#ifndef DETACH_CLI_H
#define DETACH_CLI_H

#include <stdio.h>

struct verb {
	const char *name;
	const char *summary;     /* one line for `detach --help` */
	int (*main)(int argc, char **argv);   /* argv[0] is the verb */
};

#define DETACH_VERB(var) \
	__attribute__((used, section("detach_verbs"), aligned(sizeof(void *)))) \
	const struct verb var

/* The command line as the user typed it, before getopt reorders argv. */
extern int cli_argc;
extern char **cli_argv;

/* One error line "detach: ..." on stderr; returns the exit status 2 or 1.
 * cli_note(): an indented "NOTE: ..." line with the fix. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit status for bad usage (like getopt-based tools: 2). */
#define EXIT_USAGE 2

#endif
