/* spawncost: the cost of creating and ending a child, as the program sees
 * it: fork + _exit + waitpid, and pthread_create + pthread_join, one TSC
 * sample per round.  Run it plain for the native cost, under `detach run`
 * for the detached one (the children are born on the detached CPU);
 * detach-spawncost (tools/detach_tools/spawncost.py) runs them interleaved.
 *
 *   spawncost [-n ROUNDS] --json FILE
 */
#include "lib/util.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *nothing(void *arg)
{
	return arg;
}

static uint64_t fork_once(void)
{
	uint64_t t0 = rdtscp();
	pid_t p = fork();
	int st;

	if (p == 0)
		_exit(0);
	if (p < 0 || waitpid(p, &st, 0) != p)
		abort();
	return rdtscp() - t0;
}

static uint64_t thread_once(void)
{
	uint64_t t0 = rdtscp();
	pthread_t th;

	if (pthread_create(&th, NULL, nothing, NULL) || pthread_join(th, NULL))
		abort();
	return rdtscp() - t0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rounds", required_argument, NULL, 'n' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const names[] = { "fork_exit", "pthread_create_join" };
	uint64_t (*const once[])(void) = { fork_once, thread_once };
	struct run_header h;
	struct tsc_clock clk;
	const char *json_path = NULL;
	size_t n = 500;
	int c;

	run_header_init(&h, argc, argv);
	while ((c = getopt_long(argc, argv, "n:j:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': n = strtoul(optarg, NULL, 10); break;
		case 'j': json_path = optarg; break;
		case 'h':
			printf("usage: spawncost [-n ROUNDS] --json FILE\n"
			       "Times fork+_exit+waitpid and pthread_create+join, one TSC sample per round.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!json_path || n < 10) {
		fprintf(stderr, "spawncost: error: --json FILE is needed, and at least 10 rounds\n");
		return 2;
	}
	if (tsc_calibrate(&clk, 0)) {
		fprintf(stderr, "spawncost: error: TSC calibration failed\n");
		return 1;
	}
	h.tsc_hz = clk.hz;
	FILE *f = fopen(json_path, "w");
	if (!f) {
		fprintf(stderr, "spawncost: error: cannot write %s: %s\n", json_path, strerror(errno));
		return 1;
	}
	struct json j;
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_common_header(&j, &h, 0);
	json_uint(&j, "rounds", n);
	for (int k = 0; k < 2; k++) {
		json_array_begin(&j, names[k]);
		for (size_t i = 0; i < n + n / 10; i++) {       /* first tenth: warm-up */
			uint64_t cyc = once[k]();
			if (i >= n / 10)
				json_uint(&j, NULL, cyc);
		}
		json_array_end(&j);
	}
	json_object_end(&j);
	fclose(f);
	return 0;
}
