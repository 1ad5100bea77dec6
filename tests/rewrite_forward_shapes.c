/* Description: the shapes of a forward window (rewrite.c, find_forward)
 * that rewrite_forward_window does not make, each built here in asm and
 * run natively, detached in sud mode and detached in the default mode
 * (rewrite) under strace, which counts the kernel's SIGSYS at the site and
 * the membarrier SYNC_CORE calls of its patch after it:
 *  - guarded / noguard: `syscall; test %eax,%eax; cmp $-4096,%rax` has
 *    inner boundaries at window offsets 2 and 4, whose int3s need a stub
 *    about 830 MiB below the code.  In the executable (PIE) one is found:
 *    of 3 thread exits at the site only the first traps, then its patch.
 *    The same bytes copied to 4 MiB (where a non-PIE executable lies) have
 *    none: the site is refused, never left unguarded (NO_GUARD), so each
 *    of 4 thread exits and the final exit_group trap, the bytes stay
 *    `0f 05`, the statistics list it as trapping with its reason; and a
 *    thread blocked in read() there (--select first) when the detached
 *    first thread's exit meets the site returns normally (no SIGTRAP).
 *  - jmp32: `syscall; jmp rel32` is moved, the jmp kept as a jmp rel32 to
 *    its target: after a thread's exit patched it, the detached thread's
 *    getppid() there returns through the stub to that target.
 *  - jmpstart: `L: mov 16(%rbx),%eax; syscall; jmp L` (the jmp's target is
 *    the window's first byte, which becomes the jump to the stub): the
 *    detached thread loops through the stub on getppid until another
 *    thread stores exit_group's number, without a trap.
 *  - jmpinside: the same with `jmp L+2` (inside the mov): refused, each
 *    thread exit traps.  branchinto: a pure forward window with a direct
 *    jmp elsewhere onto syscall+2: refused (branch_into), each exit traps.
 *  - trapip: a seccomp filter's SECCOMP_RET_TRAP for exit_group at a
 *    forward site (patched by a thread's exit): the call goes to the
 *    stub's own `syscall` and traps there (strace: that SIGSYS's address
 *    is the stub's, not the site's); the filter sees the site's end as
 *    instruction_pointer (rewrite_trap_ip), and the program's SIGSYS
 *    handler gets si_call_addr = the site's end, but uc rip (and rcx) in
 *    the stub, just after its own `syscall`, as docs/runtime.md says;
 *    natively and in sud mode both are the site's end.  The handler's rax
 *    is the call's result there too.
 * FWDSHAPES_ONLY=ROLE[,ROLE...] runs those parts only.
 * Timeout: 180 */
#include "helpers/t_detach.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <ucontext.h>

typedef long (*call_fn)(long nr, long a1, long a2, long a3);

/* Each shape sits between 1 KiB of int3s: branch_into reads 1 KiB either
 * side of a site for anything that could be a direct branch onto an inner
 * boundary, and must find only the shape's own bytes there. */
#define PAD "	.skip 1100, 0xcc\n"

/* ng_call(nr, a1, a2, a3): the syscall is a branch target after a jump
 * (nothing before it to move), then `test %eax,%eax` (2 bytes: a boundary
 * at window offset 4) and glibc's error test.  Position-independent: also
 * copied to LOW. */
long ng_call(long nr, long a1, long a2, long a3);
long j32_call(long nr, long a1, long a2, long a3);
long lp_call(const long *cell, long a1);
long in_call(const long *cell, long a1);
long bi_call(long nr, long a1, long a2, long a3);
long tp_call(long nr, long a1, long a2, long a3);
extern const unsigned char ng_site[], ng_end[], j32_site[], lp_site[], lp_start[], in_site[], in_start[],
	bi_site[], tp_site[];
__asm__(".text\n"
	PAD
	"ng_call:\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp ng_site\n"
	"ng_site:\n"
	"	syscall\n"
	"	testl %eax, %eax\n"
	"	cmpq $-4096, %rax\n"
	"	ja 1f\n"
	"	ret\n"
	"1:	ret\n"
	"ng_end:\n"
	PAD
	/* syscall; jmp rel32 to j32_target.  The bytes after the jmp are
	 * another path's: -1000 if the stub went on past the window. */
	"j32_call:\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp j32_site\n"
	"j32_site:\n"
	"	syscall\n"
	"	.byte 0xe9\n"
	"	.long j32_target - (j32_site + 7)\n"
	"	movq $-1000, %rax\n"
	"	ret\n"
	"	.skip 64, 0xcc\n"
	"j32_target:\n"
	"	ret\n"
	PAD
	/* lp_call(cell, a1): loops on the call whose number cell[2] holds,
	 * read at every pass; never returns (a thread's exit, or exit_group) */
	"lp_call:\n"
	"	pushq %rbx\n"
	"	movq %rdi, %rbx\n"
	"	movq %rsi, %rdi\n"
	"	jmp lp_start\n"
	"lp_start:\n"
	"	movl 16(%rbx), %eax\n"
	"lp_site:\n"
	"	syscall\n"
	"	jmp lp_start\n"
	"	popq %rbx\n"
	"	ret\n"
	PAD
	/* the same, its jmp going to lp_start+2 (the mov's displacement) */
	"in_call:\n"
	"	pushq %rbx\n"
	"	movq %rdi, %rbx\n"
	"	movq %rsi, %rdi\n"
	"	jmp in_start\n"
	"in_start:\n"
	"	movl 16(%rbx), %eax\n"
	"in_site:\n"
	"	syscall\n"
	"	jmp in_start + 2\n"
	"	popq %rbx\n"
	"	ret\n"
	PAD
	/* a pure forward window, and a jmp onto syscall+2 (never run) */
	"bi_call:\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp bi_site\n"
	"bi_site:\n"
	"	syscall\n"
	"bi_after:\n"
	"	cmpq $-4096, %rax\n"
	"	ja 1f\n"
	"	ret\n"
	"1:	ret\n"
	"	jmp bi_after\n"
	PAD
	/* _exit's shape: syscall; cmp $-4096,%rax (8 bytes) */
	"tp_call:\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp tp_site\n"
	"tp_site:\n"
	"	syscall\n"
	"	cmpq $-4096, %rax\n"
	"	ja 1f\n"
	"	ret\n"
	"1:	ret\n"
	PAD);

/* ---- the roles (the program run three ways) ---------------------------- */

/* Says where site is: "site ADDR OFFSET MAPPING", the offset and mapping as
 * the statistics' sites name them (an unnamed mapping: [anon]) */
static void say_site(const void *site)
{
	char name[400];
	unsigned long off;

	if (t_map_of((uintptr_t)site, name, sizeof(name), &off))
		printf("site %#lx %#lx %s\n", (unsigned long)site, off, name);
	fflush(stdout);
}

/* Threads created and joined one at a time, each ending itself with exit
 * at a site (through fn, or the loop on cell) */
static void *exit_through(void *arg)
{
	((call_fn)arg)(SYS_exit, 0, 0, 0);
	return NULL;
}

static const long exit_cell[3] = { 0, 0, SYS_exit };

static void *exit_loop(void *arg)
{
	((long (*)(const long *, long))arg)(exit_cell, 0);
	return NULL;
}

static int exits(void *(*fn)(void *), void *arg, int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, fn, arg) || pthread_join(th, NULL))
			return -1;
	}
	return 0;
}

static bool is_syscall(const unsigned char *p)
{
	return ((volatile const unsigned char *)p)[0] == 0x0f && ((volatile const unsigned char *)p)[1] == 0x05;
}

#define LOW ((void *)0x400000)

/* ng_call's bytes at 4 MiB, where a non-PIE executable lies: a stub about
 * 830 MiB below would be below 0 (NULL if the page is taken) */
static call_fn low_code(void)
{
	unsigned char *p = mmap(LOW, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
				-1, 0);

	if (p != LOW)
		return NULL;
	memset(p, 0xcc, 4096);
	memcpy(p, (const void *)ng_call, (size_t)(ng_end - (const unsigned char *)ng_call));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return NULL;
	return (call_fn)p;
}

static const unsigned char *low_site(call_fn fn)
{
	return (const unsigned char *)fn + (ng_site - (const unsigned char *)ng_call);
}

/* guarded: 3 thread exits at ng_site, then exit_group there (status 44) */
static int guarded_role(void)
{
	say_site(ng_site);
	if (exits(exit_through, (void *)ng_call, 3))
		return 2;
	ng_call(SYS_exit_group, 44, 0, 0);
	return 6;
}

/* noguard: the same at the copy at 4 MiB (status 45); the site's bytes
 * must still be a `syscall` after the exits */
static int noguard_role(void)
{
	call_fn fn = low_code();

	if (!fn)
		return 9;
	say_site(low_site(fn));
	if (exits(exit_through, (void *)fn, 4))
		return 2;
	if (!is_syscall(low_site(fn)))
		return 3;
	fn(SYS_exit_group, 45, 0, 0);
	return 6;
}

static int pipefd[2];
static _Atomic pid_t reader_tid;
static call_fn reader_fn;

/* Not intercepted (--select first): blocks in read() at the site at 4 MiB;
 * 41 if it got the byte and the site is still a `syscall` */
static void *reader(void *arg)
{
	char c = 0;
	long r;

	(void)arg;
	atomic_store(&reader_tid, (pid_t)syscall(SYS_gettid));
	r = reader_fn(SYS_read, pipefd[0], (long)&c, 1);
	_exit(r == 1 && c == 'x' ? (is_syscall(low_site(reader_fn)) ? 41 : 42) : 40);
}

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000 && !t_first_thread_ended(); i++)
		usleep(500);
	if (!t_first_thread_ended())
		_exit(7);
	if (write(pipefd[1], "x", 1) != 1)
		_exit(4);
	return NULL;
}

/* noguard_reader (--select first): the detached first thread's exit at
 * the site at 4 MiB while the reader is in the kernel there (/proc's pc:
 * the site's end); the reader ends the process with 41 */
static int noguard_reader_role(void)
{
	pthread_t r, w;
	uintptr_t end;

	if (!(reader_fn = low_code()))
		return 9;
	end = (uintptr_t)low_site(reader_fn) + 2;
	say_site(low_site(reader_fn));
	if (pipe(pipefd))
		return 2;
	pthread_create(&r, NULL, reader, NULL);
	while (!atomic_load(&reader_tid))
		usleep(100);
	if (!t_task_in_syscall_at(atomic_load(&reader_tid), SYS_read, end))
		return 5;
	printf("reader in read(2) at pc %#lx, the site's end\n", (unsigned long)end);
	fflush(stdout);
	pthread_create(&w, NULL, writer, NULL);
	pthread_detach(w);
	pthread_detach(r);
	reader_fn(SYS_exit, 0, 0, 0);
	return 6;
}

/* jmp32: a thread's exit at j32_site, then 1000 getppid() there, each of
 * which must come back through the jmp's target (status 46) */
static int jmp32_role(void)
{
	long want = getppid();

	say_site(j32_site);
	if (exits(exit_through, (void *)j32_call, 1))
		return 2;
	for (int i = 0; i < 1000; i++) {
		long r = j32_call(SYS_getppid, 0, 0, 0);
		if (r != want) {
			printf("j32_call(getppid) = %ld, want %ld\n", r, want);
			return r == -1000 ? 3 : 4;
		}
	}
	return 46;
}

static long loop_cell[3];

/* Stores exit_group's number in the detached thread's loop after 30 ms */
static void *stopper(void *arg)
{
	(void)arg;
	usleep(30000);
	__atomic_store_n(&loop_cell[2], SYS_exit_group, __ATOMIC_RELEASE);
	return NULL;
}

/* jmpstart: a thread's exit at lp_site, then the first thread loops there
 * on getppid until the stopper makes it exit_group(47) */
static int jmpstart_role(void)
{
	pthread_t s;

	say_site(lp_site);
	if (exits(exit_loop, (void *)lp_call, 3))
		return 2;
	loop_cell[2] = SYS_getppid;
	if (pthread_create(&s, NULL, stopper, NULL))
		return 2;
	lp_call(loop_cell, 47);
	return 6;
}

/* jmpinside: 4 thread exits at in_site (status 48) */
static int jmpinside_role(void)
{
	say_site(in_site);
	if (exits(exit_loop, (void *)in_call, 4))
		return 2;
	return is_syscall(in_site) ? 48 : 3;
}

/* branchinto: 4 thread exits at bi_site (status 49) */
static int branchinto_role(void)
{
	say_site(bi_site);
	if (exits(exit_through, (void *)bi_call, 4))
		return 2;
	return is_syscall(bi_site) ? 49 : 3;
}

static volatile long h_code = -1, h_errno = -1, h_nr = -1;
static volatile uintptr_t h_addr, h_rip, h_rcx;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	h_code = si->si_code;
	h_errno = si->si_errno;
	h_nr = si->si_syscall;
	h_addr = (uintptr_t)si->si_call_addr;
	h_rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	h_rcx = (uintptr_t)uc->uc_mcontext.gregs[REG_RCX];
	uc->uc_mcontext.gregs[REG_RAX] = 1234;  /* the call's result */
}

/* trapip: a thread's exit patches tp_site; then a filter traps
 * exit_group(99) with data 1 when its instruction_pointer is the site's
 * end, 2 elsewhere; the handler's rax (1234) is the call's result.
 * Prints what the handler saw; status 50. */
static int trapip_role(void)
{
	uintptr_t end = (uintptr_t)tp_site + 2;
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 0, 8),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 99, 0, 6),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)end, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(end >> 32), 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	char map[400];
	int32_t rel;

	say_site(tp_site);
	if (exits(exit_through, (void *)tp_call, 1))
		return 2;
	bool patched = ((volatile const unsigned char *)tp_site)[0] == 0xe9;
	if (sigaction(SIGSYS, &sa, NULL) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 8;
	long r = tp_call(SYS_exit_group, 99, 0, 0);
	/* the stub the site's jump goes to: its slot holds h_rip */
	memcpy(&rel, tp_site + 1, 4);
	uintptr_t stub = patched ? (uintptr_t)tp_site + 5 + (uintptr_t)(intptr_t)rel : 0;
	t_map_of(h_rip, map, sizeof(map), NULL);
	printf("trap result %ld si_code %ld si_errno %ld si_syscall %ld si_call_addr %#lx rip %#lx rcx %#lx "
	       "end %#lx patched %d stub %#lx rip_in_stub %d rip_after_syscall %d rip_map %s\n", r, h_code, h_errno,
	       h_nr, (unsigned long)h_addr, (unsigned long)h_rip, (unsigned long)h_rcx, (unsigned long)end, patched,
	       (unsigned long)stub, stub && h_rip - stub < 64,
	       h_rip > 2 && is_syscall((const unsigned char *)h_rip - 2), map);
	fflush(stdout);
	return 50;
}

/* ---- the judge ----------------------------------------------------------- */

/* What one run of a role showed */
struct run {
	int st;
	uintptr_t site;                 /* from its "site" line */
	unsigned long off;
	char map[400];
	char out[4096];                 /* its stdout */
	char out_native[4096], out_sud[4096];
	int sigsys_site;                /* SIGSYS (SUD) at the site */
	int sync_after;                 /* SYNC_CORE membarriers of the same thread after one */
	int int3;                       /* SIGTRAP SI_KERNEL in the site's first 16 bytes */
	int exit_group_elsewhere;       /* SIGSYS for exit_group not at the site */
	uintptr_t exit_group_addr[8];   /* their si_call_addr */
	char stats[128];
};

static void parse_site(struct run *r)
{
	char *s = strstr(r->out, "site 0x");
	unsigned long a = 0;
	int at = 0;

	r->site = 0;
	r->map[0] = '\0';
	if (s && sscanf(s, "site %lx %lx %n", &a, &r->off, &at) >= 2 && at) {
		r->site = a;
		snprintf(r->map, sizeof(r->map), "%s", s + at);
		r->map[strcspn(r->map, "\n")] = '\0';
	}
}

/* The kernel's SIGSYS and SIGTRAP and the membarrier calls in strace's
 * output (-f: each line starts with the thread's tid; -i: then the
 * instruction pointer in brackets) */
static void parse_trace(const char *trace, struct run *r)
{
	char line[1024], at[64];
	enum { TIDS = 64 };
	int tids[TIDS] = { 0 }, ntids = 0;
	FILE *f = fopen(trace, "r");

	snprintf(at, sizeof(at), "si_call_addr=%#lx,", (unsigned long)(r->site + 2));
	while (f && fgets(line, sizeof(line), f)) {
		int tid = atoi(line), k;
		for (k = 0; k < ntids && tids[k] != tid; k++)
			;
		if (strstr(line, "SYS_USER_DISPATCH")) {
			bool here = r->site && strstr(line, at);
			r->sigsys_site += here;
			if (!here && strstr(line, "si_syscall=__NR_exit_group,")) {
				char *p = strstr(line, "si_call_addr=");
				if (p && r->exit_group_elsewhere < 8)
					r->exit_group_addr[r->exit_group_elsewhere++] = strtoul(p + 13, NULL, 16);
			}
			/* a SIGSYS at the site opens its thread's count */
			if (here && k == ntids && ntids < TIDS)
				tids[ntids++] = tid;
			else if (!here && k < ntids)
				tids[k] = -1;
		} else if (strstr(line, "MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE") && !strstr(line, "REGISTER") &&
			   k < ntids) {
			r->sync_after++;
		} else if (r->site && t_strace_int3_at(line, r->site)) {
			r->int3++;      /* the site's only, not the proxy's */
		}
	}
	if (f)
		fclose(f);
}

/* The counts of the statistics' sites for mapping map */
struct counts {
	long long exact, window, trapping, traps_trapping;
	long long site_traps;           /* the site's own entry in trapping_sites, -1: none */
	char why[200];
};

static long long after(const char *from, const char *key)
{
	const char *p = strstr(from, key);

	return p ? atoll(p + strlen(key)) : -1;
}

static bool map_counts(const struct run *r, struct counts *c)
{
	char buf[1 << 16], key[520], off[40], *m, *end, *s;

	memset(c, 0, sizeof(*c));
	c->site_traps = -1;
	if (!t_stats_read(r->stats, buf, sizeof(buf)))
		return false;
	snprintf(key, sizeof(key), "\"%s\": {", r->map);
	if (!(m = strstr(buf, key)))
		return false;
	if ((end = strstr(m + strlen(key), "]")))       /* the mapping's trapping_sites end */
		end[1] = '\0';
	c->exact = after(m, "\"exact\": ");
	c->window = after(m, "\"window\": ");
	c->trapping = after(m, "\"trapping\": ");
	c->traps_trapping = after(m, "\"traps_trapping\": ");
	snprintf(off, sizeof(off), "\"offset\": \"%#lx\"", r->off);
	if ((s = strstr(m, off))) {
		c->site_traps = after(s, "\"traps\": ");
		if ((s = strstr(s, "\"why\": \""))) {
			s += 8;
			snprintf(c->why, sizeof(c->why), "%.*s", (int)strcspn(s, "\""), s);
		}
	}
	return true;
}

/* Runs role natively and in sud mode (each must end with want), then
 * detached in the default mode under strace with --stats (extra: more
 * options of `detach run`); the last run's evidence in r.  Its statistics
 * must say the mode was rewrite, if need_stats (a process whose detached
 * first thread ended before a thread the runtime does not see ended it may
 * have written none). */
static void three_ways(const char *self, const char *role, const char *extra, int want, struct run *r,
		       bool need_stats)
{
	const char *bin = getenv("DETACH_BIN");
	char cmd[2048], trace[128];

	memset(r, 0, sizeof(*r));
	snprintf(cmd, sizeof(cmd), "%s %s", self, role);
	r->st = t_run_output(cmd, r->out, sizeof(r->out));
	memcpy(r->out_native, r->out, sizeof(r->out));
	t_check(r->st == want, "%s natively: status %d, want %d", role, r->st, want);
	snprintf(cmd, sizeof(cmd), "%s run -c 1 --mode sud %s -- %s %s", bin, extra, self, role);
	r->st = t_run_output(cmd, r->out, sizeof(r->out));
	memcpy(r->out_sud, r->out, sizeof(r->out));
	t_check(r->st == want, "%s in sud mode: status %d, want %d", role, r->st, want);

	snprintf(r->stats, sizeof(r->stats), "/tmp/detach-test-%d-%s.json", getpid(), role);
	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-%s.strace", getpid(), role);
	unlink(r->stats);
	snprintf(cmd, sizeof(cmd),
		 "strace -f -i -qq --seccomp-bpf -e trace=membarrier -e signal=SIGSYS,SIGTRAP -o %s %s run -c 1 "
		 "--stats %s %s -- %s %s", trace, bin, r->stats, extra, self, role);
	r->st = t_run_output(cmd, r->out, sizeof(r->out));
	parse_site(r);
	parse_trace(trace, r);
	unlink(trace);
	t_check(r->st == want, "%s in the default mode: status %d, want %d", role, r->st, want);
	if (need_stats || t_stats_read(r->stats, cmd, sizeof(cmd)))
		t_check(t_stats_has(r->stats, "\"mode\": \"rewrite\""), "%s: the default mode is not rewrite here",
			role);
	t_check(r->site != 0, "%s: no site line in its output", role);
}

/* A shape the runtime must patch at its first trap: one SIGSYS at the
 * site, the two SYNC_CORE membarriers of its patch after it (the same
 * thread), no other trap there, the statistics' window for its mapping */
static void patched(const char *self, const char *role, int want)
{
	struct run r;
	struct counts c;

	three_ways(self, role, "", want, &r, true);
	bool have = map_counts(&r, &c);
	printf("%-12s site %#lx (%s +%#lx): the kernel delivered %d SIGSYS there, %d membarrier SYNC_CORE after "
	       "it; statistics: %lld exact, %lld window, %lld trapping\n", role, (unsigned long)r.site, r.map, r.off,
	       r.sigsys_site, r.sync_after, c.exact, c.window, c.trapping);
	t_check(have, "%s: no statistics for the mapping %s", role, r.map);
	t_check(r.sigsys_site == 1, "%s: %d SIGSYS at the site, want 1 (patched at its first trap)", role,
		r.sigsys_site);
	t_check(r.sync_after == 2, "%s: %d SYNC_CORE after the site's trap, want 2 (its patch)", role, r.sync_after);
	t_check(c.window == 1 && c.trapping == 0 && c.exact == 0, "%s: %lld window, %lld trapping, want 1 and 0",
		role, c.window, c.trapping);
	unlink(r.stats);
}

/* A shape the runtime must refuse: every exit there traps (traps SIGSYS),
 * no patch follows any, the site listed as trapping, for why */
static void refused(const char *self, const char *role, const char *extra, int want, int traps, const char *why)
{
	struct run r;
	struct counts c;

	three_ways(self, role, extra, want, &r, true);
	bool have = map_counts(&r, &c);
	printf("%-12s site %#lx (%s +%#lx): the kernel delivered %d SIGSYS there, %d membarrier SYNC_CORE after "
	       "them, %d SIGTRAP there; statistics: %lld window, %lld trapping, the site's traps %lld, why \"%s\"\n", role,
	       (unsigned long)r.site, r.map, r.off, r.sigsys_site, r.sync_after, r.int3, c.window, c.trapping,
	       c.site_traps, c.why);
	t_check(have, "%s: no statistics for the mapping %s", role, r.map);
	t_check(r.sigsys_site == traps, "%s: %d SIGSYS at the site, want %d (refused: each call traps)", role,
		r.sigsys_site, traps);
	t_check(r.sync_after == 0, "%s: %d SYNC_CORE after a trap at the site: patched", role, r.sync_after);
	t_check(r.int3 == 0, "%s: %d int3 met at the site", role, r.int3);
	t_check(c.window == 0 && c.trapping == 1, "%s: %lld window, %lld trapping, want 0 and 1", role, c.window,
		c.trapping);
	t_check(c.site_traps == traps && strstr(c.why, why),
		"%s: the site's entry: %lld traps, why \"%s\"; want %d, \"%s\"", role, c.site_traps, c.why, traps, why);
	unlink(r.stats);
}

static unsigned long field(const char *out, const char *key)
{
	const char *p = strstr(out, key);

	return p ? strtoul(p + strlen(key), NULL, 0) : (unsigned long)-1;
}

/* The program's SIGSYS handler of its filter's TRAP at a forward site */
static uintptr_t trapip_saw(const char *out, const char *how)
{
	const char *line = strstr(out, "trap ");
	uintptr_t end = field(out, "site ") + 2;        /* this run's: an address of its own */

	printf("trapip %s: %s", how, line ? line : "(no trap line)\n");
	t_check(field(out, "trap result ") == 1234, "trapip %s: the handler's rax is not the call's result", how);
	/* the filter saw the site's end (data 1), as the kernel does */
	t_check(field(out, "si_code ") == 1 && field(out, "si_errno ") == 1,
		"trapip %s: the filter did not see the site's end as instruction_pointer (si_errno %ld)", how,
		(long)field(out, "si_errno "));
	t_check(field(out, "si_call_addr ") == end, "trapip %s: si_call_addr is not the site's end", how);
	return end;
}

static void trapip(const char *self)
{
	struct run r;
	struct counts c;
	int at_rip = 0;

	three_ways(self, "trapip", "", 50, &r, true);
	uintptr_t end = r.site + 2, rip = field(r.out, " rip ");
	/* natively and in sud mode (the site not rewritten) the handler's rip
	 * and rcx are the site's end too */
	uintptr_t e = trapip_saw(r.out_native, "natively");
	t_check(field(r.out_native, " rip ") == e && field(r.out_native, "rcx ") == e,
		"trapip natively: rip or rcx is not the site's end");
	e = trapip_saw(r.out_sud, "sud mode");
	t_check(field(r.out_sud, " rip ") == e && field(r.out_sud, "rcx ") == e,
		"trapip in sud mode: rip or rcx is not the site's end");
	trapip_saw(r.out, "rewrite");
	for (int i = 0; i < r.exit_group_elsewhere; i++)
		at_rip += r.exit_group_addr[i] == rip;
	bool have = map_counts(&r, &c);
	printf("trapip rewrite: the kernel delivered %d SIGSYS at the site (the thread's exit), %d SYNC_CORE "
	       "after it, %d for exit_group at the handler's rip; statistics: %lld window, %lld trapping\n",
	       r.sigsys_site, r.sync_after, at_rip, c.window, c.trapping);
	t_check(r.sigsys_site == 1 && r.sync_after == 2, "trapip: the site was not patched at the thread's exit");
	t_check(field(r.out, "patched ") == 1, "trapip: the site holds no jump");
	/* the handler's rip: in the site's stub, after its own `syscall`
	 * (docs/runtime.md), where the kernel's SIGSYS was; rcx the same */
	t_check(rip != end && field(r.out, "rip_in_stub ") == 1 && field(r.out, "rip_after_syscall ") == 1,
		"trapip: the handler's rip %#lx is not after the site's stub's syscall", (unsigned long)rip);
	t_check(at_rip == 1, "trapip: %d SIGSYS for exit_group at the handler's rip %#lx, want 1", at_rip,
		(unsigned long)rip);
	t_check(field(r.out, "rcx ") == rip, "trapip: the handler's rcx is not its rip (the stub's)");
	t_check(have && c.window == 1 && c.trapping == 0, "trapip: %lld window, %lld trapping in %s", c.window,
		c.trapping, r.map);
	unlink(r.stats);
}

/* FWDSHAPES_ONLY=ROLE[,ROLE...]: those parts only */
static bool part(const char *name)
{
	const char *only = getenv("FWDSHAPES_ONLY");
	size_t n = strlen(name);

	if (!only || !*only)
		return true;
	for (const char *p = only; *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int (*fn)(void); } roles[] = {
		{ "guarded", guarded_role }, { "noguard", noguard_role }, { "noguard_reader", noguard_reader_role },
		{ "jmp32", jmp32_role }, { "jmpstart", jmpstart_role }, { "jmpinside", jmpinside_role },
		{ "branchinto", branchinto_role }, { "trapip", trapip_role },
	};
	char self[4096];

	for (size_t i = 0; argc > 1 && i < sizeof(roles) / sizeof(roles[0]); i++)
		if (!strcmp(argv[1], roles[i].name))
			return roles[i].fn();
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	if (system("strace -V >/dev/null 2>&1") != 0)
		t_skip("strace is not installed (tools/install-deps.sh)");
	if (!t_self_exe(self, sizeof(self)))
		t_skip("no /proc/self/exe");
	if (part("guarded"))
		patched(self, "guarded", 44);
	if (part("noguard"))
		refused(self, "noguard", "", 45, 5, "no stub whose jump holds an int3 at syscall+2");
	if (part("noguard_reader")) {
		struct run r;
		three_ways(self, "noguard_reader", "--select first", 41, &r, false);
		printf("noguard_reader: status %d (41: the reader got its byte, the site still a syscall), %d SIGSYS "
		       "at the site, %d SIGTRAP there\n", r.st, r.sigsys_site, r.int3);
		t_check(r.sigsys_site == 1 && r.sync_after == 0, "noguard_reader: %d SIGSYS, %d SYNC_CORE after",
			r.sigsys_site, r.sync_after);
		t_check(r.int3 == 0, "noguard_reader: %d int3 met at the site", r.int3);
		unlink(r.stats);
	}
	if (part("jmp32"))
		patched(self, "jmp32", 46);
	if (part("jmpstart"))
		patched(self, "jmpstart", 47);
	if (part("jmpinside"))
		refused(self, "jmpinside", "", 48, 4, "no instruction to move");
	if (part("branchinto"))
		refused(self, "branchinto", "", 49, 4, "a branch may land inside the window");
	if (part("trapip"))
		trapip(self);
	return t_done();
}
