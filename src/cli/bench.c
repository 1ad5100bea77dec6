/* detach bench: the paper's evaluation (docs/bench.md).  The measurement
 * programs are C (bench/fwq.c, bench/ctlloop.c); the orchestration, tables
 * and plots are Python reading their JSON (tools/detach_tools/bench), run
 * from the venv that `make deps` creates.  This verb only finds the two and
 * execs `python -m detach_tools bench`. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The source tree: $DETACH_ROOT, else the directory above the one holding
 * this binary (build/detach -> .), as long as it holds tools/detach_tools. */
static int find_root(char *root, size_t len)
{
	const char *env = getenv("DETACH_ROOT");
	char exe[PATH_MAX], probe[PATH_MAX + 32];
	ssize_t n;

	if (env && *env) {
		snprintf(root, len, "%s", env);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n < 0)
			return -errno;
		exe[n] = 0;
		snprintf(root, len, "%s/..", dirname(exe));
	}
	snprintf(probe, sizeof(probe), "%s/tools/detach_tools/__main__.py", root);
	return access(probe, R_OK) ? -ENOENT : 0;
}

static int bench_main(int argc, char **argv)
{
	char root[PATH_MAX], py[PATH_MAX + 32], pypath[PATH_MAX + 32], bin[PATH_MAX + 32];
	char **args;

	if (find_root(root, sizeof(root))) {
		cli_err("cannot find tools/detach_tools (the benchmark runs from the source tree)");
		cli_note("run build/detach bench from a checkout, or set DETACH_ROOT to it");
		return 1;
	}
	snprintf(py, sizeof(py), "%s/build/venv/bin/python", root);
	if (access(py, X_OK)) {
		cli_err("the benchmark's Python environment is missing (%s)", py);
		cli_note("run 'make deps' (or 'make bench', which does it)");
		return 1;
	}
	snprintf(bin, sizeof(bin), "%s/build/detach", root);
	setenv("DETACH_ROOT", root, 1);
	/* The venv holds the package editable; the path makes sure it is this tree's. */
	snprintf(pypath, sizeof(pypath), "%s/tools", root);
	setenv("PYTHONPATH", pypath, 1);
	if (!getenv("DETACH_BIN"))
		setenv("DETACH_BIN", bin, 1);

	args = calloc((size_t)argc + 4, sizeof(*args));
	if (!args) {
		cli_err("out of memory");
		return 1;
	}
	args[0] = py;
	args[1] = "-m";
	args[2] = "detach_tools";
	args[3] = "bench";
	for (int i = 1; i < argc; i++)
		args[i + 3] = argv[i];
	execv(py, args);
	cli_err("cannot run %s: %s", py, strerror(errno));
	free(args);
	return 1;
}

DETACH_VERB(verb_bench) = { "bench", "reproduce the paper's evaluation (fwq, ctlloop; tables, plots)", bench_main };
