/* The HTTP transport (transport.h): listeners, the request state machine, bodies. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "admission.h"
#include "audit.h"
#include "timefmt.h"
#include "fields.h"
#include "http_req.h"
#include "keyless.h"
#include "peer.h"
#include "transport.h"
#include "gate.h"
#include "http.h"
#include "router.h"

/* Bytes of an oversized body read and dropped before the connection is cut instead. */
#define DISCARD_MAX   (16u << 20)
#define LISTENERS_MAX 4

struct listener {
	struct transport_listener cfg; /* first: a request's listener pointer is its listener's */
	struct MHD_Daemon *daemon;
	struct gate *gate;	       /* TCP */
	struct keyless_budget keyless; /* TCP */
};

/* What the HTTP server keeps of a connection: what its first request's credential was. */
struct conn_ctx {
	bool classified, keyless;
	struct peer_key peer;
};

static struct listener listeners[LISTENERS_MAX];
static unsigned n_listeners;

/* ---- the request state machine ---- */

static enum MHD_Result find_nul(void *cls, enum MHD_ValueKind kind, const char *key,
				size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	const char **bad = cls;
	/* "%00" in a query value would cut a path short once it is used as a C string. */
	if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
		*bad = key;
		return MHD_NO;
	}
	return MHD_YES;
}

/* 0 when a route took r (its captures in r->match), else answered through the API. */
static int route_request(struct http_req *r)
{
	const struct http_api *api = r->api;
	enum router_result res =
	    router_route(&api->routes, r->method, r->raw_path ? r->raw_path : "", &r->match);
	if (res == ROUTER_MATCH)
		return 0;
	if (res == ROUTER_NOMEM)
		return http_no_memory(r), -ENOMEM;
	return api->unrouted(r, res, &r->match), -ENOENT;
}

/* A body over the route's limit: 0 to go on (read and drop it, then answer 413), or
 * answered 413 at once. */
static bool body_too_large(struct http_req *r)
{
	const char *cl = http_header(r, "Content-Length");
	int64_t len;
	if (!cl || parse_int64(cl, 0, INT64_MAX, &len) < 0 || (uint64_t)len <= r->body_limit)
		return false;
	/* A client that sent the body without waiting for "100 Continue" would get a reset
	 * instead of the 413 if the connection closed on its unread bytes: a body within the
	 * discard allowance is read and dropped first. */
	const char *expect = http_header(r, "Expect");
	if (!(expect && !strcasecmp(expect, "100-continue")) &&
	    (uint64_t)len <= r->body_limit + DISCARD_MAX) {
		r->too_large = true;
		return true;
	}
	/* Refused before a byte of it is read. */
	http_error(r, 413, "REQUEST_TOO_LARGE",
		   "request body of %llu bytes exceeds the limit of %llu bytes",
		   (unsigned long long)len, (unsigned long long)r->body_limit);
	return true;
}

/* The connection of a TCP request is classed by its first request's credential: a key (or
 * a sandbox's own client's token), or one anyone may be handed (http_anonymous: a preview
 * or traffic token, a signed URL, a public port). Those are held within the listener's
 * keyless budget; past it the request is answered 503 and its connection closed, so that
 * connections anyone can hold open never lock key holders out. */
static bool keyless_admitted(struct http_req *r)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_ctx *ctx = ci ? ci->socket_context : NULL;
	if (!ctx || ctx->classified)
		return true;
	ctx->classified = true;
	if (!http_anonymous(r) || !http_peer(r, &ctx->peer))
		return true;
	struct listener *l = (struct listener *)r->listener;
	bool whole;
	if (keyless_take(&l->keyless, &ctx->peer, &whole)) {
		ctx->keyless = true;
		return true;
	}
	r->close = true;
	if (whole)
		http_error(r, 503, "UNAVAILABLE",
			   "%u connections without an API key are held: try again later",
			   l->keyless.max);
	else
		http_error(r, 503, "UNAVAILABLE",
			   "this client holds %u connections without an API key, its share: close "
			   "one first",
			   l->keyless.per_client);
	return false;
}

/* A request refused 401 on a keep-alive connection the gate let through: security.log. */
static void auth_failed(struct http_req *r)
{
	char client[64] = "?", req[320];
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr)
		audit_client_text(ci->client_addr, client, sizeof(client));
	int n = snprintf(req, sizeof(req), "%s %s", r->method ? r->method : "?",
			 r->raw_path ? r->raw_path : "?");
	if (n >= (int)sizeof(req))
		n = (int)sizeof(req) - 1;
	audit_auth_failed(r->api->name, client, r->request_id, req, n > 0 ? (size_t)n : 0);
}

static void begin_request(struct http_req *r)
{
	const char *bad = NULL;
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, find_nul, &bad);
	if (bad) {
		http_error(r, 400, "INVALID_ARGUMENT",
			   "query parameter '%.64s' contains a NUL byte", bad);
		return;
	}
	if (r->api->reroute && r->api->reroute(r) < 0)
		return;
	r->who = r->listener->who;
	/* On TCP nobody is the operator: a credential the hook accepts names whom it is of. */
	if (r->tcp && (!r->api->authorized(r) || !r->granted || !r->who)) {
		r->who = NULL;
		auth_failed(r);
		http_error(r, 401, "UNAUTHORIZED", "%s", r->api->unauthorized_message);
		return;
	}
	if (r->tcp && !keyless_admitted(r))
		return;
	if (route_request(r) < 0)
		return;
	const struct route *route = r->match.route;
	if (route->flags & ROUTE_STREAMED) {
		struct cell_error err = {0};
		if (admission_take(r->who, ADM_STREAMS, false, &err) < 0) {
			http_internal(r, &err);
			return;
		}
		r->admitted = true;
	}
	r->body_limit = route->body != ROUTE_BODY_STREAM ? HTTP_JSON_MAX
			: route->flags & ROUTE_ARCHIVE	 ? HTTP_ARCHIVE_MAX
							 : HTTP_UPLOAD_MAX;
	if (body_too_large(r))
		return;
	/* Who asked, for the audit log of whatever this request changes (audit.h). */
	audit_context_set(r->request_id, admission_principal_id(r->who));
	if (route->begin)
		route->begin(r);
	audit_context_set(NULL, NULL);
}

/* Returns false to drop the connection. */
static bool body_chunk(struct http_req *r, const char *data, size_t len)
{
	r->body_seen += len;
	if (r->too_large || r->body_seen > r->body_limit) {
		/* Chunked bodies have no Content-Length: counted here as they arrive. Read and
		 * drop a bounded amount so the 413 can still be sent, then cut the connection. */
		r->too_large = true;
		free(r->body);
		r->body = NULL;
		r->body_len = r->body_cap = 0;
		return r->body_seen <= r->body_limit + DISCARD_MAX;
	}
	if (r->match.route->body == ROUTE_BODY_STREAM) {
		audit_context_set(r->request_id, admission_principal_id(r->who));
		r->match.route->data(r, data, len);
		audit_context_set(NULL, NULL);
		return true;
	}
	if (r->body_len + len > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + len)
			cap *= 2;
		char *nb = realloc(r->body, cap + 1);
		if (!nb)
			return false;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return true;
}

static void finish_request(struct http_req *r)
{
	if (r->too_large) {
		http_error(r, 413, "REQUEST_TOO_LARGE",
			   "request body exceeds the limit of %llu bytes",
			   (unsigned long long)r->body_limit);
		return;
	}
	audit_context_set(r->request_id, admission_principal_id(r->who));
	r->match.route->handler(r);
	audit_context_set(NULL, NULL);
	if (!r->queued)
		http_error(r, 500, "INTERNAL", "no response was produced");
}

/* The client's X-Request-ID, when it is one (HTTP_REQUEST_ID_MAX): echoed on the answer
 * and logged, so the client's id finds celld's log lines. Anything else keeps the id made
 * in on_uri, so a hostile header never reaches the log or a response. */
static void request_id_take(struct http_req *r, const char *id)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "0123456789._:+/=~-";
	if (!id)
		return;
	size_t n = strspn(id, ok);
	if (n == 0 || n > HTTP_REQUEST_ID_MAX || id[n])
		return;
	memcpy(r->request_id, id, n + 1);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)cls;
	(void)url;
	(void)version;
	struct http_req *r = *con_cls;
	if (!r)
		return MHD_NO;
	if (!r->started) {
		r->started = true;
		r->conn = conn;
		r->method = method;
		request_id_take(r,
				MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-ID"));
		begin_request(r);
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (r->queued)
			return MHD_YES;
		return body_chunk(r, upload_data, n) ? MHD_YES : MHD_NO;
	}
	if (!r->queued)
		finish_request(r);
	return MHD_YES;
}

/* A connection's context from its start to its close (conn_ctx); a keyless one gives its
 * place in the budget back. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)conn;
	struct listener *l = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = calloc(1, sizeof(struct conn_ctx));
		return;
	}
	struct conn_ctx *ctx = *socket_context;
	if (ctx && ctx->keyless)
		keyless_put(&l->keyless, &ctx->peer);
	free(ctx);
	*socket_context = NULL;
}

/* Called once per request before its headers are parsed, with the URI exactly as sent:
 * the request is born here so the path can be split before any unescaping. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)conn;
	const struct listener *l = cls;
	struct http_req *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->listener = &l->cfg;
	r->api = l->cfg.api;
	r->tcp = l->cfg.tcp != NULL;
	r->t0 = celld_now_ms();
	if (cell_id_random(r->request_id) < 0)
		snprintf(r->request_id, sizeof(r->request_id), "%016llx",
			 (unsigned long long)r->t0);
	size_t n = strcspn(uri, "?#");
	if (n < ROUTER_PATH_MAX)
		r->raw_path = strndup(uri, n);
	if (uri[n] == '?' && strlen(uri + n + 1) < ROUTER_PATH_MAX)
		r->raw_query = strndup(uri + n + 1, strcspn(uri + n + 1, "#"));
	return r;
}

static void log_request(const struct http_req *r)
{
	char path[160];
	http_printable(path, sizeof(path), r->raw_path ? r->raw_path : "?");
	log_info("%s %s%s -> %u (%lld ms) rid=%s", r->method ? r->method : "?", path,
		 r->tcp ? " [tcp]" : "", r->status, (long long)(celld_now_ms() - r->t0),
		 r->request_id);
}

static enum metric_group group_of(const struct http_req *r)
{
	return r->api->route_group ? r->api->route_group(r->match.route) : METRIC_GROUP_OTHER;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct http_req *r = *con_cls;
	if (!r)
		return;
	*con_cls = NULL;
	if (r->started) {
		log_request(r);
		metrics_request(group_of(r), celld_now_ms() - r->t0);
	}
	if (r->state_free)
		r->state_free(r->state);
	if (r->admitted)
		admission_put(r->who, ADM_STREAMS);
	router_match_free(&r->match);
	free(r->raw_path);
	free(r->raw_query);
	free(r->body);
	free(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_warn("http: %s", line);
}

/* ---- listeners ---- */

/* A live celld answering on the socket must not have its socket stolen; a stale one left by
 * a crash is removed (only if it is a socket). */
static int clear_stale_socket(const char *path, struct cell_error *err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : cell_err(err, errno, "stat %s", path);
	if (!S_ISSOCK(st.st_mode))
		return cell_err(err, EEXIST, "%s exists and is not a socket", path);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return cell_err(err, EADDRINUSE, "another celld is listening on %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return cell_err(err, errno, "removing stale socket %s", path);
	return 0;
}

static int listen_unix(const char *path, struct cell_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return cell_err(err, ENAMETOOLONG, "socket path %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_free_ char *parent = strdup(path);
	if (!parent)
		return cell_err(err, ENOMEM, "socket path");
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		int r = cell_mkdir_p(parent, 0755, err);
		if (r < 0)
			return r;
	}
	int r = clear_stale_socket(path, err);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "socket");
	/* Created 0660 from the start: no window where anyone else may connect. */
	mode_t old = umask(0117);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return cell_err(err, errno, "binding %s", path);
	struct group *g = getgrnam("cell");
	if (g && chown(path, 0, g->gr_gid) < 0)
		log_warn("chown %s to group cell: %s", path, strerror(errno));
	if (chmod(path, 0660) < 0)
		return cell_err(err, errno, "chmod %s", path);
	if (listen(fd, 128) < 0)
		return cell_err(err, errno, "listen on %s", path);
	return move_fd(fd);
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

static int listen_tcp(const char *hostport, bool keyed, struct cell_error *err)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(host) || !colon[1])
		return cell_err(err, EINVAL, "--listen %s: expected HOST:PORT", hostport);
	memcpy(host, hostport, colon - hostport);
	host[colon - hostport] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int gr = getaddrinfo(host, colon + 1, &hints, &ai);
	if (gr)
		return cell_err(err, EINVAL, "--listen %s: %s", hostport, gai_strerror(gr));
	if (!is_loopback(ai->ai_addr) && !keyed) {
		freeaddrinfo(ai);
		return cell_err(err, EPERM,
				"refusing to listen on non-loopback %s without an API key",
				hostport);
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return cell_err(err, errno, "socket for %s", hostport);
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int r = bind(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "listening on %s", hostport);
	}
	return fd;
}

/* The memory limit is also how large a piece of a streamed response MHD takes from its
 * callback: command output goes to the client in pieces of up to about this size (fewer
 * chunks, fewer sends). The pool is mapped on demand, so a connection only ever uses what
 * its requests touch. fd < 0: no listen socket, connections come from the gate. */
static struct MHD_Daemon *start_daemon(int fd, struct listener *l)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ERROR_LOG;
	if (fd < 0)
		flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	/* Upgraded connections (WebSocket, PTY) are taken over by their route: http_upgrade. */
	if (l->cfg.upgrades)
		flags |= MHD_ALLOW_UPGRADE;
	/* The listen socket is the last option: without one, the list ends before it. */
	return MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, l, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)300, MHD_OPTION_CONNECTION_LIMIT, l->cfg.max_connections,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(512 << 10), MHD_OPTION_THREAD_STACK_SIZE,
	    (size_t)(1 << 20), fd < 0 ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_END);
}

static int serve_unix(struct listener *l, struct cell_error *err)
{
	const char *path = l->cfg.unix_path;
	int fd = listen_unix(path, err);
	if (fd < 0)
		return fd;
	l->daemon = start_daemon(fd, l);
	if (!l->daemon) {
		close(fd);
		return cell_err(err, EIO, "starting the HTTP server on %s", path);
	}
	log_info("listening on unix:%s (%s API)", path, l->cfg.api->name);
	return 0;
}

static int serve_tcp(struct listener *l, struct cell_error *err)
{
	const struct transport_listener *c = &l->cfg;
	int fd = listen_tcp(c->tcp, c->keyed, err);
	if (fd < 0)
		return fd;
	if (keyless_init(&l->keyless, c->max_connections / 4, c->keyless_per_client) < 0) {
		close(fd);
		return cell_err(err, ENOMEM, "the keyless budget of %s", c->tcp);
	}
	l->daemon = start_daemon(-1, l);
	if (!l->daemon) {
		close(fd);
		return cell_err(err, EIO, "starting the HTTP server for %s", c->tcp);
	}
	int r = gate_start(fd, l->daemon, c->api, &c->gate, &l->gate, err);
	if (r < 0)
		return r;
	log_info("listening on tcp:%s (%s API, %s required; unauthenticated: %u "
		 "connections, %u per client, %u s and " GATE_HEAD_MAX_TEXT
		 " for the request head; without a key: %u connections held, %u per client)",
		 c->tcp, c->api->name, c->api->key_header, c->gate.pending_max,
		 c->gate.pending_per_ip, c->gate.head_timeout_s, l->keyless.max,
		 l->keyless.per_client);
	return 0;
}

int transport_listen(const struct transport_listener *cfg, struct cell_error *err)
{
	if (n_listeners == LISTENERS_MAX)
		return cell_err(err, ENOSPC, "more than %d listeners", LISTENERS_MAX);
	struct listener *l = &listeners[n_listeners];
	*l = (struct listener){.cfg = *cfg};
	int r = cfg->tcp ? serve_tcp(l, err) : serve_unix(l, err);
	if (r < 0) {
		if (l->daemon)
			MHD_stop_daemon(l->daemon);
		*l = (struct listener){0};
		return r;
	}
	n_listeners++;
	return 0;
}

void transport_stop(void)
{
	/* Upgraded connections (terminals) end by themselves once told: a daemon waits for
	 * every connection's thread. */
	http_upgrades_stop();
	/* Gates first: nothing new is handed to a daemon being stopped. */
	for (unsigned i = 0; i < n_listeners; i++)
		if (listeners[i].gate)
			gate_stop(listeners[i].gate);
	for (unsigned i = n_listeners; i-- > 0;)
		MHD_stop_daemon(listeners[i].daemon);
	memset(listeners, 0, sizeof(listeners));
	n_listeners = 0;
}
