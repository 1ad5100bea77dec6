/* Description: the run contract between `detach run`/`detach pid` and the
 * runtime (src/lib/contract.h): what the encoder writes the decoder reads
 * back field for field; a contract for another pid is none; each malformed
 * variable is refused by name. */
#include "helpers/t.h"
#include "lib/contract.h"
#include "lib/util.h"

#include <errno.h>
#include <string.h>

#define MAXV 32
struct vars { char name[MAXV][32]; char value[MAXV][4200]; int n; };

static int put(const char *name, const char *value, void *ctx)
{
	struct vars *v = ctx;

	if (!value)
		return 0;
	snprintf(v->name[v->n], sizeof(v->name[0]), "%s", name);
	snprintf(v->value[v->n], sizeof(v->value[0]), "%s", value);
	v->n++;
	return 0;
}

static const char *get(const char *name, void *ctx)
{
	struct vars *v = ctx;

	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->name[i], name))
			return v->value[i];
	return NULL;
}

static void set(struct vars *v, const char *name, const char *value)
{
	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->name[i], name)) {
			snprintf(v->value[i], sizeof(v->value[0]), "%s", value);
			return;
		}
	put(name, value, v);
}

static struct vars vars;

static void sample(struct run_contract *c)
{
	contract_defaults(c);
	c->pid = 4242;
	cpulist_parse("1,3", &c->cpus);
	cpulist_parse("0,2", &c->housekeeping);
	snprintf(c->policy, sizeof(c->policy), "f:10");
	snprintf(c->mlock, sizeof(c->mlock), "none");
	snprintf(c->mode, sizeof(c->mode), "sud");
	snprintf(c->proxy, sizeof(c->proxy), "adaptive");
	snprintf(c->select, sizeof(c->select), "first,name:rt-*");
	snprintf(c->home_cpuset, sizeof(c->home_cpuset), "/user.slice");
	t_check(contract_set_stats(c, "st.json") == 0 && c->stats[0] == '/', "stats made absolute: %s", c->stats);
	c->keep_policy = true;
	c->verbose = true;
}

static void refused(const char *name, const char *value)
{
	struct run_contract in, out;
	const char *bad = NULL;

	sample(&in);
	memset(&vars, 0, sizeof(vars));
	contract_encode(&in, put, &vars);
	set(&vars, name, value);
	int err = contract_decode(&out, 4242, get, &vars, &bad);
	t_check(err == -EINVAL && bad && !strcmp(bad, name), "%s=%s: %d, bad %s", name, value, err, bad ? bad : "none");
}

int main(void)
{
	struct run_contract in, out;
	const char *bad;

	sample(&in);
	t_check(contract_encode(&in, put, &vars) == 0, "encode");
	t_check(contract_decode(&out, 4242, get, &vars, &bad) == 0, "decode: bad %s", bad ? bad : "none");
	t_check(out.pid == in.pid && CPU_EQUAL(&out.cpus, &in.cpus) && CPU_EQUAL(&out.housekeeping, &in.housekeeping),
		"pid and CPUs");
	t_check(!strcmp(out.policy, in.policy) && !strcmp(out.mlock, in.mlock) && !strcmp(out.mode, in.mode) &&
		!strcmp(out.proxy, in.proxy) && !strcmp(out.select, in.select) && !strcmp(out.stats, in.stats) &&
		!strcmp(out.home_cpuset, in.home_cpuset) && out.keep_policy && out.verbose, "the strings and flags");
	t_check(contract_decode(&out, 4243, get, &vars, &bad) == -ENOENT, "another pid's contract is none");

	/* defaults: what is left unset is not written, and reads back as the default */
	struct run_contract d;
	contract_defaults(&d);
	d.pid = 7;
	cpulist_parse("1", &d.cpus);
	cpulist_parse("0", &d.housekeeping);
	memset(&vars, 0, sizeof(vars));
	contract_encode(&d, put, &vars);
	t_check(!get(ENV_STATS, &vars) && !get(ENV_PROXY, &vars) && !get(ENV_KEEP_POLICY, &vars) &&
		!get(ENV_VERBOSE, &vars), "an unset option is written");
	t_check(contract_decode(&out, 7, get, &vars, &bad) == 0 && !out.stats[0] && !out.proxy[0] && !out.verbose &&
		!strcmp(out.select, "first") && !strcmp(out.mode, "auto"), "defaults read back");
	memset(&vars, 0, sizeof(vars));
	t_check(contract_decode(&out, 7, get, &vars, &bad) == -ENOENT, "no contract at all");

	refused(ENV_PID, "12x");
	refused(ENV_CPUS, "1-x");
	refused(ENV_CPUS, "");
	refused(ENV_HOUSEKEEPING, "zero");
	refused(ENV_POLICY, "f:100");
	refused(ENV_POLICY, "x:1");
	refused(ENV_POLICY, "f:");
	refused(ENV_MLOCK, "some");
	refused(ENV_MODE, "fast");
	refused(ENV_PROXY, "sleepy");
	refused(ENV_STATS, "relative.json");
	refused(ENV_VERBOSE, "yes");
	refused(ENV_KEEP_POLICY, "2");
	return t_done();
}
