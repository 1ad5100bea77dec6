/* An MPI program for tests/mpi_ranks.sh, built there with each MPI's mpicc:
 * barrier, allreduce, a point-to-point ring and MPI_Wtime.  Rank 0 prints
 * results that do not depend on timing, so native and detached runs must
 * print the same.  With an evidence directory as argv[1], each rank also
 * writes there what the kernel says about its first thread and, when it has
 * one, the detach proxy (CPU, syscw over 1,000 writes), and the CPUs every
 * other thread (MPI's own) may run on.  argv[2]: the exit status of every
 * rank (default 0), to compare how it reaches mpirun. */
#include <mpi.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One number from /proc/self/task/TID/FILE: the value after "key" */
static long long task_value(int tid, const char *file, const char *key)
{
	char path[128], line[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", tid, file);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':')
			v = atoll(line + strlen(key) + 1);
	fclose(f);
	return v;
}

/* Field 39 of /proc/self/task/TID/stat: the CPU it last ran on. */
static int task_cpu(int tid)
{
	char path[128], buf[1024], *p;
	int fd, n, field = 2;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	if ((fd = open(path, O_RDONLY)) < 0)
		return -1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')');
	for (; p && *p && field < 39; p++)
		if (*p == ' ')
			field++;
	return p ? atoi(p) : -1;
}

static int find_proxy(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int found = 0;

	while (d && (e = readdir(d))) {
		char path[128], comm[64] = "";
		int tid = atoi(e->d_name);
		FILE *f;
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		if (tid > 0 && (f = fopen(path, "r"))) {
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "detach-proxy", 12))
				found = tid;
			fclose(f);
		}
	}
	if (d)
		closedir(d);
	return found;
}

static void evidence(const char *dir, int rank)
{
	char path[4096], buf[64] = "x";
	int me = getpid(), proxy = find_proxy(), fd = open("/dev/null", O_WRONLY);
	long long w0 = task_value(me, "io", "syscw"), p0 = proxy ? task_value(proxy, "io", "syscw") : -1;
	FILE *f;

	for (int i = 0; i < 1000; i++)
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			MPI_Abort(MPI_COMM_WORLD, 3);
	close(fd);
	long long w1 = task_value(me, "io", "syscw"), p1 = proxy ? task_value(proxy, "io", "syscw") : -1;
	snprintf(path, sizeof(path), "%s/rank-%d.txt", dir, rank);
	if (!(f = fopen(path, "w")))
		MPI_Abort(MPI_COMM_WORLD, 4);
	fprintf(f, "pid %d\ncpu %d\nsyscw %lld\nproxy %d\nproxy_cpu %d\nproxy_syscw %lld\n",
		me, task_cpu(me), w1 - w0, proxy, proxy ? task_cpu(proxy) : -1, proxy ? p1 - p0 : -1);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char tpath[128], line[256];
		int tid = atoi(e->d_name);
		FILE *t;
		snprintf(tpath, sizeof(tpath), "/proc/self/task/%d/status", tid);
		if (tid <= 0 || tid == me || !(t = fopen(tpath, "r")))
			continue;
		while (fgets(line, sizeof(line), t))
			if (!strncmp(line, "Cpus_allowed_list:", 18))
				fprintf(f, "thread %d allowed %s", tid, line + 18 + strspn(line + 18, " \t"));
		fclose(t);
	}
	if (d)
		closedir(d);
	fclose(f);
}

int main(int argc, char **argv)
{
	int rank, size, token, sum = 0, ok = 1;
	double t0, t1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	t0 = MPI_Wtime();
	MPI_Barrier(MPI_COMM_WORLD);
	for (int round = 0; round < 100; round++) {
		int mine = rank + round, all;
		MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		ok &= all == size * (size - 1) / 2 + size * round;
		sum += all;
	}
	/* The ring: rank 0 starts a token that every rank adds its rank to. */
	if (rank == 0) {
		token = 1000;
		if (size > 1) {
			MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_INT, size - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
	} else {
		MPI_Recv(&token, 1, MPI_INT, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		token += rank;
		MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
	}
	if (argc > 1 && strcmp(argv[1], "-"))
		evidence(argv[1], rank);
	MPI_Barrier(MPI_COMM_WORLD);
	t1 = MPI_Wtime();
	int wtime_ok = t1 > t0 && t1 - t0 < 600, all_ok;
	int mine_ok = ok && wtime_ok;
	MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("ranks %d\nallreduce sum over 100 rounds %d\nring token %d\n", size, sum, token);
		printf("results %s, MPI_Wtime advancing on every rank: %s\n",
		       all_ok ? "checked" : "WRONG", all_ok ? "yes" : "no");
	}
	MPI_Finalize();
	return all_ok ? (argc > 2 ? atoi(argv[2]) : 0) : 1;
}
