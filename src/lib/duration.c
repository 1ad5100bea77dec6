/* Durations as rt-tests and rtla write them: "30s", "20m", "2h", "500ms". */
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int duration_parse(const char *s, uint64_t *ns)
{
	static const struct { const char *suffix; uint64_t ns; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000ull },
		{ "m", 60000000000ull }, { "h", 3600000000000ull }, { "d", 86400000000000ull },
		{ "", 1000000000ull },  /* a bare number is seconds */
	};
	char *end;
	double v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			double r = v * (double)units[i].ns;

			if (r > 1.8e19)
				return -ERANGE;
			*ns = (uint64_t)(r + 0.5);
			return 0;
		}
	}
	return -EINVAL;
}
