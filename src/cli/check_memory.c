/* detach check: memory probes (THP, NUMA balancing, mmap_min_addr, swap). */
#include "cli/check.h"

#include <string.h>

void probe_thp(struct check *c, int cpu)
{
	char buf[1024];

	(void)cpu;
	if (read_text_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)))
		return;
	if (strstr(buf, "[always]"))
		check_add(c, "thp", S_WARN, -1, false, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
			          "transparent huge pages: always: khugepaged collapses pages of every process, with TLB shootdowns to its CPUs");
	else
		check_add(c, "thp", S_OK, -1, false, NULL, "transparent huge pages: %s", buf);
}

void probe_numa_balancing(struct check *c, int cpu)
{
	long l;

	(void)cpu;
	if (read_long_file("/proc/sys/kernel/numa_balancing", &l))
		return;
	if (l)
		check_add(c, "numa_balancing", S_WARN, -1, false, "sysctl kernel.numa_balancing=0",
			          "NUMA balancing is on: it unmaps pages to sample accesses, which makes page faults on the listed CPUs");
	else
		check_add(c, "numa_balancing", S_OK, -1, false, NULL, "NUMA balancing is off");
}

void probe_mmap_min_addr(struct check *c, int cpu)
{
	long l;

	(void)cpu;
	if (read_long_file("/proc/sys/vm/mmap_min_addr", &l))
		return;
	/* detach needs nothing here (rewrite mode's stubs lie near the code);
	 * 0 is a risk an older detach asked for (isolate --allow-zero-page) */
	if (l == 0)
		check_add(c, "mmap_min_addr", S_WARN, -1, false, "sysctl vm.mmap_min_addr=65536",
			          "vm.mmap_min_addr=0: any program may map page 0, which turns kernel NULL-pointer bugs "
			          "into exploits; detach does not need it");
	else
		check_add(c, "mmap_min_addr", S_OK, -1, false, NULL, "vm.mmap_min_addr=%ld: page 0 cannot be mapped", l);
}

void probe_swap(struct check *c, int cpu)
{
	FILE *f = fopen("/proc/swaps", "re");
	char line[512];
	int n = 0;

	(void)cpu;
	while (f && fgets(line, sizeof(line), f))
		n++;
	if (f)
		fclose(f);
	if (n > 1)
		check_add(c, "swap", S_INFO, -1, false, "detach run --mlock all locks every page of the program (see its --help for the cost)",
			          "%d swap area(s) active: unlocked memory of a detached program may be paged out", n - 1);
	else
		check_add(c, "swap", S_OK, -1, false, NULL, "no swap");
}
