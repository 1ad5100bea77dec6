/* Description: forwarding is real: 10,000 write() calls of the detached
 * thread are carried out by its proxy (the kernel's syscw says so), and the
 * detached thread stays on its CPU throughout (no migration).  A number the
 * kernel does not know is ENOSYS, as natively: syscall(-1) once reached the
 * proxy as its own command to end (LTP syscall02 then waited forever).
 * select and pselect with a negative nfds and no sets are the kernel's
 * EINVAL, not a sleep without end (LTP pselect02). */
#include "helpers/t_detach.h"

#include <sys/select.h>

int main(int argc, char **argv)
{
	t_reexec_detached(argc, argv, NULL);

	errno = 0;
	t_check(syscall(SYS_select, -1, NULL, NULL, NULL, NULL) == -1 && errno == EINVAL, "select(-1): errno %d", errno);
	errno = 0;
	t_check(syscall(SYS_pselect6, -1, NULL, NULL, NULL, NULL, NULL) == -1 && errno == EINVAL,
		"pselect6(-1): errno %d", errno);

	const char *mode = getenv("T_MODE");
	if (mode && !strcmp(mode, "rewrite")) {
		/* page 0's trampoline is entered at the number as an address */
		printf("syscall(-1): not checked in rewrite mode (a rewritten site calls the number as an address)\n");
	} else {
		errno = 0;
		t_check(syscall(-1) == -1 && errno == ENOSYS, "syscall(-1): errno %d, natively ENOSYS", errno);
		errno = 0;
		t_check(syscall(-4) == -1 && errno == ENOSYS, "syscall(-4): errno %d, natively ENOSYS", errno);
		t_check(syscall(0x100000000l | SYS_getppid) == getppid(), "the kernel reads the number as 32 bits");
	}

	pid_t me = t_main_tid(), proxy = t_find_proxy();
	t_check(proxy > 0 && proxy != me, "no proxy thread found");

	long long w0 = t_task_value(me, "io", "syscw");
	long long p0 = t_task_value(proxy, "io", "syscw");
	long long m0 = t_task_value(me, "sched", "se.nr_migrations");
	long long s0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	int fd = open("/dev/null", O_WRONLY);
	char buf[64] = "x";
	int cpu_seen_elsewhere = 0;

	for (int i = 0; i < 10000; i++) {
		t_check(write(fd, buf, sizeof(buf)) == sizeof(buf), "write %d", i);
		if (i % 1000 == 0 && t_task_stat_field(me, 39) != T_DETACHED_CPU)
			cpu_seen_elsewhere++;
	}
	close(fd);
	long long w1 = t_task_value(me, "io", "syscw");
	long long p1 = t_task_value(proxy, "io", "syscw");
	long long m1 = t_task_value(me, "sched", "se.nr_migrations");
	long long s1 = t_task_value(me, "status", "voluntary_ctxt_switches");

	printf("detached tid %d: syscw %lld -> %lld, migrations %lld -> %lld, voluntary switches %lld -> %lld\n",
	       me, w0, w1, m0, m1, s0, s1);
	printf("proxy tid %d: syscw %lld -> %lld\n", proxy, p0, p1);
	t_check(w0 >= 0 && w1 == w0, "the detached thread wrote itself: syscw +%lld", w1 - w0);
	t_check(p1 - p0 >= 10000, "the proxy wrote only %lld times", p1 - p0);
	t_check(m1 == m0, "the detached thread migrated %lld times", m1 - m0);
	t_check(cpu_seen_elsewhere == 0, "the detached thread was seen off CPU %d", T_DETACHED_CPU);
	t_check(t_task_stat_field(me, 39) == T_DETACHED_CPU, "last CPU %lld", t_task_stat_field(me, 39));
	/* Waiting for the proxy happens in user space: no sleep in the kernel. */
	t_check(s1 - s0 <= 2, "the detached thread slept in the kernel %lld times", s1 - s0);
	return t_detached_done();
}
