/* A raw HTTP request head, as the gate peeks at it before the HTTP server parses it. */
#include <string.h>
#include <strings.h>

#include "head.h"

/* Length of the head in buf[0..n) through its empty line, 0 while it is incomplete; *start
 * is where the request line begins (empty lines before it are allowed). */
size_t head_len(const char *buf, size_t n, size_t *start)
{
	size_t i = 0;
	while (i < n && (buf[i] == '\r' || buf[i] == '\n'))
		i++;
	*start = i;
	for (const char *p = buf + i; (p = memchr(p, '\n', buf + n - p)); p++) {
		if (p + 1 < buf + n && p[1] == '\n')
			return p + 2 - buf;
		if (p + 2 < buf + n && p[1] == '\r' && p[2] == '\n')
			return p + 3 - buf;
	}
	return 0;
}

bool head_value(const char *head, size_t len, const char *name, const char **value, size_t *vlen)
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
