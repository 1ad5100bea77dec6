/* fwq_mpi: FWQ as an MPI job sees it (LLNL's fwq-mpi idea, written our way).
 * Every rank runs the fixed work quantum, then joins a collective
 * (allreduce or barrier), SAMPLES times.  Per iteration each rank records
 * its local quantum (TSC cycles) and the TSC when the collective completed
 * for it.  The slowest rank sets the job's pace: an iteration of the job
 * (completion to completion) is the ideal (the fastest quantum plus the
 * fastest collective) plus whatever noise hit any rank.  Rank 0 gathers
 * every rank's samples and writes one JSON (--json): per rank the FWQ
 * statistics of its quanta and who it ran as, for the job the iteration
 * times and their excess over the ideal ("stats" and "samples", as fwq's).  Built with Open MPI's mpicc
 * (Makefile); run by `detach bench --program fwq-mpi` or by hand:
 *   mpirun -np 2 build/bench/fwq_mpi --loops 1000000 --json out.json */
#include <mpi.h>

#include "lib/bench.h"
#include "lib/stats.h"
#include "lib/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SAMPLES 10000
#define DEFAULT_WARMUP  100
#define DEFAULT_QUANTUM 4300000ull   /* cycles: the paper's quantum */

struct fwq_mpi_opts {
	BENCH_COMMON;            /* cpu (-1: do not pin), samples, warmup, json, quiet */
	uint64_t loops;          /* 0: calibrate to quantum (on rank 0, sent to all) */
	uint64_t quantum;
	bool barrier;            /* the collective: barrier instead of allreduce */
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: mpirun -np N fwq_mpi [OPTIONS]\n"
"\n"
"Fixed Work Quantum in an MPI job: each rank times the same loop of work,\n"
"then joins a collective, SAMPLES times; reports each rank's noise and the\n"
"job's iteration time against the ideal (the slowest rank sets the pace).\n"
"\n"
"  -c, --cpu CPU        pin every rank to CPU (default: where it is started)\n"
"  -s, --samples N      iterations (default %d; 10k accepted)\n"
"  -w, --warmup N       iterations run and discarded first (default %d)\n"
"  -q, --quantum CYC    calibrate the work to about CYC TSC cycles (default %llu)\n"
"  -l, --loops N        exactly N loop iterations per quantum (no calibration)\n"
"      --collective C   allreduce (default) or barrier\n"
"  -j, --json FILE      rank 0 writes header, per-rank and job statistics and\n"
"                       the raw samples as JSON\n"
"      --quiet          no summary on stdout\n"
"  -h, --help           this text\n",
		DEFAULT_SAMPLES, DEFAULT_WARMUP, DEFAULT_QUANTUM);
	exit(status);
}

static void parse(int argc, char **argv, struct fwq_mpi_opts *o)
{
	static const struct option lo[] = {
		BENCH_COMMON_LONGOPTS,
		{ "quantum", required_argument, NULL, 'q' },
		{ "loops", required_argument, NULL, 'l' },
		{ "collective", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	uint64_t v;

	while ((c = getopt_long(argc, argv, BENCH_COMMON_SHORTOPTS "q:l:", lo, NULL)) != -1) {
		if (bench_common_opt("fwq_mpi", c, optarg, &o->common))
			continue;
		switch (c) {
		case 'q': case 'l':
			if (bench_parse_count(optarg, &v) || v == 0) {
				fprintf(stderr, "fwq_mpi: bad number '%s' for -%c\n", optarg, c);
				exit(2);
			}
			*(c == 'q' ? &o->quantum : &o->loops) = v;
			break;
		case 'C':
			if (strcmp(optarg, "allreduce") && strcmp(optarg, "barrier")) {
				fprintf(stderr, "fwq_mpi: unknown collective '%s' (allreduce or barrier)\n", optarg);
				exit(2);
			}
			o->barrier = !strcmp(optarg, "barrier");
			break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	bench_common_done("fwq_mpi", argc, argv, &o->common);
}

/* One iteration: the quantum, then the collective.  q: the quantum's
 * cycles; returns the TSC at the collective's completion. */
static uint64_t iteration(const struct fwq_mpi_opts *o, uint64_t *q)
{
	double in = 1.0, out;

	*q = bench_time_work(o->loops);
	if (o->barrier)
		MPI_Barrier(MPI_COMM_WORLD);
	else
		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	return rdtscp();
}

static void write_array(struct json *j, const char *key, const uint64_t *v, uint64_t n)
{
	json_array_begin(j, key);
	for (uint64_t i = 0; i < n; i++)
		json_uint(j, NULL, v[i]);
	json_array_end(j);
}

/* Rank 0: everything gathered.  q and done: size x n, rank-major. */
static int write_json(const struct fwq_mpi_opts *o, struct run_header *h, int size,
		      const struct bench_self *who, const uint64_t *q, const uint64_t *done)
{
	uint64_t n = o->samples, *iter = calloc(n, sizeof(*iter));
	struct fwq_stats st;
	FILE *f = bench_open_out(o->json);
	struct json j;

	if (!f || !iter) {
		fprintf(stderr, "fwq_mpi: cannot write %s: %s\n", o->json, strerror(errno));
		return 1;
	}
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_common_header(&j, h, 0);
	json_str(&j, "program", "fwq-mpi");
	bench_json_self_of(&j, "self", &who[0]);
	json_object_begin(&j, "params");
	json_int(&j, "cpu", o->cpu);
	json_uint(&j, "samples", n);
	json_uint(&j, "warmup", o->warmup);
	json_uint(&j, "loops", o->loops);
	json_uint(&j, "quantum_target", o->quantum);
	json_str(&j, "collective", o->barrier ? "barrier" : "allreduce");
	json_int(&j, "ranks", size);
	json_object_end(&j);

	json_array_begin(&j, "ranks");
	for (int r = 0; r < size; r++) {
		json_object_begin(&j, NULL);
		json_int(&j, "rank", r);
		bench_json_self_of(&j, "self", &who[r]);
		fwq_stats_compute(q + (size_t)r * n, n, &st);
		bench_json_fwq_stats(&j, "stats", &st);
		write_array(&j, "samples", q + (size_t)r * n, n);
		/* completions relative to the first, so that the numbers stay small */
		json_array_begin(&j, "completion");
		for (uint64_t i = 0; i < n; i++)
			json_uint(&j, NULL, done[(size_t)r * n + i] - done[(size_t)r * n]);
		json_array_end(&j);
		json_object_end(&j);
	}
	json_array_end(&j);

	/* The job: completion to completion on rank 0 (every rank leaves the
	 * collective within its exit latency of the others).  The first
	 * iteration has no predecessor: its quantum is taken as is.  "stats"
	 * and "samples" are the job's iterations, in fwq's terms: deltas to
	 * the fastest iteration are what noise cost the job. */
	for (uint64_t i = 0; i < n; i++)
		iter[i] = i ? done[i] - done[i - 1] : q[0];
	fwq_stats_compute(iter, n, &st);
	bench_json_fwq_stats(&j, "stats", &st);
	json_object_begin(&j, "job");
	uint64_t qmin = UINT64_MAX;
	for (size_t k = 0; k < (size_t)size * n; k++)
		if (q[k] < qmin)
			qmin = q[k];
	json_uint(&j, "quantum_min", qmin);
	/* The ideal iteration: no noise on any rank, the fastest collective. */
	json_uint(&j, "ideal", st.min);
	json_double(&j, "slowdown_mean", st.mean / (double)st.min);
	json_object_end(&j);
	write_array(&j, "samples", iter, n);
	json_object_end(&j);
	fputc('\n', f);
	free(iter);
	if ((f != stdout && fclose(f)) || (f == stdout && fflush(f))) {
		fprintf(stderr, "fwq_mpi: writing %s failed\n", o->json);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct fwq_mpi_opts o = { .cpu = -1, .samples = DEFAULT_SAMPLES,
				  .warmup = DEFAULT_WARMUP, .quantum = DEFAULT_QUANTUM };
	struct run_header h;
	struct tsc_clock clk;
	struct bench_self me, *who = NULL;
	uint64_t *q, *done, *all_q = NULL, *all_done = NULL, dummy;
	int rank, size, err, rc = 0;

	run_header_init(&h, argc, argv);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	parse(argc, argv, &o);

	if (o.cpu >= 0 && (err = bench_pin(o.cpu))) {
		fprintf(stderr, "fwq_mpi: cannot pin to CPU %d: %s\n", o.cpu, strerror(-err));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	bench_mlock();   /* best effort: without it a page fault is noise too */
	if (rank == 0 && (err = tsc_calibrate(&clk, 50000000))) {
		fprintf(stderr, "fwq_mpi: TSC calibration failed: %s\n", strerror(-err));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	h.tsc_hz = rank == 0 ? clk.hz : 0;
	/* one loop count for every rank: the same work everywhere */
	if (rank == 0 && !o.loops)
		o.loops = bench_calibrate_loops(o.quantum);
	MPI_Bcast(&o.loops, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

	q = calloc(o.samples, sizeof(*q));
	done = calloc(o.samples, sizeof(*done));
	if (rank == 0) {
		all_q = calloc((size_t)size * o.samples, sizeof(*all_q));
		all_done = calloc((size_t)size * o.samples, sizeof(*all_done));
		who = calloc((size_t)size, sizeof(*who));
	}
	if (!q || !done || (rank == 0 && (!all_q || !all_done || !who))) {
		fprintf(stderr, "fwq_mpi: out of memory for %llu samples\n", (unsigned long long)o.samples);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (uint64_t i = 0; i < o.warmup; i++)
		iteration(&o, &dummy);
	for (uint64_t i = 0; i < o.samples; i++)
		done[i] = iteration(&o, &q[i]);
	clock_gettime(CLOCK_REALTIME, &h.end);

	bench_self_read(&me);
	MPI_Gather(&me, sizeof(me), MPI_BYTE, who, sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
	MPI_Gather(q, (int)o.samples, MPI_UINT64_T, all_q, (int)o.samples, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	MPI_Gather(done, (int)o.samples, MPI_UINT64_T, all_done, (int)o.samples, MPI_UINT64_T, 0, MPI_COMM_WORLD);

	if (rank == 0) {
		if (!o.quiet) {
			struct fwq_stats st;
			printf("fwq_mpi: %d ranks, %llu iterations of %llu loops + %s\n", size,
			       (unsigned long long)o.samples, (unsigned long long)o.loops,
			       o.barrier ? "barrier" : "allreduce");
			for (int r = 0; r < size; r++) {
				fwq_stats_compute(all_q + (size_t)r * o.samples, o.samples, &st);
				printf("rank %d (CPUs %s, %s): quantum min %llu, deltas max %llu (%.4f%%) p99 %llu (%.4f%%)\n",
				       r, who[r].cpus_allowed, who[r].policy, (unsigned long long)st.min,
				       (unsigned long long)st.d_max, st.d_max_pct,
				       (unsigned long long)st.d_p99, st.d_p99_pct);
			}
		}
		if (o.json)
			rc = write_json(&o, &h, size, who, all_q, all_done);
	}
	free(q);
	free(done);
	free(all_q);
	free(all_done);
	free(who);
	MPI_Finalize();
	return rc;
}
