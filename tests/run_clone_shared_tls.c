/* Description: a child made by the detached thread with clone(CLONE_VM)
 * without CLONE_SETTLS (old "lightweight process" code) shares the
 * thread's TLS, and with it the runtime's state of the thread, which from
 * then on does not count as detached.  The program must run as natively
 * (same output, same exit status) and detach must say so, once, on stderr:
 * dt_is_detached() turns 0 and the warning names the clone. */
#include "helpers/t_detach.h"

#include <dlfcn.h>

#define WARNING "with clone(CLONE_VM) without CLONE_SETTLS"

/* clone(flags, stack) whose child exits at once with code, by a raw
 * system call on the new stack: it never returns into C. */
static long clone_and_exit(unsigned long flags, void *stack_top, long code)
{
	long ret;
	register long r10 __asm__("r10") = 0;
	register long r8 __asm__("r8") = 0;

	__asm__ volatile("syscall\n\t"
			 "testq %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "movq %[code], %%rdi\n\t"
			 "movl $60, %%eax\n\t"     /* exit */
			 "syscall\n\t"
			 "ud2\n"
			 "1:"
			 : "=a"(ret)
			 : "0"((long)SYS_clone), "D"(flags), "S"(stack_top), "d"(0L), "r"(r10), "r"(r8),
			   [code] "r"(code)
			 : "rcx", "r11", "memory");
	return ret;
}

static int run_clones(void)
{
	int (*is_detached)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "dt_is_detached");
	size_t size = 64 * 1024;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	t_check(stack != MAP_FAILED, "mmap");
	if (!t_native()) {
		t_check(t_find_proxy() > 0, "not detached");
		t_check(is_detached && is_detached() == 1, "dt_is_detached() before the clone");
	}
	for (int i = 0; i < 2; i++) {
		int st = -1;
		long pid = clone_and_exit(CLONE_VM | SIGCHLD, stack + size, 7);

		t_check(pid > 0, "clone: %ld", pid);
		t_check(waitpid((pid_t)pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7,
			"child %d: wait status %#x", i, st);
		printf("child %d exited with %d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	if (!t_native())
		t_check(is_detached && is_detached() == 0, "dt_is_detached() after the clone: %d", is_detached ? is_detached() : -1);
	return t_done();
}

/* Runs this test (T_NATIVE set: natively; else under `detach run`) with
 * stdout and stderr in out and err; its wait status. */
static int run_capture(char **argv, bool native, FILE *out, FILE *err)
{
	char *args[64];
	pid_t pid;
	int st = -1;

	t_detach_argv(args, NULL, NULL, argv[0], NULL);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(fileno(out), 1);
		dup2(fileno(err), 2);
		setenv(native ? "T_NATIVE" : "T_DETACHED", "1", 1);
		if (native)
			execv("/proc/self/exe", argv);
		else
			execv(args[0], args);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return st;
}

static size_t slurp(FILE *f, char *buf, size_t len)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	return n;
}

int main(int argc, char **argv)
{
	char out[2][4096], err[2][8192];
	int st[2];

	(void)argc;
	if (getenv("T_DETACHED") || t_native())
		return run_clones();
	for (int detached = 0; detached < 2; detached++) {
		FILE *o = tmpfile(), *e = tmpfile();

		t_check(o && e, "tmpfile");
		if (!o || !e)
			return t_done();
		st[detached] = run_capture(argv, !detached, o, e);
		slurp(o, out[detached], sizeof(out[0]));
		slurp(e, err[detached], sizeof(err[0]));
		printf("%s: wait status %#x\n--- stdout\n%s--- stderr\n%s---\n", detached ? "detached" : "natively",
		       st[detached], out[detached], err[detached]);
		fclose(o);
		fclose(e);
	}
	t_check(st[0] == 0, "natively: wait status %#x", st[0]);
	t_check(st[1] == st[0], "detached: wait status %#x, natively %#x", st[1], st[0]);
	t_check(strcmp(out[0], out[1]) == 0, "stdout differs");
	t_check(!strstr(err[0], "detach:"), "natively: a detach message");
	char *w = strstr(err[1], WARNING);
	t_check(w != NULL, "detached: no warning naming the clone");
	t_check(!w || !strstr(w + 1, WARNING), "detached: the warning came more than once");
	return t_done();
}
