/* The tracer's tools of the window tests (helpers/t_window.h,
 * run_wait_frame_window): start the test's program under detach as its
 * workload, find a function of the libdetach.so it mapped, trace its
 * detached thread with an execution breakpoint at that function's entry,
 * read its memory, set its debug registers, and let it go. */
#ifndef DETACH_TESTS_T_WIN_TRACE_H
#define DETACH_TESTS_T_WIN_TRACE_H

#include "t_detach.h"
#include "runtime/thread.h"

#include <elf.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>

static pid_t t_win_traced;

static inline long t_win_peek(uintptr_t addr)
{
	long v = 0;
	struct iovec l = { &v, sizeof(v) }, r = { (void *)addr, sizeof(v) };

	if (process_vm_readv(t_win_traced, &l, 1, &r, 1, 0) != sizeof(v))
		fprintf(stderr, "reading %#lx of %d: %s\n", (unsigned long)addr, (int)t_win_traced, strerror(errno));
	return v;
}

#define T_WIN_DR(i) offsetof(struct user, u_debugreg[i])

static inline bool t_win_set_dr(int i, unsigned long v)
{
	if (ptrace(PTRACE_POKEUSER, t_win_traced, (void *)T_WIN_DR(i), (void *)v) == 0)
		return true;
	fprintf(stderr, "PTRACE_POKEUSER debug register %d = %#lx: %s\n", i, v, strerror(errno));
	return false;
}

/* DR7: breakpoint 0 on writes of 8 bytes (a wait frame), 1 on reads and
 * writes of len1 bytes (1 or 4: mb.intr or depth), 2 on execution (an
 * entry or a return address); watch enables 0 and 1, exec 2 */
static inline bool t_win_dr7_of(bool watch, int len1, bool exec)
{
	unsigned long v = 0;

	if (watch)
		v |= 1ul << 0 | 1ul << 16 | 2ul << 18                          /* L0, write, 8 bytes */
		     | 1ul << 2 | 3ul << 20 | (len1 == 4 ? 3ul : 0ul) << 22;   /* L1, read/write */
	if (exec)
		v |= 1ul << 4;                                                 /* L2, execution */
	return t_win_set_dr(7, v);
}

/* The libdetach.so that process pid mapped, mapped here (len bytes; NULL:
 * why says why), and its load bias (the address of its vaddr 0). */
static inline const unsigned char *t_win_lib(pid_t pid, uintptr_t *bias, size_t *len, char *why, size_t whylen)
{
	char path[64], line[512], lib[400] = "";
	unsigned long start = 0, end, off;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "r"))) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		char file[400] = "";
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %399s", &start, &end, &off, file) == 4 &&
		    off == 0 && strstr(file, "/libdetach.so")) {
			snprintf(lib, sizeof(lib), "%s", file);
			break;
		}
	}
	fclose(f);
	if (!lib[0]) {
		snprintf(why, whylen, "no libdetach.so mapped in %d", (int)pid);
		return NULL;
	}
	int fd = open(lib, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, whylen, "%s: %s", lib, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	const unsigned char *m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(why, whylen, "mmap %s: %s", lib, strerror(errno));
		return NULL;
	}
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(m + eh->e_phoff);
	uintptr_t first_load = UINTPTR_MAX;

	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first_load)
			first_load = ph[i].p_vaddr & ~(uintptr_t)4095;
	*bias = start - first_load;
	*len = st.st_size;
	return m;
}

/* The function of the mapped library m that contains vaddr v (name NULL),
 * or the one called name; NULL: none (*has_symtab false: stripped). */
static inline const Elf64_Sym *t_win_sym(const unsigned char *m, const char *name, uintptr_t v,
					 const char **sym_name, bool *has_symtab)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);

	*has_symtab = false;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		*has_symtab = true;
		const Elf64_Sym *sym = (const Elf64_Sym *)(m + sh[i].sh_offset);
		const char *names = (const char *)(m + sh[sh[i].sh_link].sh_offset);
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_size)
				continue;
			if (name ? !strcmp(names + sym[k].st_name, name) :
				   v - sym[k].st_value < sym[k].st_size) {
				*sym_name = names + sym[k].st_name;
				return &sym[k];
			}
		}
	}
	return NULL;
}

/* Function name's address and size in process pid: the libdetach.so it
 * mapped, its symbol table, its load base from /proc/PID/maps. */
static inline bool t_win_find(pid_t pid, const char *name, uintptr_t *addr, size_t *size, char *why,
			      size_t whylen)
{
	uintptr_t bias = 0;
	size_t len = 0;
	const char *found_name;
	bool symtab;
	const unsigned char *m = t_win_lib(pid, &bias, &len, why, whylen);

	if (!m)
		return false;
	const Elf64_Sym *s = t_win_sym(m, name, 0, &found_name, &symtab);
	if (s) {
		*addr = bias + s->st_value;
		*size = s->st_size;
	}
	munmap((void *)m, len);
	if (!s)
		snprintf(why, whylen, "libdetach.so: %s %s", symtab ? "no function in its symbol table:" :
			 "no symbol table (stripped), looking for", name);
	return s != NULL;
}

/* Where address a of process pid is, for a message: FUNCTION+0xOFF when a
 * function of libdetach.so contains it (a return address may lie in
 * another function than the one the test broke in: do_sigaltstack's is in
 * dt_trampoline_dispatch, dt_dispatch's tail call to it pushed none),
 * else the mapping it lies in (a rewritten site's stub is in an anonymous
 * mapping near the program's code, rewrite.c), else the bare address. */
static inline void t_win_where(pid_t pid, uintptr_t a, char *out, size_t outlen)
{
	char path[64], line[512], why[256];
	unsigned long start, end, off;
	uintptr_t bias = 0;
	size_t len = 0;
	const char *name;
	bool symtab;
	const unsigned char *m = t_win_lib(pid, &bias, &len, why, sizeof(why));
	FILE *f;

	snprintf(out, outlen, "%#lx", (unsigned long)a);
	if (m) {
		const Elf64_Sym *s = t_win_sym(m, NULL, a - bias, &name, &symtab);
		if (s)
			snprintf(out, outlen, "%s+%#lx", name, (unsigned long)(a - bias - s->st_value));
		munmap((void *)m, len);
		if (s)
			return;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char file[400] = "";
		int n = sscanf(line, "%lx-%lx %*s %lx %*s %*s %399s", &start, &end, &off, file);
		if (n >= 3 && a >= start && a < end) {
			if (file[0])
				snprintf(out, outlen, "%#lx (%s+%#lx)", (unsigned long)a, file,
					 (unsigned long)(a - start + off));
			else
				snprintf(out, outlen, "%#lx (the anonymous mapping at %#lx, +%#lx: a rewritten "
					 "site's stub?)", (unsigned long)a, start, (unsigned long)(a - start));
			break;
		}
	}
	fclose(f);
}

/* The parent of process pid, as the kernel has it (0: unreadable). */
static inline pid_t t_win_parent_of(pid_t pid)
{
	char path[64], line[256];
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PPid: %d", &ppid) == 1)
			break;
	fclose(f);
	return ppid;
}

static inline long t_win_ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The traced program (t_win_start): the child that runs detach, the
 * program's pid (the detached thread's tid), its proxy's tid and parent,
 * its stdin (in[1]) and stdout (f), the traced function's address and
 * size. */
struct t_win_prog {
	pid_t p, pid, proxy, ppid;
	int in[2], out[2];
	FILE *f;
	uintptr_t fa;
	size_t fsize;
};

/* Starts argv[0] under `detach run` as the workload (t_workload_ready's
 * line), finds fn in its libdetach.so, seizes it (EXITKILL: a tracer that
 * dies takes the program with it, so no detached thread is left holding
 * CPU 1), arms an execution breakpoint at fn's entry (debug register 2)
 * and sends its "g".  false: it did not start, fn was not found or it
 * could not be traced (checked; the program reaped).  *armed false: the
 * breakpoint could not be armed (checked; the program runs on). */
static inline bool t_win_start(char **argv, const char *fn, struct t_win_prog *pr, bool *armed)
{
	char *args[64], line[256] = "", why[512] = "";
	int st = 0, ws;

	memset(pr, 0, sizeof(*pr));
	*armed = false;
	t_detach_argv(args, NULL, NULL, argv[0], NULL);
	if ((pr->p = t_spawn_workload(args, pr->in, pr->out)) < 0) {
		perror("pipe or fork");
		exit(1);
	}
	pr->f = fdopen(pr->out[0], "r");
	if (!fgets(line, sizeof(line), pr->f) || sscanf(line, "%d %d", &pr->pid, &pr->proxy) != 2) {
		waitpid(pr->p, &st, 0);
		t_check(0, "the program said '%s', exit %d", line, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return false;
	}
	t_win_traced = pr->pid;
	pr->ppid = t_win_parent_of(pr->pid);
	if (!t_win_find(pr->pid, fn, &pr->fa, &pr->fsize, why, sizeof(why))) {
		kill(pr->pid, SIGKILL);
		waitpid(pr->p, &st, 0);
		t_check(0, "%s not found: %s", fn, why);
		return false;
	}
	if (ptrace(PTRACE_SEIZE, pr->pid, NULL, (void *)(long)PTRACE_O_EXITKILL)) {
		int e = errno;
		kill(pr->pid, SIGKILL);
		waitpid(pr->p, &st, 0);
		if (e == EPERM)
			t_skip("cannot trace the program (ptrace: EPERM; kernel.yama.ptrace_scope?)");
		t_check(0, "PTRACE_SEIZE %d: %s", (int)pr->pid, strerror(e));
		return false;
	}
	/* stopped (it waits for "g" in its read) to arm the entry breakpoint */
	ptrace(PTRACE_INTERRUPT, pr->pid, NULL, NULL);
	while (waitpid(pr->pid, &ws, __WALL) == pr->pid && WIFSTOPPED(ws) && ws >> 16 != PTRACE_EVENT_STOP)
		ptrace(PTRACE_CONT, pr->pid, NULL, (void *)(long)WSTOPSIG(ws));
	*armed = WIFSTOPPED(ws) && t_win_set_dr(2, pr->fa) && t_win_dr7_of(false, 0, true);
	t_check(*armed, "could not arm the breakpoint at %s (%#lx)", fn, (unsigned long)pr->fa);
	ptrace(PTRACE_CONT, pr->pid, NULL, NULL);
	t_check(write(pr->in[1], "g", 1) == 1, "write: %s", strerror(errno));
	return true;
}

/* What the traced program did (t_win_next) */
enum t_win_event {
	T_WIN_NONE,     /* nothing yet */
	T_WIN_AGAIN,    /* a group stop, continued */
	T_WIN_ENDED,    /* it ended while traced */
	T_WIN_SIGNAL,   /* a signal for it, not a debug trap: the caller continues it */
	T_WIN_TRAP,     /* a debug trap */
};

/* The next stop of the traced program, without waiting.  T_WIN_ENDED:
 * *st its wait status and *reaped true when the child t_win_start made is
 * the program and was reaped here.  T_WIN_SIGNAL: *sig.  T_WIN_TRAP: *dr6
 * what hit (cleared after: the kernel's copy accumulates) and *r its
 * registers. */
static inline enum t_win_event t_win_next(const struct t_win_prog *pr, int *st, bool *reaped, int *sig, long *dr6,
					  struct user_regs_struct *r)
{
	siginfo_t si = { 0 };
	int ws;
	pid_t w = waitpid(pr->pid, &ws, __WALL | WNOHANG);

	if (w == 0)
		return T_WIN_NONE;
	if (w != pr->pid || !WIFSTOPPED(ws)) {
		if (w == pr->pid && pr->p == pr->pid) {
			*st = ws;
			*reaped = true;
		}
		return T_WIN_ENDED;
	}
	if (ws >> 16 == PTRACE_EVENT_STOP) {
		ptrace(PTRACE_CONT, pr->pid, NULL, NULL);
		return T_WIN_AGAIN;
	}
	*sig = WSTOPSIG(ws);
	if (*sig != SIGTRAP || ptrace(PTRACE_GETSIGINFO, pr->pid, NULL, &si) || si.si_code != TRAP_HWBKPT)
		return T_WIN_SIGNAL;
	*dr6 = ptrace(PTRACE_PEEKUSER, pr->pid, (void *)T_WIN_DR(6), NULL);
	ptrace(PTRACE_GETREGS, pr->pid, NULL, r);
	t_win_set_dr(6, 0);
	return T_WIN_TRAP;
}

/* The struct dt_thread at t (rdi at the traced function's entry) is the
 * traced program's: the layout the test was built with is the runtime's
 * (its tid and its proxy's; checked) */
static inline bool t_win_layout(uintptr_t t, const struct t_win_prog *pr)
{
	int tid = (int)t_win_peek(t + offsetof(struct dt_thread, tid));
	int ptid = (int)t_win_peek(t + offsetof(struct dt_thread, proxy_tid));

	t_check(tid == pr->pid && ptid == pr->proxy, "struct dt_thread at %#lx: tid %d proxy %d, expected %d %d "
		"(the test's layout is not the runtime's)", (unsigned long)t, tid, ptid, (int)pr->pid, (int)pr->proxy);
	return tid == pr->pid && ptid == pr->proxy;
}

/* Lets the traced program go, its debug registers off, before it is
 * killed (gdb, in the hang report, traces every thread) */
static inline void t_win_let_go(pid_t pid)
{
	int ws;

	ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
	while (waitpid(pid, &ws, __WALL) == pid && WIFSTOPPED(ws)) {
		int sig = ws >> 16 == PTRACE_EVENT_STOP || WSTOPSIG(ws) == SIGTRAP ? 0 : WSTOPSIG(ws);
		t_win_dr7_of(false, 0, false);
		if (!ptrace(PTRACE_DETACH, pid, NULL, (void *)(long)sig))
			break;
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
	}
}

#endif
