/* Description: calls whose meaning is the calling thread act on the
 * detached thread, not on its proxy: checked row by row on the kernel's
 * per-thread state (comm, SigBlk, policy, affinity, nice, FS base, CPU time). */
#include "helpers/t_detach.h"

#include <asm/prctl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

static pid_t me, proxy;
static volatile sig_atomic_t got_usr1;
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

static void check_str(pid_t tid, const char *key, const char *want, const char *row)
{
	char v[256] = "";
	t_task_status_str(tid, key, v, sizeof(v));
	t_check(!strcmp(v, want), "%s: tid %d %s is '%s', want '%s'", row, tid, key, v, want);
}

static void comm_row(void)
{
	char buf[64];
	prctl(PR_SET_NAME, "t-detached");
	check_str(me, "Name", "t-detached", "prctl(PR_SET_NAME)");
	check_str(proxy, "Name", "detach-proxy", "prctl(PR_SET_NAME) proxy");
	/* /proc/thread-self names the detached thread, not the proxy */
	int fd = open("/proc/thread-self/comm", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	t_check(!strcmp(buf, "t-detached\n"), "/proc/thread-self/comm reads '%s'", buf);
	t_check(prctl(PR_GET_NAME, buf) == 0 && !strcmp(buf, "t-detached"), "PR_GET_NAME '%s'", buf);
}

static void sigmask_row(void)
{
	sigset_t s;
	char before[64], mine[64], prx[64];

	t_task_status_str(proxy, "SigBlk", before, sizeof(before));
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	sigprocmask(SIG_BLOCK, &s, NULL);
	t_task_status_str(me, "SigBlk", mine, sizeof(mine));
	t_task_status_str(proxy, "SigBlk", prx, sizeof(prx));
	t_check(!strcmp(mine, "0000000000000800"), "rt_sigprocmask: detached SigBlk %s", mine);
	t_check(!strcmp(prx, before), "rt_sigprocmask: proxy SigBlk changed %s -> %s", before, prx);
	/* SIGSYS stays open in the kernel, but the program sees what it asked */
	sigfillset(&s);
	sigprocmask(SIG_SETMASK, &s, NULL);
	sigprocmask(SIG_SETMASK, NULL, &s);
	t_check(sigismember(&s, SIGSYS), "blocked SIGSYS not reported back");
	sigemptyset(&s);
	sigprocmask(SIG_SETMASK, &s, NULL);
}

static void policy_row(void)
{
	struct sched_param sp = { .sched_priority = 5 };
	cpu_set_t set;

	/* The thread's own settings are kept by the runtime (run_sched_kept);
	 * the kernel keeps the detached thread and its proxy where they were. */
	t_check(sched_setscheduler(0, SCHED_RR | SCHED_RESET_ON_FORK, &sp) == 0, "sched_setscheduler: %s", strerror(errno));
	t_check(t_task_stat_field(me, 41) == SCHED_OTHER, "sched_setscheduler: detached policy %lld", t_task_stat_field(me, 41));
	t_check(t_task_stat_field(proxy, 41) == SCHED_OTHER, "sched_setscheduler: proxy policy %lld", t_task_stat_field(proxy, 41));
	t_check((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_RR, "sched_getscheduler(0) %d", sched_getscheduler(0));
	struct sched_param got = { 0 };
	t_check(sched_getparam(0, &got) == 0 && got.sched_priority == 5, "sched_getparam(0) %d", got.sched_priority);
	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp);

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	sched_setaffinity(0, sizeof(set), &set);
	check_str(me, "Cpus_allowed_list", "1", "sched_setaffinity");
	check_str(proxy, "Cpus_allowed_list", "0", "sched_setaffinity proxy");
}

static void priority_row(void)
{
	t_check(setpriority(PRIO_PROCESS, 0, 3) == 0, "setpriority: %s", strerror(errno));
	t_check(t_task_stat_field(me, 19) == 0, "setpriority: detached nice %lld (kept by the runtime)", t_task_stat_field(me, 19));
	t_check(t_task_stat_field(proxy, 19) == 0, "setpriority: proxy nice %lld", t_task_stat_field(proxy, 19));
	t_check(getpriority(PRIO_PROCESS, 0) == 3, "getpriority(0) %d", getpriority(PRIO_PROCESS, 0));
	setpriority(PRIO_PROCESS, 0, 0);
}

static void identity_row(void)
{
	unsigned cpu = 99, node = 99;
	unsigned long fs = 0, self_fs;

	t_check(gettid() == me, "gettid %d, want %d", gettid(), me);
	t_check(syscall(SYS_getcpu, &cpu, &node, NULL) == 0 && cpu == 1, "getcpu %u", cpu);
	t_check(sched_yield() == 0, "sched_yield");
	/* arch_prctl: the FS base is the calling thread's TLS */
	__asm__("mov %%fs:0, %0" : "=r"(self_fs));
	t_check(syscall(SYS_arch_prctl, ARCH_GET_FS, &fs) == 0 && fs == self_fs, "ARCH_GET_FS %#lx, want %#lx", fs, self_fs);
}

/* kill, tgkill and tkill of ourselves: the handler has run when they return */
static void signal_self_row(void)
{
	signal(SIGUSR1, on_usr1);
	got_usr1 = 0;
	raise(SIGUSR1);
	t_check(got_usr1, "raise: handler had not run on return");
	got_usr1 = 0;
	kill(getpid(), SIGUSR1);
	t_check(got_usr1, "kill(getpid()): handler had not run on return");
	got_usr1 = 0;
	syscall(SYS_tkill, gettid(), SIGUSR1);
	t_check(got_usr1, "tkill(self): handler had not run on return");
}

static long long schedstat_ns(pid_t tid)
{
	char buf[256];
	return t_task_file(tid, "schedstat", buf, sizeof(buf)) ? -1 : atoll(buf);
}

static long long llabs_(long long v) { return v < 0 ? -v : v; }

/* CPU-time identity: CLOCK_THREAD_CPUTIME_ID and RUSAGE_THREAD measure the
 * detached thread: they agree with its schedstat better than the proxy's. */
static void cputime_row(void)
{
	struct timespec ts;
	struct rusage ru;
	uint64_t end = rdtsc() + 300000000ull;   /* ~0.1 s of busy work */

	while (rdtsc() < end)
		;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	getrusage(RUSAGE_THREAD, &ru);
	long long mine = schedstat_ns(me), prx = schedstat_ns(proxy);
	long long clk = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	long long rus = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll;
	printf("cpu time: clock %lld, rusage %lld, detached schedstat %lld, proxy schedstat %lld\n", clk, rus, mine, prx);
	t_check(llabs_(clk - mine) < llabs_(clk - prx), "CLOCK_THREAD_CPUTIME_ID is not the detached thread's");
	t_check(llabs_(rus - mine) < llabs_(rus - prx), "RUSAGE_THREAD is not the detached thread's");
}

/* PI futex: the kernel checks the owner tid, so these run locally */
static pthread_mutex_t pi;
static long pi_count;
static void *pi_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		pthread_mutex_lock(&pi);
		pi_count++;
		pthread_mutex_unlock(&pi);
	}
	return NULL;
}

static void pi_futex_row(void)
{
	pthread_mutexattr_t a;
	pthread_t th;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&pi, &a);
	pthread_create(&th, NULL, pi_worker, NULL);
	pi_worker(NULL);
	pthread_join(th, NULL);
	t_check(pi_count == 40000, "PI mutex count %ld", pi_count);
}

int main(int argc, char **argv)
{
	t_reexec_detached(argc, argv, NULL);
	me = t_main_tid();
	proxy = t_find_proxy();
	if (!proxy) {
		fprintf(stderr, "no proxy: not detached\n");
		return 1;
	}
	comm_row();
	sigmask_row();
	policy_row();
	priority_row();
	identity_row();
	signal_self_row();
	cputime_row();
	pi_futex_row();
	return t_detached_done();
}
