/* Description: a set*id() made by another thread while the detached thread
 * renews its proxy does not hang the program.  glibc's setuid() holds its
 * lock of the thread stacks while every thread answers its SIGSETXID; the
 * retired proxy needs that lock to end, and the detached thread waits for
 * the proxy's end with its signals blocked: with SIGSETXID among them the
 * three waited for each other for ever.  Run as its own program, natively
 * and then under `detach run`, within a time limit: the detached thread
 * loops unshare(CLONE_FS) (a new proxy each time) while a second thread
 * loops setuid(getuid()) (a no-op that still reaches every thread) for
 * 3 s; both must end, and every setuid succeed.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define LIMIT_S 20
#define STORM_S 3

static atomic_bool done;
static atomic_long setuids, setuid_failed;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *set_ids(void *arg)
{
	double end = now_s() + STORM_S;

	(void)arg;
	while (now_s() < end) {
		if (setuid(getuid()))
			atomic_fetch_add(&setuid_failed, 1);
		atomic_fetch_add(&setuids, 1);
	}
	atomic_store(&done, true);
	return NULL;
}

static int storm(void)
{
	pthread_t th;
	long renewals = 0;

	if (getenv("T_DETACHED") && !t_find_proxy())
		return 10;                      /* under detach run, but not detached */
	if (pthread_create(&th, NULL, set_ids, NULL))
		return 20;
	while (!atomic_load(&done)) {
		if (unshare(CLONE_FS))
			return 21;
		renewals++;
	}
	pthread_join(th, NULL);
	printf("%ld renewals, %ld setuid calls (%ld failed)\n", renewals, atomic_load(&setuids),
	       atomic_load(&setuid_failed));
	return atomic_load(&setuid_failed) ? 22 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "storm"))
		return storm();
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	t_role_same("storm", 0, LIMIT_S);
	return t_done();
}
