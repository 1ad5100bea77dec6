/* Description: 8 threads and the detached thread contend on one pthread
 * mutex for 100,000 increments each; the count is exact (futex waits and
 * wakes forwarded by the proxy lose nothing). */
#include "helpers/t_detach.h"

#include <pthread.h>

#define N 100000
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static volatile int on_detached_cpu;

static void *work(void *arg)
{
	cpu_set_t set;

	/* new threads go to the housekeeping CPUs as soon as they exist */
	if (arg && (sched_getaffinity(0, sizeof(set), &set) || CPU_ISSET(T_DETACHED_CPU, &set)))
		on_detached_cpu++;
	for (int i = 0; i < N; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[8];

	t_reexec_detached(argc, argv, NULL);
	pid_t proxy = t_find_proxy();
	t_check(proxy > 0, "not detached");
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, work, (void *)1);
	work(NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	printf("counter %ld (want %d)\n", counter, 9 * N);
	t_check(counter == 9L * N, "counter %ld, want %d", counter, 9 * N);
	t_check(on_detached_cpu == 0, "%d threads may run on the detached CPU", on_detached_cpu);
	return t_detached_done();
}
