/* The run contract (contract.h): its one encoder and one decoder. */
#include "lib/contract.h"
#include "lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void contract_defaults(struct run_contract *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->policy, sizeof(c->policy), "o");
	snprintf(c->mlock, sizeof(c->mlock), "thread");
	snprintf(c->mode, sizeof(c->mode), "auto");
	snprintf(c->select, sizeof(c->select), "first");
}

int contract_set_stats(struct run_contract *c, const char *path)
{
	char cwd[4096];
	int n;

	/* the program may chdir, and `detach pid`'s target has a cwd of its own */
	if (path[0] == '/')
		n = snprintf(c->stats, sizeof(c->stats), "%s", path);
	else if (getcwd(cwd, sizeof(cwd)))
		n = snprintf(c->stats, sizeof(c->stats), "%s/%s", cwd, path);
	else
		return -errno;
	return n < 0 || (size_t)n >= sizeof(c->stats) ? -ENAMETOOLONG : 0;
}

int contract_index(const char *v, const char *const *choices)
{
	for (int i = 0; choices[i]; i++)
		if (!strcmp(v, choices[i]))
			return i;
	return -1;
}

static bool one_of(const char *v, const char *const *choices)
{
	return contract_index(v, choices) >= 0;
}

static const char *const mlocks[] = { "thread", "all", "none", NULL };
static const char *const modes[] = { "sud", "rewrite", "auto", NULL };
const char *const contract_proxies[] = { "spin", "adaptive", "sleep", NULL };

/* o, or f:N / r:N with N in 1..99 */
static bool policy_ok(const char *p)
{
	char *end;
	long n;

	if (!strcmp(p, "o"))
		return true;
	if ((p[0] != 'f' && p[0] != 'r') || p[1] != ':')
		return false;
	n = strtol(p + 2, &end, 10);
	return end != p + 2 && !*end && n >= 1 && n <= 99;
}

int contract_encode(const struct run_contract *c, int (*put)(const char *name, const char *value, void *ctx),
		    void *ctx)
{
	char pid[16], cpus[256], hk[256];
	int err;

	snprintf(pid, sizeof(pid), "%d", (int)c->pid);
	const struct { const char *name, *value; } vars[] = {
		{ ENV_PID, pid },
		{ ENV_CPUS, cpulist_format(&c->cpus, cpus, sizeof(cpus)) },
		{ ENV_HOUSEKEEPING, cpulist_format(&c->housekeeping, hk, sizeof(hk)) },
		{ ENV_POLICY, c->policy },
		{ ENV_MLOCK, c->mlock },
		{ ENV_MODE, c->mode },
		{ ENV_PROXY, c->proxy[0] ? c->proxy : NULL },
		{ ENV_STATS, c->stats[0] ? c->stats : NULL },
		{ ENV_HOME_CPUSET, c->home_cpuset[0] ? c->home_cpuset : NULL },
		{ ENV_SELECT, c->select },
		{ ENV_KEEP_POLICY, c->keep_policy ? "1" : NULL },
		{ ENV_VERBOSE, c->verbose ? "1" : NULL },
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if ((err = put(vars[i].name, vars[i].value, ctx)))
			return err;
	return 0;
}

/* Copies v into out when it fits; false (malformed) when it does not. */
static bool copy(char *out, size_t len, const char *v)
{
	return (size_t)snprintf(out, len, "%s", v) < len;
}

int contract_decode(struct run_contract *c, pid_t pid, const char *(*get)(const char *name, void *ctx), void *ctx,
		    const char **bad)
{
	const char *v;
	char *end;

	contract_defaults(c);
	*bad = NULL;
	if (!(v = get(ENV_PID, ctx)))
		return -ENOENT;
	c->pid = (pid_t)strtol(v, &end, 10);
	if (end == v || *end || c->pid <= 0) {
		*bad = ENV_PID;
		return -EINVAL;
	}
	if (c->pid != pid)
		return -ENOENT;
#define WANT(name, ok) do { if (!(ok)) { *bad = (name); return -EINVAL; } } while (0)
	WANT(ENV_CPUS, (v = get(ENV_CPUS, ctx)) && !cpulist_parse(v, &c->cpus) && CPU_COUNT(&c->cpus));
	WANT(ENV_HOUSEKEEPING, (v = get(ENV_HOUSEKEEPING, ctx)) && !cpulist_parse(v, &c->housekeeping) &&
			       CPU_COUNT(&c->housekeeping));
	if ((v = get(ENV_POLICY, ctx)))
		WANT(ENV_POLICY, policy_ok(v) && copy(c->policy, sizeof(c->policy), v));
	if ((v = get(ENV_MLOCK, ctx)))
		WANT(ENV_MLOCK, one_of(v, mlocks) && copy(c->mlock, sizeof(c->mlock), v));
	if ((v = get(ENV_MODE, ctx)))
		WANT(ENV_MODE, one_of(v, modes) && copy(c->mode, sizeof(c->mode), v));
	if ((v = get(ENV_PROXY, ctx)))
		WANT(ENV_PROXY, one_of(v, contract_proxies) && copy(c->proxy, sizeof(c->proxy), v));
	if ((v = get(ENV_STATS, ctx)))
		WANT(ENV_STATS, v[0] == '/' && copy(c->stats, sizeof(c->stats), v));
	if ((v = get(ENV_HOME_CPUSET, ctx)))
		WANT(ENV_HOME_CPUSET, copy(c->home_cpuset, sizeof(c->home_cpuset), v));
	if ((v = get(ENV_SELECT, ctx)) && *v)
		WANT(ENV_SELECT, copy(c->select, sizeof(c->select), v));
	if ((v = get(ENV_KEEP_POLICY, ctx)))
		WANT(ENV_KEEP_POLICY, !strcmp(v, "1") || !strcmp(v, "0"));
	c->keep_policy = v && !strcmp(v, "1");
	if ((v = get(ENV_VERBOSE, ctx)))
		WANT(ENV_VERBOSE, !strcmp(v, "1") || !strcmp(v, "0"));
	c->verbose = v && !strcmp(v, "1");
#undef WANT
	return 0;
}
