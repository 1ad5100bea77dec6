/* Description: `detach ps --sites` shows a running program's system call
 * sites by library, as the statistics file shows them at exit: a detached
 * program (default mode) rewrites a JIT site exactly and calls a site in a
 * read-only shared file mapping 100 times (it cannot be rewritten); while
 * it waits, `detach ps --sites --json` lists the file with 1 site left
 * trapping, 100 traps there and 99 after the first, and [anon] with a site
 * rewritten exactly; the table lists the same.  Both that document and the
 * run's statistics file (its sites, by the same writer) match their
 * schemas (docs/schema: ps, run-stats).
 * Timeout: 120 */
#include "helpers/t_detach.h"
#include "helpers/t_jit.h"

#include <sys/mman.h>
#include <sys/stat.h>

/* FILE matches docs/schema/SCHEMA.schema.json (tests/helpers/validate_json.py;
 * without python3-jsonschema, unchecked) */
static void validate(const char *schema, const char *file)
{
	char cmd[8400];
	const char *root = getenv("DETACH_ROOT");

	snprintf(cmd, sizeof(cmd), "python3 %s/tests/helpers/validate_json.py %s %s", root ? root : ".", schema, file);
	int st = system(cmd);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
		printf("NOTE: %s not validated (no jsonschema)\n", file);
	else
		t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s does not match %s.schema.json", file, schema);
}

static int target(const char *file)
{
	pid_t pid = getpid();
	unsigned char *jit = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open(file, O_RDONLY);
	void *ro = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0) : MAP_FAILED;
	char c;

	t_check(jit != MAP_FAILED && ro != MAP_FAILED, "mmap: %s", strerror(errno));
	if (jit == MAP_FAILED || ro == MAP_FAILED)
		return t_done();
	memcpy(jit, t_jit_getpid, sizeof(t_jit_getpid));
	t_check(mprotect(jit, 4096, PROT_READ | PROT_EXEC) == 0, "mprotect: %s", strerror(errno));
	t_check(t_jit_call(jit) == pid && jit[0] == 0xe9, "the JIT site was not rewritten");
	for (int i = 0; i < 100; i++)
		t_check(t_jit_call(ro) == pid, "the read-only site: not getpid's result");
	printf("ready %d\n", (int)pid);
	fflush(stdout);
	t_check(read(0, &c, 1) == 1, "read: %s", strerror(errno));
	return t_done();
}

int main(int argc, char **argv)
{
	char file[] = "/tmp/detach-ps-sites-XXXXXX", self[4096], cmd[8400], line[1024];
	char psjson[] = "/tmp/detach-ps-sites-json-XXXXXX", stats[] = "/tmp/detach-ps-sites-stats-XXXXXX";
	static char out[1 << 16];
	size_t len = 0;
	int in[2], outp[2], pid = 0;

	if (argc > 2 && !strcmp(argv[1], "target"))
		return target(argv[2]);
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (!t_self_exe(self, sizeof(self)))
		return 1;
	t_jit_file(file);
	int sfd = mkstemp(stats), jfd = mkstemp(psjson);
	t_check(sfd >= 0 && jfd >= 0, "mkstemp: %s", strerror(errno));
	if (sfd >= 0)
		close(sfd);

	char *args[] = { getenv("DETACH_BIN"), "run", "-c", "1", "--stats", stats, "--", self, "target", file, NULL };
	pid_t child = t_spawn_piped(args, in, outp, NULL);
	t_check(child > 0, "pipe or fork: %s", strerror(errno));
	FILE *f = child > 0 ? fdopen(outp[0], "r") : NULL;
	if (f && fgets(line, sizeof(line), f))
		sscanf(line, "ready %d", &pid);
	t_check(pid > 0, "the target did not start");
	if (pid > 0) {
		snprintf(cmd, sizeof(cmd), "%s ps --sites --json", getenv("DETACH_BIN"));
		FILE *p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p) && len + strlen(line) < sizeof(out) - 1) {
			memcpy(out + len, line, strlen(line));
			len += strlen(line);
		}
		out[len] = '\0';
		if (p)
			pclose(p);
		printf("%s", out);
		if (jfd >= 0) {
			t_check(write(jfd, out, len) == (ssize_t)len, "write %s", psjson);
			close(jfd);
			jfd = -1;
			validate("ps", psjson);
		}
		char key[160], pidkey[32];
		snprintf(pidkey, sizeof(pidkey), "\"pid\": %d,", pid);
		char *prog = strstr(out, pidkey);
		snprintf(key, sizeof(key), "\"%s\": {", file);
		char *at = prog ? strstr(prog, key) : NULL;
		t_check(at, "no sites listed under %s for pid %d", file, pid);
		if (at) {
			char *end = strchr(at, ']');
			if (end)
				*end = '\0';
			t_check(strstr(at, "\"trapping\": 1,") && strstr(at, "\"traps_trapping\": 100,") &&
					strstr(at, "\"traps_after_warmup\": 99,"),
				"the read-only site is not listed as trapping, 100 traps, 99 after warm-up");
			if (end)
				*end = ']';
		}
		char *anon = prog ? strstr(prog, "\"[anon]\": {") : NULL;
		t_check(anon && strstr(anon, "\"exact\": ") && atoi(strstr(anon, "\"exact\": ") + 9) >= 1,
			"no exact site under [anon]");
		snprintf(cmd, sizeof(cmd), "%s ps --sites", getenv("DETACH_BIN"));
		p = popen(cmd, "r");
		bool row = false;
		while (p && fgets(line, sizeof(line), p)) {
			int rp = 0;
			unsigned long long ex, win, trap, nostub, late;
			char name[512];
			if (sscanf(line, "%d %*s %llu %llu %llu %llu %llu %511s", &rp, &ex, &win, &trap, &nostub, &late,
				   name) == 7 && rp == pid && !strcmp(name, file)) {
				printf("table: %s", line);
				row = trap == 1 && late == 99;
			}
		}
		if (p)
			pclose(p);
		t_check(row, "the table has no row for %s with 1 site trapping and 99 late traps", file);
	}
	t_check(write(in[1], "x", 1) == 1, "write");
	close(in[1]);
	int st;
	waitpid(child, &st, 0);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the target ended with status %#x", st);
	validate("run-stats", stats);
	if (f)
		fclose(f);
	if (jfd >= 0)
		close(jfd);
	unlink(file);
	unlink(psjson);
	unlink(stats);
	return t_done();
}
