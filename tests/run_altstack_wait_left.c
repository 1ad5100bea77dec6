/* Description: a blocking read made by an SA_ONSTACK handler while an
 * earlier handler on the program's alternate stack sleeps in sigsuspend,
 * left by a third handler's siglongjmp back to main code, is abandoned
 * detached as natively: the next calls of main code do not find the proxy
 * still reading the pipe (the kernel's /proc/TID/syscall of the thread that
 * carries out the read: the program's natively, the proxy detached), and
 * data written afterwards reaches main's read.  Such a read's wait runs on
 * the program's alternate stack (the sigsuspend's trap moved its work to
 * the runtime's stack, and a trap nested under it stays where it is,
 * src/runtime/stack.c); main's next call runs on the thread's stack (sud
 * mode: it traps in place, the alternate stack disarmed) or the runtime's
 * (rewrite mode's trampoline).  The runtime counted a call on another stack
 * than the wait's as never made after the wait was left: the read stayed in
 * the proxy, and every later call ran on the detached thread itself. */
#include "helpers/t_altstack.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>

#define SS_SIZE (64 * 1024)

static char *ss_lo;
static int p[2];
static sigjmp_buf env;
static volatile int phase;                      /* 1: in sigsuspend, 2: about to read */
static volatile int read_on_altstack = -1;

/* SIGUSR1, with SIGUSR2 blocked: waits for it in sigsuspend */
static void on_usr1(int sig)
{
	sigset_t none;

	(void)sig;
	sigemptyset(&none);
	phase = 1;
	sigsuspend(&none);
}

/* SIGUSR2, on top of the sigsuspend: a read that blocks */
static void on_usr2(int sig)
{
	char c;

	(void)sig;
	read_on_altstack = t_runs_on(ss_lo, SS_SIZE);
	phase = 2;
	(void)!read(p[0], &c, 1);
}

/* SIGALRM, on top of the read: back to main code */
static void on_alrm(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

/* Is thread tid in a read of p[0] (its /proc syscall line)? */
static bool reads_pipe(pid_t tid)
{
	char sc[256], want[32];

	snprintf(want, sizeof(want), "0 0x%x ", p[0]);
	return tid > 0 && t_task_file(tid, "syscall", sc, sizeof(sc)) == 0 && !strncmp(sc, want, strlen(want));
}

/* The other thread (not detached: its calls are native) sends SIGUSR2 once
 * the main thread's handler is about to wait for it, and SIGALRM once the
 * thread that carries out the read is in it.  Returns 1 when the read was
 * never seen. */
static void *sender(void *arg)
{
	pthread_t main_thread = *(pthread_t *)arg;
	pid_t reader = getenv("T_DETACHED") ? t_find_proxy() : getpid();
	int i;

	while (phase < 1)
		__asm__ volatile("pause" ::: "memory");
	pthread_kill(main_thread, SIGUSR2);
	for (i = 0; i < 10000 && !(phase == 2 && reads_pipe(reader)); i++)
		usleep(1000);
	pthread_kill(main_thread, SIGALRM);
	return (void *)(intptr_t)(i == 10000);
}

/* 0 when main code's calls after the siglongjmp found the read abandoned */
static int run(void)
{
	struct sigaction sa = { .sa_flags = SA_ONSTACK };
	pthread_t main_thread = pthread_self(), other;
	void *missed = NULL;
	char buf[8];
	ssize_t n;

	if (!(ss_lo = t_altstack_set(SS_SIZE)) || pipe(p))
		return 1;
	sa.sa_handler = on_usr1;
	sigaddset(&sa.sa_mask, SIGUSR2);
	if (sigaction(SIGUSR1, &sa, NULL))
		return 3;
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr2;
	if (sigaction(SIGUSR2, &sa, NULL))
		return 3;
	sa.sa_handler = on_alrm;
	if (sigaction(SIGALRM, &sa, NULL))
		return 3;
	if (pthread_create(&other, NULL, sender, &main_thread))
		return 4;
	if (!sigsetjmp(env, 1)) {
		raise(SIGUSR1);
		return 5;               /* the handlers never return */
	}
	/* the first calls of main code after the jump: the read is gone */
	pid_t reader = getenv("T_DETACHED") ? t_find_proxy() : 0;
	if (reader && reads_pipe(reader)) {
		printf("the proxy still reads the pipe the program left by siglongjmp\n");
		return 6;               /* the read below would wait for good */
	}
	if (pthread_join(other, &missed) || missed)
		return 7;
	if (read_on_altstack != 1)
		return 8;
	if (write(p[1], "abc", 3) != 3)
		return 9;
	n = read(p[0], buf, sizeof(buf));
	if (n != 3 || memcmp(buf, "abc", 3))
		return 10;
	close(p[0]);
	close(p[1]);
	return 0;
}

/* r: 6 the proxy still read the pipe; 7 the read was never seen to begin;
 * 8 the read's handler was not on the alternate stack; 9, 10 the data
 * written after the jump */
int main(int argc, char **argv)
{
	return t_altstack_main(argc, argv, run, "a handler's read on the alternate stack, left by siglongjmp");
}
