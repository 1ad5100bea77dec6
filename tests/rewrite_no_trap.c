/* Description: rewrite mode leaves no site trapping.  sha256sum of a file
 * (glibc's openat site straddles a page) refuses no site and takes one trap
 * per site rewritten: the kernel's SIGSYS deliveries (strace) match the
 * statistics, each site address once.  1,000,000 opendir/closedir (an
 * openat and a close through glibc's __open_nocancel and __close_nocancel,
 * whose sites straddle a page and a cache line in Debian 12's glibc 2.36)
 * leave the detached tid's stime and voluntary switches flat.  193 sites
 * whose two bytes straddle a cache line (one a page) are rewritten, each
 * while a thread that is not detached runs it in a loop: that thread meets
 * the staged int3 (the kernel's SIGTRAP deliveries, seen by strace) and
 * every call of either thread returns the right result.
 * Timeout: 180 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <stdatomic.h>

#define OPENS 1000000
#define NSITES 192

/* NSITES functions 128 bytes apart, each `getppid` with its syscall at
 * byte 63 of a cache line (its two bytes straddle it), and one with it at
 * byte 4095 of a page. */
__asm__(".text\n"
	".p2align 7\n"
	"straddle_lines:\n"
	".rept 192\n"
	"	.p2align 7\n"
	"	movl $110, %eax\n"             /* getppid: 5 bytes */
	"	.fill 58, 1, 0x90\n"
	"	syscall\n"                     /* at 63 */
	"	ret\n"
	".endr\n"
	".p2align 12\n"
	"straddle_page:\n"
	"	movl $110, %eax\n"
	"	.fill 4090, 1, 0x90\n"
	"	syscall\n"                     /* at 4095 */
	"	ret\n");
extern const char straddle_lines[], straddle_page[];

static long straddler(int i)
{
	const char *fn = i < NSITES ? straddle_lines + 128 * i : straddle_page;

	return ((long (*)(void))fn)();
}

static atomic_bool stop;
static atomic_int current = -1;
static atomic_long hammer_calls, hammer_bad;

/* Runs the site the detached thread is about to rewrite, in a loop */
static void *hammer(void *arg)
{
	long want = (long)arg;

	while (!atomic_load(&stop)) {
		int i = atomic_load(&current);
		if (i < 0)
			continue;
		if (straddler(i) != want)
			atomic_fetch_add(&hammer_bad, 1);
		atomic_fetch_add(&hammer_calls, 1);
	}
	return NULL;
}

/* The detached thread rewrites the straddling sites, each while another
 * thread (not detached: --select first) runs it in a loop. */
static int race(void)
{
	long want = getppid();
	pthread_t th;
	int bad = 0;

	pthread_create(&th, NULL, hammer, (void *)want);
	for (int i = 0; i <= NSITES; i++) {
		atomic_store(&current, i);
		long before = atomic_load(&hammer_calls);
		while (atomic_load(&hammer_calls) < before + 3)
			;                     /* it runs site i right now */
		if (straddler(i) != want)
			bad++;
	}
	for (int round = 0; round < 100; round++)
		for (int i = 0; i <= NSITES; i++)
			if (straddler(i) != want)
				bad++;
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	printf("race: %d wrong results on the detached thread; the other thread: %ld calls, %ld wrong\n",
	       bad, atomic_load(&hammer_calls), atomic_load(&hammer_bad));
	return bad || atomic_load(&hammer_bad) ? 1 : 0;
}

static int open_close(void)
{
	pid_t me = t_main_tid();
	DIR *d = opendir("/dev");                 /* the sites trap once here */

	if (!d)
		return 2;
	closedir(d);
	uint64_t t0 = monotonic_ns();
	long long s0 = t_task_stat_field(me, 15);          /* stime, ticks */
	long long v0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	for (long i = 0; i < OPENS; i++) {
		d = opendir("/dev");
		if (!d || closedir(d))
			return 3;
	}
	uint64_t t1 = monotonic_ns();
	long long s1 = t_task_stat_field(me, 15);
	long long v1 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long ticks = (long long)((t1 - t0) * sysconf(_SC_CLK_TCK) / 1000000000ull);
	printf("%d opendir/closedir in %lld ticks: detached tid stime +%lld ticks, voluntary switches +%lld\n",
	       OPENS, ticks, s1 - s0, v1 - v0);
	t_check(v1 == v0, "the detached thread slept in the kernel %lld times", v1 - v0);
	/* interrupts on a CPU that is not isolated are charged to whoever runs;
	 * a call that entered the kernel would cost most of the time there */
	t_check((s1 - s0) * 10 <= ticks + 20, "the detached thread spent %lld of %lld ticks in the kernel",
		s1 - s0, ticks);
	return t_done();
}

/* The statistics of a run must show every site rewritten, none refused */
static void check_sites(const char *what, const char *stats)
{
	long long traps = t_stats_value(stats, "traps"), sites = t_stats_value(stats, "sites_rewritten");
	long long refused = t_stats_value(stats, "sites_refused"), trefused = t_stats_value(stats, "traps_refused");
	long long syncs = t_stats_value(stats, "sync_cores");

	printf("%s: %lld traps, %lld sites rewritten, %lld refused (%lld traps there), %lld membarrier SYNC_CORE\n",
	       what, traps, sites, refused, trefused, syncs);
	t_check(t_stats_has(stats, "\"mode\": \"rewrite\""), "%s: not in rewrite mode", what);
	t_check(sites > 0 && refused == 0 && trefused == 0, "%s: %lld sites refused", what, refused);
	t_check(traps == sites, "%s: %lld traps for %lld sites", what, traps, sites);
}

/* sha256sum under strace, which sees each SIGSYS the kernel delivers */
static void sha256sum_sites(void)
{
	const char *bin = getenv("DETACH_BIN");
	char file[] = "/tmp/detach-notrap-XXXXXX", stats[128], trace[128], cmd[1024], line[1024];
	char native[128] = "", detached[128] = "", addrs[256][24];
	int fd = mkstemp(file), naddr = 0, sigsys = 0, repeat = 0, sigtrap = 0;
	static char block[1 << 16];
	FILE *f;

	for (int i = 0; i < 64; i++) {
		for (size_t j = 0; j < sizeof(block); j++)
			block[j] = (char)(i * 131 + j * 7);
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			t_skip("cannot write %s", file);
	}
	close(fd);
	snprintf(stats, sizeof(stats), "/tmp/detach-test-%d-sha.json", getpid());
	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-sha.strace", getpid());
	snprintf(cmd, sizeof(cmd), "sha256sum %s", file);
	if ((f = popen(cmd, "r"))) {
		if (!fgets(native, sizeof(native), f))
			native[0] = '\0';
		pclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "strace -f -qq -e trace=none -e signal=SIGSYS,SIGTRAP -o %s %s run -c 1 --mode rewrite "
		 "--stats %s -- sha256sum %s 2>/dev/null", trace, bin, stats, file);
	if ((f = popen(cmd, "r"))) {
		if (!fgets(detached, sizeof(detached), f))
			detached[0] = '\0';
		pclose(f);
	}
	t_check(native[0] && !strcmp(native, detached), "sha256sum: %s natively, %s detached", native, detached);
	f = fopen(trace, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *p;
		if (strstr(line, "SIGTRAP"))
			sigtrap++;
		if (!strstr(line, "SYS_USER_DISPATCH") || !(p = strstr(line, "si_call_addr=")))
			continue;
		sigsys++;
		p += 13;
		p[strcspn(p, ",")] = '\0';
		for (int i = 0; i < naddr; i++)
			if (!strcmp(addrs[i], p))
				repeat++;
		if (naddr < 256)
			snprintf(addrs[naddr++], sizeof(addrs[0]), "%s", p);
	}
	if (f)
		fclose(f);
	printf("sha256sum: the kernel delivered %d SIGSYS (traps) at %d addresses, %d again at an address "
	       "seen before; %d SIGTRAP\n", sigsys, naddr, repeat, sigtrap);
	check_sites("sha256sum", stats);
	t_check(sigsys > 0 && sigsys == t_stats_value(stats, "traps") + t_stats_value(stats, "retraps"),
		"the kernel delivered %d SIGSYS, the statistics count %lld traps", sigsys,
		t_stats_value(stats, "traps"));
	t_check(repeat == 0, "%d traps at a site that trapped before", repeat);
	unlink(stats);
	unlink(trace);
	unlink(file);
}

/* The race under strace (--seccomp-bpf: no stop but at signals), which
 * sees each SIGTRAP the kernel delivers.  --select first: the other thread
 * is not watched, it runs the sites natively. */
static void race_sites(const char *self)
{
	char stats[128], trace[128], cmd[1024], line[1024];
	int st, int3 = 0;
	FILE *f;

	snprintf(stats, sizeof(stats), "/tmp/detach-test-%d-race.json", getpid());
	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-race.strace", getpid());
	snprintf(cmd, sizeof(cmd),
		 "strace -f --seccomp-bpf -qq -e trace=none -e signal=SIGTRAP -o %s %s run -c 1 --mode rewrite "
		 "--select first --stats %s -- %s race", trace, getenv("DETACH_BIN"), stats, self);
	st = system(cmd);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "race run: status %#x", st);
	f = fopen(trace, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "SIGTRAP") && strstr(line, "si_code=SI_KERNEL"))
			int3++;
	if (f)
		fclose(f);
	check_sites("race", stats);
	printf("race: the kernel delivered %d SIGTRAP for an int3 (the other thread met a staged site and "
	       "went on); %lld int3 met by the detached thread\n", int3, t_stats_value(stats, "int3_hits"));
	t_check(int3 > 0, "no thread met a site's int3 while it was rewritten: is the patch staged?");
	unlink(stats);
	unlink(trace);
}

int main(int argc, char **argv)
{
	static const char *const rewrite[] = { "--mode", "rewrite", NULL };
	char stats[128];
	int st;

	if (argc > 1 && !strcmp(argv[1], "openclose"))
		return open_close();
	if (argc > 1 && !strcmp(argv[1], "race"))
		return race();
	t_need_rewrite();
	if (system("strace -V >/dev/null 2>&1") != 0)
		t_skip("strace is not installed (tools/install-deps.sh)");

	sha256sum_sites();

	st = t_run_inner(argv[0], "openclose", rewrite, stats, sizeof(stats), false);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "open/close run: status %#x", st);
	check_sites("open/close", stats);
	unlink(stats);

	race_sites(argv[0]);
	return t_done();
}
