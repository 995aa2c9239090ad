/* Preview URLs: who may open a sandbox's port through the port proxy without the API key,
 * the host names that route to it, and what the endpoint answer gives a browser.
 *
 * A request to ANY .../sandboxes/{id}/proxy/{port}/... (an app's port: not execd's 44772
 * nor egress's 18080) is let through on TCP without the API key when it carries that port's
 * preview token (preview.h): in the header X-Cell-Preview-Token, in the cookie
 * cell_preview, or, on a browser's first GET, in the query parameter cell_token. That
 * first GET is answered here: a redirect to the same URL without the token, setting the
 * cookie (HttpOnly, SameSite=Lax, scoped to the sandbox's port: its proxy path, or its
 * preview host), so the page's later requests carry it. The app never sees the token:
 * the port proxy drops the header and the cookie with every other credential of celld's
 * (proxyhead.c).
 *
 * With --preview-domain D, a request whose Host is "<port>-<id>.D" (any path) is that
 * sandbox's port at the app's "/": it is rerouted to .../proxy/<port><path> before the
 * auth check, so the same rules hold. A Host under D that names no port and sandbox is
 * 404. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

#include <microhttpd.h>

#include "api.h"
#include "config.h"
#include "fields.h"
#include "http/head.h"
#include "http/http.h"
#include "preview.h"
#include "http/router.h"

#define PORT_EXECD  44772
#define PORT_EGRESS 18080

static bool app_port(int64_t port)
{
	return port >= 1 && port <= 65535 && port != PORT_EXECD && port != PORT_EGRESS;
}

/* Whether raw (a path as the router sees it) is the port proxy of an app's port: 1 with id
 * and *port filled, else 0. The router's own split, so this agrees with what it routes. */
static int proxy_target(const char *raw, char id[CELL_ID_MAX + 1], unsigned *port)
{
	static const struct route_table v1 = {NULL, 0, "v1"};
	char buf[ROUTER_PATH_MAX];
	char *segs[ROUTER_SEGS_MAX];
	int n = raw ? router_split(&v1, raw, buf, sizeof(buf), segs) : -1;
	int64_t p;
	if (n < 4 || strcmp(segs[0], "sandboxes") || strcmp(segs[2], "proxy") ||
	    !cell_id_valid(segs[1]) || parse_int64(segs[3], 1, 65535, &p) < 0 || !app_port(p))
		return 0;
	snprintf(id, CELL_ID_MAX + 1, "%s", segs[1]);
	*port = (unsigned)p;
	return 1;
}

/* The path a preview host's request is routed as: malloc'd, NULL when too long. */
static char *preview_path(const char *id, unsigned port, const char *rest)
{
	char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s/proxy/%u%s", id, port, rest) < 0)
		return NULL;
	if (strlen(path) >= ROUTER_PATH_MAX) {
		free(path);
		return NULL;
	}
	return path;
}

int api_preview_reroute(struct http_req *r)
{
	if (!celld.preview_domain)
		return 0;
	const char *host = http_header(r, "Host");
	char id[CELL_ID_MAX + 1];
	unsigned port;
	int rc = preview_host_parse(host, celld.preview_domain, &port, id);
	if (rc == 0)
		return 0;
	if (rc < 0 || !app_port(port))
		return http_error(r, 404, "NOT_FOUND",
				  "host '%.80s' names no sandbox port: use <port>-<sandbox id>.%s "
				  "(port 1-65535, not 44772 or 18080)",
				  host, celld.preview_domain),
		       -1;
	const char *raw = http_raw_path(r);
	if (!raw || raw[0] != '/')
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "a preview host's request target must be a path"),
		       -1;
	char *path = preview_path(id, port, raw);
	if (!path)
		return http_error(r, 414, "URI_TOO_LONG", "the request path is too long"), -1;
	http_reroute(r, path);
	return 1;
}

/* ---- the auth check ---- */

static bool token_ok(const char *id, unsigned port, const char *hdr, size_t hlen,
		     const char *cookie, const char *query)
{
	const char *tok;
	size_t len;
	if (hdr && preview_token_ok(id, port, hdr, hlen))
		return true;
	if (cookie && preview_cookie_ok(cookie, id, port))
		return true;
	return query && preview_query_token(query, &tok, &len) &&
	       preview_token_ok(id, port, tok, len);
}

bool api_preview_authorized(const struct http_req *r, char id[CELL_ID_MAX + 1])
{
	unsigned port;
	if (!preview_secret_ready() || !proxy_target(http_raw_path(r), id, &port))
		return false;
	const char *hdr = http_header(r, PREVIEW_HEADER);
	return token_ok(id, port, hdr, hdr ? strlen(hdr) : 0, http_header(r, "Cookie"),
			http_raw_query(r));
}

/* A header of a raw head as a C string (malloc'd), or NULL. */
static char *head_string(const char *head, size_t len, const char *name)
{
	const char *v;
	size_t vlen;
	return head_value(head, len, name, &v, &vlen) ? strndup(v, vlen) : NULL;
}

bool api_preview_head_authorized(const char *head, size_t len)
{
	if (!preview_secret_ready())
		return false;
	/* "METHOD SP target SP HTTP/1.x" */
	const char *eol = memchr(head, '\n', len);
	const char *sp = eol ? memchr(head, ' ', (size_t)(eol - head)) : NULL;
	if (!sp)
		return false;
	const char *target = sp + 1;
	size_t tlen = strcspn(target, " \r\n");
	if (target + tlen > eol || tlen >= ROUTER_PATH_MAX)
		return false;
	char raw[ROUTER_PATH_MAX];
	memcpy(raw, target, tlen);
	raw[tlen] = '\0';
	char *q = strchr(raw, '?');
	if (q)
		*q++ = '\0';
	char id[CELL_ID_MAX + 1];
	unsigned port;
	char *host = head_string(head, len, "Host");
	int routed = 0;
	if (celld.preview_domain) {
		routed = preview_host_parse(host, celld.preview_domain, &port, id);
		if (routed == 1 && !app_port(port))
			routed = -1;
	}
	free(host);
	if (routed < 0 || (routed == 0 && !proxy_target(raw, id, &port)))
		return false;
	const char *hv;
	size_t hl;
	bool has_hdr = head_value(head, len, PREVIEW_HEADER, &hv, &hl);
	char *cookie = head_string(head, len, "Cookie");
	bool ok = token_ok(id, port, has_hdr ? hv : NULL, has_hdr ? hl : 0, cookie, q);
	free(cookie);
	return ok;
}

/* ---- a browser's first GET: the cookie, and the URL without the token ---- */

/* The raw prefix of a path-routed request, ".../proxy/<port>" as sent: its length. */
static size_t raw_prefix_len(const char *raw)
{
	unsigned skip = !strncmp(raw, "/v1/", 4) ? 5 : 4;
	const char *p = raw;
	for (unsigned i = 0; i < skip && *p; i++) {
		const char *slash = strchr(p + 1, '/');
		p = slash ? slash : p + strlen(p);
	}
	return (size_t)(p - raw);
}

static bool https(const struct http_req *r)
{
	const char *proto = http_header(r, "X-Forwarded-Proto");
	return proto && !strcasecmp(proto, "https");
}

int api_preview_begin(struct http_req *r, const char *id, unsigned port)
{
	const char *query = http_raw_query(r), *tok;
	size_t len;
	if (!preview_query_token(query, &tok, &len))
		return 0;
	if (!preview_token_ok(id, port, tok, len))
		return http_error(r, 401, "UNAUTHORIZED",
				  "%s is not the preview token of port %u of sandbox %s",
				  PREVIEW_QUERY, port, id),
		       1;
	const char *method = http_method(r);
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%s in the query is for a browser's first GET; send the %s "
				  "header with %s",
				  PREVIEW_QUERY, PREVIEW_HEADER, method),
		       1;
	const char *raw = http_raw_path(r);
	char rest_query[ROUTER_PATH_MAX], cookie_path[ROUTER_PATH_MAX];
	if (preview_query_strip(query, rest_query, sizeof(rest_query)) < 0)
		return http_error(r, 414, "URI_TOO_LONG", "the query is too long"), 1;
	/* Where the browser goes next: the same path, as it sent it. A preview host's request
	 * was rerouted: its own path is what follows the proxy prefix. */
	const char *path = raw;
	if (http_rerouted(r)) {
		path = raw + raw_prefix_len(raw);
		snprintf(cookie_path, sizeof(cookie_path), "/");
	} else {
		snprintf(cookie_path, sizeof(cookie_path), "%.*s", (int)raw_prefix_len(raw), raw);
	}
	char *location = NULL, *cookie = NULL;
	if (asprintf(&location, "%s%s%s", path[0] ? path : "/", rest_query[0] ? "?" : "",
		     rest_query) < 0)
		location = NULL;
	/* An expiring token's cookie goes when the token does. */
	char max_age[40] = "";
	uint64_t expires = preview_token_expires(tok, len), now = (uint64_t)time(NULL);
	if (expires)
		snprintf(max_age, sizeof(max_age), "; Max-Age=%llu",
			 (unsigned long long)(expires > now ? expires - now : 0));
	if (asprintf(&cookie, "%s=%.*s; Path=%s; HttpOnly; SameSite=Lax%s%s", PREVIEW_COOKIE,
		     (int)len, tok, cookie_path, max_age, https(r) ? "; Secure" : "") < 0)
		cookie = NULL;
	struct MHD_Response *resp =
	    location && cookie
		? MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT)
		: NULL;
	if (!resp) {
		free(location);
		free(cookie);
		return http_no_memory(r), 1;
	}
	MHD_add_response_header(resp, "Location", location);
	MHD_add_response_header(resp, "Set-Cookie", cookie);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	free(location);
	free(cookie);
	http_respond(r, 302, resp);
	return 1;
}

/* ---- the endpoint answer ---- */

/* ":<port>" at the end of a Host value, or "". */
static const char *host_port(const char *host)
{
	const char *colon = strrchr(host, ':');
	if (!colon || strchr(colon, ']') || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return "";
	return colon;
}

json_t *api_preview_endpoint(struct http_req *r, const char *id, unsigned port, const char *host,
			     uint64_t expires)
{
	char tok[PREVIEW_TOKEN_MAX + 1];
	if ((expires ? preview_token_until(id, port, expires, tok) : preview_token(id, port, tok)) <
	    0)
		return NULL;
	char ep[512];
	if (celld.preview_domain)
		snprintf(ep, sizeof(ep), "%u-%s.%s%s", port, id, celld.preview_domain,
			 host_port(host));
	else
		snprintf(ep, sizeof(ep), "%s/v1/sandboxes/%s/proxy/%u", host, id, port);
	char url[640];
	snprintf(url, sizeof(url), "%s://%s/?%s=%s", https(r) ? "https" : "http", ep, PREVIEW_QUERY,
		 tok);
	return json_pack("{s:s, s:{s:s}, s:s}", "endpoint", ep, "headers", PREVIEW_HEADER, tok,
			 "url", url);
}
