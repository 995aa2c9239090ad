/* Output helpers of the cell CLI: pretty JSON, terminal-safe text, human sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

int cli_output_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
	if (!s)
		return -ENOMEM;
	/* JSON escapes every control character, so this is safe on a terminal. */
	puts(s);
	free(s);
	return 0;
}

void cli_output_safe(const char *s, FILE *f)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char ch = *p;
		/* Control bytes from a server message could be terminal escape sequences. */
		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			ch = '?';
		fputc(ch, f);
	}
}

void cli_output_size(unsigned long long n, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%llu B", n);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
}
