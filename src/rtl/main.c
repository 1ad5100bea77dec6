/* main() of an RTLinux program under detach-rtl (docs/rtl.md): what insmod
 * and rmmod did.
 *
 * Serves /dev/rtfN (devfs.c), detaches the executive (exec.c) on
 * $DETACH_RTL_CPU or the last CPU the program may use (its other threads
 * keep to the rest), calls init_module()
 * (non-zero: a message, exit 1), waits for SIGINT or SIGTERM, calls
 * cleanup_module() and exits 0.  Both signals are blocked in every thread
 * from the start and taken here with sigwaitinfo, so none reaches an RT
 * thread.  In its own object: a Linux program that links -ldetach-rtl for
 * mbuff_alloc keeps its own main(). */
#include "rtl/rtl_int.h"

static int pick_cpu(void)
{
	const char *env = getenv("DETACH_RTL_CPU");
	cpu_set_t own;
	int cpu = -1;

	if (env && *env)
		return atoi(env);
	if (sched_getaffinity(0, sizeof(own), &own))
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &own))
			cpu = c;
	return CPU_COUNT(&own) >= 2 ? cpu : -1;
}

static void stop_all(void)
{
	rtl_exec_stop();
	rtl_exec_report();
	rtl_fifo_destroy_all();
	rtl_devfs_stop();
}

int main(int argc, char **argv)
{
	sigset_t stop;
	siginfo_t si;
	cpu_set_t hk;
	int cpu, err, rc;

	if (argc > 1) {
		fprintf(stderr, "%s: an RT task takes no arguments\n"
			"NOTE: it runs until SIGINT or SIGTERM; configure it through its RT-FIFOs or mbuffs\n", argv[0]);
		return 2;
	}
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if ((cpu = pick_cpu()) < 0) {
		fprintf(stderr, "%s: no CPU to detach the RT executive on\n"
			"NOTE: an RT task needs 2 CPUs (one for Linux); set DETACH_RTL_CPU\n", argv[0]);
		return 1;
	}
	/* Linux's threads of the task (this one, the FUSE server) off the RT CPU */
	if (!sched_getaffinity(0, sizeof(hk), &hk)) {
		CPU_CLR(cpu, &hk);
		sched_setaffinity(0, sizeof(hk), &hk);
	}
	/* before anything is detached: mounting may fork fusermount3 */
	if ((err = rtl_devfs_start())) {
		fprintf(stderr, "%s: cannot serve the RT-FIFOs over FUSE: %s\n"
			"NOTE: /dev/fuse must be usable (modprobe fuse; Debian's fuse3 package)\n", argv[0], strerror(-err));
		return 1;
	}
	if ((err = rtl_exec_start(cpu))) {
		fprintf(stderr, "%s: cannot detach the RT executive on CPU %d: %s\n"
			"NOTE: `detach check` tells what this machine allows; DETACH_RTL_CPU picks another CPU\n",
			argv[0], cpu, strerror(-err));
		rtl_devfs_stop();
		return 1;
	}
	if ((rc = init_module())) {
		fprintf(stderr, "%s: init_module() failed: %d%s%s\n", argv[0], rc, rc < 0 ? " " : "",
			rc < 0 ? strerror(-rc) : "");
		stop_all();
		return 1;
	}
	while (sigwaitinfo(&stop, &si) < 0)
		;
	cleanup_module();
	stop_all();
	return 0;
}
