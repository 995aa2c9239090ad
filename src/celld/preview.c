/* Preview tokens and preview host names (preview.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "preview.h"

static unsigned char secret[PREVIEW_SECRET_LEN];
static bool secret_set;

void preview_secret_set(const unsigned char s[PREVIEW_SECRET_LEN])
{
	memcpy(secret, s, PREVIEW_SECRET_LEN);
	secret_set = true;
}

bool preview_secret_ready(void)
{
	return secret_set;
}

static void base64url(const unsigned char *in, size_t len, char *out)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < len)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		if (i + 1 < len)
			out[o++] = alphabet[(v >> 6) & 63];
		if (i + 2 < len)
			out[o++] = alphabet[v & 63];
	}
	out[o] = '\0';
}

int preview_token(const char *id, unsigned port, char out[PREVIEW_TOKEN_LEN + 1])
{
	out[0] = '\0';
	if (!secret_set)
		return -EAGAIN;
	if (!id || !cell_id_valid(id) || port < 1 || port > 65535)
		return -EINVAL;
	char msg[CELL_ID_MAX + 32];
	int n = snprintf(msg, sizeof(msg), "cell-preview-v1\n%s\n%u", id, port);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned mac_len = 0;
	if (!HMAC(EVP_sha256(), secret, sizeof(secret), (const unsigned char *)msg, (size_t)n, mac,
		  &mac_len) ||
	    mac_len != 32)
		return -EIO;
	base64url(mac, mac_len, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

bool preview_token_ok(const char *id, unsigned port, const char *given, size_t len)
{
	char want[PREVIEW_TOKEN_LEN + 1];
	if (!given || len != PREVIEW_TOKEN_LEN || preview_token(id, port, want) < 0)
		return false;
	bool ok = CRYPTO_memcmp(want, given, PREVIEW_TOKEN_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

/* ---- Cookie: name=value; name=value ---- */

/* The next pair of a Cookie header from *p: its name and value (blanks trimmed); false at
 * the end. */
static bool next_pair(const char **p, const char **name, size_t *nlen, const char **val,
		      size_t *vlen, const char **start, const char **end)
{
	const char *s = *p;
	s += strspn(s, " \t;");
	if (!*s)
		return false;
	*start = s;
	size_t n = strcspn(s, ";");
	*end = s + n;
	*p = s + n;
	const char *eq = memchr(s, '=', n);
	*name = s;
	*nlen = eq ? (size_t)(eq - s) : n;
	while (*nlen && (s[*nlen - 1] == ' ' || s[*nlen - 1] == '\t'))
		(*nlen)--;
	*val = eq ? eq + 1 : s + n;
	*vlen = eq ? n - (size_t)(eq + 1 - s) : 0;
	while (*vlen && (**val == ' ' || **val == '\t'))
		(*val)++, (*vlen)--;
	while (*vlen && ((*val)[*vlen - 1] == ' ' || (*val)[*vlen - 1] == '\t'))
		(*vlen)--;
	return true;
}

static bool is_preview_cookie(const char *name, size_t nlen)
{
	return nlen == strlen(PREVIEW_COOKIE) && !memcmp(name, PREVIEW_COOKIE, nlen);
}

bool preview_cookie_ok(const char *cookie, const char *id, unsigned port)
{
	const char *p = cookie, *name, *val, *s, *e;
	size_t nlen, vlen;
	bool ok = false;
	/* Every one is checked, not the first only: a cookie another site under the same
	 * domain set with the same name must not hide the right one. */
	while (p && next_pair(&p, &name, &nlen, &val, &vlen, &s, &e))
		if (is_preview_cookie(name, nlen) && preview_token_ok(id, port, val, vlen))
			ok = true;
	return ok;
}

int preview_cookie_strip(const char *cookie, char *out, size_t size)
{
	const char *p = cookie, *name, *val, *s, *e;
	size_t nlen, vlen, o = 0;
	if (!size)
		return -E2BIG;
	out[0] = '\0';
	while (p && next_pair(&p, &name, &nlen, &val, &vlen, &s, &e)) {
		if (is_preview_cookie(name, nlen))
			continue;
		size_t n = (size_t)(e - s);
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (o + (o ? 2 : 0) + n + 1 > size)
			return -E2BIG;
		if (o) {
			memcpy(out + o, "; ", 2);
			o += 2;
		}
		memcpy(out + o, s, n);
		o += n;
		out[o] = '\0';
	}
	return (int)o;
}

/* ---- the query: a=1&cell_token=...&b=2 ---- */

static bool is_query_token(const char *s, size_t n)
{
	size_t k = strlen(PREVIEW_QUERY);
	return n > k && !memcmp(s, PREVIEW_QUERY, k) && s[k] == '=';
}

bool preview_query_token(const char *query, const char **tok, size_t *len)
{
	for (const char *p = query; p && *p;) {
		size_t n = strcspn(p, "&");
		if (is_query_token(p, n)) {
			*tok = p + strlen(PREVIEW_QUERY) + 1;
			*len = n - strlen(PREVIEW_QUERY) - 1;
			return true;
		}
		p += n;
		if (*p)
			p++;
	}
	return false;
}

int preview_query_strip(const char *query, char *out, size_t size)
{
	size_t o = 0;
	if (!size)
		return -E2BIG;
	out[0] = '\0';
	for (const char *p = query; p && *p;) {
		size_t n = strcspn(p, "&");
		if (n && !is_query_token(p, n) &&
		    !(n == strlen(PREVIEW_QUERY) && !memcmp(p, PREVIEW_QUERY, n))) {
			if (o + (o ? 1 : 0) + n + 1 > size)
				return -E2BIG;
			if (o)
				out[o++] = '&';
			memcpy(out + o, p, n);
			o += n;
			out[o] = '\0';
		}
		p += n;
		if (*p)
			p++;
	}
	return (int)o;
}

/* ---- host names: <port>-<id>.<domain> ---- */

int preview_host_parse(const char *host, const char *domain, unsigned *port,
		       char id[CELL_ID_MAX + 1])
{
	if (!host || !domain || !domain[0])
		return 0;
	size_t hl = strlen(host);
	/* ":<port>" of the listener, when the client named one. */
	const char *colon = strrchr(host, ':');
	if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
	    strlen(colon + 1) <= 5)
		hl = (size_t)(colon - host);
	size_t dl = strlen(domain);
	if (hl < dl || strncasecmp(host + hl - dl, domain, dl))
		return 0;
	if (hl == dl)
		return -EINVAL; /* the domain itself names no sandbox */
	if (host[hl - dl - 1] != '.')
		return 0;	 /* "xpreview.example.com": another name */
	size_t ll = hl - dl - 1; /* the label before the domain */
	const char *label = host;
	if (!ll || memchr(label, '.', ll))
		return -EINVAL;
	size_t digits = strspn(label, "0123456789");
	if (!digits || digits > 5 || label[0] == '0' || digits >= ll || label[digits] != '-')
		return -EINVAL;
	unsigned p = 0;
	for (size_t i = 0; i < digits; i++)
		p = p * 10 + (unsigned)(label[i] - '0');
	if (p < 1 || p > 65535)
		return -EINVAL;
	size_t idl = ll - digits - 1;
	if (idl > CELL_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < idl; i++) {
		char c = label[digits + 1 + i];
		id[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	id[idl] = '\0';
	if (!cell_id_valid(id))
		return -EINVAL;
	*port = p;
	return 1;
}
