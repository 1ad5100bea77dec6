/* CPU lists in the kernel's notation: "2-5,8". */
#include "lib/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_cpu(const char **p, int *cpu)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)**p))
		return -EINVAL;
	errno = 0;
	v = strtol(*p, &end, 10);
	if (errno || v < 0 || v >= CPU_SETSIZE)
		return -ERANGE;
	*cpu = (int)v;
	*p = end;
	return 0;
}

int cpulist_parse(const char *s, cpu_set_t *set)
{
	const char *p = s;

	CPU_ZERO(set);
	if (!s || !*s)
		return -EINVAL;
	for (;;) {
		int lo, hi, err;

		if ((err = parse_cpu(&p, &lo)))
			return err;
		hi = lo;
		if (*p == '-') {
			p++;
			if ((err = parse_cpu(&p, &hi)))
				return err;
			if (hi < lo)
				return -EINVAL;
		}
		for (int c = lo; c <= hi; c++)
			CPU_SET(c, set);
		if (*p == '\0')
			return 0;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
}

char *cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;

	if (len)
		buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		int e = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
		if (e > c && off < len)
			off += (size_t)snprintf(buf + off, len - off, "-%d", e);
		c = e;
	}
	return buf;
}

int cpuset_nth(const cpu_set_t *set, int n)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set) && n-- == 0)
			return c;
	return -1;
}

int cpus_online(cpu_set_t *set)
{
	char buf[1024];
	int err = read_text_file("/sys/devices/system/cpu/online", buf, sizeof(buf));

	if (err)
		return err;
	return cpulist_parse(buf, set);
}
