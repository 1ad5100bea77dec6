/* detach bench: the paper's evaluation (docs/bench.md).  The measurement
 * programs are C (bench/fwq.c, bench/ctlloop.c); the orchestration, tables
 * and plots are the Python package detach_tools (tools/detach_tools) reading
 * their JSON.  This verb only finds the two and execs
 * `python -m detach_tools bench`, from one of two places:
 *   a checkout   $DETACH_ROOT, else the directory above this binary
 *                (build/detach -> .), holding tools/detach_tools; run by the
 *                venv that `make deps` creates (build/venv/bin/python);
 *   installed    PREFIX/lib/detach/python beside PREFIX/bin/detach (`make
 *                install`, the .deb); run by the system's python3, with the
 *                distribution's numpy and matplotlib for the plots
 *                (docs/install.md says why). */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PACKAGE_PROBE "detach_tools/__main__.py"

static int has_package(const char *pydir)
{
	char probe[PATH_MAX + 64];

	snprintf(probe, sizeof(probe), "%s/" PACKAGE_PROBE, pydir);
	return access(probe, R_OK) == 0;
}

/* Sets the environment of the orchestration and the interpreter to run it;
 * 0, or -1 after one error line. */
static int locate(char *py, size_t len)
{
	const char *root_env = getenv("DETACH_ROOT");
	char exe[PATH_MAX], root[PATH_MAX], buf[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0) {
		cli_err("cannot read /proc/self/exe: %s", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';            /* the directory holding detach */

	snprintf(root, sizeof(root), "%s", root_env && *root_env ? root_env : exe);
	if (!(root_env && *root_env))
		strncat(root, "/..", sizeof(root) - strlen(root) - 1);
	snprintf(buf, sizeof(buf), "%s/tools", root);
	if (has_package(buf)) {
		setenv("PYTHONPATH", buf, 1);  /* this tree's package, not another venv's */
		setenv("DETACH_ROOT", root, 1);
		snprintf(buf, sizeof(buf), "%s/build/detach", root);
		setenv("DETACH_BIN", buf, 0);
		snprintf(py, len, "%s/build/venv/bin/python", root);
		if (access(py, X_OK)) {
			cli_err("the benchmark's Python environment is missing (%s)", py);
			cli_note("run 'make deps' (or 'make bench', which does it)");
			return -1;
		}
		return 0;
	}
	if (root_env && *root_env) {
		cli_err("DETACH_ROOT=%s holds no tools/detach_tools", root_env);
		cli_note("set DETACH_ROOT to a detach checkout, or unset it to use the installed tools");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s/../lib/detach/python", exe);
	if (!has_package(buf)) {
		cli_err("cannot find the benchmark's Python package (tools/detach_tools in a checkout, "
			"lib/detach/python when installed)");
		cli_note("run build/detach bench from a checkout, or reinstall detach ('make install')");
		return -1;
	}
	setenv("PYTHONPATH", buf, 1);
	setenv("PYTHONDONTWRITEBYTECODE", "1", 1);   /* leave the installed tree as installed */
	snprintf(buf, sizeof(buf), "%s/detach", exe);
	setenv("DETACH_BIN", buf, 0);
	snprintf(py, len, "python3");
	return 0;
}

int cli_exec_python_tool(const char *tool, int argc, char **argv)
{
	char py[PATH_MAX + 32];
	char **args;

	if (locate(py, sizeof(py)))
		return 1;
	args = calloc((size_t)argc + 4, sizeof(*args));
	if (!args) {
		cli_err("out of memory");
		return 1;
	}
	args[0] = py;
	args[1] = "-m";
	args[2] = "detach_tools";
	args[3] = (char *)tool;
	for (int i = 1; i < argc; i++)
		args[i + 3] = argv[i];
	execvp(py, args);
	cli_err("cannot run %s: %s", py, strerror(errno));
	if (errno == ENOENT)
		cli_note("install Python 3 (apt-get install python3)");
	free(args);
	return 1;
}

static int bench_main(int argc, char **argv)
{
	return cli_exec_python_tool("bench", argc, argv);
}

DETACH_VERB(verb_bench) = { "bench", "reproduce the paper's evaluation (fwq, ctlloop; tables, plots)", bench_main };
