/* Description: system calls made with only 1 KiB of stack left below rsp
 * (a makecontext stack with a guard page under it) work detached as
 * natively: forwarded (getppid, uname, a 4 KiB write and read), emulated
 * (gettid) and a timed wait.  The runtime must not put the trap's signal
 * frame or the trampoline's saved state on the program's stack. */
#include "helpers/t_detach.h"

#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>

#define STACK 16384
#define LEFT 1024

static ucontext_t main_uc, small_uc;
static char *stack_lo;
static int pipefd[2];
static pid_t want_ppid, want_tid;
static int result = -1;

static int calls(void)
{
	static char buf[4096], back[4096];
	struct utsname u;
	struct timespec ts = { 0, 1000000 };

	memset(buf, 'x', sizeof(buf));
	if (getppid() != want_ppid)
		return 1;
	if (uname(&u) || strcmp(u.sysname, "Linux"))
		return 2;
	if (write(pipefd[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
	    read(pipefd[0], back, sizeof(back)) != (ssize_t)sizeof(back) || memcmp(buf, back, sizeof(buf)))
		return 3;
	if (syscall(SYS_gettid) != want_tid)
		return 4;
	if (nanosleep(&ts, NULL))
		return 5;
	return 0;
}

/* On the small stack: leave LEFT bytes below, then make the calls. */
static void on_small_stack(void)
{
	char *sp = __builtin_frame_address(0);
	size_t pad = (size_t)(sp - stack_lo) - LEFT;
	volatile char *room = __builtin_alloca(pad);

	room[0] = 0;
	result = calls();
	__asm__ volatile("" : : "r"(room) : "memory");
}

static int run(void)
{
	if (!(stack_lo = t_guarded_stack(STACK)) || pipe(pipefd))
		return 10;
	want_ppid = getppid();
	want_tid = (pid_t)syscall(SYS_gettid);
	/* once on this stack: the dynamic linker resolves each function on its
	 * first call, with more stack than the test leaves */
	if (calls())
		return 12;
	getcontext(&small_uc);
	small_uc.uc_stack.ss_sp = stack_lo;
	small_uc.uc_stack.ss_size = STACK;
	small_uc.uc_link = &main_uc;
	makecontext(&small_uc, on_small_stack, 0);
	if (swapcontext(&main_uc, &small_uc))
		return 11;
	return result;
}

int main(int argc, char **argv)
{
	if (!getenv("T_DETACHED")) {
		pid_t p = fork();
		int st;
		if (p == 0)
			_exit(run());
		waitpid(p, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("natively: status %#x: the test itself is wrong here\n", st);
			return 1;
		}
		printf("natively: all calls right with %d bytes of stack left\n", LEFT);
		fflush(stdout);
		t_reexec_detached(argc, argv, NULL);
	}
	if (!t_find_proxy())
		t_check(0, "not detached");
	int r = run();
	printf("detached: calls on the small stack: %s (%d)\n", r ? "wrong" : "right", r);
	t_check(r == 0, "call %d went wrong", r);
	return t_detached_done();
}
