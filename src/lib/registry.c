/* The registry's one writer of a thread's statistics (registry.h), and the
 * kernel's per-thread figures it reports. */
#include "lib/registry.h"
#include "lib/syscall_names.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kernel_counters_read(pid_t pid, pid_t tid, struct kernel_counters *k)
{
	char dir[48], path[64], buf[4096], *p;
	unsigned long long minflt = 0, majflt = 0;
	int err;

	memset(k, 0, sizeof(*k));
	if (pid)
		snprintf(dir, sizeof(dir), "/proc/%d/task/%d", (int)pid, (int)tid);
	else
		snprintf(dir, sizeof(dir), "/proc/self/task/%d", (int)tid);
	snprintf(path, sizeof(path), "%s/stat", dir);
	if ((err = read_text_file(path, buf, sizeof(buf))))
		return err;
	if ((p = strrchr(buf, ')')))
		/* after "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt */
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu", &minflt, &majflt);
	k->minflt = minflt;
	k->majflt = majflt;
	snprintf(path, sizeof(path), "%s/status", dir);
	if ((err = read_text_file(path, buf, sizeof(buf))))
		return err;
	if ((p = strstr(buf, "\nvoluntary_ctxt_switches:")))
		k->vol_switches = strtoull(p + 25, NULL, 10);
	if ((p = strstr(buf, "\nnonvoluntary_ctxt_switches:")))
		k->invol_switches = strtoull(p + 28, NULL, 10);
	return 0;
}

void registry_thread_json(struct json *j, const struct dt_registry *r, const struct dt_thread_stats *s,
			  pid_t proc_pid)
{
	struct { long nr; uint64_t n; } top[DT_NR_SYSCALLS];
	struct kernel_counters k = s->at_exit;
	int ntop = 0;

	json_int(j, "tid", s->tid);
	json_int(j, "cpu", s->cpu);
	json_int(j, "proxy_tid", s->proxy_tid);
	json_uint(j, "forwarded", s->forwarded);
	json_uint(j, "local", s->local);
	json_uint(j, "emulated", s->emulated);
	json_uint(j, "waited_ns", tsc_cycles_to_ns(&r->tsc, s->waited));
	json_uint(j, "traps", s->traps);
	json_uint(j, "retraps", s->retraps);
	json_uint(j, "sites_rewritten", s->sites_rewritten);
	json_uint(j, "sites_window", s->sites_window);
	json_uint(j, "sites_refused", s->sites_refused);
	json_uint(j, "traps_refused", s->traps_refused);
	json_uint(j, "sync_cores", s->sync_cores);
	json_uint(j, "int3_hits", s->int3_hits);
	json_uint(j, "interrupts_resent", s->interrupts_resent);
	/* the runtime's own account of kernel entries on the detached CPU:
	 * a trap or an int3 hit is two (the trap and its rt_sigreturn), a
	 * local call or a membarrier one */
	json_uint(j, "kernel_entries", 2 * (s->traps + s->retraps + s->int3_hits) + s->local + s->sync_cores);
	/* while detached: the kernel's figures now, less those at detach time */
	if (s->ended || kernel_counters_read(proc_pid, s->tid, &k) == 0) {
		json_uint(j, "minor_faults", k.minflt - s->at_detach.minflt);
		json_uint(j, "major_faults", k.majflt - s->at_detach.majflt);
		json_uint(j, "voluntary_ctxt_switches", k.vol_switches - s->at_detach.vol_switches);
		json_uint(j, "nonvoluntary_ctxt_switches", k.invol_switches - s->at_detach.invol_switches);
	}
	for (long nr = 0; nr < DT_NR_SYSCALLS; nr++)
		if (s->per_nr[nr])
			top[ntop].nr = nr, top[ntop++].n = s->per_nr[nr];
	for (int i = 1; i < ntop; i++)       /* insertion sort, most first */
		for (int m = i; m > 0 && top[m].n > top[m - 1].n; m--) {
			typeof(top[0]) x = top[m];
			top[m] = top[m - 1];
			top[m - 1] = x;
		}
	json_object_begin(j, "syscalls");
	for (int i = 0; i < ntop; i++) {
		const char *name = syscall_name(top[i].nr);
		char num[32];
		if (!name) {
			snprintf(num, sizeof(num), "%ld", top[i].nr);
			name = num;
		}
		json_uint(j, name, top[i].n);
	}
	json_object_end(j);
}

unsigned registry_sites_group(const struct dt_registry *r, pid_t pid, struct dt_site_map *by, unsigned max,
			      struct dt_site_left *left, unsigned *nleft)
{
	unsigned nby = 0, n = __atomic_load_n(&r->nsites, __ATOMIC_ACQUIRE);
	char line[512], path[48];
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/maps");
	if (n > DT_SITES)
		n = DT_SITES;
	if (nleft)
		*nleft = 0;
	memset(by, 0, max * sizeof(*by));
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &at) < 3)
			continue;
		char *name = line + at;
		name[strcspn(name, "\n")] = '\0';
		if (!*name)
			name = "[anon]";
		for (unsigned i = 0; i < n; i++) {
			uint64_t site = __atomic_load_n(&r->sites[i].addr, __ATOMIC_ACQUIRE);
			unsigned kind = r->sites[i].kind, k = 0;
			if (site < lo || site >= hi || kind > DT_SITE_NO_STUB)
				continue;
			while (k < nby && strcmp(by[k].name, name))
				k++;
			if (k == nby) {
				if (nby == max)
					continue;
				snprintf(by[nby++].name, sizeof(by[0].name), "%s", name);
			}
			by[k].n[kind]++;
			if (kind >= DT_SITE_TRAPPING) {
				uint32_t t = r->sites[i].traps;
				by[k].traps += t;
				by[k].after += t ? t - 1 : 0;
				if (left && *nleft < DT_SITES) {
					left[*nleft].map = k;
					left[*nleft].site = i;
					left[(*nleft)++].off = site - lo + off;
				}
			}
		}
	}
	fclose(f);
	return nby;
}

void registry_sites_json(struct json *j, const struct dt_registry *r, pid_t pid, const char *(*why)(unsigned i))
{
	static const char *const kinds[] = { "exact", "window", "trapping", "no_stub" };
	static struct dt_site_map by[DT_SITE_MAPS];
	static struct dt_site_left left[DT_SITES];
	unsigned nleft, nby = registry_sites_group(r, pid, by, DT_SITE_MAPS, left, &nleft);

	json_object_begin(j, "sites");
	for (unsigned k = 0; k < nby; k++) {
		json_object_begin(j, by[k].name);
		for (int kind = 0; kind <= DT_SITE_NO_STUB; kind++)
			json_uint(j, kinds[kind], by[k].n[kind]);
		json_uint(j, "traps_trapping", by[k].traps);
		json_uint(j, "traps_after_warmup", by[k].after);
		json_array_begin(j, "trapping_sites");
		for (unsigned i = 0; i < nleft; i++) {
			if (left[i].map != k)
				continue;
			char at[24];
			snprintf(at, sizeof(at), "%#lx", left[i].off);
			json_object_begin(j, NULL);
			json_str(j, "offset", at);
			json_uint(j, "traps", r->sites[left[i].site].traps);
			if (why)
				json_str(j, "why", why(left[i].site));
			json_object_end(j);
		}
		json_array_end(j);
		json_object_end(j);
	}
	json_object_end(j);
}
