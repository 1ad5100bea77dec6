/* detach ps: the detached threads of every running program, from the
 * statistics each runtime publishes in REGISTRY_DIR/<pid>, shown while its
 * owner holds its lock (lib/liveness.h) and removed when it does not: a
 * program killed before it could remove its file. */
#include "cli/cli.h"
#include "cli/ps.h"
#include "lib/contract.h"
#include "lib/liveness.h"
#include "lib/registry.h"
#include "lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int ps_channels(struct json *j);      /* ps_chan.c */

static int usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: detach ps [--json] [--sites]\n\n"
		"Lists the detached threads of all running programs: pid, tid, CPU, mode,\n"
		"proxy tid and wait, forwarded / local / emulated calls and traps; then the\n"
		"channels (dt_chan_open) with their holders' pids (0: none) and counters.\n"
		"  --json   one JSON document instead of the table: each thread with the\n"
		"           fields of a thread in `detach run --stats`'s file\n"
		"  --sites  rewrite mode's system call sites met so far, by program and\n"
		"           library: rewritten exactly, with a window, left trapping (for\n"
		"           want of a stub page among them), traps at those left trapping\n"
		"           after the first at each (with --json: as `sites` in `detach run\n"
		"           --stats`'s file, each site left trapping listed)\n");
	return status;
}

static const struct dt_registry *map_registry(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *p;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || st.st_size != (off_t)sizeof(struct dt_registry)) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct dt_registry), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

int ps_each(pid_t only, void (*fn)(const struct dt_registry *r, void *arg), void *arg)
{
	DIR *d = opendir(REGISTRY_DIR);
	struct dirent *e;
	int n = 0, locks = locks_open(true);

	if (locks < 0)
		locks = locks_open(false);      /* another user's: looks, removes nothing */

	while (d && (e = readdir(d))) {
		char path[512];
		const struct dt_registry *r;
		int pid = atoi(e->d_name);

		if (pid <= 0 || (only && pid != only))
			continue;
		snprintf(path, sizeof(path), "%s/%s", REGISTRY_DIR, e->d_name);
		if (!registry_live(locks, pid))
			continue;               /* a dead program's: removed when we may */
		if (!(r = map_registry(path)))
			continue;
		if (r->magic == REGISTRY_MAGIC && r->pid == pid) {
			fn(r, arg);
			n++;
		}
		munmap((void *)r, sizeof(*r));
	}
	if (d)
		closedir(d);
	if (locks >= 0)
		close(locks);
	return n;
}

/* One thread as `detach ps --json` and the ctl files show it: the
 * program's pid, mode, proxy and command and the thread's state beside
 * the statistics every writer of them shares (lib/registry.c). */
void ps_thread_json(struct json *j, const struct dt_registry *r, const struct dt_thread_stats *s)
{
	bool alive = task_alive(r->pid, s->tid);

	json_object_begin(j, NULL);
	json_int(j, "pid", r->pid);
	json_str(j, "mode", r->mode);
	json_str(j, "proxy", r->proxy);
	json_str(j, "command", r->comm);
	json_bool(j, "alive", alive);
	json_bool(j, "detached", alive && s->state == 1);
	registry_thread_json(j, r, s, r->pid);
	json_object_end(j);
}

struct listing {
	struct json *j;         /* NULL: the table */
	int rows;
};

static void list_threads(const struct dt_registry *r, void *arg)
{
	struct listing *l = arg;

	for (int i = 0; i < r->nthreads && i < DT_MAX_THREADS; i++) {
		const struct dt_thread_stats *s = &r->threads[i];
		if (!s->tid)
			continue;
		l->rows++;
		if (l->j) {
			ps_thread_json(l->j, r, s);
			continue;
		}
		bool alive = task_alive(r->pid, s->tid);
		printf("%7d %7d %4d %-8s %-6s %-8s %7d %12llu %10llu %10llu %12llu  %s\n", r->pid, s->tid,
		       s->cpu, r->mode, !alive ? "exited" : s->state == 1 ? "run" : "attach", r->proxy, s->proxy_tid,
		       (unsigned long long)s->forwarded, (unsigned long long)s->local,
		       (unsigned long long)s->emulated, (unsigned long long)s->traps, r->comm);
	}
}

/* --sites: the table, a row per program and library, or the JSON */
static void list_sites(const struct dt_registry *r, void *arg)
{
	static struct dt_site_map by[DT_SITE_MAPS];
	struct listing *l = arg;

	l->rows++;
	if (l->j) {
		json_object_begin(l->j, NULL);
		json_int(l->j, "pid", r->pid);
		json_str(l->j, "mode", r->mode);
		json_str(l->j, "command", r->comm);
		registry_sites_json(l->j, r, r->pid, NULL);
		json_object_end(l->j);
		return;
	}
	unsigned n = registry_sites_group(r, r->pid, by, DT_SITE_MAPS, NULL, NULL);
	for (unsigned k = 0; k < n; k++)
		printf("%7d %-8s %7llu %7llu %8llu %7llu %10llu  %s\n", r->pid, r->mode,
		       (unsigned long long)by[k].n[DT_SITE_EXACT], (unsigned long long)by[k].n[DT_SITE_WINDOW],
		       (unsigned long long)(by[k].n[DT_SITE_TRAPPING] + by[k].n[DT_SITE_NO_STUB]),
		       (unsigned long long)by[k].n[DT_SITE_NO_STUB], (unsigned long long)by[k].after, by[k].name);
}

static int ps_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "sites", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool as_json = false, sites = false;
	struct json j;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': as_json = true; break;
		case 's': sites = true; break;
		case 'h': return usage(0);
		default: return cli_bad_option("ps", argv);
		}
	}
	if (optind < argc)
		return cli_unexpected_arg("ps", argv[optind]);
	if (sites) {
		struct listing l = { as_json ? &j : NULL, 0 };
		if (as_json) {
			json_init(&j, stdout);
			json_object_begin(&j, NULL);
			json_array_begin(&j, "programs");
		} else {
			printf("%7s %-8s %7s %7s %8s %7s %10s  %s\n", "PID", "MODE", "EXACT", "WINDOW", "TRAPPING",
			       "NO_STUB", "LATE_TRAPS", "LIBRARY");
		}
		ps_each(0, list_sites, &l);
		if (as_json) {
			json_array_end(&j);
			json_object_end(&j);
		} else if (!l.rows) {
			printf("(no detached programs)\n");
		}
		return 0;
	}
	if (as_json) {
		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_array_begin(&j, "threads");
	} else {
		printf("%7s %7s %4s %-8s %-6s %-8s %7s %12s %10s %10s %12s  %s\n", "PID", "TID", "CPU", "MODE",
		       "STATE", "PROXY", "PTID", "FORWARDED", "LOCAL", "EMULATED", "TRAPS", "COMMAND");
	}
	struct listing l = { as_json ? &j : NULL, 0 };
	ps_each(0, list_threads, &l);
	if (as_json) {
		json_array_end(&j);
		ps_channels(&j);
		json_object_end(&j);
	} else {
		if (!l.rows)
			printf("(no detached threads)\n");
		ps_channels(NULL);
	}
	return 0;
}

DETACH_VERB(verb_ps) = { "ps", "list the detached threads of running programs", ps_main };
