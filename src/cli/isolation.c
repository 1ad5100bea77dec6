/* Shared parts of `detach isolate` and `detach check` (isolation.h). */
#include "cli/cli.h"
#include "cli/isolation.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void value_escape(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in && o + 3 < len; in++) {
		if (*in == '\\') { out[o++] = '\\'; out[o++] = '\\'; }
		else if (*in == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
		else if (*in == '\t') { out[o++] = '\\'; out[o++] = 't'; }
		else out[o++] = *in;
	}
	out[o] = '\0';
}

void value_unescape(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in && o + 1 < len; in++) {
		if (*in == '\\' && in[1]) {
			in++;
			out[o++] = *in == 'n' ? '\n' : *in == 't' ? '\t' : *in;
		} else {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}

static struct jentry *jnew(struct journal *j)
{
	if (j->n == j->cap) {
		int cap = j->cap ? j->cap * 2 : 64;
		struct jentry *e = realloc(j->e, (size_t)cap * sizeof(*e));
		if (!e)
			return NULL;
		j->e = e;
		j->cap = cap;
	}
	memset(&j->e[j->n], 0, sizeof(j->e[0]));
	return &j->e[j->n++];
}

/* Parses one complete line into the journal; unknown lines are skipped. */
static void jparse(struct journal *j, char *line)
{
	struct jentry *e;
	char *tab;

	if (!strncmp(line, "write ", 6) && (tab = strchr(line + 6, '\t'))) {
		if (!(e = jnew(j)))
			return;
		e->kind = J_WRITE;
		*tab = '\0';
		snprintf(e->path, sizeof(e->path), "%s", line + 6);
		value_unescape(tab + 1, e->value, sizeof(e->value));
	} else if (!strncmp(line, "mkdir ", 6)) {
		if (!(e = jnew(j)))
			return;
		e->kind = J_MKDIR;
		snprintf(e->path, sizeof(e->path), "%s", line + 6);
	} else if (!strncmp(line, "task ", 5)) {
		long tid;
		unsigned long long st;
		char list[1024];
		if (sscanf(line + 5, "%ld %llu %1023s", &tid, &st, list) != 3 || !(e = jnew(j)))
			return;
		e->kind = J_TASK;
		e->tid = tid;
		e->start = st;
		snprintf(e->value, sizeof(e->value), "%s", list);
	} else if (!strncmp(line, "unmovable-irq ", 14)) {
		int irq, err;
		if (sscanf(line + 14, "%d %d", &irq, &err) != 2 || !(e = jnew(j)))
			return;
		e->kind = J_UNMOVABLE_IRQ;
		e->irq = irq;
		e->err = err;
	} else if (!strncmp(line, "config ", 7)) {
		if (!(e = jnew(j)))
			return;
		e->kind = J_CONFIG;
		snprintf(e->value, sizeof(e->value), "%s", line + 7);
	}
}

int journal_load(struct journal *j, const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	memset(j, 0, sizeof(*j));
	j->fd = -1;
	if (!f)
		return -errno;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break;          /* torn last line: the change after it never happened */
		line[n - 1] = '\0';
		jparse(j, line);
	}
	free(line);
	fclose(f);
	return 0;
}

void journal_free(struct journal *j)
{
	if (j->fd >= 0)
		close(j->fd);
	free(j->e);
	memset(j, 0, sizeof(*j));
	j->fd = -1;
}

int journal_append(struct journal *j, const char *line)
{
	size_t len = strlen(line);
	char *copy;

	if (j->fd < 0)
		return -EBADF;
	/* One write() per record: a crash leaves whole lines or a torn last one. */
	if (write(j->fd, line, len) != (ssize_t)len || write(j->fd, "\n", 1) != 1)
		return errno ? -errno : -EIO;
	if (fsync(j->fd))
		return -errno;
	copy = strdup(line);
	if (copy) {
		jparse(j, copy);
		free(copy);
	}
	return 0;
}

bool journal_has_write(const struct journal *j, const char *path)
{
	for (int i = 0; i < j->n; i++)
		if (j->e[i].kind == J_WRITE && !strcmp(j->e[i].path, path))
			return true;
	return false;
}

bool journal_has_mkdir(const struct journal *j, const char *path)
{
	for (int i = 0; i < j->n; i++)
		if (j->e[i].kind == J_MKDIR && !strcmp(j->e[i].path, path))
			return true;
	return false;
}

bool journal_has_task(const struct journal *j, long tid)
{
	for (int i = 0; i < j->n; i++)
		if (j->e[i].kind == J_TASK && j->e[i].tid == tid)
			return true;
	return false;
}

int journal_config_cpus(const struct journal *j, cpu_set_t *cpus)
{
	for (int i = 0; i < j->n; i++) {
		char list[256];
		if (j->e[i].kind != J_CONFIG)
			continue;
		if (sscanf(j->e[i].value, "cpus=%255s", list) == 1)
			return cpulist_parse(list, cpus);
	}
	return -ENOENT;
}

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

int parse_cpu_option(const char *arg, cpu_set_t *set)
{
	cpu_set_t online, off;
	char buf[256];

	if (cpulist_parse(arg, set)) {
		cli_err("malformed CPU list '%s'", arg);
		cli_note("a CPU list looks like 3 or 2-5,8");
		return -1;
	}
	if (cpus_online(&online) == 0) {
		CPU_XOR(&off, set, &online);
		CPU_AND(&off, &off, set);
		if (CPU_COUNT(&off)) {
			cli_err("CPU %s is not online", cpulist_format(&off, buf, sizeof(buf)));
			cli_note("online CPUs: %s", cpulist_format(&online, buf, sizeof(buf)));
			return -1;
		}
	}
	return 0;
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

unsigned long long task_starttime(long tid)
{
	char buf[2048], *after;
	const char *p;

	if (stat_fields(tid, buf, sizeof(buf), &after))
		return 0;
	p = nth_after(after, 22);
	return p ? strtoull(p, NULL, 10) : 0;
}

unsigned long task_flags(long tid)
{
	char buf[2048], *after;
	const char *p;

	if (stat_fields(tid, buf, sizeof(buf), &after))
		return 0;
	p = nth_after(after, 9);
	return p ? strtoul(p, NULL, 10) : 0;
}

void task_comm(long tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/comm", tid);
	if (read_text_file(path, buf, len))
		snprintf(buf, len, "?");
}
