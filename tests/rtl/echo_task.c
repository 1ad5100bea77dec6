/* An RT task for tests/rtl_task.sh: an RT thread blocked in rtf_get_wait on
 * FIFO 7 sends back what Linux writes there, upper-cased, on FIFO 8.
 * RTL_TEST_FAIL_INIT=N: init_module() returns -N.  cleanup_module() says so
 * on stdout. */
#include <detach/rtl.h>

#include <ctype.h>

static pthread_t echo;

static void *echo_code(void *arg)
{
	char buf[256];
	int n;

	(void)arg;
	while ((n = rtf_get_wait(7, buf, sizeof(buf), 0)) > 0) {
		for (int i = 0; i < n; i++)
			buf[i] = (char)toupper((unsigned char)buf[i]);
		while (rtf_put(8, buf, n) == -ENOSPC)
			usleep(1000);
	}
	return NULL;
}

int init_module(void)
{
	const char *fail = getenv("RTL_TEST_FAIL_INIT");
	int err;

	if (fail && *fail)
		return -atoi(fail);
	if ((err = rtf_create(7, 4096)) || (err = rtf_create(8, 4096)))
		return err;
	return pthread_create(&echo, NULL, echo_code, NULL);
}

void cleanup_module(void)
{
	pthread_delete_np(echo);
	rtf_destroy(7);
	rtf_destroy(8);
	printf("cleanup_module ran\n");
	fflush(stdout);
}
