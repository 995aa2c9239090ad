/* Helpers every E2B route group shares: the envd and traffic tokens, the control plane's error
 * body and its sandbox lookup, and the user an envd call acts as. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/codec.h"

#include "e2b.h"
#include "http/http.h"
#include "preview.h"
#include "registry.h"
#include "sandbox.h"
#include "sbfile.h"
#include "tenancy.h"

int e2b_access_token(const char *id, char out[PREVIEW_TOKEN_LEN + 1])
{
	return preview_sandbox_token(E2B_ENVD_LABEL, id, out);
}

int e2b_traffic_token(const char *id, char out[PREVIEW_TOKEN_LEN + 1])
{
	return preview_sandbox_token(E2B_TRAFFIC_LABEL, id, out);
}

int e2b_error(struct http_req *r, unsigned status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* The API's error body (e2b_api.c) makes the code the status. */
	return http_error(r, status, "", "%s", msg);
}

struct sandbox *e2b_find_sandbox(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct sandbox *sb = tenancy_sandbox(r, id);
	if (!sb)
		e2b_error(r, 404, "sandbox %s not found", id ? id : "");
	return sb;
}

/* ---- the acting user ---- */

#define PASSWD_MAX (256u << 10) /* bytes of the sandbox's /etc/passwd read */

_Static_assert(E2B_USER_NAME_MAX == SBFILE_NAME_MAX, "envd's user names are the service's");

int e2b_user_name(const char *name, char out[E2B_USER_NAME_MAX + 1])
{
	size_t n = name ? strlen(name) : 0;
	if (!sbfile_name_ok(name ? name : "", n))
		return -EINVAL;
	memcpy(out, name, n + 1);
	return 0;
}

int e2b_rpc_user_name(struct http_req *r, char out[E2B_USER_NAME_MAX + 1])
{
	const char *h = http_header(r, "Authorization");
	out[0] = '\0';
	if (!h)
		return 0;
	if (strncasecmp(h, "Basic ", 6))
		return -EINVAL;
	h += 6;
	uint8_t *dec = NULL;
	size_t len = 0;
	if (strlen(h) > 256 || cell_base64_decode(h, strlen(h), &dec, &len) < 0)
		return -EINVAL;
	/* "<user>:" (no password: envd's users have none). */
	const char *colon = memchr(dec, ':', len);
	size_t n = colon ? (size_t)(colon - (const char *)dec) : len;
	int rc = -EINVAL;
	if (n <= E2B_USER_NAME_MAX && sbfile_name_ok((const char *)dec, n)) {
		memcpy(out, dec, n);
		out[n] = '\0';
		rc = 0;
	} else if (n == 0) {
		rc = 0; /* ":" alone: no user named */
	}
	free(dec);
	return rc;
}

/* name's line of passwd ("name:x:uid:gid:gecos:home:shell") into u: 0 or -ENOENT. */
static int passwd_find(const char *passwd, const char *name, struct e2b_user *u)
{
	size_t nlen = strlen(name);
	for (const char *line = passwd; *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *f[7];
		size_t fl[7], nf = 0;
		for (const char *p = line; nf < 7;) {
			const char *c = memchr(p, ':', (size_t)(line + len - p));
			f[nf] = p;
			fl[nf++] = c ? (size_t)(c - p) : (size_t)(line + len - p);
			if (!c)
				break;
			p = c + 1;
		}
		char num[16];
		if (nf >= 6 && fl[0] == nlen && !memcmp(f[0], name, nlen) && fl[2] < sizeof(num) &&
		    fl[3] < sizeof(num) && fl[5] < PATH_MAX && fl[5] > 0 && f[5][0] == '/') {
			int64_t uid, gid;
			memcpy(num, f[2], fl[2]);
			num[fl[2]] = '\0';
			char *end;
			uid = strtoll(num, &end, 10);
			bool ok = fl[2] && !*end && uid >= 0 && uid < CELL_UID_RANGE;
			memcpy(num, f[3], fl[3]);
			num[fl[3]] = '\0';
			gid = strtoll(num, &end, 10);
			ok = ok && fl[3] && !*end && gid >= 0 && gid < CELL_UID_RANGE;
			if (ok) {
				snprintf(u->name, sizeof(u->name), "%s", name);
				u->uid = uid;
				u->gid = gid;
				memcpy(u->home, f[5], fl[5]);
				u->home[fl[5]] = '\0';
				return 0;
			}
		}
		line = eol ? eol + 1 : line + len;
	}
	return -ENOENT;
}

int e2b_user_lookup(const struct sandbox *sb, const char *name, struct e2b_user *u,
		    sbfile_budget *b, struct cell_error *err)
{
	static const struct e2b_user root = {"root", 0, 0, "/root"};
	char *passwd = NULL;
	/* The sandbox's own /etc/passwd (at most PASSWD_MAX bytes); none is no user. */
	struct sbfile_ctx c = {(struct sandbox *)sb, NULL, b};
	int rc = sbfile_read_all(&c, "/etc/passwd", PASSWD_MAX, &passwd, err);
	if (rc == 1 && err->code != ENOENT) {
		char why[sizeof(err->msg)];
		snprintf(why, sizeof(why), "%s", err->msg);
		return cell_err(err, err->code, "/etc/passwd: %s", why);
	}
	if (rc < 0)
		return rc;
	cell_err_clear(err);
	bool named = name && name[0];
	rc = passwd ? passwd_find(passwd, named ? name : E2B_DEFAULT_USER, u) : -ENOENT;
	free(passwd);
	/* Without a user named: envd's default user, or root where there is none. */
	if (rc < 0 && (!named || !strcmp(name, "root"))) {
		*u = root;
		rc = 0;
	}
	if (rc < 0)
		return cell_err(err, ENOENT, "user %s: no such user in the sandbox's /etc/passwd",
				name);
	return 0;
}

int e2b_user_path(const struct e2b_user *u, const char *path, char out[PATH_MAX])
{
	if (!path || !path[0])
		return -EINVAL;
	int n;
	if (path[0] == '/')
		n = snprintf(out, PATH_MAX, "%s", path);
	else if (path[0] == '~' && (path[1] == '\0' || path[1] == '/'))
		n = snprintf(out, PATH_MAX, "%s%s", u->home, path + 1);
	else
		n = snprintf(out, PATH_MAX, "%s/%s", u->home, path);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int e2b_page_token_parse(const char *text, struct e2b_page_token *t)
{
	char *end;
	errno = 0;
	long long at = strtoll(text, &end, 10);
	if (errno || end == text || *end != ':' || at < 0 || strlen(end + 1) > CELL_ID_MAX ||
	    !cell_id_valid(end + 1))
		return -EINVAL;
	t->at = at;
	snprintf(t->id, sizeof(t->id), "%s", end + 1);
	t->set = true;
	return 0;
}

void e2b_page_token_format(char out[E2B_PAGE_TOKEN_MAX], int64_t at, const char *id)
{
	snprintf(out, E2B_PAGE_TOKEN_MAX, "%lld:%s", (long long)at, id);
}

int e2b_page_token_cmp(const struct e2b_page_token *t, int64_t at, const char *id)
{
	if (!t->set)
		return 0;
	if (at != t->at)
		return at < t->at ? -1 : 1;
	return strcmp(id, t->id);
}

int e2b_page(struct http_req *r, json_t *items, const char *next_token)
{
	char *text = json_dumps(items, JSON_COMPACT);
	json_decref(items);
	if (!text)
		return http_no_memory(r);
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	/* The SDK asks for the next page only when this header is there. */
	if (next_token)
		MHD_add_response_header(resp, "X-Next-Token", next_token);
	return http_respond(r, 200, resp);
}

int e2b_change_failed(struct http_req *r, int rc, const struct cell_error *err)
{
	if (rc == -ENOENT)
		return e2b_error(r, 404, "%s", err->msg);
	if (rc == -EALREADY || rc == -EBUSY)
		return e2b_error(r, 409, "%s", err->msg);
	return http_internal(r, err);
}
