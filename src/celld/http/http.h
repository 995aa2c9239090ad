/* The request an API handler answers: its path captures, headers, query, body, per-request
 * state, and the responses (each with X-Request-ID; errors in the body of the API the
 * request came in on). The transport (transport.h) makes requests and runs them; the
 * API's routes (router.h) say which handler answers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"
#include "metrics.h"
#include "router.h"

struct http_req;
struct MHD_Response;
struct adm_principal;
struct peer_key;

/* What an API brings to a listener: its routes, how its clients prove who they are, and
 * the body of its errors. The transport and the router know nothing else of any API, so a
 * second one (its own listener, auth and error body) plugs in beside the first without
 * touching either. */
struct http_api {
	const char *name; /* for the log */
	struct route_table routes;
	/* Listeners that require a key: whether r carries a credential (a key, or a token of
	 * one sandbox), saying whose with http_grant. Asked of every request, not only a
	 * connection's first (which the gate checked already): the client may send the next
	 * one without it. */
	bool (*authorized)(struct http_req *r);
	/* The same asked by the gate of a first request's raw head (whole, through its empty
	 * line), before the HTTP server has parsed anything, from client. */
	bool (*head_authorized)(const char *head, size_t len, const struct peer_key *client);
	/* A first request head_authorized refused, answered with this body (a new reference)
	 * and *status (403 or 502) instead of the 401 when it returns one: an API whose
	 * clients read another answer for what they lack (E2B's traffic token). NULL: the
	 * 401. */
	json_t *(*head_refusal)(const char *head, size_t len, unsigned *status);
	const char *key_header;		  /* for the log: which header holds the key */
	const char *unauthorized_message; /* the 401's message */
	/* The API's error body for status, code and message (a new reference, NULL when out
	 * of memory). */
	json_t *(*error_body)(unsigned status, const char *code, const char *message);
	/* Before the auth check and the routing, on every request: may give r another path
	 * (http_reroute: the host-name routing of preview URLs). Returns < 0 when it answered r
	 * itself. NULL: none. */
	int (*reroute)(struct http_req *r);
	/* Answer a request no route took (ROUTER_BAD_PATH, _NO_PATH, _NO_METHOD, _BAD_ID). */
	int (*unrouted)(struct http_req *r, enum router_result res, const struct router_match *m);
	/* The group of route (NULL: no route took the request) whose latency histogram its
	 * requests count in (metrics.h). NULL: METRIC_GROUP_OTHER. */
	enum metric_group (*route_group)(const struct route *route);
};

/* Path captures of the matched route, in order ({id}, then {cmd} or {port}). */
const char *http_param(const struct http_req *r, unsigned i);
/* The method and the raw path as sent (before unescaping). */
const char *http_method(const struct http_req *r);
const char *http_raw_path(const struct http_req *r);
/* The query as sent (after '?', still escaped), or NULL when the request had none. */
const char *http_raw_query(const struct http_req *r);
bool http_is_tcp(const struct http_req *r);
/* The client r came from (peer.h: its IPv4 address or IPv6 /64): false when there is none
 * (the Unix socket). */
bool http_peer(const struct http_req *r, struct peer_key *key);
/* Route r as if it had come with raw_path (taken; malloc'd), before the auth check: an
 * API's reroute hook. */
void http_reroute(struct http_req *r, char *raw_path);
/* Whether r was rerouted (its path is not the one sent). */
bool http_rerouted(const struct http_req *r);
/* The client connection's socket (-1 if unknown), valid while the request is answered. */
int http_socket(const struct http_req *r);
const char *http_header(const struct http_req *r, const char *name);
/* Call fn for each request header in the order sent, until it returns false. */
void http_headers_each(const struct http_req *r,
		       bool (*fn)(void *cls, const char *name, const char *value), void *cls);
/* First value of a query parameter, or NULL. */
const char *http_query(const struct http_req *r, const char *key);
/* All values of a repeated query parameter (at most max); returns how many. */
size_t http_query_all(const struct http_req *r, const char *key, const char **vals, size_t max);
/* The body as read (a ROUTE_BODY_JSON route's, whatever its bytes), "" when none. */
const char *http_body(const struct http_req *r, size_t *len);
/* Parse the body as a JSON object; on failure answers 400 and returns -EINVAL. */
int http_json_body(struct http_req *r, json_t **out);
/* The same for a body of any JSON value (an array). */
int http_json_body_any(struct http_req *r, json_t **out);
/* Whom the request acts for (NULL: nobody a quota limits, the Unix socket). */
struct adm_principal *http_principal(const struct http_req *r);
/* The authorized hook's word: r acts for who, and (scope not NULL: a token of one sandbox)
 * on sandbox scope alone (tenancy.h). */
void http_grant(struct http_req *r, struct adm_principal *who, const char *scope);
/* The sandbox r's credential is scoped to, or NULL (a key, or the Unix socket). */
const char *http_scope(const struct http_req *r);
/* r's credential is one anyone may be handed (tenancy_grant_scoped); http_anonymous says. */
void http_grant_anonymous(struct http_req *r);
bool http_anonymous(const struct http_req *r);

/* Per-request handler state, freed with the request. */
void *http_state(const struct http_req *r);
void http_set_state(struct http_req *r, void *state, void (*free_fn)(void *));

/* Responses. Each adds X-Request-ID; all return 0 (or -errno when queueing failed). */
int http_respond(struct http_req *r, unsigned status, struct MHD_Response *resp);
int http_json(struct http_req *r, unsigned status, json_t *body /* reference stolen */);
/* text (malloc'd, taken, len bytes) as the body of a 200 with this Content-Type and, when
 * not NULL, Cache-Control; out of memory answered as such. */
int http_text(struct http_req *r, char *text, size_t len, const char *content_type,
	      const char *cache_control);
int http_empty(struct http_req *r, unsigned status);
/* An error in the body of r's API; 5xx are logged here, once. */
int http_error(struct http_req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The first failure of a request whose body is still read after it (an upload): kept, the
 * rest of the body read and dropped, then answered with http_later_answer. */
struct http_later {
	unsigned status; /* 0: none yet */
	const char *code;
	char msg[CELL_ERROR_MSG_MAX + 4096];
};
/* Keep the failure unless one is kept already; -EIO (to stop the work at hand). */
int http_later_fail(struct http_later *l, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a failure with errno errnum: its status through the errno table (errors.h),
 * its code too unless code names it more precisely for this route. */
int http_later_fail_errno(struct http_later *l, int errnum, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer the kept failure. */
int http_later_answer(struct http_req *r, const struct http_later *l);
/* A failure with errno errnum, answered through the errno table (errors.h): its status,
 * and its code unless code names it more precisely for this route. */
int http_fail(struct http_req *r, int errnum, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a cell_error from a lower layer: err->code through the table. */
int http_internal(struct http_req *r, const struct cell_error *err);
/* celld out of memory: ENOMEM through the table, whichever API r is of. */
int http_no_memory(struct http_req *r);

/* Connection upgrade (the WebSocket/PTY routes, the port proxy): answer 101 with
 * Upgrade: protocol plus headers (name, value pairs ending with NULL; may be NULL), then
 * hand the raw socket to fn on the connection's own thread. fn owns the conversation until it calls
 * http_upgrade_done(handle); bytes the client sent after its request head are passed in extra. It
 * takes r's per-request state (http_set_state). Needs a listener started with
 * transport_listener.upgrades. */
struct http_upgrade;
typedef void (*http_upgrade_fn)(void *cls, int fd, const char *extra, size_t extra_len,
				struct http_upgrade *handle);
int http_upgrade(struct http_req *r, const char *protocol, const char *const *headers,
		 http_upgrade_fn fn, void *cls);
/* The same, with cls_free(cls) called when fn never runs (the client left before the
 * switch); on a failure (-errno) neither runs and cls stays the caller's. */
int http_upgrade_ex(struct http_req *r, const char *protocol, const char *const *headers,
		    http_upgrade_fn fn, void *cls, void (*cls_free)(void *cls));
void http_upgrade_done(struct http_upgrade *handle);
/* Readable once celld's listeners begin to stop (-1 if it could not be made): an upgraded
 * conversation polls it and ends, since the HTTP server waits for its thread. */
int http_upgrades_stopping_fd(void);
/* Has celld begun to stop? (A long response, such as a followed stream, then ends.) */
bool http_stopping(void);
/* Make it readable: called before the listeners stop. */
void http_upgrades_stop(void);
