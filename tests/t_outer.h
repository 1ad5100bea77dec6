/* Tests that run an inner part of themselves under `detach run` and then
 * judge the statistics it wrote: t_run_inner() forks, execs
 * `detach run -c 1 --stats FILE [extra...] -- self ROLE`, and waits. */
#ifndef DETACH_TESTS_T_OUTER_H
#define DETACH_TESTS_T_OUTER_H

#include "t_detach.h"

#include <sys/wait.h>

/* Skips a test of rewrite mode where page 0 cannot be mapped. */
static inline void t_need_rewrite(void)
{
	long min = -1;

	if (geteuid() == 0)
		return;
	read_long_file("/proc/sys/vm/mmap_min_addr", &min);
	if (min != 0)
		t_skip("rewrite mode needs root or vm.mmap_min_addr=0");
}

/* Returns the wait status; stats_path receives the statistics file name. */
static inline int t_run_inner(char *self, const char *role, const char *const *extra,
			      char *stats_path, size_t len, bool quiet_stderr)
{
	const char *bin = getenv("DETACH_BIN");
	char *args[64];
	int n = 0, st;
	pid_t p;

	if (!bin)
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	snprintf(stats_path, len, "/tmp/detach-test-%d-%s.json", getpid(), role);
	args[n++] = (char *)bin;
	args[n++] = "run";
	args[n++] = "-c";
	args[n++] = "1";
	args[n++] = "--stats";
	args[n++] = stats_path;
	for (int i = 0; extra && extra[i] && n < 58; i++)
		args[n++] = (char *)extra[i];
	args[n++] = "--";
	args[n++] = self;
	args[n++] = (char *)role;
	args[n] = NULL;
	p = fork();
	if (p == 0) {
		if (quiet_stderr) {
			int fd = open("/dev/null", O_WRONLY);
			dup2(fd, 2);
		}
		execv(bin, args);
		_exit(127);
	}
	waitpid(p, &st, 0);
	return st;
}

/* A number from the statistics JSON of the first thread: "key": N */
static inline long long t_stats_value(const char *path, const char *key)
{
	char buf[1 << 16], pat[64], *p;
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

static inline bool t_stats_has(const char *path, const char *text)
{
	char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

#endif
