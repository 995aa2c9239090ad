/* E2B's signed file URLs (the SDK's uploadUrl and downloadUrl): /files?path=P&username=U
 * &signature=v1_<S>&signature_expiration=E, opened with no header at all (a browser, curl),
 * where S is the unpadded base64 of SHA-256("P:read|write:U:<envdAccessToken>[:E]").
 *
 * With E2B_SANDBOX_URL set the URL names no sandbox (it is the listener's own), so the
 * signature is what names it: the one sandbox whose access token makes it. It is looked for
 * in the sandbox the request names (E2b-Sandbox-Id, or the host 49983-<id>.<domain> of the
 * SDK's own URLs), else among the last few its client used (e2b_recent.c), else, off the
 * gate's thread and bounded host-wide, in every sandbox (e2b_signed_scan). An expired URL
 * is refused before any of that. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cell/id.h"
#include "e2b.h"
#include "e2b_recent.h"
#include "fields.h"
#include "registry.h"
#include "sandbox.h"
#include "http/url.h"

#define SIG_PREFIX "v1_"
#define SIG_LEN	   (3 + 43) /* "v1_" and the unpadded base64 of 32 bytes */

/* Copy an escaped query value into out, unescaped: false when it does not fit or is
 * malformed. */
static bool take_value(const char *v, size_t len, char *out, size_t size)
{
	if (len >= size)
		return false;
	memcpy(out, v, len);
	out[len] = '\0';
	return url_unescape(out, true) == 0;
}

bool e2b_signed_parse(const char *method, const char *raw_query, struct e2b_signed *s)
{
	memset(s, 0, sizeof(*s));
	if (!raw_query || !method)
		return false;
	snprintf(s->op, sizeof(s->op), "%s", !strcmp(method, "POST") ? "write" : "read");
	bool ok = true;
	for (const char *p = raw_query; ok && *p;) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		const char *v = eq ? eq + 1 : p + len;
		size_t vlen = eq ? len - klen - 1 : 0;
		struct {
			const char *name;
			char *out;
			size_t size;
		} const keys[] = {{"path", s->path, sizeof(s->path)},
				  {"username", s->user, sizeof(s->user)},
				  {"signature", s->signature, sizeof(s->signature)},
				  {"signature_expiration", s->expiration, sizeof(s->expiration)}};
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (klen == strlen(keys[i].name) && !memcmp(p, keys[i].name, klen))
				ok = take_value(v, vlen, keys[i].out, keys[i].size);
		p += len + (p[len] == '&');
	}
	return ok && s->signature[0];
}

/* The signature of a URL for sandbox id: 0, or -errno (no preview secret, bad id). */
static int signature_of(const char *id, const struct e2b_signed *s, char out[SIG_LEN + 1])
{
	char token[PREVIEW_TOKEN_LEN + 1];
	int r = e2b_access_token(id, token);
	if (r < 0)
		return r;
	char *raw = NULL;
	int n = s->expiration[0] ? asprintf(&raw, "%s:%s:%s:%s:%s", s->path, s->op, s->user, token,
					    s->expiration)
				 : asprintf(&raw, "%s:%s:%s:%s", s->path, s->op, s->user, token);
	OPENSSL_cleanse(token, sizeof(token));
	if (n < 0)
		return -ENOMEM;
	unsigned char digest[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)raw, (size_t)n, digest);
	OPENSSL_clear_free(raw, (size_t)n);
	unsigned char b64[4 * ((SHA256_DIGEST_LENGTH + 2) / 3) + 1];
	int len = EVP_EncodeBlock(b64, digest, SHA256_DIGEST_LENGTH);
	while (len > 0 && b64[len - 1] == '=')
		len--;
	snprintf(out, SIG_LEN + 1, SIG_PREFIX "%.*s", len, (const char *)b64);
	return 0;
}

int e2b_signed_expired(const struct e2b_signed *s)
{
	int64_t at;
	if (!s->expiration[0])
		return 0;
	if (parse_int64(s->expiration, 0, INT64_MAX, &at) < 0)
		return -EINVAL;
	return at < (int64_t)time(NULL) ? 1 : 0;
}

bool e2b_signed_by(const char *id, const struct e2b_signed *s)
{
	char want[SIG_LEN + 1];
	if (!cell_id_valid(id) || strlen(s->signature) != SIG_LEN || signature_of(id, s, want) < 0)
		return false;
	return CRYPTO_memcmp(want, s->signature, SIG_LEN) == 0;
}

static bool well_formed(const struct e2b_signed *s)
{
	return strlen(s->signature) == SIG_LEN && !strncmp(s->signature, SIG_PREFIX, 3);
}

static bool signer_is(const char *id, const void *s)
{
	return e2b_signed_by(id, s);
}

int e2b_signed_sandbox(const struct e2b_signed *s, const char *named, const struct peer_key *client,
		       char id[CELL_ID_MAX + 1])
{
	if (!well_formed(s))
		return -EACCES;
	return e2b_recent_find(named, client, signer_is, s, id);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int e2b_signed_scan(const struct e2b_signed *s, const struct peer_key *client,
		    char id[CELL_ID_MAX + 1])
{
	if (!well_formed(s))
		return -EACCES;
	int r = e2b_recent_scan_begin(mono_ms());
	if (r < 0)
		return r;
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	r = -EACCES;
	for (size_t i = 0; i < n && r < 0; i++)
		if (e2b_signed_by(v[i]->id, s)) {
			snprintf(id, CELL_ID_MAX + 1, "%s", v[i]->id);
			r = 0;
		}
	sandbox_unref_all(v, n);
	e2b_recent_scan_end();
	if (r == 0 && client)
		e2b_recent_note(client, id);
	return r;
}
