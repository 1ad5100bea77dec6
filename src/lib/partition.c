/* Finding the detach partition (see partition.h).  Uses open/read/write only,
 * no stdio: the runtime calls this while it sets a thread up. */
#include "lib/partition.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The i-th space-separated field of line (0-based), copied into out. */
static int field(const char *line, int i, char *out, size_t len)
{
	const char *p = line;

	while (i-- > 0) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	size_t n = strcspn(p, " \n");
	if (n >= len)
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

static bool has_word(const char *list, const char *word, char sep)
{
	size_t wl = strlen(word);

	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, (char[]){ sep, ' ', '\n', '\0' });
		if (n == wl && !strncmp(p, word, wl))
			return true;
		p += n;
		while (*p == sep || *p == ' ' || *p == '\n')
			p++;
	}
	return false;
}

int cpuset_hierarchy(struct partition *p)
{
	static char buf[65536];
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	ssize_t n, off = 0;

	memset(p, 0, sizeof(*p));
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
		off += n;
	close(fd);
	buf[off] = '\0';

	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		char mnt[PATH_MAX / 4], fstype[32], opts[512], path[PATH_MAX / 4 + 32], ctl[512];
		char *dash;

		if (nl)
			*nl = '\0';
		/* "id parent maj:min root mountpoint opts [tags] - fstype source superopts" */
		dash = strstr(line, " - ");
		if (dash && field(line, 4, mnt, sizeof(mnt)) == 0 &&
		    field(dash + 3, 0, fstype, sizeof(fstype)) == 0 &&
		    field(dash + 3, 2, opts, sizeof(opts)) == 0) {
			if (!strcmp(fstype, "cgroup") && has_word(opts, "cpuset", ',')) {
				p->kind = CG_V1;
				snprintf(p->root, sizeof(p->root), "%s", mnt);
			} else if (!strcmp(fstype, "cgroup2") && p->kind != CG_V1) {
				snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
				if (read_text_file(path, ctl, sizeof(ctl)) == 0 && has_word(ctl, "cpuset", ' ')) {
					p->kind = CG_V2;
					snprintf(p->root, sizeof(p->root), "%s", mnt);
				}
			}
		}
		if (nl)
			*nl = '\n';
		line = nl ? nl + 1 : NULL;
	}
	return p->kind == CG_NONE ? -ENOENT : 0;
}

int partition_find(struct partition *p)
{
	char path[PATH_MAX], buf[1024];
	struct stat st;
	int err = cpuset_hierarchy(p);

	if (err)
		return err;
	snprintf(p->dir, sizeof(p->dir), "%s/%s", p->root, PARTITION_NAME);
	if (stat(p->dir, &st) || !S_ISDIR(st.st_mode)) {
		p->dir[0] = '\0';
		return -ENOENT;
	}
	if (p->kind == CG_V1) {
		snprintf(p->tasks, sizeof(p->tasks), "%s/tasks", p->dir);
		snprintf(path, sizeof(path), "%s/cpuset.effective_cpus", p->dir);
		if (read_text_file(path, buf, sizeof(buf))) {
			snprintf(path, sizeof(path), "%s/cpuset.cpus", p->dir);
			if ((err = read_text_file(path, buf, sizeof(buf))))
				return err;
		}
		p->valid = true;
	} else {
		snprintf(p->tasks, sizeof(p->tasks), "%s/cgroup.threads", p->dir);
		snprintf(path, sizeof(path), "%s/cpuset.cpus.partition", p->dir);
		if ((err = read_text_file(path, buf, sizeof(buf))))
			return err;
		p->valid = !strcmp(buf, "isolated");
		snprintf(path, sizeof(path), "%s/cpuset.cpus.effective", p->dir);
		if ((err = read_text_file(path, buf, sizeof(buf))))
			return err;
	}
	if (!buf[0]) {
		CPU_ZERO(&p->cpus);
		return 0;
	}
	return cpulist_parse(buf, &p->cpus);
}

int partition_cpu_isolated(int cpu)
{
	struct partition p;
	int err = partition_find(&p);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	return p.valid && cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &p.cpus);
}

int partition_add_thread(const struct partition *p, pid_t tid)
{
	char buf[32];

	if (p->kind == CG_NONE || !p->tasks[0])
		return -ENOENT;
	if (!tid)
		tid = gettid();
	snprintf(buf, sizeof(buf), "%d", (int)tid);
	return write_text_file(p->tasks, buf);
}
