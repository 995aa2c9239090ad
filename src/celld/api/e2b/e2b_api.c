/* E2B's API as the --e2b-listen listener serves it: its routes, who may call them, its
 * error body. With --e2b-domain D, a Host "<port>-<id>.D" (the SDK's getHost(port); any
 * port but envd's) is that port of that sandbox, whatever the path, with E2B's traffic
 * rules alone (traffic_verdict); any other host goes on as below. Routing goes by path
 * first, then by headers (as E2B's own front does, and because an SDK once sent
 * E2b-Sandbox-* headers on a control-plane call):
 *   1. the control plane's paths (sandboxes, v2/sandboxes, health without a sandbox) and
 *      envd's (process.Process/..., filesystem.Filesystem/..., files, envs, metrics, health
 *      with E2b-Sandbox-Id) are routed as they are;
 *   2. any other path with E2b-Sandbox-Id and an E2b-Sandbox-Port other than envd's is that
 *      port of that sandbox (the code interpreter's 49999, an app's): rerouted to the port
 *      proxy, sandboxes/{id}/proxy/{port}/<path>.
 * The control plane takes the API key (X-API-Key); envd and the ports take the sandbox's
 * envdAccessToken (X-Access-Token) or the API key; the ports also take its
 * trafficAccessToken (E2B-Traffic-Access-Token), which envd never takes, and nothing at all
 * when the sandbox was created with network.allowPublicTraffic. Each token is taken in its
 * own header only. A port refused for want of all of them gets E2B's proxy's answer (403,
 * or 502 for no such sandbox), the gate's included (head_refusal); envd and the control
 * plane get the 401. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_proxy.h"
#include "cell/cleanup.h"
#include "cell/id.h"
#include "config.h"
#include "e2b.h"
#include "e2b_recent.h"
#include "http/errors.h"
#include "http/head.h"
#include "http/http.h"
#include "lifecycle.h"
#include "http/keys.h"
#include "http/peer.h"
#include "preview.h"
#include "registry.h"
#include "http/router.h"
#include "sandbox.h"
#include "tenancy.h"

#define SHORT	 ROUTE_SHORT
#define STREAMED ROUTE_STREAMED
#define NONE	 ROUTE_BODY_NONE
#define JSON	 ROUTE_BODY_JSON
#define STREAM	 ROUTE_BODY_STREAM

#define PROCESS	   "process.Process/"
#define FILESYSTEM "filesystem.Filesystem/"

static const struct route routes[] = {
    /* The control plane. */
    {"POST", "sandboxes", JSON, SHORT, e2b_sandbox_create, NULL, NULL},
    {"POST", "v2/sandboxes", JSON, SHORT, e2b_sandbox_create, NULL, NULL},
    {"GET", "sandboxes", NONE, SHORT, e2b_sandbox_list, NULL, NULL},
    {"GET", "v2/sandboxes", NONE, SHORT, e2b_sandbox_list_v2, NULL, NULL},
    {"GET", "sandboxes/{id}", NONE, SHORT, e2b_sandbox_get, NULL, NULL},
    {"DELETE", "sandboxes/{id}", NONE, SHORT, e2b_sandbox_kill, NULL, NULL},
    {"POST", "sandboxes/{id}/timeout", JSON, SHORT, e2b_sandbox_timeout, NULL, NULL},
    {"POST", "sandboxes/{id}/refreshes", JSON, SHORT, e2b_sandbox_refresh, NULL, NULL},
    {"POST", "sandboxes/{id}/pause", JSON, SHORT, e2b_sandbox_pause, NULL, NULL},
    {"POST", "sandboxes/{id}/resume", JSON, SHORT, e2b_sandbox_resume, NULL, NULL},
    {"POST", "sandboxes/{id}/connect", JSON, SHORT, e2b_sandbox_connect, NULL, NULL},
    {"POST", "v2/sandboxes/{id}/connect", JSON, SHORT, e2b_sandbox_connect, NULL, NULL},
    {"GET", "sandboxes/{id}/metrics", NONE, SHORT, e2b_sandbox_metrics, NULL, NULL},
    {"PUT", "sandboxes/{id}/network", JSON, SHORT, e2b_sandbox_network, NULL, NULL},
    {"POST", "sandboxes/{id}/snapshots", JSON, SHORT, e2b_snapshot_create, NULL, NULL},
    {"GET", "snapshots", NONE, SHORT, e2b_snapshot_list, NULL, NULL},
    {"DELETE", "templates/{id}", NONE, SHORT, e2b_template_delete, NULL, NULL},
    {"GET", "templates/aliases/{alias}", NONE, SHORT, e2b_template_alias, NULL, NULL},
    {"POST", "sandboxes/{id}/fork", JSON, SHORT, e2b_sandbox_fork, NULL, NULL},
    /* envd; health is the control plane's too (without E2b-Sandbox-Id). */
    {"GET", "health", NONE, SHORT, e2b_health, NULL, NULL},
    {"GET", "envs", NONE, SHORT, e2b_envs, NULL, NULL},
    {"GET", "metrics", NONE, SHORT, e2b_envd_metrics, NULL, NULL},
    {"GET", "files", NONE, STREAMED, e2b_files_download, NULL, NULL},
    {"POST", "files", STREAM, STREAMED, e2b_files_upload, e2b_files_upload_begin,
     e2b_files_upload_data},
    /* A signed /files URL, rerouted to the sandbox its signature names (e2b_signature.c). */
    {"GET", "sandboxes/{id}/files", NONE, STREAMED, e2b_files_download, NULL, NULL},
    {"POST", "sandboxes/{id}/files", STREAM, STREAMED, e2b_files_upload, e2b_files_upload_begin,
     e2b_files_upload_data},
    {"POST", PROCESS "Start", JSON, STREAMED, e2b_process_start, NULL, NULL},
    {"POST", PROCESS "Connect", JSON, STREAMED, e2b_process_connect, NULL, NULL},
    {"POST", PROCESS "List", JSON, SHORT, e2b_process_list, NULL, NULL},
    {"POST", PROCESS "SendInput", JSON, SHORT, e2b_process_send_input, NULL, NULL},
    {"POST", PROCESS "StreamInput", JSON, SHORT, e2b_process_stream_input, NULL, NULL},
    {"POST", PROCESS "CloseStdin", JSON, SHORT, e2b_process_close_stdin, NULL, NULL},
    {"POST", PROCESS "SendSignal", JSON, SHORT, e2b_process_send_signal, NULL, NULL},
    {"POST", PROCESS "Update", JSON, SHORT, e2b_process_update, NULL, NULL},
    {"POST", FILESYSTEM "Stat", JSON, SHORT, e2b_fs_stat, NULL, NULL},
    {"POST", FILESYSTEM "ListDir", JSON, SHORT, e2b_fs_list_dir, NULL, NULL},
    {"POST", FILESYSTEM "MakeDir", JSON, SHORT, e2b_fs_make_dir, NULL, NULL},
    {"POST", FILESYSTEM "Move", JSON, SHORT, e2b_fs_move, NULL, NULL},
    {"POST", FILESYSTEM "Remove", JSON, SHORT, e2b_fs_remove, NULL, NULL},
    {"POST", FILESYSTEM "WatchDir", JSON, STREAMED, e2b_fs_watch_dir, NULL, NULL},
    {"POST", FILESYSTEM "CreateWatcher", JSON, SHORT, e2b_fs_create_watcher, NULL, NULL},
    {"POST", FILESYSTEM "GetWatcherEvents", JSON, SHORT, e2b_fs_get_watcher_events, NULL, NULL},
    {"POST", FILESYSTEM "RemoveWatcher", JSON, SHORT, e2b_fs_remove_watcher, NULL, NULL},
    /* Another port of a sandbox (step 2 above): cell's port proxy, as the OpenSandbox
     * API's "proxy/{port}" is. */
    {"*", "sandboxes/{id}/proxy/{port}/*", STREAM, STREAMED, api_proxy, api_proxy_begin,
     api_proxy_data},
};

/* The first segment of a raw path (at most size - 1 bytes, else ""). */
static void first_segment(const char *raw, char *out, size_t size)
{
	size_t n = strcspn(raw + (raw[0] == '/'), "/?");
	if (n >= size)
		n = 0;
	memcpy(out, raw + (raw[0] == '/'), n);
	out[n] = '\0';
}

static bool is_control_plane(const char *first, bool has_id)
{
	return !strcmp(first, "sandboxes") || !strcmp(first, "v2") ||
	       (!strcmp(first, "health") && !has_id);
}

static bool is_envd(const char *first)
{
	static const char *const paths[] = {
	    "process.Process", "filesystem.Filesystem", "files", "envs", "metrics", "health"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(paths); i++)
		if (!strcmp(first, paths[i]))
			return true;
	return false;
}

/* The sandbox the host name Host: 49983-<id>.<domain> names (the SDK's own URL for envd
 * when E2B_SANDBOX_URL is not set), len bytes of host: false when it names none. */
static bool host_names(const char *host, size_t len, char id[CELL_ID_MAX + 1])
{
	static const char prefix[] = "49983-";
	const size_t plen = sizeof(prefix) - 1;
	if (!host || len <= plen || memcmp(host, prefix, plen))
		return false;
	const char *dot = memchr(host + plen, '.', len - plen);
	size_t n = dot ? (size_t)(dot - host) - plen : 0;
	if (!n || n > CELL_ID_MAX)
		return false;
	memcpy(id, host + plen, n);
	id[n] = '\0';
	return cell_id_valid(id);
}

/* The sandbox a signed URL's request names: 1 with id (E2b-Sandbox-Id, else a Host
 * 49983-<id>.<domain>), 0 when it names none, -1 when E2b-Sandbox-Id is no id. From the
 * header's value (NULL: none) and the Host's. */
static int signed_named(const char *hid, size_t hid_len, const char *host, size_t host_len,
			char id[CELL_ID_MAX + 1])
{
	if (hid) {
		if (hid_len > CELL_ID_MAX)
			return -1;
		memcpy(id, hid, hid_len);
		id[hid_len] = '\0';
		return cell_id_valid(id) ? 1 : -1;
	}
	return host_names(host, host_len, id) ? 1 : 0;
}

/* A signed /files URL, answered with E2B's messages when expired or signed by no sandbox,
 * else rerouted to sandboxes/{id}/files. Its signer is the sandbox it names, else one its
 * client used (e2b_recent.c), else what a scan of every sandbox finds: the gate lets a URL
 * that names none and is none of its client's through for this, and the scan's bound is
 * host-wide (503 past it). */
static int reroute_signed(struct http_req *r)
{
	struct e2b_signed s;
	if (!e2b_signed_parse(http_method(r), http_raw_query(r), &s))
		return 0;
	int expired = e2b_signed_expired(&s);
	if (expired)
		return e2b_error(r, 401, "%s",
				 expired > 0
				     ? "signature is already expired"
				     : "signature_expiration must be a Unix time in seconds"),
		       -1;
	const char *hid = http_header(r, E2B_HEADER_ID), *host = http_header(r, "Host");
	char named[CELL_ID_MAX + 1], id[CELL_ID_MAX + 1];
	int how = signed_named(hid, hid ? strlen(hid) : 0, host, host ? strlen(host) : 0, named);
	struct peer_key key;
	const struct peer_key *client = http_peer(r, &key) ? &key : NULL;
	int rc = how < 0 ? -EACCES : e2b_signed_sandbox(&s, how ? named : NULL, client, id);
	if (rc == -ENOENT)
		rc = e2b_signed_scan(&s, client, id);
	if (rc == -EBUSY || rc == -EAGAIN)
		return e2b_error(r, 503,
				 "too many signed URLs that name no sandbox at once: try again, or "
				 "name it (%s, or the host %d-<id>.<domain>)",
				 E2B_HEADER_ID, E2B_ENVD_PORT),
		       -1;
	if (rc < 0)
		return e2b_error(r, 401, "invalid signature"), -1;
	char *path;
	if (asprintf(&path, "/sandboxes/%s/files", id) < 0)
		return http_no_memory(r), -1;
	http_reroute(r, path);
	return 0;
}

static bool authorized(struct http_req *r);
static bool token_ok(const char *label, const char *id, size_t id_len, const char *given,
		     size_t len);

/* ---- E2B's host names (--e2b-domain): Host <port>-<id>.<domain> ---- */

/* The port and sandbox a Host (len bytes) names under --e2b-domain: true for a port other
 * than envd's. envd's own name (49983-<id>) stays E2B's API, which the SDK's envd calls
 * name their sandbox to with E2b-Sandbox-Id; api.<domain> and any other host too. */
static bool host_port(const char *host, size_t len, unsigned *port, char id[CELL_ID_MAX + 1])
{
	char buf[256];
	if (!celld.e2b_domain || !host || len >= sizeof(buf))
		return false;
	memcpy(buf, host, len);
	buf[len] = '\0';
	return preview_host_parse(buf, celld.e2b_domain, port, id) == 1 && *port != E2B_ENVD_PORT;
}

/* E2B's proxy's word on traffic to a port of sandbox id carrying the traffic token tok
 * (tok_len bytes; NULL: none): 0 to let it through (the sandbox allows public traffic, or
 * the token is its own), else the status with E2B's message in msg: 403 when its token is
 * missing or wrong; 502 when there is no such sandbox (E2B's proxy template says 404, but
 * its front answers 502 "The sandbox was not found", which E2B's own SDK tests expect: the
 * client's answer wins). Only the token counts: E2B's proxy reads no API key and no envd
 * token, so neither opens a private sandbox's port here. */
static unsigned traffic_verdict(const char *id, const char *tok, size_t tok_len, char *msg,
				size_t size)
{
	struct sandbox *sb = registry_get(id);
	if (!sb) {
		snprintf(msg, size, "The sandbox was not found");
		return 502;
	}
	bool pub = sb->public_ports; /* fixed at create */
	sandbox_unref(sb);
	if (pub)
		return 0;
	if (tok && token_ok(E2B_TRAFFIC_LABEL, id, strlen(id), tok, tok_len))
		return 0;
	snprintf(msg, size, "Sandbox is secured with traffic access token. %s '%s' is %s",
		 tok ? "Provided token in header" : "Token header", E2B_HEADER_TRAFFIC,
		 tok ? "invalid" : "missing");
	return 403;
}

/* E2B's body of a refused port: {"code", "message", "sandboxId"} (a new reference). */
static json_t *traffic_body(unsigned status, const char *msg, const char *id)
{
	return json_pack("{s:i, s:s, s:s}", "code", (int)status, "message", msg, "sandboxId", id);
}

static void traffic_refuse(struct http_req *r, unsigned status, const char *msg, const char *id)
{
	json_t *body = traffic_body(status, msg, id);
	if (body)
		http_json(r, status, body);
	else
		http_no_memory(r);
}

/* Step 2's request: a path neither API has (first, its first segment) with an
 * E2b-Sandbox-Port other than envd's (port_hdr, len bytes) into *port. */
static bool header_port(const char *first, const char *port_hdr, size_t len, unsigned *port)
{
	char buf[8], *end;
	if (is_control_plane(first, true) || is_envd(first) || !len || len >= sizeof(buf))
		return false;
	memcpy(buf, port_hdr, len);
	buf[len] = '\0';
	unsigned long p = strtoul(buf, &end, 10);
	if (*end || buf[0] < '0' || buf[0] > '9' || p == 0 || p > 65535 || p == E2B_ENVD_PORT)
		return false;
	*port = (unsigned)p;
	return true;
}

/* A request a host name routes to a port (reroute_host): its sandbox's id. */
static bool host_routed(const struct http_req *r, char id[CELL_ID_MAX + 1])
{
	const char *host = http_header(r, "Host");
	unsigned port;
	return http_rerouted(r) && host && host_port(host, strlen(host), &port, id);
}

/* A sandbox that does not resume on use (E2B's autoResume false) is not woken by the port
 * proxy: 502 as E2B's front answers (true: answered), to a caller allowed to reach it
 * (others get the listener's refusal, telling nothing of its state). */
static bool asleep_refused(struct http_req *r, const char *id)
{
	struct sandbox *sb = authorized(r) ? tenancy_sandbox(r, id) : NULL;
	bool asleep = sb && lifecycle_asleep(sb);
	if (sb)
		sandbox_unref(sb);
	if (asleep)
		e2b_error(r, 502,
			  "sandbox %s is paused and is not resumed by its use (autoResume "
			  "false): connect to it first",
			  id);
	return asleep;
}

/* Host <port>-<id>.<domain>: that port of that sandbox at the app's "/", as E2B's proxy
 * routes the SDK's getHost(port) URLs: 1 when rerouted to the port proxy, 0 for any other
 * host, -1 when answered (E2B's 403 or 502). */
static int reroute_host(struct http_req *r)
{
	const char *host = http_header(r, "Host");
	char id[CELL_ID_MAX + 1], msg[160];
	unsigned port;
	if (!host || !host_port(host, strlen(host), &port, id))
		return 0;
	const char *tok = http_header(r, E2B_HEADER_TRAFFIC);
	unsigned status = traffic_verdict(id, tok, tok ? strlen(tok) : 0, msg, sizeof(msg));
	if (status)
		return traffic_refuse(r, status, msg, id), -1;
	const char *raw = http_raw_path(r);
	if (raw[0] != '/')
		return e2b_error(r, 400, "a sandbox host's request target must be a path"), -1;
	char *path;
	if (asprintf(&path, "/sandboxes/%s/proxy/%u%s", id, port, raw) < 0)
		return http_no_memory(r), -1;
	http_reroute(r, path);
	return asleep_refused(r, id) ? -1 : 1;
}

/* A signed /files URL, above; and step 2: a path neither API has, with a sandbox and a port
 * other than envd's in the headers, goes to that port. */
static int reroute(struct http_req *r)
{
	int routed = reroute_host(r);
	if (routed)
		return routed < 0 ? -1 : 0;
	const char *id = http_header(r, E2B_HEADER_ID);
	const char *port = http_header(r, E2B_HEADER_PORT);
	char first[32];
	first_segment(http_raw_path(r), first, sizeof(first));
	/* A signed URL: without the sandbox's credentials (its SDK's own calls send them with
	 * E2b-Sandbox-Id, and they decide as before). */
	if (!strcmp(http_raw_path(r), "/files") &&
	    (!id || (!http_header(r, E2B_HEADER_TOKEN) && !http_header(r, E2B_HEADER_KEY))))
		return reroute_signed(r);
	unsigned p;
	if (!id || !port || !header_port(first, port, strlen(port), &p))
		return 0;
	if (!cell_id_valid(id)) {
		e2b_error(r, 400, "invalid %s '%.80s'", E2B_HEADER_ID, id);
		return -1;
	}
	char *path;
	const char *raw = http_raw_path(r);
	if (asprintf(&path, "/sandboxes/%s/proxy/%u%s", id, p, raw[0] ? raw : "/") < 0) {
		http_no_memory(r);
		return -1;
	}
	http_reroute(r, path);
	/* No credential of cell's either (the key, the envd token): E2B's refusal, as for a
	 * host name's port. */
	if (!authorized(r)) {
		const char *tok = http_header(r, E2B_HEADER_TRAFFIC);
		char msg[160];
		unsigned status = traffic_verdict(id, tok, tok ? strlen(tok) : 0, msg, sizeof(msg));
		return status ? (traffic_refuse(r, status, msg, id), -1) : 0;
	}
	return asleep_refused(r, id) ? -1 : 0;
}

/* given is the token of sandbox id that label names (E2B_ENVD_LABEL: its envdAccessToken,
 * E2B_TRAFFIC_LABEL: its trafficAccessToken). */
static bool token_ok(const char *label, const char *id, size_t id_len, const char *given,
		     size_t len)
{
	char sid[CELL_ID_MAX + 1];
	if (!id || !given || id_len > CELL_ID_MAX)
		return false;
	memcpy(sid, id, id_len);
	sid[id_len] = '\0';
	return cell_id_valid(sid) && preview_sandbox_token_ok(label, sid, given, len);
}

static bool key_ok(const char *given, size_t len)
{
	return keys_match(given, len) != NULL;
}

/* A rerouted signed URL (sandboxes/<id>/files): its signature is that sandbox's (id). */
static bool signed_ok(const struct http_req *r, char id[CELL_ID_MAX + 1])
{
	const char *raw = http_raw_path(r);
	int n = 0;
	if (!http_rerouted(r) || sscanf(raw, "/sandboxes/%64[a-z0-9-]/files%n", id, &n) != 1 ||
	    raw[n])
		return false;
	struct e2b_signed s;
	return e2b_signed_parse(http_method(r), http_raw_query(r), &s) &&
	       e2b_signed_expired(&s) == 0 && e2b_signed_by(id, &s);
}

/* Sandbox id was created with E2B's network.allowPublicTraffic: its ports (never envd's)
 * take no credential. id_len bytes of id. */
static bool ports_public(const char *id, size_t id_len)
{
	char sid[CELL_ID_MAX + 1];
	if (!id || id_len > CELL_ID_MAX)
		return false;
	memcpy(sid, id, id_len);
	sid[id_len] = '\0';
	struct sandbox *sb = cell_id_valid(sid) ? registry_get(sid) : NULL;
	bool pub = sb && sb->public_ports; /* fixed at create */
	if (sb)
		sandbox_unref(sb);
	return pub;
}

/* A request reroute() sent to a port of a sandbox (never envd's): that sandbox's id. */
static bool port_request(const struct http_req *r, char id[CELL_ID_MAX + 1])
{
	int n = 0;
	return http_rerouted(r) &&
	       sscanf(http_raw_path(r), "/sandboxes/%64[a-z0-9-]/proxy/%n", id, &n) == 1 && n > 0;
}

/* r reaches a sandbox with the key or its envd token: noted as used by r's client, whose
 * signed URLs are looked for among the sandboxes it used (e2b_recent.c). The sandbox is
 * E2b-Sandbox-Id's, else a path's sandboxes/{id} (connect, a port, ...). */
static void note_use(const struct http_req *r)
{
	char id[CELL_ID_MAX + 1];
	const char *raw = http_raw_path(r), *hid = http_header(r, E2B_HEADER_ID);
	if (hid)
		snprintf(id, sizeof(id), "%s", strlen(hid) <= CELL_ID_MAX ? hid : "");
	else if (sscanf(raw + (!strncmp(raw, "/v2/", 4) ? 3 : 0), "/sandboxes/%64[a-z0-9-]", id) !=
		 1)
		return;
	struct peer_key client;
	if (cell_id_valid(id) && http_peer(r, &client))
		e2b_recent_note(&client, id);
}

/* An API key (its tenant's), or a credential of one sandbox (that sandbox alone). */
static bool authorized(struct http_req *r)
{
	/* A host name's port: E2B's traffic rules alone, whatever else the request carries
	 * (an API key is no traffic credential there, as in E2B). */
	char hid[CELL_ID_MAX + 1], msg[160];
	if (host_routed(r, hid)) {
		const char *tok = http_header(r, E2B_HEADER_TRAFFIC);
		if (traffic_verdict(hid, tok, tok ? strlen(tok) : 0, msg, sizeof(msg)))
			return false;
		tenancy_grant_scoped(r, hid, true); /* an app's viewers */
		return true;
	}
	const char *key = http_header(r, E2B_HEADER_KEY);
	struct adm_principal *who = keys_match(key, key ? strlen(key) : 0);
	if (who) {
		http_grant(r, who, NULL);
		note_use(r);
		return true;
	}
	char sid[CELL_ID_MAX + 1];
	if (signed_ok(r, sid)) {
		tenancy_grant_scoped(r, sid, true); /* a URL anyone may be handed */
		return true;
	}
	/* A port of a sandbox: public when its create said so, else its traffic token as
	 * E2B's SDK users send it, or the envd token as below. Never envd on the traffic
	 * token: it is given to whoever may view an app. */
	char pid[CELL_ID_MAX + 1];
	if (port_request(r, pid)) {
		const char *traffic = http_header(r, E2B_HEADER_TRAFFIC);
		if (ports_public(pid, strlen(pid)) ||
		    (traffic &&
		     token_ok(E2B_TRAFFIC_LABEL, pid, strlen(pid), traffic, strlen(traffic)))) {
			tenancy_grant_scoped(r, pid, true); /* an app's viewers */
			return true;
		}
	}
	/* Without the key: only what belongs to the sandbox the token is of, its envd and
	 * (rerouted, its id in the path being the header's) its ports. */
	char first[32];
	first_segment(http_raw_path(r), first, sizeof(first));
	if (!http_rerouted(r) && (is_control_plane(first, true) || !is_envd(first)))
		return false;
	const char *id = http_header(r, E2B_HEADER_ID);
	const char *token = http_header(r, E2B_HEADER_TOKEN);
	if (!id || !token || !token_ok(E2B_ENVD_LABEL, id, strlen(id), token, strlen(token)))
		return false;
	tenancy_grant_scoped(r, id, false); /* envd's token: the sandbox's own client */
	note_use(r);
	return true;
}

/* The gate's view of a signed /files URL (its request line's method and target), from
 * client: let through when expired (reroute_signed answers it), when signed by the
 * sandbox it names, else by one its client used, else, naming none, for the bounded scan of
 * the HTTP server (reroute_signed): the gate's thread checks at most E2B_RECENT_PER_CLIENT
 * signatures whatever the number of sandboxes. */
static bool head_signed(const char *head, size_t len, const struct peer_key *client)
{
	const char *hid, *host, *v;
	size_t hid_len = 0, host_len = 0, vlen;
	bool has_id = head_value(head, len, E2B_HEADER_ID, &hid, &hid_len);
	/* The sandbox's credentials decide (head_authorized), as reroute() has it. */
	if (has_id && (head_value(head, len, E2B_HEADER_TOKEN, &v, &vlen) ||
		       head_value(head, len, E2B_HEADER_KEY, &v, &vlen)))
		return false;
	if (!head_value(head, len, "Host", &host, &host_len))
		host = NULL;
	while (len && (*head == '\r' || *head == '\n'))
		head++, len--;
	const char *sp = memchr(head, ' ', len);
	if (!sp || sp - head > 8)
		return false;
	char method[9], target[8192];
	memcpy(method, head, (size_t)(sp - head));
	method[sp - head] = '\0';
	const char *t = sp + 1, *end = memchr(t, ' ', len - (size_t)(t - head));
	if (!end || (size_t)(end - t) >= sizeof(target))
		return false;
	memcpy(target, t, (size_t)(end - t));
	target[end - t] = '\0';
	char *q = strchr(target, '?');
	if (!q || (size_t)(q - target) != 6 || memcmp(target, "/files", 6))
		return false;
	struct e2b_signed s;
	if (!e2b_signed_parse(method, q + 1, &s))
		return false;
	if (e2b_signed_expired(&s) != 0)
		return true;
	char named[CELL_ID_MAX + 1], id[CELL_ID_MAX + 1];
	int how = signed_named(has_id ? hid : NULL, hid_len, host, host_len, named);
	if (how < 0)
		return false;
	int rc = e2b_signed_sandbox(&s, how ? named : NULL, client, id);
	return rc == 0 || (rc == -ENOENT && !how);
}

/* The gate's check, on the raw head of a connection's first request: the key, or the
 * token of the sandbox the head names for a path that takes one, or a signed URL. The
 * path is taken from the request line. */
/* A head's Host naming a sandbox's port under --e2b-domain (id): that port's verdict
 * (traffic_verdict) into *status, true. */
static bool head_host_verdict(const char *head, size_t len, char id[CELL_ID_MAX + 1],
			      unsigned *status, char *msg, size_t size)
{
	const char *host, *tok;
	size_t host_len, tok_len = 0;
	unsigned port;
	if (!head_value(head, len, "Host", &host, &host_len) ||
	    !host_port(host, host_len, &port, id))
		return false;
	if (!head_value(head, len, E2B_HEADER_TRAFFIC, &tok, &tok_len))
		tok = NULL;
	*status = traffic_verdict(id, tok, tok_len, msg, size);
	return true;
}

/* The first segment of a head's request target (as first_segment). */
static void head_first_segment(const char *head, size_t len, char *out, size_t size)
{
	char target[64];
	while (len && (*head == '\r' || *head == '\n'))
		head++, len--;
	/* The head is len bytes, not a string: every read stays within them. */
	const char *sp = memchr(head, ' ', len);
	const char *t = sp ? sp + 1 : head + len, *end = head + len;
	size_t n = 0;
	while (t + n < end && n < sizeof(target) - 1 && !strchr(" \r\n", t[n]))
		n++; /* the first segment is all that is read */
	memcpy(target, t, n);
	target[n] = '\0';
	first_segment(target, out, size);
}

/* The gate's answer to a head it refused: E2B's 403 or 502 for a sandbox's port, named by
 * a host name or by step 2's headers (no credential of cell's opened it either). */
static json_t *head_refusal(const char *head, size_t len, unsigned *status)
{
	char id[CELL_ID_MAX + 1], msg[160], first[32];
	const char *hid, *port, *tok;
	size_t hid_len, port_len, tok_len;
	unsigned p;
	if (head_host_verdict(head, len, id, status, msg, sizeof(msg)))
		return *status ? traffic_body(*status, msg, id) : NULL;
	head_first_segment(head, len, first, sizeof(first));
	if (!head_value(head, len, E2B_HEADER_ID, &hid, &hid_len) || hid_len > CELL_ID_MAX ||
	    !head_value(head, len, E2B_HEADER_PORT, &port, &port_len) ||
	    !header_port(first, port, port_len, &p))
		return NULL;
	memcpy(id, hid, hid_len);
	id[hid_len] = '\0';
	if (!cell_id_valid(id))
		return NULL;
	if (!head_value(head, len, E2B_HEADER_TRAFFIC, &tok, &tok_len))
		tok = NULL;
	*status = traffic_verdict(id, tok, tok_len, msg, sizeof(msg));
	return *status ? traffic_body(*status, msg, id) : NULL;
}

static bool head_authorized(const char *head, size_t len, const struct peer_key *client)
{
	const char *v, *id, *tok;
	size_t vlen, id_len, tok_len;
	unsigned status;
	char hid[CELL_ID_MAX + 1], msg[160];
	if (head_host_verdict(head, len, hid, &status, msg, sizeof(msg)))
		return status == 0;
	if (head_value(head, len, E2B_HEADER_KEY, &v, &vlen) && key_ok(v, vlen))
		return true;
	if (head_signed(head, len, client))
		return true;
	/* A port of a public sandbox, or one with its traffic token: authorized() then lets
	 * only a request rerouted to a port (never envd's) through on that ground. */
	const char *port;
	size_t port_len;
	if (head_value(head, len, E2B_HEADER_ID, &id, &id_len) &&
	    head_value(head, len, E2B_HEADER_PORT, &port, &port_len) &&
	    (ports_public(id, id_len) ||
	     (head_value(head, len, E2B_HEADER_TRAFFIC, &tok, &tok_len) &&
	      token_ok(E2B_TRAFFIC_LABEL, id, id_len, tok, tok_len))))
		return true;
	if (!head_value(head, len, E2B_HEADER_ID, &id, &id_len) ||
	    !head_value(head, len, E2B_HEADER_TOKEN, &tok, &tok_len))
		return false;
	/* Whatever the path: the HTTP server's check (authorized) still applies to it. */
	return token_ok(E2B_ENVD_LABEL, id, id_len, tok, tok_len);
}

/* E2B's Error: {"code": <HTTP status>, "message"}; the SDK branches on the number. */
static int unrouted(struct http_req *r, enum router_result res, const struct router_match *m)
{
	if (res == ROUTER_BAD_PATH)
		return e2b_error(r, 400, "malformed request path");
	/* An id that cannot be cell's names no sandbox: 404, which the SDK's kill() reads as
	 * "not there" (false) rather than an error. */
	if (res == ROUTER_BAD_ID)
		return e2b_error(r, 404, "sandbox %.80s not found", m->params[m->bad_param]);
	if (res == ROUTER_NO_METHOD)
		return e2b_error(r, 405, "%s is not allowed on this path", http_method(r));
	char first[32];
	first_segment(http_raw_path(r), first, sizeof(first));
	/* A Connect client reads a 404 without a string code as "unimplemented". */
	if (!strcmp(first, "process.Process") || !strcmp(first, "filesystem.Filesystem"))
		return connect_error(r, CONNECT_UNIMPLEMENTED, "%s is not implemented",
				     http_raw_path(r));
	return e2b_error(r, 404, "no such endpoint");
}

/* One group: E2B's clients are told apart by listener, not by route. */
static enum metric_group route_group(const struct route *route)
{
	(void)route;
	return METRIC_GROUP_E2B;
}

const struct http_api api_e2b = {
    .name = "E2B",
    .routes = {routes, CELL_ARRAY_SIZE(routes), NULL},
    .authorized = authorized,
    .head_authorized = head_authorized,
    .head_refusal = head_refusal,
    .key_header = E2B_HEADER_KEY,
    .unauthorized_message = "missing or wrong " E2B_HEADER_KEY " header (or, for a "
			    "sandbox's envd and ports, its " E2B_HEADER_TOKEN ")",
    .error_body = errors_body_numbered,
    .unrouted = unrouted,
    .reroute = reroute,
    .route_group = route_group,
};
