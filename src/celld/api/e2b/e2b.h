/* E2B's API on its own listener (celld --e2b-listen): the official E2B SDKs, unchanged,
 * with E2B_API_URL and E2B_SANDBOX_URL both set to it.
 *
 * One listener carries two APIs of E2B's, told apart by path first and by headers second
 * (e2b_api.c):
 *   - the control plane (E2B's REST API: create, list, kill, timeout, pause, connect;
 *     header X-API-Key, the API key of the OpenSandbox listener): e2b_sandboxes.c. Its
 *     errors are {"code": <HTTP status>, "message": "..."}.
 *   - envd, the agent E2B runs in each sandbox (header E2b-Sandbox-Id names the sandbox,
 *     X-Access-Token its envdAccessToken): the Connect protocol with JSON messages
 *     (e2b_connect.c) for the process service (e2b_process.c) and the filesystem service
 *     (e2b_filesystem.c), and plain HTTP for /files (e2b_files.c), /health, /envs and
 *     /metrics (e2b_envd.c).
 *   - any other port of a sandbox (E2b-Sandbox-Port, the code interpreter's 49999): cell's
 *     port proxy.
 * Every handler translates E2B's wire format into the same internal calls the OpenSandbox
 * routes make (lifecycle, commands, files, policy): one registry, one set of limits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "cell/id.h"
#include "credentials.h"
#include "http/http.h"
#include "preview.h"
#include "sbfile.h"

struct sandbox;
struct sse_buf;
struct create_spec;

extern const struct http_api api_e2b;

/* The port the SDK believes envd listens on (E2b-Sandbox-Port on envd calls). */
#define E2B_ENVD_PORT 49983
/* The envd version reported to the SDK, which turns features on by it (closeStdin from
 * 0.5.2, octet-stream uploads from 0.5.7, file metadata from 0.6.2, watch events with their
 * entry from 0.6.3, allowNetworkMounts from 0.6.4, ...). */
#define E2B_ENVD_VERSION "0.6.4"
#define E2B_HEADER_KEY	 CREDENTIALS_E2B_KEY
#define E2B_HEADER_ID	 "E2b-Sandbox-Id"
#define E2B_HEADER_PORT	 "E2b-Sandbox-Port"
#define E2B_HEADER_TOKEN CREDENTIALS_E2B_ENVD
/* What E2B's ports take: the create's trafficAccessToken, a token of its own. */
#define E2B_HEADER_TRAFFIC CREDENTIALS_E2B_TRAFFIC
/* What the two tokens sign first (preview.h): each is no other token of the sandbox's. */
#define E2B_ENVD_LABEL	  "cell-e2b-envd-v1"
#define E2B_TRAFFIC_LABEL "cell-e2b-traffic-v1"

/* ---- e2b_common.c ---- */

/* The envdAccessToken of sandbox id (envd: commands, files; and its ports) and its
 * trafficAccessToken (its ports only, never envd): HMACs of the preview secret with labels
 * of their own (kept nowhere, recomputed, dead with the sandbox and the preview secret),
 * neither one the other nor any port's preview token. 0 or -errno. */
int e2b_access_token(const char *id, char out[PREVIEW_TOKEN_LEN + 1]);
int e2b_traffic_token(const char *id, char out[PREVIEW_TOKEN_LEN + 1]);
/* A control-plane error: {"code": status, "message": ...}. Returns 0. */
int e2b_error(struct http_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The sandbox of a control-plane route's {id} (param 0), or NULL with 404 answered. */
struct sandbox *e2b_find_sandbox(struct http_req *r);
/* The answer to a change of a sandbox that returned rc: 404 when it went, 409 when its
 * state did not allow it (being made, deleted, captured, already so), else the errno's
 * status. Returns 0. */
int e2b_change_failed(struct http_req *r, int rc, const struct cell_error *err);
/* A list's page token, "<at>:<id>": the sort key (a creation time, then an id) of the
 * last entry of the page before; the next page starts after it. */
#define E2B_PAGE_TOKEN_MAX (64 + CELL_ID_MAX)
struct e2b_page_token {
	bool set;
	int64_t at;
	char id[CELL_ID_MAX + 1];
};
/* text into t (set): 0, or -EINVAL when it is not a token this server gave. */
int e2b_page_token_parse(const char *text, struct e2b_page_token *t);
/* The token of the entry (at, id). */
void e2b_page_token_format(char out[E2B_PAGE_TOKEN_MAX], int64_t at, const char *id);
/* <0, 0 or >0 as (at, id) sorts before, at or after t (0 for no token). */
int e2b_page_token_cmp(const struct e2b_page_token *t, int64_t at, const char *id);
/* 200 with items (a JSON array, taken) and, when there is a next page, X-Next-Token (the
 * SDK's paginators ask for another page only when it is there). Returns 0. */
int e2b_page(struct http_req *r, json_t *items, const char *next_token);

/* The user an envd call acts as: named by the call (the username query parameter of
 * /files, Authorization: Basic base64("<user>:") of a Connect call), else envd's default
 * user "user" where the sandbox's /etc/passwd has it, else root. Relative paths resolve
 * against its home; what a call creates is owned by it. */
#define E2B_DEFAULT_USER  "user"
#define E2B_USER_NAME_MAX 32
struct e2b_user {
	char name[E2B_USER_NAME_MAX + 1];
	int64_t uid, gid;
	char home[4096];
};
struct cell_error;
/* A user name as a client sends it, checked (letters, digits, "._-", a last "$"): 0 or
 * -EINVAL. */
int e2b_user_name(const char *name, char out[E2B_USER_NAME_MAX + 1]);
/* The user a Connect call names in its Authorization header: 0 with out ("" when none),
 * -EINVAL when the header is not Basic base64("<user>:"). */
int e2b_rpc_user_name(struct http_req *r, char out[E2B_USER_NAME_MAX + 1]);
/* name (NULL or "": the default) looked up in sb's /etc/passwd: 0 with u, -ENOENT (err
 * names the user) when there is no such user, -errno from the relay. */
int e2b_user_lookup(const struct sandbox *sb, const char *name, struct e2b_user *u,
		    sbfile_budget *b, struct cell_error *err);
/* path as u sees it: absolute as is, "~" and "~/..." and relative ones below u's home.
 * 0, -EINVAL (empty), -ENAMETOOLONG. */
int e2b_user_path(const struct e2b_user *u, const char *path, char out[4096]);

/* ---- e2b_signature.c: signed file URLs ---- */

/* What a signed /files URL says (its query's path, username, signature and
 * signature_expiration, unescaped) and the operation its method is. */
struct e2b_signed {
	char path[4096];
	char user[256];
	char op[8]; /* "read" (GET) or "write" (POST) */
	char signature[64];
	char expiration[24];
};
/* From a request's method and raw query (escaped, NULL: none): true when it carries a
 * signature whose parts all fit. */
bool e2b_signed_parse(const char *method, const char *raw_query, struct e2b_signed *s);
/* 1 when its expiration has passed, 0 when not (or it has none), -EINVAL when malformed. */
int e2b_signed_expired(const struct e2b_signed *s);
/* s is signed with sandbox id's envdAccessToken (compared in constant time). */
bool e2b_signed_by(const char *id, const struct e2b_signed *s);
/* The sandbox whose token signed s into id, looked for where it costs little (what the
 * gate's thread may do): the one named (named non-NULL: one check), else the last few
 * client used (e2b_recent.c: at most E2B_RECENT_PER_CLIENT checks). 0; -EACCES when s is
 * malformed or named and not signed by it; -ENOENT when nothing was named and none of
 * client's signed it. */
struct peer_key;
int e2b_signed_sandbox(const struct e2b_signed *s, const char *named, const struct peer_key *client,
		       char id[CELL_ID_MAX + 1]);
/* The last resort, never on the gate's thread: every sandbox tried, one scan at a time
 * host-wide and E2B_SCANS_PER_SECOND a second. 0 with id (noted as used by client, so its
 * next URL is found at once); -EACCES (none); -EBUSY or -EAGAIN (not now: past the
 * bound). */
int e2b_signed_scan(const struct e2b_signed *s, const struct peer_key *client,
		    char id[CELL_ID_MAX + 1]);

/* ---- e2b_connect.c: the Connect protocol, JSON codec ---- */

enum connect_code {
	CONNECT_OK = 0,
	CONNECT_CANCELED,
	CONNECT_UNKNOWN,
	CONNECT_INVALID_ARGUMENT,
	CONNECT_DEADLINE_EXCEEDED,
	CONNECT_NOT_FOUND,
	CONNECT_ALREADY_EXISTS,
	CONNECT_PERMISSION_DENIED,
	CONNECT_RESOURCE_EXHAUSTED,
	CONNECT_FAILED_PRECONDITION,
	CONNECT_ABORTED,
	CONNECT_OUT_OF_RANGE,
	CONNECT_UNIMPLEMENTED,
	CONNECT_INTERNAL,
	CONNECT_UNAVAILABLE,
	CONNECT_DATA_LOSS,
	CONNECT_UNAUTHENTICATED,
};

/* "not_found" and so on, as the protocol spells codes. */
const char *connect_code_name(enum connect_code code);
/* The HTTP status of a unary error with code. */
unsigned connect_code_status(enum connect_code code);
/* The code for an errno from a lower layer: the errno table's RPC name (http/errors.c). */
enum connect_code connect_code_from_errno(int errnum);
/* The request message of a Connect call: a unary call's body is the JSON message, a
 * streaming call's one envelope around it. 0 with *msg (a new reference, an object), or
 * answered (invalid_argument) and -EINVAL. */
int connect_request(struct http_req *r, bool streaming, json_t **msg);
/* A unary call's answer: 200, application/json, msg (reference stolen). */
int connect_reply(struct http_req *r, json_t *msg);
/* A unary call's error: its status, {"code": "<name>", "message": ...}. Returns 0. */
int connect_error(struct http_req *r, enum connect_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The deadline a call's Connect-Timeout-Ms gives, in ms from now: 0 when none (missing, 0,
 * or not a number of at most 10 digits, as the protocol bounds it). */
int64_t connect_timeout_ms(const struct http_req *r);

/* A streamed answer's bytes (application/connect+json) go into an sse_buf (sse.h):
 * envelopes of 5 bytes (flags, u32 big-endian length) and JSON. A message frame of msg (not
 * stolen): 0 or -ENOMEM. */
int connect_frame(struct sse_buf *b, const json_t *msg);
/* The end-of-stream frame: {} for CONNECT_OK, else {"error":{"code","message"}}. */
int connect_end(struct sse_buf *b, enum connect_code code, const char *message);
/* Move up to max unread bytes of b into buf; how many. */
size_t connect_buf_take(struct sse_buf *b, char *buf, size_t max);
/* Start a streamed answer: 200 application/connect+json whose body read(cls) produces
 * (MHD's content reader: bytes, MHD_CONTENT_READER_END_OF_STREAM, or _WITH_ERROR), free_fn
 * called at its end. Frees cls itself when the answer cannot be made (answered 500). */
int connect_stream(struct http_req *r,
		   ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max), void *cls,
		   void (*free_fn)(void *cls));
/* A streaming call that fails before its stream starts: 200 with one end frame (the
 * protocol answers a streaming call's errors in its body, never with a status). */
int connect_stream_error(struct http_req *r, enum connect_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Proto3 JSON's int64 member: a string of digits or a number. 0 or -EINVAL. */
int connect_int64(const json_t *v, int64_t *out);

/* ---- e2b_envd.c: envd's sandbox, /health, /envs, /metrics ---- */

/* The sandbox an envd call names (E2b-Sandbox-Id), started when paused or stopped (E2B's
 * auto-resume), or NULL with a Connect error answered (unary when !streaming, else a
 * stream of one end frame). */
struct sandbox *e2b_envd_sandbox(struct http_req *r, bool streaming);
/* The same for envd's plain HTTP routes: errors as {"code": status, "message"}. */
struct sandbox *e2b_envd_http_sandbox(struct http_req *r);
int e2b_health(struct http_req *r);
int e2b_envs(struct http_req *r);
int e2b_envd_metrics(struct http_req *r);

/* ---- e2b_sandboxes.c: the control plane ---- */

int e2b_sandbox_create(struct http_req *r);
int e2b_sandbox_list(struct http_req *r);
int e2b_sandbox_list_v2(struct http_req *r);
int e2b_sandbox_get(struct http_req *r);
int e2b_sandbox_kill(struct http_req *r);
int e2b_sandbox_timeout(struct http_req *r);
int e2b_sandbox_refresh(struct http_req *r);
int e2b_sandbox_pause(struct http_req *r);
int e2b_sandbox_resume(struct http_req *r);
int e2b_sandbox_connect(struct http_req *r);
int e2b_sandbox_metrics(struct http_req *r);
int e2b_sandbox_network(struct http_req *r);
/* A create's body into spec (E2B's fields onto cell's; a templateID is a template the map
 * lists, else an image, else one of spec->owner's snapshots: snapshot_find). fork: the
 * create of a fork (the
 * source's network policy and sudo kept, which a create's own fields replace). 0, -EINVAL
 * (err names the field), -ENOENT (no such template), or what the host says. */
int e2b_create_spec(json_t *body, bool fork, struct create_spec *spec, const char **template_id,
		    struct cell_error *err);
/* E2B's Sandbox (what create, connect and each fork answer); alias: the templateID asked
 * for, or NULL. NULL when out of memory. */
json_t *e2b_sandbox_json(const struct sandbox *sb, const char *alias);

/* ---- e2b_snapshots.c: snapshots (cell's, snapshots.c) and forks ---- */

int e2b_snapshot_create(struct http_req *r);
int e2b_snapshot_list(struct http_req *r);
int e2b_template_delete(struct http_req *r);
int e2b_template_alias(struct http_req *r);
int e2b_sandbox_fork(struct http_req *r);

/* What a sandbox uses now, from its cgroup (two readings SAMPLE_MS apart for the CPU) and
 * its writable layer; bytes. */
struct e2b_sample {
	time_t at;
	unsigned cpu_count;  /* the CPU limit in whole cores (the host's when unlimited) */
	double cpu_used_pct; /* of cpu_count cores */
	uint64_t mem_used, mem_total, disk_used, disk_total;
};
/* 0, or -errno when the sandbox has no cgroup to read (stopped). */
int e2b_sample(struct sandbox *sb, struct e2b_sample *out);

/* ---- e2b_process.c: envd's process service ---- */

int e2b_process_start(struct http_req *r);
int e2b_process_connect(struct http_req *r);
int e2b_process_list(struct http_req *r);
int e2b_process_send_input(struct http_req *r);
int e2b_process_stream_input(struct http_req *r);
int e2b_process_close_stdin(struct http_req *r);
int e2b_process_send_signal(struct http_req *r);
int e2b_process_update(struct http_req *r);

/* ---- e2b_filesystem.c: envd's filesystem service ---- */

int e2b_fs_stat(struct http_req *r);
int e2b_fs_list_dir(struct http_req *r);
int e2b_fs_make_dir(struct http_req *r);
int e2b_fs_move(struct http_req *r);
int e2b_fs_remove(struct http_req *r);
int e2b_fs_watch_dir(struct http_req *r);
int e2b_fs_create_watcher(struct http_req *r);
int e2b_fs_get_watcher_events(struct http_req *r);
int e2b_fs_remove_watcher(struct http_req *r);

/* ---- e2b_files.c: envd's GET and POST /files ---- */

int e2b_files_download(struct http_req *r);
int e2b_files_upload_begin(struct http_req *r);
int e2b_files_upload_data(struct http_req *r, const char *data, size_t len);
int e2b_files_upload(struct http_req *r);
