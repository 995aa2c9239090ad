/* JSON helpers of cell-init. */
#include <stdlib.h>
#include <string.h>

#include "json.h"

static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	/* Refuse overlong forms, UTF-16 surrogates and code points above U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

json_t *init_json_string_lossy(const char *msg, size_t len)
{
	char *buf = malloc(len + 1);
	if (!buf)
		return NULL;
	const unsigned char *s = (const unsigned char *)msg;
	size_t i = 0;
	while (i < len) {
		if (s[i] >= 0x80) {
			size_t n = utf8_seq_len(s + i, len - i);
			if (n) {
				memcpy(buf + i, s + i, n);
				i += n;
				continue;
			}
		}
		buf[i] = (s[i] == 0 || s[i] >= 0x80) ? '?' : (char)s[i];
		i++;
	}
	json_t *j = json_stringn(buf, len);
	free(buf);
	return j;
}
