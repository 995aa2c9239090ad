/* What crosses the port proxy (proxyhead.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cell/cleanup.h"
#include "cell/proto.h"
#include "credentials.h"
#include "preview.h"
#include "proxyhead.h"

/* The request headers that carry a credential of celld's: the app gets none of them. */
static const char *const credential_headers[] = {
    CREDENTIALS_OPENSANDBOX_KEY, CREDENTIALS_E2B_KEY, CREDENTIALS_E2B_ENVD,
    CREDENTIALS_E2B_TRAFFIC,	 PREVIEW_HEADER,
};

enum proxyhead_verdict proxyhead_request(const char *name, const char *value, char **out)
{
	*out = NULL;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(credential_headers); i++)
		if (!strcasecmp(name, credential_headers[i]))
			return PROXYHEAD_DROP;
	if (strcasecmp(name, "Cookie"))
		return PROXYHEAD_PASS;
	/* Never longer than the header it comes from. */
	size_t size = strlen(value) + 1;
	char *rest = malloc(size);
	if (!rest || preview_cookie_strip(value, rest, size) <= 0) {
		free(rest);
		return PROXYHEAD_DROP;
	}
	*out = rest;
	return PROXYHEAD_REWRITE;
}

/* A header name: an RFC 9110 token. */
static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!cell_http_tchar((unsigned char)*s))
			return false;
	return true;
}

/* A field value: visible characters, blanks, obs-text; no other control character. */
static bool field_value(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return false;
	}
	return true;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* s[0, *n) without blanks at either end: its new start, *n its length. */
static const char *trim(const char *s, size_t *n)
{
	while (*n && blank(*s))
		s++, (*n)--;
	while (*n && blank(s[*n - 1]))
		(*n)--;
	return s;
}

static void put(char *out, size_t *o, const char *s, size_t n)
{
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
}

/* Whether path (n bytes) is prefix or below it. */
static bool under(const char *path, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);
	return n >= pl && !memcmp(path, prefix, pl) && (n == pl || path[pl] == '/');
}

/* A Set-Cookie value scoped to the app (proxyhead_answer). */
static enum proxyhead_verdict set_cookie(const char *value, const char *prefix, char **out)
{
	size_t n = strcspn(value, ";");
	const char *eq = memchr(value, '=', n);
	size_t name_len = eq ? (size_t)(eq - value) : 0;
	const char *name = trim(value, &name_len);
	if (eq && name_len == strlen(PREVIEW_COOKIE) && !memcmp(name, PREVIEW_COOKIE, name_len))
		return PROXYHEAD_DROP;
	/* Each attribute may grow by "; " and the prefix. */
	size_t attrs = 0, plen = prefix ? strlen(prefix) : 0;
	for (const char *p = value; (p = strchr(p, ';')); p++)
		attrs++;
	char *o = malloc(strlen(value) + attrs * (plen + 2) + 1);
	if (!o)
		return PROXYHEAD_DROP;
	size_t len = 0;
	bool changed = false;
	put(o, &len, value, n);
	for (const char *p = value + n; *p == ';';) {
		p++;
		size_t an = strcspn(p, ";");
		size_t tn = an;
		const char *attr = trim(p, &tn);
		const char *aeq = memchr(attr, '=', tn);
		size_t kn = aeq ? (size_t)(aeq - attr) : tn;
		const char *key = trim(attr, &kn);
		size_t vn = aeq ? tn - (size_t)(aeq + 1 - attr) : 0;
		const char *val = aeq ? trim(aeq + 1, &vn) : attr + tn;
		p += an;
		if (kn == 6 && !strncasecmp(key, "Domain", 6)) {
			changed = true;
			continue;
		}
		put(o, &len, "; ", 2);
		if (prefix && kn == 4 && !strncasecmp(key, "Path", 4) && vn && val[0] == '/' &&
		    !under(val, vn, prefix)) {
			put(o, &len, key, kn);
			put(o, &len, "=", 1);
			put(o, &len, prefix, plen);
			put(o, &len, val, vn);
			changed = true;
		} else {
			put(o, &len, attr, tn);
		}
	}
	if (!changed) {
		free(o);
		return PROXYHEAD_PASS;
	}
	*out = o;
	return PROXYHEAD_REWRITE;
}

enum proxyhead_verdict proxyhead_answer(const char *name, const char *value, const char *prefix,
					char **out)
{
	*out = NULL;
	if (!token(name) || !field_value(value))
		return PROXYHEAD_DROP;
	if (!strcasecmp(name, "Set-Cookie"))
		return set_cookie(value, prefix, out);
	return PROXYHEAD_PASS;
}
