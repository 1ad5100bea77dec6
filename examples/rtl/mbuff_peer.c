/* mbuff, the Linux side: an ordinary program (its own main) that maps the
 * region mbuff_rt.c shares, sets the gain and prints consistent samples.
 *
 *   ./mbuff_peer GAIN [COUNT]
 *
 * Prints "peer: N samples, gain G: value = G * period in all" and exits 0;
 * exit 1 if a sample broke that rule after the gain was seen. */
#include <detach/rtl.h>

#include "mbuff_shared.h"

int main(int argc, char **argv)
{
	long gain = argc > 1 ? atol(argv[1]) : 2, count = argc > 2 ? atol(argv[2]) : 100, got = 0, bad = 0;
	volatile struct shared *sh = mbuff_alloc(MBUFF_NAME, sizeof(struct shared));
	unsigned long last = 0;

	if (!sh) {
		fprintf(stderr, "mbuff_peer: mbuff_alloc(%s) failed\n", MBUFF_NAME);
		return 1;
	}
	sh->gain = gain;
	while (got < count) {
		unsigned long s1, s2, period;
		long value;

		s1 = sh->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		period = sh->period;
		value = sh->value;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = sh->seq;
		if ((s1 & 1) || s1 != s2 || period == last) {
			usleep(200);
			continue;
		}
		if (value != gain * (long)period && got == 0) {
			usleep(200);              /* the RT side has not seen the gain yet */
			continue;
		}
		bad += value != gain * (long)period;
		last = period;
		got++;
	}
	printf("peer: %ld samples, gain %ld: %s (last period %lu)\n", got, gain,
	       bad ? "value != gain * period in some" : "value = gain * period in all", last);
	mbuff_free(MBUFF_NAME, (void *)sh);
	return bad ? 1 : 0;
}
