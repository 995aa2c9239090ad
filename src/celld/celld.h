/* celld internals: one section per file of src/celld/.
 *
 * Threads: libmicrohttpd runs one thread per client connection (a handler may block on a
 * sandbox's relay socket), plus the init watcher, the expiry reaper and one small thread per
 * background command. Shared state lives in the registry (one mutex, one condition
 * variable); long work (spawn, teardown, relay I/O) never runs under that mutex. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cell/cgroup.h"
#include "cell/error.h"
#include "cell/id.h"
#include "cell/proto.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"

struct sandbox;
struct cell_quota_usage;

/* Sections moved into their own headers (one per module); the rest follow below. */
#include "admission.h"
#include "commands.h"
#include "config.h"
#include "images.h"
#include "lifecycle.h"
#include "registry.h"
#include "relay.h"
#include "sandbox.h"
#include "seccomp_log.h"
#include "seccomp_policy.h"
#include "store.h"
#include "timefmt.h"
#include "timers.h"
#include "uidrange.h"
#include "volumes.h"
#include "watch.h"

/* ---- fields.c: typed access to request JSON, errors naming the field ---- */

/* Each returns 1 when the field is present and valid, 0 when absent (or null) and not
 * required, -EINVAL with err filled ("entrypoint[2] must be a string") otherwise. Strings
 * are refused when they carry a NUL byte (bodies are parsed with JSON_ALLOW_NUL so the
 * message can name the field). */
int field_string(json_t *obj, const char *key, const char *name, bool required, const char **out,
		 struct cell_error *err);
int field_int(json_t *obj, const char *key, const char *name, int64_t min, int64_t max,
	      int64_t *out, struct cell_error *err);
int field_bool(json_t *obj, const char *key, const char *name, bool *out, struct cell_error *err);
/* An object whose values are all strings; *out is a new reference. */
int field_string_map(json_t *obj, const char *key, const char *name, json_t **out,
		     struct cell_error *err);
/* An array of strings; *out is a new reference. */
int field_string_array(json_t *obj, const char *key, const char *name, json_t **out,
		       struct cell_error *err);
/* Bounds of a string map or array a client stores in a sandbox's record (state.json must
 * stay loadable, and copies of it cheap). */
struct field_caps {
	size_t items;	  /* entries */
	size_t key_len;	  /* bytes of one key (maps; keys must be non-empty) */
	size_t value_len; /* bytes of one value */
	size_t total;	  /* bytes of every key and value together */
};
/* map (an object of strings) or arr (an array of strings) within caps, else -EINVAL with
 * err naming the field, the entry and the cap. */
int field_check_map_caps(json_t *map, const char *name, const struct field_caps *caps,
			 struct cell_error *err);
int field_check_array_caps(json_t *arr, const char *name, const struct field_caps *caps,
			   struct cell_error *err);
/* Fill err with a message (no errno text appended) and return -code. */
int celld_fail(struct cell_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with EINVAL. */
int field_fail(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decimal integer in [min, max], nothing else around it. 0 or -EINVAL. */
int parse_int64(const char *text, int64_t min, int64_t max, int64_t *out);
/* A JSON string without NUL bytes. */
bool json_is_clean_string(const json_t *v);

/* ---- http.c: libmicrohttpd glue ---- */

struct http_req;
struct MHD_Response;

#define HTTP_JSON_MAX	(1u << 20)		    /* JSON request bodies */
#define HTTP_UPLOAD_MAX ((1ull << 30) + (1u << 20)) /* multipart uploads: 1 GiB + framing */

#define HTTP_UNAUTHORIZED_MESSAGE "missing or wrong OPEN-SANDBOX-API-KEY header"

int http_start(struct cell_error *err);
void http_stop(void);

/* Path captures of the matched route, in order ({id}, then {cmd} or {port}). */
const char *http_param(const struct http_req *r, unsigned i);
bool http_is_tcp(const struct http_req *r);
/* The client connection's socket (-1 if unknown), valid while the request is answered. */
int http_socket(const struct http_req *r);
const char *http_header(const struct http_req *r, const char *name);
/* First value of a query parameter, or NULL. */
const char *http_query(const struct http_req *r, const char *key);
/* All values of a repeated query parameter (at most max); returns how many. */
size_t http_query_all(const struct http_req *r, const char *key, const char **vals, size_t max);
/* Percent-decode s in place ('+' as a space when plus_space). Malformed escapes and "%00"
 * are refused (-EINVAL): a NUL would cut the text short wherever it is used next. */
int http_unescape(char *s, bool plus_space);
/* Parse the body as a JSON object; on failure answers 400 and returns -EINVAL. */
int http_json_body(struct http_req *r, json_t **out);

/* Per-request handler state, freed with the request. */
void *http_state(const struct http_req *r);
void http_set_state(struct http_req *r, void *state, void (*free_fn)(void *));

/* Responses. Each adds X-Request-ID; all return 0 (or -errno when queueing failed). */
int http_respond(struct http_req *r, unsigned status, struct MHD_Response *resp);
int http_json(struct http_req *r, unsigned status, json_t *body /* reference stolen */);
int http_empty(struct http_req *r, unsigned status);
int http_error(struct http_req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map a cell_error from a lower layer onto a status (ENOSPC → 503, ...). */
int http_internal(struct http_req *r, const struct cell_error *err);
/* Resolve {id} (param 0) to a referenced sandbox; answers 400 INVALID_ID or 404 itself. */
struct sandbox *http_sandbox(struct http_req *r);
/* Whom the request acts for (NULL: the Unix socket). */
struct adm_principal *http_principal(const struct http_req *r);

/* ---- gate.c: the TCP listener's gate ---- */

struct MHD_Daemon;

/* The head of a connection's first request, before the key is known. */
#define GATE_HEAD_MAX	   (16u << 10)
#define GATE_HEAD_MAX_TEXT "16384 bytes"

/* Accept on listen_fd (owned from here, also on failure); hand each connection whose first
 * request head carries the API key to daemon (started without a listen socket); answer the
 * rest 401 or 431 or close them, within the limits of celld.tcp_*. */
int gate_start(int listen_fd, struct MHD_Daemon *daemon, struct cell_error *err);
/* Stop accepting and close every connection not handed over yet. */
void gate_stop(void);
/* given (len bytes) is the API key; the comparison takes the same time whatever it holds. */
bool gate_key_matches(const char *given, size_t len);

/* ---- api_*.c: route handlers (return 0; the response is queued on r) ---- */

int api_sandbox_create(struct http_req *r);
int api_sandbox_list(struct http_req *r);
int api_sandbox_get(struct http_req *r);
int api_sandbox_delete(struct http_req *r);
int api_sandbox_endpoint(struct http_req *r);
int api_sandbox_inspect(struct http_req *r);
int api_sandbox_renew(struct http_req *r);
int api_sandbox_patch_metadata(struct http_req *r);
int api_sandbox_pause(struct http_req *r);
int api_sandbox_resume(struct http_req *r);
int api_metrics_event(struct http_req *r);
int api_info(struct http_req *r);

/* {id} resolved to a referenced sandbox that can run things (Running, not busy), or NULL
 * with 404/409 answered. */
struct sandbox *api_running_sandbox(struct http_req *r);
int api_execd_ping(struct http_req *r);
int api_execd_command(struct http_req *r);
int api_execd_status(struct http_req *r);
int api_execd_logs(struct http_req *r);
int api_execd_interrupt(struct http_req *r);

/* Uploads stream: begin (after headers; may answer early), data per chunk, end. */
int api_files_upload_begin(struct http_req *r);
int api_files_upload_data(struct http_req *r, const char *data, size_t len);
int api_files_upload(struct http_req *r);
int api_files_download(struct http_req *r);
int api_files_info(struct http_req *r);

/* ---- multipart.c: streaming multipart/form-data parser ---- */

struct multipart;
struct multipart_ops {
	/* A part starts; name is its Content-Disposition name. */
	int (*part_begin)(void *cls, const char *name);
	int (*part_data)(void *cls, const char *data, size_t len);
	int (*part_end)(void *cls);
};
/* boundary from the Content-Type header (parsed here); NULL with err when unusable. */
struct multipart *multipart_new(const char *content_type, const struct multipart_ops *ops,
				void *cls, struct cell_error *err);
/* Feed body bytes; a callback's negative return stops the parser and is returned. */
int multipart_feed(struct multipart *mp, const char *data, size_t len, struct cell_error *err);
/* The body ended: -EINVAL unless the closing boundary was seen. */
int multipart_finish(struct multipart *mp, struct cell_error *err);
void multipart_free(struct multipart *mp);

/* ---- limits.c: policies/resources/default.json and a create's resourceLimits ---- */

/* Read the policy once at start; a bad file refuses the start, naming file and field. */
int limits_load(struct cell_error *err);
/* resourceLimits (a string map, or NULL) with the policy's defaults filled in. Returns 0,
 * 400 (err names resourceLimits.<field>: malformed, too small, above the maximum) or, with
 * check_host, 503 (more than the host can hold, err says which rule). */
int limits_resolve(json_t *request, struct cell_limits *out, bool check_host,
		   struct cell_error *err);
/* The rlimits every sandbox's processes start with. */
const struct cell_rlimit *limits_rlimits(size_t *n);
/* The limits as enforced, as shown by inspect and kept in state.json (0 = unlimited;
 * socketMemoryBytes null where socket buffers count in memoryBytes). */
json_t *limits_json(const struct cell_limits *l);

/* ---- api_metrics.c: execd GET /metrics and /metrics/watch, usage ---- */

int api_execd_metrics(struct http_req *r);
int api_execd_metrics_watch(struct http_req *r);
/* The writable layer's quota and use (include/cell/quota.h), measured through the running
 * sandbox when its init is still the recorded one; false when unknown. */
bool metrics_disk_usage(struct sandbox *sb, struct cell_quota_usage *du);
/* The "usage" object of GET /v1/sandboxes/{id} and inspect; NULL when there is no cgroup.
 * disk: from metrics_disk_usage, or NULL when it gave nothing. */
json_t *metrics_usage_json(struct sandbox *sb, const struct cell_quota_usage *disk);

/* ---- sse.c: command event JSON ("{...}\n\n") ---- */

struct sse_utf8 {
	uint8_t carry[4]; /* incomplete UTF-8 sequence held back from the previous chunk */
	size_t n;
};

/* Events not yet handed to the client: data[off..len) is unread. */
struct sse_buf {
	char *data;
	size_t off, len, cap;
};

/* Append len bytes (an event from the builders below). 0 or -ENOMEM. */
int sse_buf_add(struct sse_buf *b, const char *data, size_t len);
void sse_buf_free(struct sse_buf *b);
/* The stdout/stderr event(s) for data, appended to b; the rules of sse_output. */
int sse_output_add(struct sse_buf *b, const char *type, struct sse_utf8 *u, const uint8_t *data,
		   size_t n, bool final);

char *sse_init(const char *cmd_id, size_t *len);
char *sse_ping(size_t *len);
/* stdout/stderr event into *out (NULL when there is nothing to send yet); bytes that are
 * not UTF-8 go out base64 with "encoding":"base64". A multi-byte character split across
 * chunks is held back in u; final flushes it. 0 or -ENOMEM. */
int sse_output(const char *type, struct sse_utf8 *u, const uint8_t *data, size_t n, bool final,
	       char **out, size_t *len);
char *sse_complete(int64_t execution_ms, size_t *len);
char *sse_error(int exit_code, const char *traceback, size_t *len);
