/* libmicrohttpd glue: two daemons (Unix socket: trusted; TCP: API key), a per-request
 * context, bounded body accumulation, a static route table, JSON errors and X-Request-ID on
 * every response.
 *
 * Both daemons run one thread per connection, so a handler may block on a sandbox's relay
 * socket while streaming (command events, downloads). The TCP daemon has no listen socket of
 * its own: the gate (gate.c) accepts, and hands it only connections whose first request
 * carried the key, so no unauthenticated peer ever holds one of its threads or pools. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "celld.h"

enum body_kind { BODY_NONE, BODY_JSON, BODY_STREAM };

/* A request whose answer is streamed for as long as the client or the command takes (an
 * event stream, a file, a log, the list) holds its connection and a relay or buffers that
 * long: it counts as one of its principal's streams (admission.c) from its headers to its
 * end. */
enum { SHORT = false, STREAMED = true };

struct route {
	const char *method;
	const char *pattern; /* below the optional /v1; "{id}" and "{cmd}" are ids, "{port}" */
	enum body_kind body;
	int (*handler)(struct http_req *r);
	int (*begin)(struct http_req *r);
	int (*data)(struct http_req *r, const char *data, size_t len);
	bool streamed;
};

#define EXECD "sandboxes/{id}/proxy/44772/"

static const struct route routes[] = {
    {"POST", "sandboxes", BODY_JSON, api_sandbox_create, NULL, NULL, SHORT},
    {"GET", "sandboxes", BODY_NONE, api_sandbox_list, NULL, NULL, STREAMED},
    {"GET", "sandboxes/{id}", BODY_NONE, api_sandbox_get, NULL, NULL, SHORT},
    {"DELETE", "sandboxes/{id}", BODY_NONE, api_sandbox_delete, NULL, NULL, SHORT},
    {"GET", "sandboxes/{id}/endpoints/{port}", BODY_NONE, api_sandbox_endpoint, NULL, NULL, SHORT},
    {"GET", "sandboxes/{id}/inspect", BODY_NONE, api_sandbox_inspect, NULL, NULL, SHORT},
    {"POST", "sandboxes/{id}/renew-expiration", BODY_JSON, api_sandbox_renew, NULL, NULL, SHORT},
    {"PATCH", "sandboxes/{id}/metadata", BODY_JSON, api_sandbox_patch_metadata, NULL, NULL, SHORT},
    {"POST", "sandboxes/{id}/pause", BODY_NONE, api_sandbox_pause, NULL, NULL, SHORT},
    {"POST", "sandboxes/{id}/resume", BODY_NONE, api_sandbox_resume, NULL, NULL, SHORT},
    {"POST", "metrics/events", BODY_JSON, api_metrics_event, NULL, NULL, SHORT},
    {"GET", "info", BODY_NONE, api_info, NULL, NULL, SHORT},
    {"GET", EXECD "ping", BODY_NONE, api_execd_ping, NULL, NULL, SHORT},
    {"POST", EXECD "command", BODY_JSON, api_execd_command, NULL, NULL, STREAMED},
    {"DELETE", EXECD "command", BODY_NONE, api_execd_interrupt, NULL, NULL, SHORT},
    {"GET", EXECD "command/status/{cmd}", BODY_NONE, api_execd_status, NULL, NULL, SHORT},
    {"GET", EXECD "command/{cmd}/logs", BODY_NONE, api_execd_logs, NULL, NULL, STREAMED},
    {"POST", EXECD "files/upload", BODY_STREAM, api_files_upload, api_files_upload_begin,
     api_files_upload_data, STREAMED},
    {"GET", EXECD "files/download", BODY_NONE, api_files_download, NULL, NULL, STREAMED},
    {"GET", EXECD "files/info", BODY_NONE, api_files_info, NULL, NULL, SHORT},
    {"GET", EXECD "metrics", BODY_NONE, api_execd_metrics, NULL, NULL, SHORT},
    {"GET", EXECD "metrics/watch", BODY_NONE, api_execd_metrics_watch, NULL, NULL, STREAMED},
};

#define MAX_SEGS     16
#define MAX_PARAMS   4
#define RAW_PATH_MAX 4096
/* Bytes of an oversized body read and dropped before the connection is cut instead. */
#define DISCARD_MAX (16u << 20)

struct http_req {
	struct MHD_Connection *conn;
	bool tcp;
	char request_id[CELL_ID_RANDOM_LEN + 1];
	char *raw_path; /* as sent, before any unescaping: segments are decoded one by one */
	const char *method;
	const struct route *route;
	char *params[MAX_PARAMS];
	unsigned n_params;
	bool started, queued, too_large;
	uint64_t body_limit, body_seen;
	char *body;
	size_t body_len, body_cap;
	unsigned status;
	int64_t t0;
	void *state;
	void (*state_free)(void *);
	struct adm_principal *who; /* NULL: the Unix socket */
	bool admitted;		   /* counted as one of who's streams until completed */
};

static struct MHD_Daemon *unix_daemon, *tcp_daemon;
static struct adm_principal *tcp_principal; /* the API key's */

/* ---- request accessors ---- */

const char *http_param(const struct http_req *r, unsigned i)
{
	return i < r->n_params ? r->params[i] : NULL;
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

struct adm_principal *http_principal(const struct http_req *r)
{
	return r->who;
}

const char *http_header(const struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
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

int http_json_body(struct http_req *r, json_t **out)
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
	if (!json_is_object(root)) {
		json_decref(root);
		return http_error(r, 400, "INVALID_ARGUMENT", "request body must be a JSON object"),
		       -EINVAL;
	}
	*out = root;
	return 0;
}

/* ---- responses ---- */

/* Client and sandbox text in the log: no control bytes, so no forged lines. */
static void printable(char *dst, size_t size, const char *src)
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
	enum MHD_Result ok = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ok != MHD_YES)
		return -EIO;
	r->queued = true;
	r->status = status;
	return 0;
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

int http_error(struct http_req *r, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A failure of celld or a sandbox (not of the request) is logged once, here. */
	if (status >= 500) {
		char line[sizeof(msg)];
		printable(line, sizeof(line), msg);
		log_error("rid=%s: %s %u: %s", r->request_id, code, status, line);
	}
	/* Messages may quote client or sandbox text: keep the JSON valid whatever it holds. */
	json_t *m = json_string(msg);
	if (!m)
		m = json_string("(message was not valid UTF-8)");
	return http_json(r, status, json_pack("{s:s, s:o}", "code", code, "message", m));
}

/* What a lower layer's errno means to a client. The host running out of something (fds,
 * memory, uid ranges, disk) is 503, never a client error. */
static const struct {
	int code;
	unsigned status;
	const char *name;
} errno_statuses[] = {
    {ENOSPC, 503, "HOST_OUT_OF_CAPACITY"},
    {EMFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENOMEM, 503, "HOST_OUT_OF_CAPACITY"},
    {EAGAIN, 503, "HOST_OUT_OF_CAPACITY"},
    {EINVAL, 400, "INVALID_ARGUMENT"},
    {EBUSY, 409, "CONFLICT"},
    {EEXIST, 409, "CONFLICT"},
    {EFBIG, 413, "REQUEST_TOO_LARGE"},
    {EUSERS, 429, "QUOTA_EXCEEDED"},
};

int http_internal(struct http_req *r, const struct cell_error *err)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(errno_statuses); i++)
		if (errno_statuses[i].code == err->code)
			return http_error(r, errno_statuses[i].status, errno_statuses[i].name, "%s",
					  err->msg);
	return http_error(r, 500, "INTERNAL", "%s", err->msg);
}

struct sandbox *http_sandbox(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct sandbox *sb = id ? registry_get(id) : NULL;
	if (!sb)
		http_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", id ? id : "");
	return sb;
}

/* ---- routing ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int http_unescape(char *s, bool plus_space)
{
	char *w = s;
	for (const char *p = s; *p; p++) {
		if (*p == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL;
			*w++ = (char)(hi << 4 | lo);
			p += 2;
		} else {
			*w++ = plus_space && *p == '+' ? ' ' : *p;
		}
	}
	*w = '\0';
	return 0;
}

/* Split the raw path into decoded segments (in buf); the optional leading "v1" is dropped
 * (the API answers at / and at /v1 alike). Returns the count or -EINVAL. */
static int split_path(const char *raw, char *buf, size_t size, char **segs)
{
	if (raw[0] != '/' || strlen(raw) >= size)
		return -EINVAL;
	strcpy(buf, raw + 1);
	int n = 0;
	char *save = NULL;
	size_t len = strlen(buf);
	if (len && buf[len - 1] == '/')
		buf[len - 1] = '\0';
	if (!buf[0])
		return 0;
	for (char *p = buf;; p = NULL) {
		char *s = strtok_r(p, "/", &save);
		if (!s)
			break;
		/* Each segment decoded on its own: an encoded "/" stays inside its segment (and
		 * then fails id validation) instead of adding a path level. */
		if (n == MAX_SEGS || http_unescape(s, false) < 0)
			return -EINVAL;
		segs[n++] = s;
	}
	/* strtok_r folds "//": refuse those paths rather than guess. */
	if (strstr(raw, "//"))
		return -EINVAL;
	if (n && !strcmp(segs[0], "v1")) {
		memmove(segs, segs + 1, (n - 1) * sizeof(*segs));
		n--;
	}
	return n;
}

/* Match segs against a pattern; captures are stored in r. 1 match, 0 no match. */
static int match_route(struct http_req *r, const char *pattern, char **segs, int n)
{
	char pat[256];
	snprintf(pat, sizeof(pat), "%s", pattern);
	char *save = NULL;
	int i = 0;
	unsigned np = 0;
	char *caps[MAX_PARAMS];
	for (char *p = pat;; p = NULL) {
		char *s = strtok_r(p, "/", &save);
		if (!s)
			break;
		if (i >= n)
			return 0;
		if (s[0] == '{') {
			if (np < MAX_PARAMS)
				caps[np++] = segs[i];
		} else if (strcmp(s, segs[i])) {
			return 0;
		}
		i++;
	}
	if (i != n)
		return 0;
	for (unsigned k = 0; k < np; k++) {
		r->params[k] = strdup(caps[k]);
		if (!r->params[k])
			return -ENOMEM;
	}
	r->n_params = np;
	return 1;
}

/* Every {id}/{cmd} capture must be a valid id before it can reach a lookup or a path. */
static int check_ids(struct http_req *r)
{
	const char *pat = r->route->pattern;
	unsigned k = 0;
	for (const char *p = strchr(pat, '{'); p && k < r->n_params; p = strchr(p + 1, '{'), k++) {
		bool is_id = !strncmp(p, "{id}", 4) || !strncmp(p, "{cmd}", 5);
		if (is_id && !cell_id_valid(r->params[k]))
			return http_error(r, 400, "INVALID_ID",
					  "invalid %s '%.80s': use 1-64 characters of [a-z0-9-]",
					  p[1] == 'i' ? "sandbox id" : "command id", r->params[k]),
			       -EINVAL;
	}
	return 0;
}

static int route_request(struct http_req *r)
{
	char buf[RAW_PATH_MAX];
	char *segs[MAX_SEGS];
	int n = split_path(r->raw_path ? r->raw_path : "", buf, sizeof(buf), segs);
	if (n < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "malformed request path"), -EINVAL;
	bool path_known = false;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(routes); i++) {
		int m = match_route(r, routes[i].pattern, segs, n);
		if (m < 0)
			return http_error(r, 500, "INTERNAL", "out of memory"), -ENOMEM;
		if (!m)
			continue;
		if (strcmp(routes[i].method, r->method)) {
			path_known = true;
			for (unsigned k = 0; k < r->n_params; k++) {
				free(r->params[k]);
				r->params[k] = NULL;
			}
			r->n_params = 0;
			continue;
		}
		r->route = &routes[i];
		return check_ids(r);
	}
	if (n >= 2 && !strcmp(segs[0], "sandboxes") && !cell_id_valid(segs[1]))
		return http_error(r, 400, "INVALID_ID",
				  "invalid sandbox id '%.80s': use 1-64 characters of [a-z0-9-]",
				  segs[1]),
		       -EINVAL;
	if (path_known)
		return http_error(r, 405, "METHOD_NOT_ALLOWED", "%s is not allowed on this path",
				  r->method),
		       -EINVAL;
	return http_error(r, 404, "NOT_FOUND", "no such endpoint"), -ENOENT;
}

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

static void begin_request(struct http_req *r)
{
	const char *bad = NULL;
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, find_nul, &bad);
	if (bad) {
		http_error(r, 400, "INVALID_ARGUMENT",
			   "query parameter '%.64s' contains a NUL byte", bad);
		return;
	}
	/* Every request on TCP, not only the first of its connection (which the gate checked
	 * already): the client may send the next one without the key. */
	const char *key = http_header(r, "OPEN-SANDBOX-API-KEY");
	if (r->tcp && !gate_key_matches(key, key ? strlen(key) : 0)) {
		http_error(r, 401, "UNAUTHORIZED", HTTP_UNAUTHORIZED_MESSAGE);
		return;
	}
	r->who = r->tcp ? tcp_principal : NULL;
	if (route_request(r) < 0)
		return;
	if (r->route->streamed) {
		struct cell_error err = {0};
		if (admission_take(r->who, ADM_STREAMS, false, &err) < 0) {
			http_internal(r, &err);
			return;
		}
		r->admitted = true;
	}
	r->body_limit = r->route->body == BODY_STREAM ? HTTP_UPLOAD_MAX : HTTP_JSON_MAX;
	const char *cl = http_header(r, "Content-Length");
	int64_t len;
	if (cl && parse_int64(cl, 0, INT64_MAX, &len) == 0 && (uint64_t)len > r->body_limit) {
		/* A client that sent the body without waiting for "100 Continue" would get
		 * a reset instead of the 413 if the connection closed on its unread bytes: a
		 * body within the discard allowance is read and dropped first. */
		const char *expect = http_header(r, "Expect");
		if (!(expect && !strcasecmp(expect, "100-continue")) &&
		    (uint64_t)len <= r->body_limit + DISCARD_MAX) {
			r->too_large = true;
			return;
		}
		/* Refused before a byte of it is read. */
		http_error(r, 413, "REQUEST_TOO_LARGE",
			   "request body of %llu bytes exceeds the limit of %llu bytes",
			   (unsigned long long)len, (unsigned long long)r->body_limit);
		return;
	}
	if (r->route->begin)
		r->route->begin(r);
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
	if (r->route->body == BODY_STREAM) {
		r->route->data(r, data, len);
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
	r->route->handler(r);
	if (!r->queued)
		http_error(r, 500, "INTERNAL", "no response was produced");
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

/* Called once per request before its headers are parsed, with the URI exactly as sent:
 * the request context is born here so the path can be split before any unescaping. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)conn;
	struct http_req *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->tcp = cls == &tcp_daemon;
	r->t0 = celld_now_ms();
	if (cell_id_random(r->request_id) < 0)
		snprintf(r->request_id, sizeof(r->request_id), "%016llx",
			 (unsigned long long)r->t0);
	size_t n = strcspn(uri, "?#");
	if (n < RAW_PATH_MAX)
		r->raw_path = strndup(uri, n);
	return r;
}

static void log_request(const struct http_req *r)
{
	char path[160];
	printable(path, sizeof(path), r->raw_path ? r->raw_path : "?");
	log_info("%s %s%s -> %u (%lld ms) rid=%s", r->method ? r->method : "?", path,
		 r->tcp ? " [tcp]" : "", r->status, (long long)(celld_now_ms() - r->t0),
		 r->request_id);
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
	if (r->started)
		log_request(r);
	if (r->state_free)
		r->state_free(r->state);
	if (r->admitted)
		admission_put(r->who, ADM_STREAMS);
	for (unsigned k = 0; k < r->n_params; k++)
		free(r->params[k]);
	free(r->raw_path);
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

static int listen_tcp(const char *hostport, struct cell_error *err)
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
	if (!is_loopback(ai->ai_addr) && (!celld.api_key || !celld.api_key[0])) {
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
static struct MHD_Daemon *start_daemon(int fd, void *kind, unsigned max_connections)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ERROR_LOG;
	if (fd < 0)
		flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	/* The listen socket is the last option: without one, the list ends before it. */
	return MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, kind, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
	    NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_CONNECTION_LIMIT,
	    max_connections, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(512 << 10),
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20),
	    fd < 0 ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
}

int http_start(struct cell_error *err)
{
	int fd = listen_unix(celld.socket_path, err);
	if (fd < 0)
		return fd;
	unix_daemon = start_daemon(fd, &unix_daemon, 4096);
	if (!unix_daemon) {
		close(fd);
		return cell_err(err, EIO, "starting the HTTP server on %s", celld.socket_path);
	}
	log_info("listening on unix:%s", celld.socket_path);
	if (!celld.listen)
		return 0;
	tcp_principal = admission_principal(celld.api_key);
	fd = listen_tcp(celld.listen, err);
	if (fd < 0)
		return fd;
	tcp_daemon = start_daemon(-1, &tcp_daemon, admission_tcp_connections());
	if (!tcp_daemon) {
		close(fd);
		return cell_err(err, EIO, "starting the HTTP server for %s", celld.listen);
	}
	int r = gate_start(fd, tcp_daemon, err);
	if (r < 0)
		return r;
	log_info("listening on tcp:%s (OPEN-SANDBOX-API-KEY required; unauthenticated: %u "
		 "connections, %u per client, %u s and " GATE_HEAD_MAX_TEXT
		 " for the request head)",
		 celld.listen, celld.tcp_pending_max, celld.tcp_pending_per_ip,
		 celld.tcp_head_timeout_s);
	return 0;
}

void http_stop(void)
{
	gate_stop();
	if (tcp_daemon)
		MHD_stop_daemon(tcp_daemon);
	if (unix_daemon)
		MHD_stop_daemon(unix_daemon);
	tcp_daemon = unix_daemon = NULL;
}
