/* detach check: the findings model and the report, as text or as JSON with
 * the common header. */
#include "cli/check.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const sev_name[] = { "ok", "info", "warn", "block" };

void check_add(struct check *c, const char *id, enum sev sev, int cpu, bool by_isolate,
	       const char *fix, const char *fmt, ...)
{
	struct finding *f;
	va_list ap;

	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 64;
		struct finding *nf = realloc(c->f, (size_t)cap * sizeof(*nf));
		if (!nf)
			return;
		c->f = nf;
		c->cap = cap;
	}
	f = &c->f[c->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->category = c->probe->category;
	f->sev = sev;
	f->cpu = cpu;
	f->by_isolate = by_isolate;
	snprintf(f->fix, sizeof(f->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
}

int check_verdict(const struct check *c, int *nwarn, int *nblock)
{
	*nwarn = *nblock = 0;
	for (int i = 0; i < c->n; i++) {
		*nwarn += c->f[i].sev == S_WARN;
		*nblock += c->f[i].sev == S_BLOCK;
	}
	return *nblock ? CHECK_BLOCKED : *nwarn ? CHECK_WARNINGS : CHECK_READY;
}

void check_print_text(const struct check *c, int rc, const struct check_measure *const *m, int nm)
{
	static const char *const label[] = { "ok   ", "info ", "WARN ", "BLOCK" };
	int nw, nb;

	printf("detach check: CPU %s (housekeeping %s)", c->cpus_s, c->hk_s);
	if (c->have_part)
		printf(", partition %s: CPU %s%s\n", c->part.dir, cpulist_format(&c->part.cpus, (char[256]){ 0 }, 256),
		       c->part.valid ? "" : " (invalid)");
	else
		printf(", no detach partition\n");
	for (int i = 0; i < c->n; i++) {
		const struct finding *f = &c->f[i];
		printf("  %s %-16s %s\n", label[f->sev], f->id, f->what);
		if (f->sev >= S_INFO && f->fix[0])
			printf("        %-16s fix: %s\n", "", f->fix);
	}
	check_verdict(c, &nw, &nb);
	if (rc == CHECK_BLOCKED)
		printf("verdict: blocked: %d finding(s) block detached execution, %d warning(s) (exit status %d)\n", nb, nw, rc);
	else if (rc == CHECK_WARNINGS)
		printf("verdict: ready with %d warning(s): detached threads run, but the listed CPUs are still disturbed (exit status %d)\n", nw, rc);
	else
		printf("verdict: ready (exit status 0)\n");
	if (c->measured)
		printf("measured (information only, not part of the verdict):\n");
	for (int i = 0; i < nm; i++)
		m[i]->text(c);
}

static void json_finding(struct json *j, const struct finding *f)
{
	json_object_begin(j, NULL);
	json_str(j, "id", f->id);
	json_str(j, "category", f->category);
	json_str(j, "severity", sev_name[f->sev]);
	if (f->cpu >= 0)
		json_int(j, "cpu", f->cpu);
	else
		json_null(j, "cpu");
	json_str(j, "what", f->what);
	if (f->fix[0])
		json_str(j, "fix", f->fix);
	else
		json_null(j, "fix");
	json_bool(j, "fixed_by_isolate", f->by_isolate);
	json_object_end(j);
}

int check_write_json(const struct check *c, FILE *out, int rc, const struct check_measure *const *m, int nm)
{
	struct run_header h;
	struct json j;
	int nw, nb;

	run_header_init(&h, cli_argc, cli_argv);
	h.tsc_hz = c->tsc.hz;
	json_init(&j, out);
	json_object_begin(&j, NULL);
	json_common_header(&j, &h, rc);
	json_str(&j, "cpus", c->cpus_s);
	json_str(&j, "housekeeping", c->hk_s);
	if (c->have_part) {
		char buf[256];
		json_object_begin(&j, "partition");
		json_str(&j, "dir", c->part.dir);
		json_str(&j, "cgroup", c->part.kind == CG_V1 ? "v1" : "v2");
		json_str(&j, "cpus", cpulist_format(&c->part.cpus, buf, sizeof(buf)));
		json_bool(&j, "valid", c->part.valid);
		json_object_end(&j);
	} else {
		json_null(&j, "partition");
	}
	check_verdict(c, &nw, &nb);
	json_str(&j, "verdict", rc == CHECK_BLOCKED ? "blocked" : rc == CHECK_WARNINGS ? "warnings" : "ready");
	json_int(&j, "warnings", nw);
	json_int(&j, "blocks", nb);
	json_array_begin(&j, "findings");
	for (int i = 0; i < c->n; i++)
		json_finding(&j, &c->f[i]);
	json_array_end(&j);
	for (int i = 0; i < nm; i++)
		m[i]->json(c, &j);
	json_object_end(&j);
	run_header_free(&h);
	return ferror(out) ? -EIO : 0;
}
