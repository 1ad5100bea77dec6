/* Description: a detached thread sees exactly the scheduling settings it
 * made, and the kernel keeps it where detach put it: sched_getscheduler(0)
 * shows no SCHED_RESET_ON_FORK of the runtime's; policy, priority, nice and
 * affinity set by the program (itself, or by chrt, nice and taskset before
 * they exec it) read back as set, also after execve, with the kernel's
 * errors for bad requests, while the kernel's own view of the thread
 * (/proc/self/task/TID/stat, Cpus_allowed_list) is unchanged;
 * --keep-policy applies them for real. */
#include "helpers/t_detach.h"

#include <sys/resource.h>
#include <sys/wait.h>

/* policy, priority, nice and affinity as this thread reads them */
static void print_own(void)
{
	struct sched_param sp = { 0 };
	cpu_set_t set;
	char list[64] = "";

	sched_getparam(0, &sp);
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0, n = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			n += snprintf(list + n, sizeof(list) - (size_t)n, "%s%d", n ? "," : "", c);
	printf("policy %d priority %d nice %d cpus %s\n", sched_getscheduler(0), sp.sched_priority,
	       getpriority(PRIO_PROCESS, 0), list);
}

/* Output of CMD... run natively or under `detach run -c 1 [opt]`. */
static void output_of(bool detached, const char *opt, char *const cmd[], char *out, size_t len)
{
	int fd[2];
	char *args[32];
	int n = 0;
	pid_t p;

	if (detached) {
		args[n++] = getenv("DETACH_BIN");
		args[n++] = "run";
		args[n++] = "-c";
		args[n++] = "1";
		if (opt)
			args[n++] = (char *)opt;
		args[n++] = "--";
	}
	for (int i = 0; cmd[i]; i++)
		args[n++] = cmd[i];
	args[n] = NULL;
	if (pipe(fd))
		exit(1);
	if (!(p = fork())) {
		dup2(fd[1], 1);
		close(fd[0]);
		execvp(args[0], args);
		_exit(127);
	}
	close(fd[1]);
	ssize_t got = 0, r;
	while (got < (ssize_t)len - 1 && (r = read(fd[0], out + got, len - 1 - (size_t)got)) > 0)
		got += r;
	out[got] = '\0';
	close(fd[0]);
	waitpid(p, NULL, 0);
}

/* A child of the detached thread: policy, priority and nice as natively,
 * but its CPUs are the housekeeping ones (the default -H: ours but CPU 1),
 * where the runtime placed it, not its parent's: the one difference of the
 * policy and affinity a program's children see (detach run --help,
 * docs/runtime.md). */
static char child_cpus[64];

static void housekeeping_cpus(void)
{
	cpu_set_t set;
	int n = snprintf(child_cpus, sizeof(child_cpus), " cpus ");

	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	CPU_CLR(1, &set);
	for (int c = 0, first = 1; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			n += snprintf(child_cpus + n, sizeof(child_cpus) - (size_t)n, "%s%d", first ? "" : ",", c);
			first = 0;
		}
	snprintf(child_cpus + n, sizeof(child_cpus) - (size_t)n, "\n");
}
#define CHILD_CPUS child_cpus

static void same_as_native_but(char *const cmd[], const char *what, const char *child_cpus)
{
	char native[256], detached[256];
	char *cpus;

	output_of(false, NULL, cmd, native, sizeof(native));
	output_of(true, NULL, cmd, detached, sizeof(detached));
	printf("%s: native '%.*s', detached '%.*s'\n", what, (int)strcspn(native, "\n"), native,
	       (int)strcspn(detached, "\n"), detached);
	if (child_cpus) {
		t_check((cpus = strstr(detached, " cpus ")) && !strcmp(cpus, child_cpus),
			"%s: the child's CPUs are not the housekeeping CPUs: '%s'", what, detached);
		if (cpus)
			*cpus = '\0';
		if ((cpus = strstr(native, " cpus ")))
			*cpus = '\0';
	}
	t_check(native[0] && !strcmp(native, detached), "%s: detached '%s', natively '%s'", what, detached, native);
}

static void same_as_native(char *const cmd[], const char *what)
{
	same_as_native_but(cmd, what, NULL);
}

/* Role "kernel": make ourselves SCHED_FIFO 10 and say what we and the
 * kernel (field 41 of our task's stat) believe. */
static void fifo_and_kernel_view(void)
{
	struct sched_param sp = { .sched_priority = 10 };

	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		printf("sched_setscheduler: %s\n", strerror(errno));
	printf("own %d kernel %lld\n", sched_getscheduler(0), t_task_stat_field((pid_t)syscall(SYS_gettid), 41));
}

static void in_process_checks(void)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	struct sched_param sp = { .sched_priority = 7 };
	cpu_set_t set;
	char cpus[64] = "";

	t_check(sched_getscheduler(0) == SCHED_OTHER, "sched_getscheduler(0) %d, natively SCHED_OTHER", sched_getscheduler(0));
	t_check(sched_setscheduler(0, SCHED_RR, &sp) == 0, "SCHED_RR 7: %s", strerror(errno));
	t_check(sched_getscheduler(0) == SCHED_RR, "SCHED_RR reads back as %d", sched_getscheduler(0));
	t_check(t_task_stat_field(me, 41) == SCHED_OTHER, "the kernel's policy became %lld", t_task_stat_field(me, 41));
	sp.sched_priority = 0;
	errno = 0;
	t_check(sched_setscheduler(0, SCHED_FIFO, &sp) == -1 && errno == EINVAL, "FIFO 0: errno %d, not EINVAL", errno);
	t_check(sched_setscheduler(0, 42, &sp) == -1 && errno == EINVAL, "policy 42: errno %d, not EINVAL", errno);
	sp.sched_priority = 5;
	t_check(sched_setscheduler(0, SCHED_OTHER, &sp) == -1 && errno == EINVAL, "OTHER 5: errno %d", errno);
	t_check(sched_setparam(0, &sp) == 0 && sched_getparam(0, &sp) == 0 && sp.sched_priority == 5,
		"sched_setparam 5 reads back %d", sp.sched_priority);
	sp.sched_priority = 0;
	t_check(sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) == 0, "OTHER|RESET_ON_FORK");
	t_check(sched_getscheduler(0) == (SCHED_OTHER | SCHED_RESET_ON_FORK), "RESET_ON_FORK set by the program is %d",
		sched_getscheduler(0));
	t_check(setpriority(PRIO_PROCESS, 0, 4) == 0 && getpriority(PRIO_PROCESS, 0) == 4, "nice 4 reads %d",
		getpriority(PRIO_PROCESS, 0));
	t_check(t_task_stat_field(me, 19) == 0, "the kernel's nice became %lld", t_task_stat_field(me, 19));
	/* glibc's nice() passes nice-1 as an int: the register's upper half
	 * is not the program's (nice(-1) once read back 19) */
	errno = 0;
	t_check(nice(-1) == 3 && errno == 0, "nice(-1) from 4 gives %d (errno %d), natively 3", getpriority(PRIO_PROCESS, 0),
		errno);
	t_check(syscall(SYS_setpriority, 0xffffffff00000000l | PRIO_PROCESS, 0, 0x1ffffffffl) == 0 &&
		getpriority(PRIO_PROCESS, 0) == -1, "setpriority with garbage upper halves reads %d, natively -1",
		getpriority(PRIO_PROCESS, 0));
	/* pid -1 is no thread: ESRCH, and this thread stays where it is,
	 * detached and with the settings it made (it once lost its CPU) */
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	t_check(sched_setaffinity(-1, sizeof(set), &set) == -1 && errno == ESRCH, "affinity of pid -1: errno %d", errno);
	t_check(sched_getscheduler(0) == (SCHED_OTHER | SCHED_RESET_ON_FORK), "after pid -1 the policy reads %d",
		sched_getscheduler(0));
	t_task_status_str(me, "Cpus_allowed_list", cpus, sizeof(cpus));
	t_check(!strcmp(cpus, "1"), "after pid -1 the kernel's affinity became %s", cpus);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	t_check(sched_setaffinity(0, sizeof(set), &set) == 0, "affinity 0: %s", strerror(errno));
	CPU_ZERO(&set);
	t_check(sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1 && CPU_ISSET(0, &set),
		"affinity 0 does not read back");
	t_task_status_str(me, "Cpus_allowed_list", cpus, sizeof(cpus));
	t_check(!strcmp(cpus, "1"), "the kernel's affinity became %s", cpus);
	CPU_ZERO(&set);
	CPU_SET(CPU_SETSIZE - 1, &set);
	t_check(sched_setaffinity(0, sizeof(set), &set) == -1 && errno == EINVAL, "an offline CPU: errno %d", errno);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "print")) {
		print_own();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "kernel")) {
		fifo_and_kernel_view();
		return 0;
	}
	if (!getenv("T_DETACHED")) {
		char self[4096], out[256];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2 || !getenv("DETACH_BIN"))
			t_skip("needs 2 CPUs and DETACH_BIN (tests/run.sh)");
		self[n] = '\0';
		housekeeping_cpus();
		same_as_native((char *const[]){ self, "print", NULL }, "as started");
		same_as_native((char *const[]){ "chrt", "-f", "10", self, "print", NULL }, "chrt -f 10");
		same_as_native((char *const[]){ "taskset", "-c", "0", self, "print", NULL }, "taskset -c 0");
		same_as_native((char *const[]){ "nice", "-n", "5", self, "print", NULL }, "nice -n 5");
		same_as_native((char *const[]){ "sh", "-c", "chrt -r 3 taskset -c 0 \"$0\" print", self, NULL },
			       "sh, chrt -r 3, taskset -c 0");
		/* children inherit what the program set, or its reset on fork */
		same_as_native_but((char *const[]){ "chrt", "-f", "10", "sh", "-c", "\"$0\" print; true", self, NULL },
			       "a child of chrt -f 10 sh", CHILD_CPUS);
		same_as_native_but((char *const[]){ "chrt", "-R", "-f", "10", "sh", "-c", "\"$0\" print; true", self, NULL },
			       "a child of chrt -R -f 10 sh", CHILD_CPUS);
		same_as_native_but((char *const[]){ "nice", "-n", "7", "sh", "-c", "\"$0\" print; true", self, NULL },
			       "a child of nice -n 7 sh", CHILD_CPUS);
		if (geteuid() == 0) {
			output_of(true, NULL, (char *const[]){ self, "kernel", NULL }, out, sizeof(out));
			printf("default: %s", out);
			t_check(!strcmp(out, "own 1 kernel 0\n"), "FIFO by default: '%s', want own 1 kernel 0", out);
			output_of(true, "--keep-policy", (char *const[]){ self, "kernel", NULL }, out, sizeof(out));
			printf("--keep-policy: %s", out);
			t_check(!strcmp(out, "own 1 kernel 1\n"), "FIFO with --keep-policy: '%s', want own 1 kernel 1", out);
		}
	}
	fflush(stdout);                 /* before the exec */
	t_reexec_detached(argc, argv, NULL);
	in_process_checks();
	return t_detached_done();
}
