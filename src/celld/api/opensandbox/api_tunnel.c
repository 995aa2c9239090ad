/* The TCP tunnel of `cell forward`: POST /v1/sandboxes/{id}/ports/{port}/tunnel with
 * "Connection: Upgrade" and "Upgrade: cell-tcp" connects to 127.0.0.1:<port> in the
 * sandbox's own network namespace (portconn.c), answers 101, and from then on the client's
 * connection carries that TCP connection's bytes both ways, unchanged, until either side
 * ends it (each half-close passed on). Raw TCP, not HTTP: ssh, a database, anything.
 *
 * API key only (never a preview token: the path is not the port proxy's). A tunnel counts
 * as one of the sandbox's proxied connections (--proxy-max-connections). It has no idle
 * timeout: a person's session may sit quiet; it ends with the app, the client, or the
 * sandbox. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "metrics.h"
#include "cell/log.h"
#include "cell/splice.h"
#include "api.h"
#include "config.h"
#include "http/errors.h"
#include "fields.h"
#include "http/http.h"
#include "portconn.h"
#include "sandbox.h"

#define TUNNEL_PROTOCOL "cell-tcp"

struct tunnel {
	struct sandbox *sb;
	int app;
	unsigned port;
};

static void tunnel_free(void *cls)
{
	struct tunnel *t = cls;
	if (t->app >= 0)
		close(t->app);
	__atomic_sub_fetch(&t->sb->proxy_conns, 1, __ATOMIC_RELAXED);
	sandbox_unref(t->sb);
	free(t);
}

static void tunnel_run(void *cls, int fd, const char *extra, size_t extra_len,
		       struct http_upgrade *h)
{
	struct tunnel *t = cls;
	/* Either side sees its connection close; how it ended is only worth a debug line. */
	struct cell_splice_opts o = {.a_first = extra,
				     .a_first_len = extra_len,
				     .stop_fd = http_upgrades_stopping_fd(),
				     .moved = metrics_proxy_moved};
	int rc = cell_splice(fd, t->app, &o);
	if (rc < 0)
		log_debug("tunnel to port %u of sandbox %s: %s", t->port, t->sb->id, strerror(-rc));
	tunnel_free(t);
	http_upgrade_done(h);
}

/* Whether the comma-separated list holds token (any case). */
static bool has_token(const char *list, const char *token)
{
	size_t n = strlen(token);
	for (const char *p = list; p && *p;) {
		p += strspn(p, " \t,");
		size_t k = strcspn(p, " \t,");
		if (k == n && !strncasecmp(p, token, n))
			return true;
		p += k;
	}
	return false;
}

int api_tunnel(struct http_req *r)
{
	int64_t port;
	if (parse_int64(http_param(r, 1), 1, 65535, &port) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "port '%.16s' must be a number between 1 and 65535",
				  http_param(r, 1));
	if (!has_token(http_header(r, "Connection"), "upgrade") ||
	    !has_token(http_header(r, "Upgrade"), TUNNEL_PROTOCOL))
		return http_error(r, 426, "UPGRADE_REQUIRED",
				  "a tunnel needs the headers 'Connection: Upgrade' and "
				  "'Upgrade: " TUNNEL_PROTOCOL "'");
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	struct tunnel *t = calloc(1, sizeof(*t));
	if (!t) {
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	*t = (struct tunnel){.sb = sb, .app = -1, .port = (unsigned)port};
	unsigned open = __atomic_add_fetch(&sb->proxy_conns, 1, __ATOMIC_RELAXED);
	if (open > celld.proxy_max) {
		int rc = http_fail(r, EUSERS, "TOO_MANY_CONNECTIONS",
				   "sandbox %s has %u proxied connections open, the most allowed "
				   "(--proxy-max-connections); try again when one ends",
				   sb->id, celld.proxy_max);
		tunnel_free(t);
		return rc;
	}
	struct cell_error err = {0};
	t->app = portconn_open(sb, t->port, &err);
	if (t->app < 0) {
		int e = -t->app, rc;
		if (e == ECONNREFUSED)
			rc = http_error(r, 502, "PROXY_CONNECT_FAILED",
					"nothing listens on port %u in sandbox %s (127.0.0.1:%u in "
					"its network namespace)",
					t->port, sb->id, t->port);
		else if (e == ETIMEDOUT)
			rc = http_error(r, 504, "PROXY_TIMEOUT",
					"port %u in sandbox %s took longer than %d s to accept",
					t->port, sb->id, PORTCONN_CONNECT_MS / 1000);
		else if (errors_host_short(e)) /* celld's own failure, not the app's */
			rc = http_internal(r, &err);
		else
			rc = http_error(r, 502, "PROXY_CONNECT_FAILED", "port %u in sandbox %s: %s",
					t->port, sb->id, err.msg);
		t->app = -1;
		tunnel_free(t);
		return rc;
	}
	int rc = http_upgrade_ex(r, TUNNEL_PROTOCOL, NULL, tunnel_run, t, tunnel_free);
	if (rc < 0) {
		tunnel_free(t);
		return http_fail(r, -rc, NULL, "switching the connection: %s", strerror(-rc));
	}
	return 0;
}
