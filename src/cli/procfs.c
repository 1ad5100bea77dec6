/* What the command reads from the kernel (procfs.h). */
#include "cli/procfs.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hexmask_parse(const char *s, cpu_set_t *set)
{
	int bit = 0;
	const char *p = s + strlen(s);

	CPU_ZERO(set);
	while (p > s) {
		int c = (unsigned char)*--p, v;
		if (c == ',' || c == '\n' || c == ' ')
			continue;
		if (!isxdigit(c))
			return -EINVAL;
		v = isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
		for (int b = 0; b < 4; b++, bit++)
			if ((v >> b) & 1 && bit < CPU_SETSIZE)
				CPU_SET(bit, set);
	}
	return bit ? 0 : -EINVAL;
}

char *hexmask_format(const cpu_set_t *set, char *buf, size_t len)
{
	int top = 0;
	size_t o = 0;

	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set))
			top = c;
	/* 32-bit groups, most significant first, as the kernel prints them */
	for (int g = top / 32; g >= 0 && o < len; g--) {
		unsigned v = 0;
		for (int b = 0; b < 32; b++)
			if (CPU_ISSET(g * 32 + b, set))
				v |= 1u << b;
		if (g == top / 32)
			o += (size_t)snprintf(buf + o, len - o, "%x", v);
		else
			o += (size_t)snprintf(buf + o, len - o, ",%08x", v);
	}
	return buf;
}

/* The /proc/interrupts line for name ("36" or "LOC"), or false. */
static bool interrupts_line(const char *name, char *out, size_t len)
{
	FILE *f = fopen("/proc/interrupts", "re");
	char line[1024];
	size_t nl = strlen(name);
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		while (*p == ' ')
			p++;
		if (!strncmp(p, name, nl) && p[nl] == ':') {
			snprintf(out, len, "%s", p + nl + 1);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

void irq_name(int irq, char *buf, size_t len)
{
	char num[16], line[1024], *p;

	snprintf(buf, len, "?");
	snprintf(num, sizeof(num), "%d", irq);
	if (!interrupts_line(num, line, sizeof(line)))
		return;
	line[strcspn(line, "\n")] = '\0';
	/* per-CPU counts, then chip ("PCI-MSIX-0000:00:02.0"), hwirq and
	 * trigger ("1-edge"), then the device names */
	p = line;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!isdigit((unsigned char)*p))
			break;
		size_t n = strspn(p, "0123456789");
		if (p[n] != ' ' && p[n] != '\0')
			break;
		p += n;
	}
	for (int skip = 0; skip < 2 && *p; skip++) {
		p += strcspn(p, " ");
		while (*p == ' ')
			p++;
	}
	if (*p)
		snprintf(buf, len, "%s", p);
}

long long loc_count(int cpu)
{
	char line[1024], *p, *end;
	long long v = -1;

	if (!interrupts_line("LOC", line, sizeof(line)))
		return -1;
	p = line;
	for (int c = 0; c <= cpu; c++) {
		errno = 0;
		v = strtoll(p, &end, 10);
		if (end == p)
			return -1;
		p = end;
	}
	return v;
}

/* /proc/TID/stat: "pid (comm) state ppid ..." - comm may hold spaces and
 * parentheses, so fields are counted from the last ')'. */
static int stat_fields(long tid, char *buf, size_t len, char **after)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/stat", tid);
	if (read_text_file(path, buf, len))
		return -1;
	*after = strrchr(buf, ')');
	return *after ? 0 : -1;
}

static const char *nth_after(char *after, int n)
{
	/* after points at ')'; field 3 (state) follows it */
	char *p = after + 1;
	for (int f = 3; f < n && p; f++) {
		p = strchr(p + 1, ' ');
	}
	return p ? p + 1 : NULL;
}

/* Numeric field n of /proc/TID/stat, 0 if the task is gone. */
static unsigned long long stat_field(long tid, int n)
{
	char buf[2048], *after;
	const char *p;

	if (stat_fields(tid, buf, sizeof(buf), &after))
		return 0;
	p = nth_after(after, n);
	return p ? strtoull(p, NULL, 10) : 0;
}

char task_state(long tid)
{
	char buf[2048], *after;

	if (stat_fields(tid, buf, sizeof(buf), &after) || !after[1] || !after[2])
		return 0;
	return after[2];              /* ") S ..." */
}

unsigned long long task_starttime(long tid)
{
	return stat_field(tid, 22);
}

unsigned long task_flags(long tid)
{
	return (unsigned long)stat_field(tid, 9);
}

void task_comm(long tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/comm", tid);
	if (read_text_file(path, buf, len))
		snprintf(buf, len, "?");
}
