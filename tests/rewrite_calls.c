/* Description: rewrite mode takes no kernel entry per call: 10,000,000
 * forwarded writes of a detached thread take no more traps than it has
 * distinct sites, and the kernel's counters for its tid show no system call
 * (syscw), no kernel time and no voluntary switch over them.  The same
 * program in sud mode takes one trap per call.
 * Timeout: 900 */
#include "helpers/t_detach.h"

static int inner(long calls)
{
	pid_t me = t_main_tid();
	int fd = open("/dev/null", O_WRONLY);
	char c = 'x';

	if (fd < 0 || write(fd, &c, 1) != 1)   /* the site traps once here */
		return 2;
	uint64_t t0 = monotonic_ns();
	long long w0 = t_task_value(me, "io", "syscw");
	long long s0 = t_task_stat_field(me, 15);          /* stime, ticks */
	long long v0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	for (long i = 0; i < calls; i++)
		if (write(fd, &c, 1) != 1)
			return 3;
	uint64_t t1 = monotonic_ns();
	long long w1 = t_task_value(me, "io", "syscw");
	long long s1 = t_task_stat_field(me, 15);
	long long v1 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long ticks = (long long)((t1 - t0) * sysconf(_SC_CLK_TCK) / 1000000000ull);
	printf("%ld writes in %lld ticks: detached tid syscw +%lld, stime +%lld ticks, voluntary switches +%lld\n",
	       calls, ticks, w1 - w0, s1 - s0, v1 - v0);
	t_check(w1 == w0, "the detached thread made %lld write system calls itself", w1 - w0);
	t_check(v1 == v0, "the detached thread slept in the kernel %lld times", v1 - v0);
	/* No kernel time but noise: interrupts taken on a CPU that is not
	 * isolated are charged to whoever runs.  A call that entered the
	 * kernel would cost about half of the time there. */
	t_check((s1 - s0) * 10 <= ticks + 20, "the detached thread spent %lld of %lld ticks in the kernel",
		s1 - s0, ticks);
	return t_done();
}

int main(int argc, char **argv)
{
	static const char *const rewrite[] = { "--mode", "rewrite", NULL };
	static const char *const sud[] = { "--mode", "sud", NULL };
	char stats[128];
	int st;

	if (argc > 1 && !strcmp(argv[1], "rewrite"))
		return inner(10000000);
	if (argc > 1 && !strcmp(argv[1], "sud"))
		return 0;   /* the sud run: counted by its statistics */

	st = t_run_inner(argv[0], "rewrite", rewrite, stats, sizeof(stats), false);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rewrite run: status %#x", st);
	long long traps = t_stats_value(stats, "traps"), sites = t_stats_value(stats, "sites_rewritten");
	long long refused = t_stats_value(stats, "traps_refused"), fwd = t_stats_value(stats, "forwarded");
	printf("rewrite: %lld forwarded, %lld traps (%lld at refused sites), %lld sites rewritten\n",
	       fwd, traps, refused, sites);
	t_check(t_stats_has(stats, "\"mode\": \"rewrite\""), "not in rewrite mode");
	t_check(sites > 0, "no site rewritten");
	t_check(fwd >= 10000000, "only %lld forwarded calls", fwd);
	t_check(traps - refused <= sites, "%lld traps for %lld sites", traps - refused, sites);
	unlink(stats);

	/* sud: a loop of 100,000 writes, one trap each */
	static const char *const sud_loop[] = { "--mode", "sud", NULL };
	(void)sud;
	char cmd_stats[128];
	snprintf(cmd_stats, sizeof(cmd_stats), "/tmp/detach-test-%d-sudloop.json", getpid());
	pid_t p = fork();
	if (p == 0) {
		const char *bin = getenv("DETACH_BIN");
		execl(bin, bin, "run", "-c", "1", "--stats", cmd_stats, sud_loop[0], sud_loop[1], "--",
		      "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=100000", "status=none", (char *)NULL);
		_exit(127);
	}
	waitpid(p, &st, 0);
	traps = t_stats_value(cmd_stats, "traps");
	fwd = t_stats_value(cmd_stats, "forwarded");
	printf("sud: dd of 100,000 1-byte blocks: %lld forwarded, %lld traps\n", fwd, traps);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sud run: status %#x", st);
	t_check(fwd >= 200000 && traps >= fwd, "sud mode: %lld traps for %lld forwarded calls", traps, fwd);
	unlink(cmd_stats);
	return t_done();
}
