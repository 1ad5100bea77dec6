/* The classic RTLinux example, unchanged but for its include line: two
 * periodic RT threads at different priorities write to RT-FIFOs 1 and 2; a
 * handler on control FIFO 3 starts, stops and re-times them.
 *
 *   cc frank.c $(pkg-config --cflags --libs detach-rtl) -o frank
 *   ./frank &            # the RT task: runs until SIGINT or SIGTERM
 *   cat /dev/rtf1        # "Frank 1", "Frank 2", ... (rtf2: "Zappa ...")
 *   echo "stop 1" > /dev/rtf3; echo "start 2 100" > /dev/rtf3   # period in ms
 *
 * Commands on FIFO 3, one a line: "start TASK [PERIOD_MS]", "stop TASK". */
#include <detach/rtl.h>

#define NTASKS 2

static pthread_t tasks[NTASKS];
static const char *words[NTASKS] = { "Frank", "Zappa" };

static void *task_code(void *arg)
{
	long i = (long)arg;
	unsigned long count = 0;
	char line[64];

	pthread_make_periodic_np(pthread_self(), gethrtime(), 500 * 1000 * 1000LL);
	for (;;) {
		int len = snprintf(line, sizeof(line), "%s %lu\n", words[i], ++count);

		/* a full FIFO (nobody reading) drops the line, as RTLinux did */
		rtf_put((unsigned)i + 1, line, len);
		pthread_wait_np();
	}
	return NULL;
}

static char cmd[128];
static int cmd_len;

static void command(const char *line)
{
	int task = 0;
	long ms = 500;

	if (sscanf(line, "start %d %ld", &task, &ms) >= 1 && task >= 1 && task <= NTASKS && ms > 0) {
		pthread_make_periodic_np(tasks[task - 1], gethrtime(), ms * 1000 * 1000LL);
		pthread_wakeup_np(tasks[task - 1]);
	} else if (sscanf(line, "stop %d", &task) == 1 && task >= 1 && task <= NTASKS) {
		pthread_suspend_np(tasks[task - 1]);
	} else {
		rtl_printf("frank: unknown command '%s'\n", line);
	}
}

/* Runs on the RT side each time a Linux process wrote to FIFO 3. */
static int control_handler(unsigned int fifo)
{
	int n;

	while ((n = rtf_get(fifo, cmd + cmd_len, (int)sizeof(cmd) - 1 - cmd_len)) > 0) {
		char *nl;

		cmd_len += n;
		cmd[cmd_len] = 0;
		while ((nl = strchr(cmd, '\n'))) {
			*nl = 0;
			command(cmd);
			cmd_len -= (int)(nl + 1 - cmd);
			memmove(cmd, nl + 1, (size_t)cmd_len + 1);
		}
		if (cmd_len == (int)sizeof(cmd) - 1)
			cmd_len = 0;                 /* a line too long: dropped */
	}
	return 0;
}

int init_module(void)
{
	pthread_attr_t attr;
	struct sched_param sched;
	int err;

	if ((err = rtf_create(1, 4000)) || (err = rtf_create(2, 4000)) || (err = rtf_create(3, 200)))
		return err;
	pthread_attr_init(&attr);
	for (long i = 0; i < NTASKS; i++) {
		sched.sched_priority = 4 + (int)i;
		pthread_attr_setschedparam(&attr, &sched);
		if ((err = pthread_create(&tasks[i], &attr, task_code, (void *)i)))
			return err;
	}
	return rtf_create_handler(3, control_handler);
}

void cleanup_module(void)
{
	for (int i = 0; i < NTASKS; i++)
		pthread_delete_np(tasks[i]);
	rtf_destroy(1);
	rtf_destroy(2);
	rtf_destroy(3);
}
