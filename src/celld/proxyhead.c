/* What crosses the port proxy (proxyhead.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cell/cleanup.h"
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

/* RFC 9110's tchar: what a header name is made of. */
static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!tchar((unsigned char)*s))
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

enum proxyhead_verdict proxyhead_answer(const char *name, const char *value, char **out)
{
	*out = NULL;
	return token(name) && field_value(value) ? PROXYHEAD_PASS : PROXYHEAD_DROP;
}
