/* The request a handler answers: accessors, the JSON body, per-request state, responses
 * (X-Request-ID on each), errors in the body of the request's API, and the errno table's
 * answers (errors.h). The transport (transport.c) makes and runs requests. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/log.h"
#include "errors.h"
#include "http.h"
#include "http_req.h"
#include "peer.h"

/* ---- request accessors ---- */

const char *http_param(const struct http_req *r, unsigned i)
{
	return i < r->match.n_params ? r->match.params[i] : NULL;
}

const char *http_method(const struct http_req *r)
{
	return r->method;
}

const char *http_raw_path(const struct http_req *r)
{
	return r->raw_path ? r->raw_path : "";
}

const char *http_raw_query(const struct http_req *r)
{
	return r->raw_query;
}

int http_socket(const struct http_req *r)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

bool http_is_tcp(const struct http_req *r)
{
	return r->tcp;
}

bool http_peer(const struct http_req *r, struct peer_key *key)
{
	const union MHD_ConnectionInfo *ci =
	    r->tcp ? MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
	return peer_key_of(ci ? ci->client_addr : NULL, key);
}

void http_reroute(struct http_req *r, char *raw_path)
{
	free(r->raw_path);
	r->raw_path = raw_path;
	r->rerouted = true;
}

bool http_rerouted(const struct http_req *r)
{
	return r->rerouted;
}

struct adm_principal *http_principal(const struct http_req *r)
{
	return r->who;
}

void http_grant(struct http_req *r, struct adm_principal *who, const char *scope)
{
	r->who = who;
	snprintf(r->scope, sizeof(r->scope), "%s", scope ? scope : "");
	r->granted = true;
}

const char *http_scope(const struct http_req *r)
{
	return r->scope[0] ? r->scope : NULL;
}

void http_grant_anonymous(struct http_req *r)
{
	r->anonymous = true;
}

bool http_anonymous(const struct http_req *r)
{
	return r->anonymous;
}

const char *http_header(const struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct headers_each {
	bool (*fn)(void *cls, const char *name, const char *value);
	void *cls;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	(void)kind;
	struct headers_each *e = cls;
	return e->fn(e->cls, key, value ? value : "") ? MHD_YES : MHD_NO;
}

void http_headers_each(const struct http_req *r,
		       bool (*fn)(void *cls, const char *name, const char *value), void *cls)
{
	struct headers_each e = {fn, cls};
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, each_header, &e);
}

const char *http_query(const struct http_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_collect {
	const char *key;
	const char **vals;
	size_t n, max;
};

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	(void)kind;
	struct query_collect *q = cls;
	if (value && !strcmp(key, q->key) && q->n < q->max)
		q->vals[q->n++] = value;
	return MHD_YES;
}

size_t http_query_all(const struct http_req *r, const char *key, const char **vals, size_t max)
{
	struct query_collect q = {key, vals, 0, max};
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_query, &q);
	return q.n;
}

void *http_state(const struct http_req *r)
{
	return r->state;
}

void http_set_state(struct http_req *r, void *state, void (*free_fn)(void *))
{
	r->state = state;
	r->state_free = free_fn;
}

const char *http_body(const struct http_req *r, size_t *len)
{
	*len = r->body_len;
	return r->body ? r->body : "";
}

static int json_body(struct http_req *r, json_t **out, bool any);

int http_json_body(struct http_req *r, json_t **out)
{
	return json_body(r, out, false);
}

int http_json_body_any(struct http_req *r, json_t **out)
{
	return json_body(r, out, true);
}

static int json_body(struct http_req *r, json_t **out, bool any)
{
	*out = NULL;
	if (!r->body_len)
		return http_error(r, 400, "INVALID_ARGUMENT", "a JSON request body is required"),
		       -EINVAL;
	json_error_t jerr;
	/* JSON_ALLOW_NUL so a "\u0000" reaches the field checks, which refuse it by name. */
	json_t *root =
	    json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "request body is not valid JSON: %s (line %d, column %d)",
				  jerr.text, jerr.line, jerr.column),
		       -EINVAL;
	if (!any && !json_is_object(root)) {
		json_decref(root);
		return http_error(r, 400, "INVALID_ARGUMENT", "request body must be a JSON object"),
		       -EINVAL;
	}
	*out = root;
	return 0;
}

/* ---- responses ---- */

void http_printable(char *dst, size_t size, const char *src)
{
	size_t i = 0;
	for (const char *p = src; *p && i < size - 1; p++)
		dst[i++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	dst[i] = '\0';
}

int http_respond(struct http_req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return -ENOMEM;
	if (r->queued) {
		MHD_destroy_response(resp);
		return -EALREADY;
	}
	MHD_add_response_header(resp, "X-Request-ID", r->request_id);
	if (r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ok = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ok != MHD_YES)
		return -EIO;
	r->queued = true;
	r->status = status;
	return 0;
}

int http_text(struct http_req *r, char *text, size_t len, const char *content_type,
	      const char *cache_control)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	if (cache_control)
		MHD_add_response_header(resp, "Cache-Control", cache_control);
	return http_respond(r, 200, resp);
}

int http_json(struct http_req *r, unsigned status, json_t *body)
{
	/* Nine significant digits: CPU seconds as 0.003148, not 0.0031480000000000002. */
	char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(body);
	if (!text)
		return -ENOMEM;
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return -ENOMEM;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return http_respond(r, status, resp);
}

int http_empty(struct http_req *r, unsigned status)
{
	return http_respond(r, status,
			    MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

static int verror(struct http_req *r, unsigned status, const char *code, const char *fmt,
		  va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* A failure of celld or a sandbox (not of the request) is logged once, here. */
	if (status >= 500) {
		char line[sizeof(msg)];
		http_printable(line, sizeof(line), msg);
		log_error("rid=%s: %s %u: %s", r->request_id, code, status, line);
	}
	/* Messages may quote client or sandbox text: keep the JSON valid whatever it holds. */
	json_t *check = json_string(msg);
	if (!check)
		snprintf(msg, sizeof(msg), "(message was not valid UTF-8)");
	json_decref(check);
	return http_json(r, status, r->api->error_body(status, code, msg));
}

int http_error(struct http_req *r, unsigned status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = verror(r, status, code, fmt, ap);
	va_end(ap);
	return rc;
}

int http_fail(struct http_req *r, int errnum, const char *code, const char *fmt, ...)
{
	const struct errors_answer *a = errors_lookup(errnum);
	va_list ap;
	va_start(ap, fmt);
	int rc = verror(r, a->status, code ? code : a->code, fmt, ap);
	va_end(ap);
	return rc;
}

int http_internal(struct http_req *r, const struct cell_error *err)
{
	return http_fail(r, err->code, NULL, "%s", err->msg);
}

int http_no_memory(struct http_req *r)
{
	return http_fail(r, ENOMEM, NULL, "out of memory");
}

/* ---- connection upgrade ---- */

static unsigned upgraded_live; /* atomic: conversations between their switch and their end */

/* Held by the request (its state slot) and, once the switch happened, by the upgraded
 * conversation: a client gone before the 101 went out frees it with the request; one that
 * switched frees it with whichever of the request's end and http_upgrade_done comes last. */
struct http_upgrade {
	http_upgrade_fn fn;
	void *cls;
	void (*cls_free)(void *cls); /* when fn never ran (http_upgrade_ex) */
	bool ran;
	struct MHD_UpgradeResponseHandle *urh;
	int refs; /* atomic */
};

static void upgrade_unref(void *cls)
{
	struct http_upgrade *up = cls;
	if (__atomic_sub_fetch(&up->refs, 1, __ATOMIC_ACQ_REL))
		return;
	/* Never switched: fn never got cls, so it is freed here. */
	if (!up->ran && up->cls_free)
		up->cls_free(up->cls);
	free(up);
}

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra,
			size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)conn;
	(void)req_cls;
	struct http_upgrade *up = cls;
	__atomic_add_fetch(&up->refs, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&upgraded_live, 1, __ATOMIC_ACQ_REL);
	up->urh = urh;
	up->ran = true;
	up->fn(up->cls, sock, extra, extra_len, up);
}

int http_upgrade(struct http_req *r, const char *protocol, const char *const *headers,
		 http_upgrade_fn fn, void *cls)
{
	return http_upgrade_ex(r, protocol, headers, fn, cls, NULL);
}

int http_upgrade_ex(struct http_req *r, const char *protocol, const char *const *headers,
		    http_upgrade_fn fn, void *cls, void (*cls_free)(void *cls))
{
	struct http_upgrade *up = calloc(1, sizeof(*up));
	if (!up)
		return -ENOMEM;
	*up = (struct http_upgrade){.fn = fn, .cls = cls, .cls_free = cls_free, .refs = 1};
	struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgraded, up);
	if (!resp) {
		free(up);
		return -ENOMEM;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, protocol);
	for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
		MHD_add_response_header(resp, headers[i], headers[i + 1]);
	int rc = http_respond(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	if (rc < 0) {
		free(up);
		return rc;
	}
	http_set_state(r, up, upgrade_unref);
	return 0;
}

void http_upgrade_done(struct http_upgrade *up)
{
	MHD_upgrade_action(up->urh, MHD_UPGRADE_ACTION_CLOSE);
	upgrade_unref(up);
	__atomic_sub_fetch(&upgraded_live, 1, __ATOMIC_ACQ_REL);
}

/* One eventfd for every upgraded conversation, written once when the listeners stop and
 * never read, so it stays readable for each of them. */
static int stop_fd = -1;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static void stop_fd_make(void)
{
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int http_upgrades_stopping_fd(void)
{
	pthread_once(&stop_once, stop_fd_make);
	return stop_fd;
}

bool http_stopping(void)
{
	int fd = http_upgrades_stopping_fd();
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return fd >= 0 && poll(&p, 1, 0) == 1;
}

void http_upgrades_stop(void)
{
	int fd = http_upgrades_stopping_fd();
	uint64_t one = 1;
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		log_warn("telling upgraded connections to stop: %s", strerror(errno));
	/* Each closes its sockets and hands its connection back to the daemon before the
	 * listeners stop (which would otherwise find it still upgraded); 2 s at most. */
	for (int i = 0; i < 200 && __atomic_load_n(&upgraded_live, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
}

static int later_keep(struct http_later *l, unsigned status, const char *code, const char *fmt,
		      va_list ap)
{
	if (!l->status) {
		vsnprintf(l->msg, sizeof(l->msg), fmt, ap);
		l->status = status;
		l->code = code;
	}
	return -EIO;
}

int http_later_fail(struct http_later *l, unsigned status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = later_keep(l, status, code, fmt, ap);
	va_end(ap);
	return rc;
}

int http_later_fail_errno(struct http_later *l, int errnum, const char *code, const char *fmt, ...)
{
	const struct errors_answer *a = errors_lookup(errnum);
	va_list ap;
	va_start(ap, fmt);
	int rc = later_keep(l, a->status, code ? code : a->code, fmt, ap);
	va_end(ap);
	return rc;
}

int http_later_answer(struct http_req *r, const struct http_later *l)
{
	return http_error(r, l->status, l->code, "%s", l->msg);
}
