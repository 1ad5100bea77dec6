/* The program sees its environment as it would without detach: the
 * constructor takes the contract variables (src/lib/contract.h) and our
 * LD_PRELOAD entry out of environ.  A detached thread's execve puts them back
 * into the new image's environment, so detached state survives exec; nobody
 * else's exec (children, other threads) gets them. */
#include "runtime/env.h"
#include "runtime/config.h"
#include "runtime/claims.h"
#include "runtime/cputime.h"
#include "runtime/sandbox.h"
#include "runtime/sched.h"
#include "runtime/signals.h"
#include "runtime/uaccess.h"
#include "lib/contract.h"
#include "lib/elf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static char *saved[CONTRACT_NVARS];   /* "NAME=value", for re-injection */
static int nsaved;
static char *runtime_path;            /* our entry of LD_PRELOAD */

static bool starts_with_var(const char *entry, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(entry, name, n) && entry[n] == '=';
}

/* `detach pid`: the contract arrives as "NAME=value" lines from outside,
 * not in the environment (__dt_pid_start, init.c).  From then on it is read
 * from here and passed on by execve as if `detach run` had set it.  A later
 * contract (a move to another CPU) replaces the variables it names and
 * keeps the others. */
static bool adopted;

int env_adopt(const char *contract, const char *lib)
{
	static const char *const vars[] = CONTRACT_VARS;

	for (const char *l = contract; l && *l; l += strcspn(l, "\n"), l += *l == '\n') {
		size_t len = strcspn(l, "\n");
		for (size_t i = 0; i < CONTRACT_NVARS; i++) {
			if (!starts_with_var(l, vars[i]))
				continue;
			int at = 0;
			while (at < nsaved && !starts_with_var(saved[at], vars[i]))
				at++;
			if (at == CONTRACT_NVARS)
				break;
			char *v = strndup(l, len);
			if (!v)
				return -ENOMEM;
			if (at < nsaved)
				free(saved[at]);     /* every entry is ours (strndup, malloc) */
			else
				nsaved++;
			saved[at] = v;
		}
	}
	if (lib) {
		free(runtime_path);
		if (!(runtime_path = strdup(lib)))
			return -ENOMEM;
	}
	/* variables taken from the environment (a `detach run` program) stay:
	 * env_get reads them all from here now */
	adopted = true;
	return 0;
}

/* A contract variable: from the environment, or from an adopted contract. */
const char *env_get(const char *name)
{
	size_t n = strlen(name);

	if (!adopted)
		return getenv(name);
	for (int i = 0; i < nsaved; i++)
		if (starts_with_var(saved[i], name))
			return saved[i] + n + 1;
	return NULL;
}

void env_scrub(void)
{
	static const char *const vars[] = CONTRACT_VARS;
	const char *preload = getenv("LD_PRELOAD");
	const char *was = getenv(ENV_PRELOAD_WAS);

	/* Loaded by dlopen (`detach pid`, or a program linked with -ldetach):
	 * the program's environment is its own, whatever it holds. */
	if (!preload || !strstr(preload, "libdetach"))
		return;

	if (preload) {
		size_t n = strcspn(preload, ": ");
		runtime_path = strndup(preload, n);
	}
	if (was)
		setenv("LD_PRELOAD", was, 1);
	else
		unsetenv("LD_PRELOAD");
	for (size_t i = 0; i < CONTRACT_NVARS; i++) {
		const char *v = getenv(vars[i]);
		if (!v)
			continue;
		size_t len = strlen(vars[i]) + strlen(v) + 2;
		char *e = malloc(len);
		if (e) {
			snprintf(e, len, "%s=%s", vars[i], v);
			saved[nsaved++] = e;
		}
		unsetenv(vars[i]);
	}
}

/* Raw calls for exec_is_static: we are inside the trap. */
static long raw_open(int dirfd, const char *path)
{
	return sys_call4(SYS_openat, dirfd, path, O_RDONLY | O_CLOEXEC, 0);
}

static long raw_pread(long fd, void *buf, size_t len, long off)
{
	return sys_call4(SYS_pread64, fd, buf, len, off);
}

static void raw_close(long fd)
{
	sys_call1(SYS_close, fd);
}

/* A static image cannot take the runtime: it would run undetached without
 * a word.  Said as `detach run` says it of a static program named directly
 * (the exec may still fail: then the program learns why from its errno).
 * True when the image will not load the runtime: static, or set-user-ID or
 * set-group-ID without no_new_privs (the loader's secure mode drops our
 * LD_PRELOAD entry). */
static bool without_runtime(long nr, const long a[6])
{
	static const struct file_ops raw_file = { raw_open, raw_pread, raw_close };
	int dirfd = nr == SYS_execve ? AT_FDCWD : (int)a[0];
	const char *path = (const char *)(nr == SYS_execve ? a[0] : a[1]);

	struct stat st;
	char first;

	if (!path || strncpy_from_user(&first, path, 1) < 0)
		return false;                   /* the exec fails (EFAULT): nothing runs */
	if (first && sys_call4(SYS_faccessat, dirfd, path, X_OK, 0) < 0)
		return false;                   /* the exec fails: nothing runs */
	if (!first && !(nr == SYS_execveat && (a[4] & AT_EMPTY_PATH)))
		return false;
	if (sys_call4(SYS_newfstatat, dirfd, path, &st, first ? 0 : AT_EMPTY_PATH) == 0 &&
	    (st.st_mode & (S_ISUID | S_ISGID)) && sys_call2(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0) != 1)
		return true;
	if (!exec_is_static(dirfd, path, &raw_file))
		return false;
	dt_warn("%s is statically linked: the runtime cannot be preloaded into it, so it runs undetached",
		path[0] ? path : "the program");
	return true;
}

/* v in decimal at p, then end; returns the position after end.  Safe in
 * the trap: no libc. */
char *env_put_u64(char *p, uint64_t v, char end)
{
	char num[24];
	int i = sizeof(num);

	do { num[--i] = (char)('0' + v % 10); v /= 10; } while (v);
	memcpy(p, num + i, sizeof(num) - (size_t)i);
	p += sizeof(num) - (size_t)i;
	*p++ = end;
	return p;
}

/* Whether env_execve may read the program's envp: every pointer, the head
 * of every string (what it compares), and LD_PRELOAD's whole value (what
 * it copies), through uaccess.  Where it may not, the kernel reads the
 * whole of it and refuses the exec with EFAULT. */
static bool envp_readable(char *const *envp)
{
	char buf[4096];
	char *e;

	for (; envp; envp++) {
		if (copy_from_user(&e, envp, sizeof(e)))
			return false;
		if (!e)
			return true;
		long n = strncpy_from_user(buf, e, 64);
		if (n < 0 || (starts_with_var(buf, "LD_PRELOAD") && strncpy_from_user(buf, e, sizeof(buf)) < 0))
			return false;
	}
	return true;
}

/* Runs on the detached thread inside the trap: no allocation but one mmap
 * of our own, no libc call that enters the kernel. */
long env_execve(long nr, long a[6])
{
	char **envp = (char **)(nr == SYS_execve ? a[2] : a[3]);
	const char *app_preload = NULL;
	size_t n = 0, size, at = 0;
	char **out, *preload, *was, *p;
	long ret, b[6], fd = -1, claims = -1;
	bool bare;

	if (!envp_readable(envp))
		return user_page0(envp) ? -EFAULT :      /* the kernel would read page 0 */
		       sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	for (char **e = envp; e && *e; e++)
		n++;
	size = (n + CONTRACT_NVARS + 3) * sizeof(char *) + 2 * 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX +
	       SANDBOX_ENV_MAX + CLAIMS_ENV_MAX;
	out = (char **)sys_call6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((long)out < 0 && (long)out > -4096)
		return (long)out;
	preload = (char *)(out + n + CONTRACT_NVARS + 3);
	was = preload + 8192;

	for (char **e = envp; e && *e; e++) {
		bool ours = false;
		if (starts_with_var(*e, "LD_PRELOAD")) {
			/* A program may pass on the LD_PRELOAD it was started with
			 * (bash's `exec` does): our own entry is not its. */
			size_t n = runtime_path ? strlen(runtime_path) : 0;
			app_preload = *e + 11;
			if (n && !strncmp(app_preload, runtime_path, n) &&
			    (app_preload[n] == ':' || app_preload[n] == '\0'))
				app_preload += n + (app_preload[n] == ':');
			continue;
		}
		for (int i = 0; i < nsaved && !ours; i++)
			ours = !strncmp(*e, saved[i], strcspn(saved[i], "=") + 1);
		if (!ours)
			out[at++] = *e;
	}
	for (int i = 0; i < nsaved; i++)
		if (!starts_with_var(saved[i], ENV_PRELOAD_WAS) && !starts_with_var(saved[i], ENV_CPUTIME) &&
		    !starts_with_var(saved[i], ENV_SCHED) && !starts_with_var(saved[i], ENV_SECCOMP) &&
		    !starts_with_var(saved[i], ENV_CLAIMS))
			out[at++] = saved[i];
	/* as of now: the runtime's CPU time, the thread's scheduling settings */
	cputime_to_env(dt_self, was + 8192);
	out[at++] = was + 8192;
	if (!dt_self->observed) {
		sched_to_env(dt_self, was + 8192 + CPUTIME_ENV_MAX);
		out[at++] = was + 8192 + CPUTIME_ENV_MAX;
	}
	/* LD_PRELOAD=<runtime>[:<the program's own>], and the program's own
	 * remembered so that the new image sees just that. */
	p = preload;
	p = stpcpy(p, "LD_PRELOAD=");
	if (runtime_path && strlen(runtime_path) < 4096)
		p = stpcpy(p, runtime_path);
	if (app_preload && *app_preload && strlen(app_preload) < 4000) {
		*p++ = ':';
		strcpy(p, app_preload);
		p = stpcpy(was, ENV_PRELOAD_WAS "=");
		strcpy(p, app_preload);
		out[at++] = was;
	}
	out[at++] = preload;

	/* The program's seccomp filters: to the new runtime, or, for an image
	 * that will not load it, to the kernel right before the exec. */
	bare = without_runtime(nr, a);
	if (dt_self->filters && bare)
		sandbox_to_kernel(dt_self->filters, false);
	else if (dt_self->filters && (fd = sandbox_to_env(dt_self, was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX)) >= 0)
		out[at++] = was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX;
	/* The locks (the CPU claimed, the registry file ours) stay the
	 * process's across the exec for the new runtime, without a moment
	 * free; an image without the runtime runs undetached: they go. */
	p = was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX + SANDBOX_ENV_MAX;
	if (!bare && !dt_self->observed && (claims = claims_pass_on()) >= 0) {
		env_put_u64(stpcpy(p, ENV_CLAIMS "="), (uint64_t)claims, '\0');
		out[at++] = p;
	}
	out[at] = NULL;
	memcpy(b, a, sizeof(b));
	b[nr == SYS_execve ? 2 : 3] = (long)out;
	signal_fault_exec(true);
	ret = sys_call6(nr, b[0], b[1], b[2], b[3], b[4], b[5]);
	/* only reached when exec failed */
	signal_fault_exec(false);
	if (fd >= 0)
		sys_call1(SYS_close, fd);
	claims_exec_failed(claims);
	sys_call2(SYS_munmap, out, size);
	return ret;
}
