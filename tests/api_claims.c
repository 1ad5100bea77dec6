/* Description: the kernel keeps the runtime's liveness and CPU claims
 * (lib/liveness.h): dt_detach() on a CPU that holds another process's
 * detached thread gets -EBUSY; a holder killed with SIGKILL (detached, attached
 * again, or in the middle of either, and while it is still a zombie) frees
 * its CPU at once and leaves no registry file once a reader (`detach ps`)
 * looked; a program that ends normally removes its file itself; dt_detach on
 * a CPU that does not exist returns -EINVAL and the program goes on.  Every
 * detached thread is a child's: this process takes no lock (closing its
 * descriptor of the locks file would drop them). */
#include "helpers/t_detach.h"
#include "lib/liveness.h"
#include <detach/detach.h>

#include <signal.h>
#include <sys/wait.h>

static char path_of[64];

static const char *registry_file(pid_t pid)
{
	snprintf(path_of, sizeof(path_of), "%s/%d", REGISTRY_DIR, (int)pid);
	return path_of;
}

static pid_t holder_of(off_t at)
{
	int fd = locks_open(false);
	pid_t h = fd >= 0 ? lock_holder(fd, at) : 0;

	if (fd >= 0)
		close(fd);
	return h;
}

/* A child that detaches on CPU 1 (attach: then attaches again), writes one
 * byte to ready and waits to be killed.  loop: detaches and attaches for
 * ever, for a kill at any point. */
enum how { DETACHED, ATTACHED, LOOP, ONCE };

static pid_t child(enum how how, int ready)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	int err = 0;
	if (how == LOOP) {
		(void)!write(ready, "r", 1);
		for (;;)
			if (!dt_detach(T_DETACHED_CPU))
				dt_attach();
	}
	err = dt_detach(T_DETACHED_CPU);
	if (how == ONCE)        /* exit(): the runtime's destructor runs (_exit skips it) */
		exit(err == -EBUSY ? 3 : err ? 4 : dt_attach() ? 5 : 0);
	if (!err && how == ATTACHED)
		err = dt_attach();
	(void)!write(ready, err ? "e" : "r", 1);
	for (;;)
		dt_wait_until(dt_now_ns() + 1000000000ull);
}

static int wait_ready(int fd)
{
	char c = 0;

	return read(fd, &c, 1) == 1 && c == 'r' ? 0 : -1;
}

static bool zombie(pid_t pid)
{
	char path[64], buf[256], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return (p = strrchr(buf, ')')) && p[2] == 'Z';
}

/* Kills pid (SIGKILL) and checks what it left: nothing held at once, the
 * registry file gone once `detach ps` looked (while pid is a zombie yet). */
static void kill_and_look(pid_t pid, const char *what)
{
	int st;

	kill(pid, SIGKILL);
	/* its leader shows Z while its other threads still exit: dead when
	 * all are (pid_alive), and not reaped yet */
	for (int i = 0; i < 2000 && pid_alive(pid); i++)
		usleep(1000);
	t_check(zombie(pid) && !pid_alive(pid), "%s: %d did not become a zombie", what, (int)pid);
	t_check(holder_of(T_DETACHED_CPU) != pid, "%s: the killed %d still holds CPU %d", what, (int)pid,
		T_DETACHED_CPU);
	t_check(holder_of(LOCK_PID_BASE + pid) == 0, "%s: the killed %d still holds its liveness lock", what, (int)pid);
	bool had = access(registry_file(pid), F_OK) == 0;
	t_reap_registry();              /* `detach ps`: a reader */
	bool has = access(registry_file(pid), F_OK) == 0;
	printf("%s: killed %d, its registry file %s, after detach ps %s\n", what, (int)pid,
	       had ? "was left" : "was not there", has ? "still there" : "gone");
	t_check(!has, "%s: %s is left after detach ps looked", what, registry_file(pid));
	waitpid(pid, &st, 0);
}

int main(void)
{
	int p[2], st;
	pid_t a, b;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	if (getenv("DETACH_PID"))
		t_skip("runs without detach run");
	if (!getenv("DETACH_BIN"))
		t_skip("needs DETACH_BIN (tests/run.sh sets it): `detach ps` is the reader");

	/* a CPU that does not exist: an error, and the program goes on */
	int bad = (int)sysconf(_SC_NPROCESSORS_CONF) + 3;
	if ((a = fork()) == 0)
		_exit(dt_detach(bad) == -EINVAL && dt_detach(-1) == -EINVAL && !dt_is_detached() ? 0 : 1);
	waitpid(a, &st, 0);
	printf("dt_detach(%d) in %d: %s\n", bad, (int)a, WIFEXITED(st) ? "returned, the program went on" : "killed it");
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dt_detach(%d) did not return -EINVAL (status %#x)", bad, st);

	if (pipe(p))
		t_skip("pipe: %s", strerror(errno));
	/* held: a second process is refused, and names no success */
	a = child(DETACHED, p[1]);
	t_check(wait_ready(p[0]) == 0, "the first child could not detach");
	t_check(holder_of(T_DETACHED_CPU) == a, "CPU %d is held by %d, not the detached child %d",
		T_DETACHED_CPU, (int)holder_of(T_DETACHED_CPU), (int)a);
	t_check(access(registry_file(a), F_OK) == 0, "no registry file for the detached child");
	b = child(ONCE, p[1]);
	waitpid(b, &st, 0);
	printf("a second process's dt_detach(%d) while %d holds it: exit %d (3: -EBUSY)\n", T_DETACHED_CPU, (int)a,
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 3, "the second process was not refused with -EBUSY (%#x)", st);
	kill_and_look(a, "detached");

	/* the crashed holder freed the CPU: the next one gets it */
	b = child(ONCE, p[1]);
	waitpid(b, &st, 0);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "CPU %d not free after its holder was killed (%#x)",
		T_DETACHED_CPU, st);
	t_check(access(registry_file(b), F_OK) != 0, "a program that ended normally left %s", registry_file(b));

	a = child(ATTACHED, p[1]);
	t_check(wait_ready(p[0]) == 0, "the child could not detach and attach");
	t_check(holder_of(T_DETACHED_CPU) == 0, "CPU %d still held after dt_attach", T_DETACHED_CPU);
	kill_and_look(a, "attached again");

	for (int i = 0; i < 8; i++) {
		char what[48];
		a = child(LOOP, p[1]);
		wait_ready(p[0]);
		usleep(300 + 1700 * i);
		snprintf(what, sizeof(what), "mid-way after %d us", 300 + 1700 * i);
		kill_and_look(a, what);
	}
	return t_done();
}
