/* detach run inside an MPI job: which CPU each local rank detaches on and
 * where all proxies go (src/cli/mpi_rank.c, docs/mpi.md). */
#ifndef DETACH_CLI_MPI_RANK_H
#define DETACH_CLI_MPI_RANK_H

#include <sched.h>
#include <stdbool.h>

struct mpi_rank {
	int local;             /* this rank's index among the ranks of this node */
	int local_size;        /* ranks on this node; -1 when the launcher does not say */
	const char *from;      /* the variable the index came from */
};

/* 0 and *r filled when the launcher told this process its local rank
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK,
 * SLURM_LOCALID); -1 when this is no MPI rank. */
int mpi_rank_find(struct mpi_rank *r);

/* The CPUs of the node the job may use, whatever one CPU the launcher bound
 * this rank to: the online CPUs of our cpuset (or all online ones). */
void mpi_node_cpus(cpu_set_t *out);

/* What the rank asked for, what the node offers. */
struct mpi_place_in {
	const cpu_set_t *cpus;         /* -c, or NULL */
	const cpu_set_t *housekeeping; /* -H, or NULL */
	const cpu_set_t *partition;    /* the detach partition's CPUs, or NULL */
	const cpu_set_t *node;         /* mpi_node_cpus() plus the partition */
	bool oversubscribe;            /* extra ranks run undetached */
};

enum mpi_place_result {
	MPI_PLACE_DETACHED,    /* *cpu is this rank's detached CPU, *hk the proxies' CPUs */
	MPI_PLACE_UNDETACHED,  /* --oversubscribe: run plainly on *hk */
	MPI_PLACE_REFUSED,     /* too many ranks, said by local rank 0 */
};

/* Chooses this rank's CPU: the one core the launcher bound it to when that
 * is a detached CPU, else by local index; never a CPU another local rank
 * takes.  *hk_runs_ranks: some local ranks run undetached on *hk
 * (--oversubscribe), beside the proxies.  Prints the error or the one
 * warning. */
enum mpi_place_result mpi_rank_place(const struct mpi_rank *r, const struct mpi_place_in *in,
				     int *cpu, cpu_set_t *hk, bool *hk_runs_ranks);

#endif
