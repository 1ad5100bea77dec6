/* detach run as an MPI rank (`mpirun -np N detach run [-c LIST] -- ./app`).
 *
 * The launcher starts N copies of `detach run` on a node, often bound to one
 * core each.  Every copy decides alone, from the same inputs, so the ranks
 * agree without talking:
 *   detached CPUs S  -c, else the detach partition, else the node's CPUs but
 *                    the last (kept for housekeeping: launchers bind local
 *                    rank i to the i-th core, from the first);
 *   housekeeping H   -H, else the node's CPUs outside S and the partition:
 *                    proxies and every ordinary thread of every rank, so
 *                    they stay outside every rank's detached CPU;
 *   rank -> CPU      the core the launcher bound the rank to, when that is in
 *                    S; otherwise a table every rank computes alike: rank i
 *                    keeps the i-th CPU of the launcher's set when it is in S,
 *                    the others take the free CPUs of S in index order.
 * More ranks than CPUs in S: refused (local rank 0 says so), or with
 * --oversubscribe the ranks left without a CPU run undetached on H.
 * A binding the launcher chose against its own default order (a custom
 * --map-by) that lands in S is trusted as is; docs/mpi.md says so. */
#include "cli/cli.h"
#include "cli/mpi_rank.h"
#include "lib/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Launchers and the variables that carry a rank's index on its node, and
 * the node's number of ranks where they give it. */
static const struct { const char *rank, *size; } launchers[] = {
	{ "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" },   /* Open MPI */
	{ "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },                         /* MPICH hydra */
	{ "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE" },                           /* PMI-2 launchers */
	{ "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },                     /* srun */
};

static int env_int(const char *name)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return -1;
	n = strtol(v, &end, 10);
	return (*end && *end != '(') || n < 0 || n > 1 << 20 ? -1 : (int)n;
}

int mpi_rank_find(struct mpi_rank *r)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		int local = env_int(launchers[i].rank);
		if (local < 0)
			continue;
		r->local = local;
		r->local_size = env_int(launchers[i].size);
		if (r->local_size <= local)
			r->local_size = -1;
		r->from = launchers[i].rank;
		return 0;
	}
	return -1;
}

void mpi_node_cpus(cpu_set_t *out)
{
	char cg[512], path[700], list[1024];
	cpu_set_t online, mine;

	cpus_online(&online);
	*out = online;
	if (read_text_file("/proc/self/cpuset", cg, sizeof(cg)))
		return;
	cg[strcspn(cg, "\n")] = 0;
	/* cgroup v2, then v1 (its cpuset hierarchy is mounted apart) */
	const char *fmt[] = { "/sys/fs/cgroup%s/cpuset.cpus.effective",
			      "/sys/fs/cgroup/cpuset%s/cpuset.effective_cpus" };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), fmt[i], strcmp(cg, "/") ? cg : "");
		if (read_text_file(path, list, sizeof(list)) == 0 && cpulist_parse(list, &mine) == 0 &&
		    CPU_COUNT(&mine)) {
			CPU_AND(out, &online, &mine);
			return;
		}
	}
}

/* The CPUs of the one core the launcher bound us to, or none (unbound, or
 * bound to more than one core). */
static void bound_core(const cpu_set_t *node, cpu_set_t *core)
{
	cpu_set_t own, sib;
	char path[128], list[256];
	int first;

	CPU_ZERO(core);
	if (sched_getaffinity(0, sizeof(own), &own) || CPU_EQUAL(&own, node) || (first = cpuset_nth(&own, 0)) < 0)
		return;
	CPU_ZERO(&sib);
	CPU_SET(first, &sib);
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", first);
	if (read_text_file(path, list, sizeof(list)) == 0)
		cpulist_parse(list, &sib);
	CPU_OR(&sib, &sib, &own);
	if (CPU_COUNT(&sib) == CPU_COUNT(&own) || CPU_COUNT(&own) == 1)
		*core = own;
}

/* slot[i]: the CPU of S that local rank i detaches on by the table, -1 for
 * none.  launcher: the CPUs the launcher binds in, in order. */
static void rank_table(int n, const cpu_set_t *slots, const cpu_set_t *launcher, int *slot)
{
	cpu_set_t free = *slots;

	for (int i = 0; i < n; i++) {
		int pref = cpuset_nth(launcher, i);
		slot[i] = -1;
		if (pref >= 0 && CPU_ISSET(pref, &free)) {
			slot[i] = pref;
			CPU_CLR(pref, &free);
		}
	}
	for (int i = 0; i < n; i++)
		if (slot[i] < 0 && (slot[i] = cpuset_nth(&free, 0)) >= 0)
			CPU_CLR(slot[i], &free);
}

static void minus(cpu_set_t *out, const cpu_set_t *a, const cpu_set_t *b)
{
	cpu_set_t both;

	CPU_AND(&both, a, b);
	CPU_XOR(out, a, &both);
}

enum mpi_place_result mpi_rank_place(const struct mpi_rank *r, const struct mpi_place_in *in,
				     int *cpu, cpu_set_t *hk, bool *hk_runs_ranks)
{
	cpu_set_t slots, launcher, core, none;
	char s_buf[256], h_buf[256];
	int n = r->local_size > 0 ? r->local_size : r->local + 1;
	int nslots, *slot;

	CPU_ZERO(&none);
	const cpu_set_t *part = in->partition ? in->partition : &none;
	minus(&launcher, in->node, part);
	if (in->cpus) {
		slots = *in->cpus;
	} else if (in->partition) {
		slots = *in->partition;
	} else {
		slots = launcher;
		int last = cpuset_nth(&slots, CPU_COUNT(&slots) - 1);
		if (last >= 0)
			CPU_CLR(last, &slots);
	}
	if (in->housekeeping) {
		*hk = *in->housekeeping;
	} else {
		minus(hk, in->node, &slots);
		minus(hk, hk, part);
	}
	nslots = CPU_COUNT(&slots);
	cpulist_format(&slots, s_buf, sizeof(s_buf));
	cpulist_format(hk, h_buf, sizeof(h_buf));
	if (!nslots)
		snprintf(s_buf, sizeof(s_buf), "none");

	if (n > nslots && !in->oversubscribe) {
		/* every rank refuses; one says why */
		if (r->local == 0 || r->local_size < 0) {
			cli_err("%d local MPI ranks (%s) but %d CPU%s for detached ranks (%s; housekeeping %s)",
				n, r->from, nslots, nslots == 1 ? "" : "s", s_buf, h_buf);
			cli_note("give one detached CPU per rank with -c, run fewer ranks per node, "
				 "or add --oversubscribe to run the extra ranks undetached");
		}
		return MPI_PLACE_REFUSED;
	}

	slot = calloc((size_t)n, sizeof(*slot));
	if (!slot) {
		cli_err("out of memory");
		return MPI_PLACE_REFUSED;
	}
	rank_table(n, &slots, &launcher, slot);
	bound_core(in->node, &core);
	CPU_AND(&core, &core, &slots);
	*cpu = CPU_COUNT(&core) ? cpuset_nth(&core, 0) : slot[r->local];

	char extra[256] = "";
	int first_extra = -1, extras = 0, len = 0;
	for (int i = 0; i < n; i++)
		if (slot[i] < 0) {
			extras++;
			if (first_extra < 0)
				first_extra = i;
			if (len < (int)sizeof(extra) - 16)
				len += snprintf(extra + len, sizeof(extra) - (size_t)len, "%s%d", len ? "," : "", i);
		}
	*hk_runs_ranks = extras > 0;
	if (*cpu < 0) {
		/* one warning, from the first rank left without a CPU */
		if (r->local == first_extra || first_extra < 0)
			cli_warn("%d local MPI ranks but %d CPU%s for detached ranks (%s): local rank%s %s run%s "
				 "undetached on the housekeeping CPUs (%s) (--oversubscribe)",
				 n, nslots, nslots == 1 ? "" : "s", s_buf, extras == 1 ? "" : "s",
				 first_extra < 0 ? "?" : extra, extras == 1 ? "s" : "", h_buf);
	}
	free(slot);
	return *cpu < 0 ? MPI_PLACE_UNDETACHED : MPI_PLACE_DETACHED;
}
