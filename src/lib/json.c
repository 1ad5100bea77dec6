/* A streaming JSON writer and the common header of every JSON output. */
#include "lib/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->pretty = true;
}

static void indent(struct json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* Comma, newline and key before a value. */
static void member(struct json *j, const char *key)
{
	if (j->depth > 0 && j->need_comma[j->depth])
		fputc(',', j->f);
	if (j->depth > 0)
		indent(j);
	j->need_comma[j->depth] = true;
	if (key) {
		put_string(j->f, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void open_scope(struct json *j, const char *key, char c)
{
	member(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void close_scope(struct json *j, char c)
{
	bool had = j->need_comma[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (had)
		indent(j);
	fputc(c, j->f);
	if (j->depth == 0)
		fputc('\n', j->f);
}

void json_object_begin(struct json *j, const char *key) { open_scope(j, key, '{'); }
void json_object_end(struct json *j) { close_scope(j, '}'); }
void json_array_begin(struct json *j, const char *key) { open_scope(j, key, '['); }
void json_array_end(struct json *j) { close_scope(j, ']'); }

void json_str(struct json *j, const char *key, const char *v)
{
	member(j, key);
	if (v)
		put_string(j->f, v);
	else
		fputs("null", j->f);
}

void json_int(struct json *j, const char *key, long long v)
{
	member(j, key);
	fprintf(j->f, "%lld", v);
}

void json_uint(struct json *j, const char *key, unsigned long long v)
{
	member(j, key);
	fprintf(j->f, "%llu", v);
}

void json_double(struct json *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.17g", v);
	else
		fputs("null", j->f);  /* JSON has no NaN or infinity */
}

void json_bool(struct json *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}

void run_header_init(struct run_header *h, int argc, char **argv)
{
	memset(h, 0, sizeof(*h));
	h->argc = argc;
	h->argv = calloc((size_t)argc + 1, sizeof(char *));
	for (int i = 0; h->argv && i < argc; i++)
		h->argv[i] = strdup(argv[i]);
	clock_gettime(CLOCK_REALTIME, &h->start);
}

void run_header_free(struct run_header *h)
{
	for (int i = 0; h->argv && i < h->argc; i++)
		free(h->argv[i]);
	free(h->argv);
	h->argv = NULL;
}

static void iso_time(const struct timespec *ts, char *buf, size_t len)
{
	struct tm tm;
	size_t n;

	gmtime_r(&ts->tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%06ldZ", ts->tv_nsec / 1000);
}

void json_common_header(struct json *j, const struct run_header *h, int return_code)
{
	struct timespec end = h->end;
	struct utsname u;
	char buf[256];

	if (!end.tv_sec)
		clock_gettime(CLOCK_REALTIME, &end);
	json_int(j, "format", DETACH_JSON_FORMAT);
	json_array_begin(j, "cmdline");
	for (int i = 0; h->argv && i < h->argc; i++)
		json_str(j, NULL, h->argv[i]);
	json_array_end(j);
	json_str(j, "version", DETACH_VERSION);
	iso_time(&h->start, buf, sizeof(buf));
	json_str(j, "start_time", buf);
	iso_time(&end, buf, sizeof(buf));
	json_str(j, "end_time", buf);
	uname(&u);
	json_str(j, "kernel", u.release);
	json_str(j, "machine", u.machine);
	cpu_model(buf, sizeof(buf));
	json_str(j, "cpu_model", buf);
	json_uint(j, "tsc_hz", h->tsc_hz);
	json_int(j, "return_code", return_code);
}
