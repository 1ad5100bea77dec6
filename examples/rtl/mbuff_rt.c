/* mbuff, the RT side: a 1 kHz RT thread publishes its period count times a
 * gain into shared memory, under a seqlock, and takes the gain a Linux
 * process (mbuff_peer.c) writes into the same region.
 *
 *   ./mbuff_rt &  ./mbuff_peer 3   # the peer sets gain 3, reads samples */
#include <detach/rtl.h>

#include "mbuff_shared.h"

static pthread_t thread;
static volatile struct shared *sh;

static void *sampler(void *arg)
{
	(void)arg;
	pthread_make_periodic_np(pthread_self(), gethrtime(), 1000 * 1000);
	for (unsigned long n = 1;; n++) {
		pthread_wait_np();
		sh->seq++;                               /* odd: writing */
		__atomic_thread_fence(__ATOMIC_RELEASE);
		sh->period = n;
		sh->value = (long)n * sh->gain;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		sh->seq++;                               /* even: consistent */
	}
	return NULL;
}

int init_module(void)
{
	sh = mbuff_alloc(MBUFF_NAME, sizeof(struct shared));
	if (!sh)
		return -ENOMEM;
	sh->gain = 1;
	return pthread_create(&thread, NULL, sampler, NULL);
}

void cleanup_module(void)
{
	pthread_delete_np(thread);
	mbuff_free(MBUFF_NAME, (void *)sh);
}
