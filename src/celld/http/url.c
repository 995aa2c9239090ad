/* URL text: percent-decoding. */
#include <errno.h>

#include "url.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int url_unescape(char *s, bool plus_space)
{
	char *w = s;
	for (const char *p = s; *p; p++) {
		if (*p == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL;
			*w++ = (char)(hi << 4 | lo);
			p += 2;
		} else {
			*w++ = plus_space && *p == '+' ? ' ' : *p;
		}
	}
	*w = '\0';
	return 0;
}
