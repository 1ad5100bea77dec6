/* The paper's control loop, through the detach API: a thread detaches
 * itself, then wakes every period against the TSC (dt_wait_until: no Linux
 * timer), does its work, and measures how far each wake-up strays from the
 * period.  Runs linked (no `detach run` needed) or under `detach run`.
 *
 *   control_loop [-c CPU] [-p PERIOD_US] [-n ITERATIONS]
 */
#include <detach/detach.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1, c, err;
	uint64_t period_us = 1000, n = 1000;
	struct dt_stats st;

	while ((c = getopt(argc, argv, "c:p:n:h")) != -1) {
		switch (c) {
		case 'c': cpu = atoi(optarg); break;
		case 'p': period_us = strtoull(optarg, NULL, 10); break;
		case 'n': n = strtoull(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: control_loop [-c CPU] [-p PERIOD_US] [-n ITERATIONS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!dt_is_detached() && (err = dt_detach(cpu))) {
		fprintf(stderr, "control_loop: cannot detach on CPU %d: %s\n", cpu, strerror(-err));
		return 1;
	}
	uint64_t period = period_us * 1000, next = dt_now_ns() + period, prev = 0;
	int64_t dev_max = 0, dev_min = 0;
	for (uint64_t i = 0; i < n; i++) {
		if ((err = dt_wait_until(next)) < 0)
			break;
		uint64_t now = dt_now_ns();
		if (prev) {
			int64_t dev = (int64_t)(now - prev) - (int64_t)period;
			dev_max = dev > dev_max ? dev : dev_max;
			dev_min = dev < dev_min ? dev : dev_min;
		}
		prev = now;
		/* the control work would go here */
		next += period;
	}
	dt_stats(&st);
	printf("%llu periods of %llu us on CPU %d: deviation +%lld / %lld ns (peak to peak %lld ns)\n",
	       (unsigned long long)n, (unsigned long long)period_us, st.cpu, (long long)dev_max,
	       (long long)dev_min, (long long)(dev_max - dev_min));
	printf("system calls: %llu forwarded, %llu local, %llu emulated, %llu traps\n",
	       (unsigned long long)st.forwarded, (unsigned long long)st.local,
	       (unsigned long long)st.emulated, (unsigned long long)st.traps);
	dt_attach();
	return err < 0 ? 1 : 0;
}
