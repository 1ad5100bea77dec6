/* Description: src/lib helpers: CPU lists, durations, TSC calibration, JSON,
 * the undo log (a torn last line is never replayed; too long is refused). */
#include "helpers/t.h"
#include "lib/util.h"
#include "lib/undo_log.h"

#include <errno.h>
#include <string.h>

static void test_cpulist(void)
{
	cpu_set_t s;
	char buf[64];

	t_check(cpulist_parse("2-5,8", &s) == 0, "parse");
	t_check(CPU_COUNT(&s) == 5 && CPU_ISSET(2, &s) && CPU_ISSET(5, &s) && CPU_ISSET(8, &s), "members");
	t_check(!strcmp(cpulist_format(&s, buf, sizeof(buf)), "2-5,8"), "format %s", buf);
	t_check(cpuset_nth(&s, 0) == 2 && cpuset_nth(&s, 4) == 8 && cpuset_nth(&s, 5) == -1, "nth");
	t_check(cpulist_parse("0", &s) == 0 && CPU_COUNT(&s) == 1, "single");
	const char *bad[] = { "", "a", "1-", "-1", "3-1", "1,,2", "1,", "1 2", "99999", NULL };
	for (int i = 0; bad[i]; i++)
		t_check(cpulist_parse(bad[i], &s) < 0, "'%s' must be refused", bad[i]);
}

static void test_duration(void)
{
	uint64_t ns;

	t_check(duration_parse("30s", &ns) == 0 && ns == 30000000000ull, "30s");
	t_check(duration_parse("20m", &ns) == 0 && ns == 1200000000000ull, "20m");
	t_check(duration_parse("2h", &ns) == 0 && ns == 7200000000000ull, "2h");
	t_check(duration_parse("500ms", &ns) == 0 && ns == 500000000ull, "500ms");
	t_check(duration_parse("100us", &ns) == 0 && ns == 100000ull, "100us");
	t_check(duration_parse("1.5", &ns) == 0 && ns == 1500000000ull, "bare seconds");
	const char *bad[] = { "", "s", "10x", "-1s", "1ss", NULL };
	for (int i = 0; bad[i]; i++)
		t_check(duration_parse(bad[i], &ns) < 0, "'%s' must be refused", bad[i]);
}

static void test_tsc(void)
{
	struct tsc_clock c;
	uint64_t t0, n0, n1, t1;

	t_check(tsc_calibrate(&c, 0) == 0, "calibrate");
	t_check(c.hz > 100000000ull, "hz %llu", (unsigned long long)c.hz);
	/* The TSC clock tracks CLOCK_MONOTONIC: within 100 us over ~50 ms. */
	n0 = monotonic_ns(); t0 = rdtsc();
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);
	t1 = rdtsc(); n1 = monotonic_ns();
	long long d = (long long)(tsc_to_ns(&c, t1) - tsc_to_ns(&c, t0)) - (long long)(n1 - n0);
	t_check(d > -100000 && d < 100000, "drift %lld ns", d);
	t_check(ns_to_tsc_cycles(&c, 1000000000ull) == c.hz, "1 s in cycles");
}

static void test_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct json j;

	json_init(&j, f);
	j.pretty = false;
	json_object_begin(&j, NULL);
	json_str(&j, "s", "a\"b\n");
	json_int(&j, "i", -3);
	json_array_begin(&j, "a");
	json_uint(&j, NULL, 1);
	json_double(&j, NULL, 0.5);
	json_bool(&j, NULL, true);
	json_null(&j, NULL);
	json_array_end(&j);
	json_object_begin(&j, "o");
	json_object_end(&j);
	json_object_end(&j);
	fclose(f);
	t_check(!strcmp(buf, "{\"s\":\"a\\\"b\\n\",\"i\":-3,\"a\":[1,0.5,true,null],\"o\":{}}\n"), "json %s", buf);
	free(buf);
}

static void test_undo_log(void)
{
	char path[] = "/tmp/detach-undo-log-XXXXXX", buf[64], small[16], *lines[8], esc[64], back[64];
	int fd = mkstemp(path), n;

	t_check(fd >= 0, "mkstemp: %s", strerror(errno));
	t_check(undo_log_append(fd, "mkdir /a") == 0 && undo_log_append(fd, "write /b\\t1") == 0, "append");
	t_check(write(fd, "mount /c", 8) == 8, "a torn line");
	close(fd);
	n = undo_log_read(path, buf, sizeof(buf), lines, 8);
	t_check(n == 2 && !strcmp(lines[0], "mkdir /a") && !strcmp(lines[1], "write /b\\t1"),
		"read back %d lines, the torn one must not count", n);
	t_check(undo_log_read(path, small, sizeof(small), lines, 8) == -EFBIG, "a log larger than the buffer");
	t_check(undo_log_read("/nonexistent/x", buf, sizeof(buf), lines, 8) == -ENOENT, "a missing log");
	unlink(path);
	undo_log_escape("a\tb\nc\\", esc, sizeof(esc));
	undo_log_unescape(esc, back, sizeof(back));
	t_check(!strchr(esc, '\n') && !strchr(esc, '\t') && !strcmp(back, "a\tb\nc\\"), "escape round trip: %s", esc);
}

int main(void)
{
	test_undo_log();
	test_cpulist();
	test_duration();
	test_tsc();
	test_json();
	return t_done();
}
