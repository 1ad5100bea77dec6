/* The journal of `detach isolate` (journal.h): the state file, its lock,
 * its records. */
#include "cli/cli.h"
#include "cli/journal.h"
#include "lib/undo_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
		undo_log_unescape(tab + 1, e->value, sizeof(e->value));
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
	struct stat st;
	char *buf = NULL, **lines = NULL;
	int n = -ENOMEM;

	memset(j, 0, sizeof(*j));
	j->fd = -1;
	/* the whole log at once (undo_log_read); one that grew meanwhile is
	 * read again */
	for (int tries = 0; tries < 3; tries++) {
		if (stat(path, &st))
			return -errno;
		size_t cap = (size_t)st.st_size + 2;
		free(buf);
		free(lines);
		buf = malloc(cap);
		lines = malloc(sizeof(*lines) * (cap / 2 + 1));
		if (!buf || !lines)
			break;
		if ((n = undo_log_read(path, buf, cap, lines, (int)(cap / 2 + 1))) != -EFBIG)
			break;
	}
	for (int i = 0; i < n; i++)
		jparse(j, lines[i]);
	free(buf);
	free(lines);
	return n < 0 ? n : 0;
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
	char *copy;
	int err;

	if (j->fd < 0)
		return -EBADF;
	if ((err = undo_log_append(j->fd, line)))
		return err;
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

bool journal_in_made_dir(const struct journal *j, const char *path)
{
	for (int i = 0; i < j->n; i++) {
		size_t n = strlen(j->e[i].path);
		if (j->e[i].kind == J_MKDIR && !strncmp(path, j->e[i].path, n) && path[n] == '/')
			return true;
	}
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

int journal_open(struct journal *j, const char *config)
{
	int fd;
	struct stat st;

	if (mkdir(ISOLATE_STATE_DIR, 0700) && errno != EEXIST) {
		cli_err("cannot create %s: %s", ISOLATE_STATE_DIR, strerror(errno));
		return -1;
	}
	fd = open(ISOLATE_STATE_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		cli_err("cannot open %s: %s", ISOLATE_STATE_FILE, strerror(errno));
		return -1;
	}
	fstat(fd, &st);
	journal_load(j, ISOLATE_STATE_FILE);
	j->fd = fd;
	if (st.st_size == 0) {
		char line[700];
		int err;

		snprintf(line, sizeof(line), "config %s", config);
		if ((err = journal_append(j, "detach-isolate 1")) || (err = journal_append(j, line))) {
			cli_err("cannot write %s: %s", ISOLATE_STATE_FILE, strerror(-err));
			return -1;
		}
		/* the new directory entry must survive a crash too */
		undo_log_sync_dir(ISOLATE_STATE_DIR);
	}
	return 0;
}

int journal_lock(void)
{
	int fd;

	mkdir(ISOLATE_STATE_DIR, 0700);
	fd = open(ISOLATE_STATE_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		if (fd >= 0 && errno == EWOULDBLOCK) {
			cli_err("another 'detach isolate' is running");
			cli_note("wait for it, or end it; a killed one leaves a state file that --undo restores");
		} else {
			cli_err("cannot lock %s/lock: %s", ISOLATE_STATE_DIR, strerror(errno));
		}
		return -1;
	}
	return fd;   /* held until exit */
}
