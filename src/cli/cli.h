/* The `detach` command: one file per verb, each registering itself with
 * DETACH_VERB so that main.c needs no list of them. */
#ifndef DETACH_CLI_H
#define DETACH_CLI_H

#include <sched.h>
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

/* Messages on stderr, one line each: cli_err() "detach: error: ...",
 * cli_warn() "detach: warning: ...", cli_note() "NOTE: ..." with the fix,
 * right after the error it explains.  They return nothing: the caller
 * returns the exit status (EXIT_USAGE or 1). */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Execs `python -m detach_tools TOOL argv[1..]` from a checkout (its venv) or
 * the installed package, with DETACH_BIN set; returns only on
 * failure, after saying why (src/cli/bench.c). */
int cli_exec_python_tool(const char *tool, int argc, char **argv);

/* Exit status for bad usage (like getopt-based tools: 2). */
#define EXIT_USAGE 2

/* ---- what every verb parses the same way (args.c) ------------------------
 * With opterr = 0, after getopt_long returned '?': "bad option" naming what
 * getopt refused (unknown, or missing its value); after the options, a stray
 * argument.  Each adds a NOTE pointing at VERB's --help, returns EXIT_USAGE. */
int cli_bad_option(const char *verb, char **argv);
int cli_unexpected_arg(const char *verb, const char *arg);
/* A CPU list given to option OPT ("-c", "--housekeeping"): well formed and
 * every CPU online.  0, or -1 after an error line and its NOTE. */
int cli_parse_cpus(const char *opt, const char *arg, cpu_set_t *set);
/* ARG is one of CHOICES (NULL-terminated); else "unknown WHAT" and a NOTE
 * listing them.  0 or EXIT_USAGE. */
int cli_choice(const char *what, const char *arg, const char *const *choices);

/* The path of the runtime: DETACH_LIB, or libdetach.so beside the command,
 * or its soname in ../lib from it (run.c).  0, or -1 when there is none. */
int cli_find_runtime(char *path, size_t len);

#endif
