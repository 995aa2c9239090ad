/* Preview tokens and preview host names: who may open a sandbox's port without the API key,
 * and which sandbox and port a preview host name names. Pure (no I/O; the secret is handed
 * in once at start): unit suites link it alone.
 *
 * A token is HMAC-SHA256(secret, "cell-preview-v1\n<id>\n<port>"), base64url without
 * padding: per sandbox and port, kept nowhere (celld recomputes it), dead with the
 * sandbox (its id is never reused) and with the secret (rotating it revokes every token).
 * An expiring one (OpenSandbox's signed endpoint, GET .../endpoints/{port}?expires=) is
 * "<expires>.<mac>": the Unix second it dies at in base 36 (lowercase, no leading zero, as
 * OpenSandbox encodes it), then the HMAC of "cell-preview-v1\n<id>\n<port>\n<expires>".
 *
 * A sandbox's token for another purpose (E2B's envd and traffic tokens) is the HMAC of
 * "<label>\n<id>" with a label of its own: the first line of what is signed tells every
 * purpose apart, so a token given for one (viewing a port) never opens another (envd,
 * commands as root). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/id.h"

#define PREVIEW_SECRET_LEN 32
#define PREVIEW_TOKEN_LEN  43				/* base64url of 32 bytes, no padding */
#define PREVIEW_TOKEN_MAX  (13 + 1 + PREVIEW_TOKEN_LEN) /* with a base-36 expiry before */
#define PREVIEW_HEADER	   "X-Cell-Preview-Token"
#define PREVIEW_COOKIE	   "cell_preview"
#define PREVIEW_QUERY	   "cell_token"
#define PREVIEW_LABEL	   "cell-preview-v1" /* what a port's token signs first */

/* The secret every token is made with (copied). Until it is set no token is made or
 * accepted. */
void preview_secret_set(const unsigned char secret[PREVIEW_SECRET_LEN]);
bool preview_secret_ready(void);
/* The token of port in sandbox id into out (NUL-terminated): 0, or -EAGAIN without a
 * secret, -EINVAL for a bad id or port. */
int preview_token(const char *id, unsigned port, char out[PREVIEW_TOKEN_LEN + 1]);
/* The same, dying after the Unix second expires (> 0). */
int preview_token_until(const char *id, unsigned port, uint64_t expires,
			char out[PREVIEW_TOKEN_MAX + 1]);
/* given (len bytes) is a token of port in sandbox id alive at now (an expiring one until
 * its second has passed), compared in constant time. preview_token_ok: now is the clock's. */
bool preview_token_ok_at(const char *id, unsigned port, const char *given, size_t len,
			 uint64_t now);
bool preview_token_ok(const char *id, unsigned port, const char *given, size_t len);
/* The expiry of a token (its Unix second), 0 when it has none or is malformed. */
uint64_t preview_token_expires(const char *given, size_t len);
/* The token of sandbox id for the purpose label ("cell-<purpose>-v<n>", at most 32 bytes,
 * not PREVIEW_LABEL, no blank) into out: 0, -EAGAIN without a secret, -EINVAL for a bad
 * label or id. */
int preview_sandbox_token(const char *label, const char *id, char out[PREVIEW_TOKEN_LEN + 1]);
/* given (len bytes) is that token, compared in constant time. */
bool preview_sandbox_token_ok(const char *label, const char *id, const char *given, size_t len);

/* Whether a Cookie header (its value) holds a PREVIEW_COOKIE valid for id and port (any of
 * them, when several are sent). */
bool preview_cookie_ok(const char *cookie, const char *id, unsigned port);
/* The Cookie header without any PREVIEW_COOKIE pair, into out: its length (0: nothing is
 * left, drop the header); -E2BIG when out is too small. */
int preview_cookie_strip(const char *cookie, char *out, size_t size);
/* The first PREVIEW_QUERY value of a raw query: true with *tok, *len pointing into it. */
bool preview_query_token(const char *query, const char **tok, size_t *len);
/* The raw query without any PREVIEW_QUERY parameter, into out ("" when nothing is left);
 * -E2BIG when out is too small. */
int preview_query_strip(const char *query, char *out, size_t size);

/* A Host header against the preview domain: 1 when it is "<port>-<id>.<domain>" (any
 * case, an optional ":<listener port>" after it) with *port and id filled; 0 when it is
 * not under domain at all (an ordinary API request); -EINVAL when it is under domain but
 * names no port and sandbox (a bad port, id, or a deeper name): the caller answers 404. */
int preview_host_parse(const char *host, const char *domain, unsigned *port,
		       char id[CELL_ID_MAX + 1]);
