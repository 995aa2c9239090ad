/* Preview tokens and preview host names (preview.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

/* v in base 36, lowercase, no leading zero ("0" for 0): at most 13 characters. */
static void base36(uint64_t v, char out[14])
{
	char rev[14];
	size_t n = 0;
	do {
		rev[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
		v /= 36;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = rev[n - 1 - i];
	out[n] = '\0';
}

/* HMAC-SHA256 of msg (n bytes) with the secret, base64url, into out. */
static int mac_of(const char *msg, int n, char out[PREVIEW_TOKEN_LEN + 1])
{
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

/* The HMAC part of a token (expiry: its base-36 text, NULL for none) into out. */
static int token_mac(const char *id, unsigned port, const char *expiry,
		     char out[PREVIEW_TOKEN_LEN + 1])
{
	out[0] = '\0';
	if (!secret_set)
		return -EAGAIN;
	if (!id || !cell_id_valid(id) || port < 1 || port > 65535)
		return -EINVAL;
	char msg[CELL_ID_MAX + 48];
	int n = expiry ? snprintf(msg, sizeof(msg), PREVIEW_LABEL "\n%s\n%u\n%s", id, port, expiry)
		       : snprintf(msg, sizeof(msg), PREVIEW_LABEL "\n%s\n%u", id, port);
	return mac_of(msg, n, out);
}

/* A label other than a preview's, of "cell-" and at most 32 bytes, no blank or line
 * break: the first line of what is signed, so no two labels sign the same text. */
static bool label_ok(const char *label)
{
	size_t n = label ? strlen(label) : 0;
	return n > 5 && n <= 32 && !strncmp(label, "cell-", 5) && strcmp(label, PREVIEW_LABEL) &&
	       !strpbrk(label, " \t\r\n");
}

int preview_sandbox_token(const char *label, const char *id, char out[PREVIEW_TOKEN_LEN + 1])
{
	out[0] = '\0';
	if (!secret_set)
		return -EAGAIN;
	if (!label_ok(label) || !id || !cell_id_valid(id))
		return -EINVAL;
	char msg[CELL_ID_MAX + 48];
	int n = snprintf(msg, sizeof(msg), "%s\n%s", label, id);
	return mac_of(msg, n, out);
}

bool preview_sandbox_token_ok(const char *label, const char *id, const char *given, size_t len)
{
	char want[PREVIEW_TOKEN_LEN + 1];
	if (!given || len != PREVIEW_TOKEN_LEN || preview_sandbox_token(label, id, want) < 0)
		return false;
	bool ok = CRYPTO_memcmp(want, given, PREVIEW_TOKEN_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

int preview_token(const char *id, unsigned port, char out[PREVIEW_TOKEN_LEN + 1])
{
	return token_mac(id, port, NULL, out);
}

int preview_token_until(const char *id, unsigned port, uint64_t expires,
			char out[PREVIEW_TOKEN_MAX + 1])
{
	char b36[14], mac[PREVIEW_TOKEN_LEN + 1];
	if (!expires)
		return -EINVAL;
	base36(expires, b36);
	int r = token_mac(id, port, b36, mac);
	if (r == 0)
		snprintf(out, PREVIEW_TOKEN_MAX + 1, "%s.%s", b36, mac);
	OPENSSL_cleanse(mac, sizeof(mac));
	return r;
}

uint64_t preview_token_expires(const char *given, size_t len)
{
	const char *dot = given ? memchr(given, '.', len) : NULL;
	size_t n = dot ? (size_t)(dot - given) : 0;
	if (!n || n > 13 || (n > 1 && given[0] == '0'))
		return 0;
	static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		const char *d = given[i] ? strchr(digits, given[i]) : NULL;
		if (!d)
			return 0;
		uint64_t digit = (uint64_t)(d - digits);
		if (v > (UINT64_MAX - digit) / 36)
			return 0; /* beyond 64 bits */
		v = v * 36 + digit;
	}
	return v;
}

bool preview_token_ok_at(const char *id, unsigned port, const char *given, size_t len, uint64_t now)
{
	if (!given)
		return false;
	const char *mac = given;
	size_t mac_len = len;
	char b36[14] = "";
	if (memchr(given, '.', len)) {
		uint64_t expires = preview_token_expires(given, len);
		if (!expires || now > expires)
			return false;
		base36(expires, b36); /* the canonical text: the same as given's, checked below */
		size_t n = strlen(b36);
		if (len <= n + 1 || memcmp(given, b36, n) || given[n] != '.')
			return false;
		mac = given + n + 1;
		mac_len = len - n - 1;
	}
	char want[PREVIEW_TOKEN_LEN + 1];
	if (mac_len != PREVIEW_TOKEN_LEN || token_mac(id, port, b36[0] ? b36 : NULL, want) < 0)
		return false;
	bool ok = CRYPTO_memcmp(want, mac, PREVIEW_TOKEN_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

bool preview_token_ok(const char *id, unsigned port, const char *given, size_t len)
{
	return preview_token_ok_at(id, port, given, len, (uint64_t)time(NULL));
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
