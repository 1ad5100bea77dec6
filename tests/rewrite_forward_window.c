/* Description: a site with no instruction before it to move gets a forward
 * window when its trapping call is exit or exit_group (rewrite.c,
 * find_forward): glibc's _exit, whose exit_group follows a branch target.
 * A program that only calls getppid() and _exit(37), detached in rewrite
 * mode, leaves no site trapping: the kernel delivers one SIGSYS per site
 * (strace), the last one for exit_group, and the detached thread then
 * makes the two membarrier SYNC_CORE calls of a patch before the process
 * ends; the statistics count both sites rewritten, none trapping; the
 * status is 37, natively, in sud mode and in rewrite mode.  A thread that
 * is in the kernel at such a site when its jump is stored (a read blocked
 * there, on a thread not detached: --select first, /proc/PID/task/TID/
 * syscall shows its pc at the site's end) returns into the jump, meets the
 * int3 the jump's second byte holds (the kernel's SIGTRAP, SI_KERNEL, to
 * that thread), is sent to the stub's copy of the instructions after the
 * `syscall`, and gets its read's result, also when, as here, the detached
 * first thread whose exit patched the site has ended first (its pid then
 * names no memory: the runtime reads the jump by the thread's own tid).  A call at the site that needs
 * the trap path (made on the program's alternate stack) traps at the
 * stub's own `syscall`: a retrap, no new site, the right result.
 * A thread's exit through glibc's start_thread (2.36: `mov %edx,%eax;
 * syscall; jmp` back to its loop) gets a forward window that starts
 * before the `syscall` and ends with that jmp, moved as a jmp rel32: a
 * program that creates and joins threads in a loop traps once for exit
 * (the first thread's; strace: one SIGSYS for __NR_exit of the kernel's
 * THREADS), the site's patch follows it, and the status is as natively.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

/* long fwd_call(nr, a1, a2, a3): a generic site whose `syscall` is a
 * branch target with a jump before it (no backward window), followed by
 * glibc's error test (6 bytes: a forward window of 8) */
long fwd_call(long nr, long a1, long a2, long a3);
extern const unsigned char fwd_site[];
__asm__(".text\n"
	".p2align 4\n"
	"fwd_call:\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp fwd_site\n"
	"fwd_site:\n"
	"	syscall\n"
	"	cmpq $-4096, %rax\n"
	"	ja 1f\n"
	"	ret\n"
	"1:	ret\n");

static int exit_role(void)
{
	(void)getppid();
	_exit(37);
}

static int pipefd[2];
static _Atomic pid_t reader_tid;
static atomic_long reader_got = -100;
static char reader_byte;

/* Not detached (--select first): blocks in the kernel at fwd_site */
static void *reader(void *arg)
{
	(void)arg;
	atomic_store(&reader_tid, (pid_t)syscall(SYS_gettid));
	atomic_store(&reader_got, fwd_call(SYS_read, pipefd[0], (long)&reader_byte, 1));
	_exit(atomic_load(&reader_got) == 1 && reader_byte == 'x' ? 41 : 40);
}

/* Not detached: writes the byte once the site's jump stands and the
 * detached first thread that patched it has ended, so that the reader
 * meets the int3 in a process whose pid names no memory any more (the
 * runtime reads the jump by its own tid then: rewrite.c, own_vm) */
static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000 && ((volatile const unsigned char *)fwd_site)[0] != 0xe9; i++)
		usleep(500);
	if (((volatile const unsigned char *)fwd_site)[0] != 0xe9)
		_exit(3);               /* never patched */
	for (int i = 0; i < 20000 && !t_first_thread_ended(); i++)
		usleep(500);
	if (!t_first_thread_ended())
		_exit(7);               /* the first thread's exit never ended */
	if (write(pipefd[1], "x", 1) != 1)
		_exit(4);
	return NULL;
}

/* The detached first thread ends itself with exit at fwd_site while the
 * reader is in the kernel there; the reader then ends the process with
 * 41 if its read returned the byte, through the rewritten site. */
static int guard_role(void)
{
	pthread_t r, w;
	uintptr_t pc = (uintptr_t)fwd_site + 2;

	if (pipe(pipefd))
		return 2;
	pthread_create(&r, NULL, reader, NULL);
	while (!atomic_load(&reader_tid))
		usleep(100);
	/* in the kernel at the site: /proc's pc is the site's end */
	if (!t_task_in_syscall_at(atomic_load(&reader_tid), SYS_read, pc))
		return 5;
	printf("site %#lx: reader tid %d in read(2) at pc %#lx, the site's end\n", (unsigned long)fwd_site,
	       (int)atomic_load(&reader_tid), (unsigned long)pc);
	fflush(stdout);
	pthread_create(&w, NULL, writer, NULL);
	pthread_detach(w);
	/* only the reader is left to end the process */
	pthread_detach(r);
	fwd_call(SYS_exit, 0, 0, 0);
	return 6;
}

/* Watched, not detached (the default --select first,pinned watches every
 * thread): its exit at fwd_site traps and rewrites the site */
static void *exiter(void *arg)
{
	(void)arg;
	fwd_call(SYS_exit, 0, 0, 0);
	return NULL;
}

static atomic_long onstack_got = -100;

/* On the program's alternate stack: the trampoline sends the call to the
 * trap path (rewrite.c, dt_trampoline_dispatch), that is to the forward
 * stub's own `syscall` */
static void onstack(int sig)
{
	(void)sig;
	atomic_store(&onstack_got, fwd_call(SYS_getppid, 0, 0, 0));
}

/* The detached first thread calls the site (patched by another thread's
 * exit) from a handler on its alternate stack, and plainly.  Says where
 * the stub the site's jump goes to lies: "stub ADDR MAPPING", the mapping
 * as the statistics' sites would name it (an unnamed one: [anon]) */
static int retrap_role(void)
{
	static char altstack[1 << 16];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	struct sigaction sa = { .sa_handler = onstack, .sa_flags = SA_ONSTACK };
	char map[400];
	int32_t rel;
	pthread_t e;

	pthread_create(&e, NULL, exiter, NULL);
	pthread_join(e, NULL);
	if (((volatile const unsigned char *)fwd_site)[0] != 0xe9)
		return 3;               /* not patched */
	memcpy(&rel, fwd_site + 1, 4);
	uintptr_t stub = (uintptr_t)fwd_site + 5 + (uintptr_t)(intptr_t)rel;
	if (!t_map_of(stub, map, sizeof(map), NULL))
		return 5;
	printf("stub %#lx %s\n", (unsigned long)stub, map);
	fflush(stdout);
	if (sigaltstack(&ss, NULL) || sigaction(SIGUSR1, &sa, NULL))
		return 2;
	raise(SIGUSR1);
	if (atomic_load(&onstack_got) != getppid() || fwd_call(SYS_getppid, 0, 0, 0) != getppid())
		return 4;
	return 0;
}

/* Threads that each make one call and return: each ends in start_thread's
 * exit.  Created and joined one at a time, so the first one's exit is
 * patched before the second is created. */
enum { THREADS = 40 };

static void *one_call(void *arg)
{
	(void)arg;
	(void)getppid();
	return NULL;
}

static int threads_role(void)
{
	for (int i = 0; i < THREADS; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, one_call, NULL) || pthread_join(th, NULL))
			return 2;
	}
	return 43;
}

/* The statistics' "trapping" counts, summed over the mappings */
static long long trapping_total(const char *stats)
{
	char buf[1 << 16];
	long long n = 0;

	if (!t_stats_read(stats, buf, sizeof(buf)))
		return -1;
	for (char *p = buf; (p = strstr(p, "\"trapping\": ")); p += 12)
		n += atoll(p + 12);
	return n;
}

/* Runs `self ROLE` natively, detached in sud mode, and detached in rewrite
 * mode under strace (its SIGSYS and membarrier calls into trace, --stats
 * into stats); each must exit with want.  Returns the trace, open (NULL if
 * strace wrote none). */
static FILE *three_ways(const char *self, const char *role, int want, char *stats, char *trace, size_t len)
{
	const char *bin = getenv("DETACH_BIN");
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s", self, role);
	st = t_run_status(cmd);
	t_check(st == want, "%s natively: status %d", role, st);
	snprintf(cmd, sizeof(cmd), "%s run -c 1 --mode sud -- %s %s 2>/dev/null", bin, self, role);
	st = t_run_status(cmd);
	t_check(st == want, "%s in sud mode: status %d", role, st);

	snprintf(stats, len, "/tmp/detach-test-%d-%s.json", getpid(), role);
	snprintf(trace, len, "/tmp/detach-test-%d-%s.strace", getpid(), role);
	snprintf(cmd, sizeof(cmd),
		 "strace -f -qq -e trace=membarrier -e signal=SIGSYS -o %s %s run -c 1 --mode rewrite "
		 "--stats %s -- %s %s 2>/dev/null", trace, bin, stats, self, role);
	st = t_run_status(cmd);
	t_check(st == want, "%s in rewrite mode: status %d", role, st);
	return fopen(trace, "r");
}

static void exit_site(const char *self)
{
	char stats[128], trace[128], line[1024];
	int sigsys = 0, sync_after = 0, last_exit_group = 0;
	FILE *f = three_ways(self, "exit", 37, stats, trace, sizeof(stats));

	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "SYS_USER_DISPATCH")) {
			sigsys++;
			last_exit_group = strstr(line, "si_syscall=__NR_exit_group") != NULL;
			sync_after = 0;
		} else if (strstr(line, "MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE") && !strstr(line, "REGISTER")) {
			sync_after++;
		}
	}
	if (f)
		fclose(f);
	long long traps = t_stats_value(stats, "traps"), retraps = t_stats_value(stats, "retraps");
	long long rewritten = t_stats_value(stats, "sites_rewritten"), window = t_stats_value(stats, "sites_window");
	long long trapping = trapping_total(stats);
	printf("rewrite mode: the kernel delivered %d SIGSYS, the last for exit_group: %s, %d membarrier "
	       "SYNC_CORE after it; statistics: %lld traps, %lld retraps, %lld sites rewritten (%lld with a "
	       "window), %lld left trapping\n", sigsys, last_exit_group ? "yes" : "no", sync_after, traps, retraps,
	       rewritten, window, trapping);
	t_check(sigsys == traps + retraps && sigsys >= 2, "%d SIGSYS, %lld traps", sigsys, traps);
	t_check(last_exit_group && sync_after == 2, "_exit's exit_group site was not patched at its trap");
	t_check(trapping == 0, "%lld sites left trapping", trapping);
	t_check(rewritten == traps && window >= 1, "%lld sites rewritten for %lld traps", rewritten, traps);
	unlink(stats);
	unlink(trace);
}

/* The reader meets the int3 of the site's jump: strace -i, the int3s met
 * at the site only (the address its role says), not the proxy's */
static void guard(const char *self)
{
	const char *bin = getenv("DETACH_BIN");
	char trace[128], cmd[1024], out[512], *p;
	uintptr_t site = 0;
	int int3, st;

	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-guard.strace", getpid());
	snprintf(cmd, sizeof(cmd),
		 "strace -f -i --seccomp-bpf -qq -e trace=none -e signal=SIGTRAP -o %s %s run -c 1 --mode rewrite "
		 "--select first -- %s guard", trace, bin, self);
	st = t_run_output(cmd, out, sizeof(out));
	fputs(out, stdout);
	t_check(st == 41, "guard run: status %d (41: the reader got its byte)", st);
	if ((p = strstr(out, "site 0x")))
		site = strtoul(p + 5, NULL, 16);
	t_check(site != 0, "guard run: no site line in its output");
	int3 = t_strace_int3s_at(trace, site);
	printf("guard: the kernel delivered %d SIGTRAP for an int3 at the site (the reader returned into the jump), "
	       "%d in all\n", int3, t_strace_int3s(trace));
	t_check(int3 == 1, "%d int3 met at the site, want 1", int3);
	unlink(trace);
}

/* A trap at the stub's own `syscall`: a retrap of the site, never a site
 * of its own (strace: the SIGSYS at an address that is not the site's) */
static void retrap(const char *self)
{
	const char *bin = getenv("DETACH_BIN");
	char stats[128], trace[128], cmd[1024], out[512], map[400] = "", *p;
	unsigned long stub = 0;
	int st, sigsys, at = 0;

	snprintf(stats, sizeof(stats), "/tmp/detach-test-%d-retrap.json", getpid());
	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-retrap.strace", getpid());
	snprintf(cmd, sizeof(cmd),
		 "strace -f -qq -e trace=none -e signal=SIGSYS -o %s %s run -c 1 --mode rewrite --stats %s -- %s retrap "
		 "2>/dev/null", trace, bin, stats, self);
	st = t_run_output(cmd, out, sizeof(out));
	fputs(out, stdout);
	t_check(st == 0, "retrap run: status %d", st);
	if ((p = strstr(out, "stub 0x")) && sscanf(p, "stub %lx %n", &stub, &at) == 1 && at) {
		snprintf(map, sizeof(map), "%s", p + at);
		map[strcspn(map, "\n")] = '\0';
	}
	t_check(stub && map[0], "retrap run: no stub line in its output");
	sigsys = t_strace_sigsys(trace, NULL);
	long long traps = t_stats_value(stats, "traps"), retraps = t_stats_value(stats, "retraps");
	char buf[1 << 16], key[4200];
	long long own = -1;
	snprintf(key, sizeof(key), "\"%s\": {", self);
	if (t_stats_read(stats, buf, sizeof(buf)) && (p = strstr(buf, key)) && (p = strstr(p, "\"trapping\": ")))
		own = atoll(p + 12);
	printf("retrap: the kernel delivered %d SIGSYS; statistics (first thread): %lld traps, %lld retraps; "
	       "%lld of the test's own sites left trapping\n", sigsys, traps, retraps, own);
	t_check(retraps >= 1, "the call on the alternate stack made no retrap");
	t_check(own == 0, "%lld of the test's sites left trapping", own);
	/* the stub's `syscall` is no site: the statistics' sites name no
	 * mapping of the stub (where it lay in this run: "[anon]" on a
	 * kernel that does not name the runtime's anonymous mappings, else
	 * "[anon:detach stubs]"; the program has no code of its own in
	 * anonymous memory), and no site was refused as "not a syscall
	 * instruction" */
	snprintf(key, sizeof(key), "\"%s\": {", map);
	t_check(!map[0] || !t_stats_has(stats, key), "a trap at the stub's own syscall was taken for a site (in %s)",
		map);
	t_check(!t_stats_has(stats, "syscall instruction"), "a site was refused as not a syscall instruction");
	unlink(stats);
	unlink(trace);
}

/* start_thread's exit is patched at its first trap: of THREADS threads'
 * exits the kernel delivers SIGSYS for one only (strace), and the
 * membarrier SYNC_CORE calls of its patch follow that SIGSYS. */
static void thread_exits(const char *self)
{
	char stats[128], trace[128], line[1024];
	int exits = 0, sync_after_exit = 0;
	FILE *f = three_ways(self, "threads", 43, stats, trace, sizeof(stats));
	bool after_exit = false;
	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "SYS_USER_DISPATCH")) {
			after_exit = strstr(line, "si_syscall=__NR_exit,") != NULL;
			exits += after_exit;
		} else if (after_exit && strstr(line, "MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE") &&
			   !strstr(line, "REGISTER")) {
			sync_after_exit++;
		}
	}
	if (f)
		fclose(f);
	long long rewritten = t_stats_value(stats, "sites_rewritten"), window = t_stats_value(stats, "sites_window");
	printf("threads: of %d thread exits the kernel delivered SIGSYS for %d, %d membarrier SYNC_CORE "
	       "after it; statistics: %lld sites rewritten (%lld with a window), %lld left trapping\n", THREADS,
	       exits, sync_after_exit, rewritten, window, trapping_total(stats));
	t_check(exits == 1, "%d of %d thread exits trapped, want 1", exits, THREADS);
	t_check(sync_after_exit == 2, "start_thread's exit was not patched at its trap");
	unlink(stats);
	unlink(trace);
}

int main(int argc, char **argv)
{
	char self[4096];

	if (argc > 1 && !strcmp(argv[1], "exit"))
		return exit_role();
	if (argc > 1 && !strcmp(argv[1], "guard"))
		return guard_role();
	if (argc > 1 && !strcmp(argv[1], "retrap"))
		return retrap_role();
	if (argc > 1 && !strcmp(argv[1], "threads"))
		return threads_role();
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (system("strace -V >/dev/null 2>&1") != 0)
		t_skip("strace is not installed (tools/install-deps.sh)");
	if (!t_self_exe(self, sizeof(self)))
		t_skip("no /proc/self/exe");
	exit_site(self);
	guard(self);
	retrap(self);
	thread_exits(self);
	return t_done();
}
