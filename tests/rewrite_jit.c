/* Description: JIT code in the default mode: a site in memory the program
 * made executable after the start (mmap RW, `mov $39,%eax; syscall; ret`
 * written, mprotect RX, called detached) is rewritten at its first trap and
 * 1,000,000 calls later leave the detached tid's stime and voluntary
 * switches flat; the program then writes new code over the rewritten bytes
 * (`mov $110,%eax; syscall; ret`, getppid): its calls give getppid's result
 * (the trap fallback); and code in a read-only shared file mapping, which
 * cannot be made writable, keeps trapping and gives getpid's result, listed
 * in the statistics' `trapping_sites` under its file.
 * Timeout: 180 */
#include "helpers/t_detach.h"
#include "helpers/t_jit.h"

#include <sys/mman.h>
#include <sys/stat.h>

#define CALLS 1000000

static int inner(const char *file)
{
	pid_t me = t_main_tid(), pid = getpid(), ppid = getppid();
	unsigned char *jit = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	t_check(jit != MAP_FAILED, "mmap: %s", strerror(errno));
	memcpy(jit, t_jit_getpid, sizeof(t_jit_getpid));
	t_check(mprotect(jit, 4096, PROT_READ | PROT_EXEC) == 0, "mprotect RX: %s", strerror(errno));
	t_check(t_jit_call(jit) == pid, "JIT getpid: %ld, want %d", t_jit_call(jit), (int)pid);
	t_check(jit[0] == 0xe9, "the JIT site was not rewritten (%#x)", jit[0]);

	uint64_t t0 = monotonic_ns();
	long long s0 = t_task_stat_field(me, 15);          /* stime, ticks */
	long long v0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long bad = 0;
	for (long i = 0; i < CALLS; i++)
		bad += t_jit_call(jit) != pid;
	uint64_t t1 = monotonic_ns();
	long long s1 = t_task_stat_field(me, 15);
	long long v1 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long ticks = (long long)((t1 - t0) * sysconf(_SC_CLK_TCK) / 1000000000ull);
	printf("%d JIT getpid in %lld ticks: detached tid stime +%lld ticks, voluntary switches +%lld\n", CALLS,
	       ticks, s1 - s0, v1 - v0);
	t_check(!bad, "%ld JIT calls gave a wrong result", bad);
	t_check(v1 == v0, "the detached thread slept in the kernel %lld times", v1 - v0);
	/* interrupts on a CPU that is not isolated are charged to whoever runs;
	 * a call that entered the kernel would cost most of the time there */
	t_check((s1 - s0) * 10 <= ticks + 20, "the detached thread spent %lld of %lld ticks in the kernel", s1 - s0,
		ticks);

	/* new code over the rewritten bytes: the runtime must not take it for
	 * its jump (the call traps and is carried out as written) */
	t_check(mprotect(jit, 4096, PROT_READ | PROT_WRITE) == 0, "mprotect RW: %s", strerror(errno));
	memcpy(jit, t_jit_getppid, sizeof(t_jit_getppid));
	t_check(mprotect(jit, 4096, PROT_READ | PROT_EXEC) == 0, "mprotect RX: %s", strerror(errno));
	for (int i = 0; i < 1000; i++)
		if (t_jit_call(jit) != ppid) {
			t_check(0, "rewritten JIT code, call %d: %ld, want getppid %d", i, t_jit_call(jit), (int)ppid);
			break;
		}

	/* a mapping that cannot become writable: the trap fallback */
	int fd = open(file, O_RDONLY);
	void *ro = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0) : MAP_FAILED;
	t_check(ro != MAP_FAILED, "mmap %s: %s", file, strerror(errno));
	if (ro != MAP_FAILED)
		for (int i = 0; i < 1000; i++)
			if (t_jit_call(ro) != pid) {
				t_check(0, "read-only code, call %d: %ld, want getpid %d", i, t_jit_call(ro), (int)pid);
				break;
			}
	t_check(ro == MAP_FAILED || ((const unsigned char *)ro)[0] == 0xb8, "the read-only code changed");
	return t_done();
}

int main(int argc, char **argv)
{
	char file[] = "/tmp/detach-jit-XXXXXX", stats[128];

	if (argc > 2 && !strcmp(argv[1], "inner"))
		return inner(argv[2]);
	if (argc > 1 && !strcmp(argv[1], "inner"))
		return inner(getenv("T_JIT_FILE"));
	t_jit_file(file);
	setenv("T_JIT_FILE", file, 1);
	t_run_inner_rewritten(argv[0], stats, sizeof(stats));
	char key[160];
	snprintf(key, sizeof(key), "\"%s\": {", file);
	t_check(t_stats_has(stats, key), "no sites listed under %s", file);
	char buf[1 << 16];
	char *at = t_stats_read(stats, buf, sizeof(buf)) ? strstr(buf, key) : NULL;
	char *end = at ? strchr(at, ']') : NULL;   /* its trapping_sites' end */
	if (end)
		*end = '\0';
	t_check(at && strstr(at, "\"trapping\": 1,") && strstr(at, "\"traps\": 1000,"),
		"the read-only code's site is not listed as trapping 1000 times");
	unlink(stats);
	unlink(file);
	return t_done();
}
