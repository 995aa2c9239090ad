/* API keys: a header of a raw request head, and a constant-time comparison. */
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "cell/codec.h"
#include "auth.h"

bool auth_key_equal(const char *given, size_t len, const char *key)
{
	if (!given || !key)
		return false;
	char a[CELL_SHA256_HEX_LEN + 1], b[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(given, len, a);
	cell_sha256_hex(key, strlen(key), b);
	return CRYPTO_memcmp(a, b, CELL_SHA256_HEX_LEN) == 0;
}

bool auth_head_value(const char *head, size_t len, const char *name, const char **value,
		     size_t *vlen)
{
	const char *end = head + len;
	const size_t klen = strlen(name);
	const char *first = memchr(head, '\n', len);
	if (!first)
		return false;
	for (const char *line = first + 1; line < end;) {
		const char *nl = memchr(line, '\n', end - line);
		if (!nl)
			return false;
		const char *e = nl > line && nl[-1] == '\r' ? nl - 1 : nl;
		if (e == line)
			break;
		if ((size_t)(e - line) > klen && line[klen] == ':' &&
		    !strncasecmp(line, name, klen)) {
			if (nl + 1 < end && (nl[1] == ' ' || nl[1] == '\t'))
				return false;
			const char *v = line + klen + 1;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			*value = v;
			*vlen = e - v;
			return true;
		}
		line = nl + 1;
	}
	return false;
}
