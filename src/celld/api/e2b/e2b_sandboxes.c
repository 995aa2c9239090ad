/* E2B's control plane: create, list, get, kill, timeout, pause, resume and connect, and a
 * sandbox's metrics, translated into the same internal calls the OpenSandbox routes make
 * (create_spec, lifecycle_*): one registry, one audit log, one set of limits. celld(8), "E2B
 * API", tells the field mapping.
 *
 * E2B's states are two: "running" (cell's Pending and Running) and "paused" (Paused, and
 * Stopped and Failed too, which connect starts again from their kept disk, as E2B's
 * connect resumes a paused sandbox). A sandbox's templateID is its image's name; the
 * create's answer also names the template asked for (alias). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "cell/log.h"
#include "cell/quota.h"
#include "audit.h"
#include "config.h"
#include "create_spec.h"
#include "e2b.h"
#include "e2b_recent.h"
#include "e2b_templates.h"
#include "events.h"
#include "fields.h"
#include "http/http.h"
#include "images.h"
#include "lifecycle.h"
#include "metafilter.h"
#include "resource_policy.h"
#include "netpolicy.h"
#include "network.h"
#include "http/peer.h"
#include "registry.h"
#include "sandbox.h"
#include "sandbox_select.h"
#include "tenancy.h"
#include "snapshots.h"
#include "timefmt.h"
#include "timer_policy.h"
#include "http/url.h"
#include "usage.h"

#define TIMEOUT_DEFAULT 300
#define TIMEOUT_MAX	(10LL * 365 * 24 * 3600)
#define REFRESH_MAX	3600 /* E2B's bound of a refresh's duration */
#define LIST_LIMIT_MAX	100
#define TEMPLATE_ID_MAX 128
#define NO_END		253402300799LL /* 9999-12-31T23:59:59Z: a sandbox without timeout */
#define SAMPLE_MS	100
#define MIB		(1024 * 1024)
#define E2B_CLIENT_ID	"cell"
#define ALL_IPV4	"0.0.0.0/0"
#define STATES_MAX	16

/* ---- small pieces ---- */

/* A body that may be absent (the SDKs send {} or nothing): an empty object then. */
static int body_or_empty(struct http_req *r, json_t **out)
{
	size_t len = 0;
	http_body(r, &len);
	if (!len) {
		*out = json_object();
		return *out ? 0 : (http_no_memory(r), -ENOMEM);
	}
	return http_json_body(r, out);
}

static bool present(json_t *body, const char *key)
{
	json_t *v = json_object_get(body, key);
	return v && !json_is_null(v);
}

/* E2B's state of a cell state. */
static bool state_running(enum sbx_state s)
{
	return s == SBX_PENDING || s == SBX_RUNNING;
}

/* Unix seconds of a new expiry secs from now. */
static time_t from_now(int64_t secs)
{
	return time(NULL) + (time_t)secs;
}

/* ---- what E2B shows of a sandbox ---- */

struct view {
	enum sbx_state state;
	time_t expires_at;
	json_t *metadata, *network;
	struct sbx_timers timers;
};

static void view_take(struct sandbox *sb, struct view *v)
{
	registry_lock();
	v->state = sb->state;
	v->expires_at = sb->expires_at;
	v->metadata = json_incref(sb->metadata);
	v->network = json_incref(sb->network);
	v->timers = sb->timers;
	registry_unlock();
}

static void view_release(struct view *v)
{
	json_decref(v->metadata);
	json_decref(v->network);
}

static unsigned cpu_count(const struct sandbox *sb)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t millis = sb->limits.cpu_millis;
	return millis ? (unsigned)((millis + 999) / 1000) : (unsigned)(online > 0 ? online : 1);
}

/* The memory limit, or the host's RAM when there is none (or it is above that). */
static uint64_t memory_total(const struct sandbox *sb)
{
	uint64_t total = sb->limits.memory_bytes;
	struct sysinfo si;
	if (sysinfo(&si) == 0) {
		uint64_t host = (uint64_t)si.totalram * si.mem_unit;
		if (!total || total > host)
			total = host;
	}
	return total;
}

json_t *e2b_sandbox_json(const struct sandbox *sb, const char *alias)
{
	char token[PREVIEW_TOKEN_LEN + 1];
	if (e2b_access_token(sb->id, token) < 0)
		return NULL;
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", sb->id, "templateID",
			      sb->image, "clientID", E2B_CLIENT_ID, "envdVersion", E2B_ENVD_VERSION,
			      "envdAccessToken", token, "domain");
	if (o && alias)
		json_object_set_new(o, "alias", json_string(alias));
	/* What its ports take (E2B-Traffic-Access-Token): none when public. Never the envd
	 * token: whoever is given it to view an app runs no command. */
	char traffic[PREVIEW_TOKEN_LEN + 1];
	if (o && !sb->public_ports && e2b_traffic_token(sb->id, traffic) < 0) {
		json_decref(o);
		return NULL;
	}
	if (o)
		json_object_set_new(o, "trafficAccessToken",
				    sb->public_ports ? json_null() : json_string(traffic));
	return o;
}

/* ListedSandbox. */
static json_t *listed_obj(const struct sandbox *sb, const struct view *v)
{
	time_t end = v->expires_at ? v->expires_at : (time_t)NO_END;
	return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:I, s:O, s:s}", "sandboxID",
			 sb->id, "templateID", sb->image, "clientID", E2B_CLIENT_ID, "envdVersion",
			 E2B_ENVD_VERSION, "startedAt", celld_time_json(sb->created_at), "endAt",
			 celld_time_json(end), "cpuCount", (json_int_t)cpu_count(sb), "memoryMB",
			 (json_int_t)(memory_total(sb) / MIB), "diskSizeMB",
			 (json_int_t)(sb->limits.disk_bytes / MIB), "metadata",
			 v->metadata ? v->metadata : json_object(), "state",
			 state_running(v->state) ? "running" : "paused");
}

/* E2B's network config of a sandbox whose egress is a policy of its own: the allowed
 * targets (allowOut), the denied ones (denyOut; 0.0.0.0/0 for a default of deny). */
static json_t *network_obj(json_t *policy)
{
	json_t *allow = json_array(), *deny = json_array();
	json_t *rule;
	size_t i;
	json_array_foreach(json_object_get(policy, "egress"), i, rule)
	{
		const char *action = json_string_value(json_object_get(rule, "action"));
		json_t *target = json_object_get(rule, "target");
		json_array_append(action && !strcmp(action, "allow") ? allow : deny, target);
	}
	const char *def = json_string_value(json_object_get(policy, "defaultAction"));
	if (def && !strcmp(def, "deny"))
		json_array_append_new(deny, json_string(ALL_IPV4));
	return json_pack("{s:o, s:o}", "allowOut", allow, "denyOut", deny);
}

/* SandboxDetail: the listed form, its envd's token, its network and lifecycle. */
static json_t *detail_obj(const struct sandbox *sb, const struct view *v)
{
	json_t *o = listed_obj(sb, v);
	char token[PREVIEW_TOKEN_LEN + 1];
	if (!o || e2b_access_token(sb->id, token) < 0) {
		json_decref(o);
		return NULL;
	}
	const char *mode = json_string_value(json_object_get(v->network, "mode"));
	json_t *policy = json_object_get(v->network, "policy");
	const char *def = json_string_value(json_object_get(policy, "defaultAction"));
	bool internet = mode && strcmp(mode, "none") &&
			!(!strcmp(mode, "custom") && (!def || !strcmp(def, "deny")));
	json_object_set_new(o, "envdAccessToken", json_string(token));
	json_object_set_new(o, "domain", json_null());
	json_object_set_new(o, "allowInternetAccess", json_boolean(internet));
	json_object_set_new(o, "lifecycle",
			    json_pack("{s:s, s:b}", "onTimeout",
				      v->timers.on_timeout == SBX_TIMEOUT_STOP ? "pause" : "kill",
				      "autoResume", !sb->manual_resume));
	if (mode && !strcmp(mode, "custom") && json_is_object(policy))
		json_object_set_new(o, "network", network_obj(policy));
	return o;
}

/* ---- create ---- */

/* A field the SDK may send that cell cannot honour: refused by name when it asks for what
 * cell does not do, accepted when its meaning holds. */
static int check_unsupported(json_t *body, struct cell_error *err)
{
	json_t *v;
	if (present(body, "mcp"))
		return field_fail(err, "mcp: cell starts no MCP gateway in a sandbox");
	if ((v = json_object_get(body, "iam")) && !json_is_null(v) &&
	    !(json_is_object(v) && !json_object_size(json_object_get(v, "tokens"))))
		return field_fail(err, "iam: cell issues no workload identity tokens");
	if ((v = json_object_get(body, "volumeMounts")) && !json_is_null(v) &&
	    !(json_is_array(v) && !json_array_size(v)))
		return field_fail(err, "volumeMounts: E2B's volumes are not cell's; mount cell's "
				       "named volumes through its own API");
	bool b;
	if (field_bool(body, "secure", "secure", &b, err) < 0)
		return -EINVAL;
	if (field_bool(body, "autoPauseMemory", "autoPauseMemory", &b, err) < 0)
		return -EINVAL;
	if ((v = json_object_get(body, "autoPauseMemory")) && json_is_true(v))
		return field_fail(err, "autoPauseMemory: true is not supported: at its timeout a "
				       "sandbox is stopped (its disk kept, its memory freed)");
	if ((v = json_object_get(body, "autoResume")) && !json_is_null(v) &&
	    (!json_is_object(v) || !json_is_boolean(json_object_get(v, "enabled"))))
		return field_fail(err, "autoResume must be {\"enabled\": true|false}");
	return 0;
}

/* One list of network targets (allowOut or denyOut) as rules; deny_all set when denyOut
 * holds 0.0.0.0/0 (a default of deny rather than a rule). prefix: the fields' path
 * ("network." in a create, "" in an update). */
static int network_rules(json_t *net, const char *prefix, const char *key, bool allow,
			 json_t *rules, bool *deny_all, struct cell_error *err)
{
	char field[64];
	snprintf(field, sizeof(field), "%s%s", prefix, key);
	json_t *list = NULL;
	if (field_string_array(net, key, field, &list, err) < 0)
		return -EINVAL;
	json_t *t;
	size_t i;
	int rc = 0;
	json_array_foreach(list, i, t)
	{
		const char *target = json_string_value(t);
		char name[96];
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		if (!allow && !strcmp(target, ALL_IPV4)) {
			*deny_all = true;
			continue;
		}
		struct netpolicy_rule rule = {0};
		rc = netpolicy_parse_target(target, strlen(target), name, &rule, err);
		if (rc < 0)
			break;
		json_array_append_new(rules, json_pack("{s:s, s:s}", "action",
						       allow ? "allow" : "deny", "target", target));
	}
	json_decref(list);
	return rc < 0 ? -EINVAL : 0;
}

/* The fields of E2B's network config cell has no counterpart of, refused by name when
 * they ask for something (an empty one asks for nothing). */
static int network_refused(json_t *net, const char *prefix, struct cell_error *err)
{
	json_t *v;
	static const char *const refused[] = {"maskRequestHost", "egressProxy"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(refused); i++)
		if ((v = json_object_get(net, refused[i])) && !json_is_null(v) &&
		    !(json_is_object(v) && !json_object_size(v)))
			return field_fail(err, "%s%s is not supported by cell", prefix, refused[i]);
	if ((v = json_object_get(net, "httpsPorts")) && !json_is_null(v) &&
	    !(json_is_array(v) && !json_array_size(v)))
		return field_fail(err, "%shttpsPorts is not supported by cell", prefix);
	if ((v = json_object_get(net, "rules")) && !json_is_null(v) &&
	    !(json_is_object(v) && !json_object_size(v)))
		return field_fail(err, "%srules (request transforms) are not supported by cell",
				  prefix);
	return 0;
}

/* allowOut and denyOut of net (may be NULL) and the internet's access into OpenSandbox's
 * NetworkPolicy: allowOut's targets allowed first (E2B's allowOut wins over denyOut), then
 * denyOut's denied, and the default deny when denyOut has 0.0.0.0/0 or the internet is not
 * allowed. *n_rules: how many rules it has. */
static int egress_policy(json_t *net, const char *prefix, bool internet, json_t **policy,
			 size_t *n_rules, struct cell_error *err)
{
	json_t *rules = json_array();
	bool deny_all = !internet;
	*policy = NULL;
	if (!rules)
		return cell_err(err, ENOMEM, "network");
	if (net && (network_rules(net, prefix, "allowOut", true, rules, &deny_all, err) < 0 ||
		    network_rules(net, prefix, "denyOut", false, rules, &deny_all, err) < 0)) {
		json_decref(rules);
		return -EINVAL;
	}
	*n_rules = json_array_size(rules);
	if (*n_rules > NETPOLICY_RULES_MAX) {
		json_decref(rules);
		return field_fail(err, "%sallowOut and denyOut: at most %d targets together",
				  prefix, NETPOLICY_RULES_MAX);
	}
	*policy =
	    json_pack("{s:s, s:o}", "defaultAction", deny_all ? "deny" : "allow", "egress", rules);
	return *policy ? 0 : cell_err(err, ENOMEM, "network");
}

/* allow_internet_access and network into cell's network: the mode (NULL: celld's default;
 * "none") or a policy of its own (egress_policy's). *public_traffic: network's
 * allowPublicTraffic. */
static int parse_network(json_t *body, const char **mode, json_t **policy, bool *public_traffic,
			 struct cell_error *err)
{
	bool internet = true;
	if (field_bool(body, "allow_internet_access", "allow_internet_access", &internet, err) < 0)
		return -EINVAL;
	json_t *net = json_object_get(body, "network");
	if (net && !json_is_null(net) && !json_is_object(net))
		return field_fail(err, "network must be an object");
	if (!json_is_object(net))
		net = NULL;
	*public_traffic = false;
	if (net && (field_bool(net, "allowPublicTraffic", "network.allowPublicTraffic",
			       public_traffic, err) < 0 ||
		    network_refused(net, "network.", err) < 0))
		return -EINVAL;
	size_t n = 0;
	json_t *p = NULL;
	*mode = NULL;
	*policy = NULL;
	if (egress_policy(net, "network.", internet, &p, &n, err) < 0)
		return -EINVAL;
	if (!n) { /* celld's default, or nothing allowed: no network */
		const char *def = json_string_value(json_object_get(p, "defaultAction"));
		*mode = !strcmp(def, "deny") ? "none" : NULL;
		json_decref(p);
		return 0;
	}
	*policy = p;
	return 0;
}

/* A create from the snapshot in spec->snapshot: what the request leaves out is its
 * source's (create_snapshot.c), the entrypoint too. A fork keeps the source's network
 * policy; a create has its own (the SDK always sends allow_internet_access). Either is
 * E2B's template, so sudo stays on. */
static int from_snapshot(struct create_spec *spec, bool fork, struct cell_error *err)
{
	json_t *meta = spec->snapshot;
	spec->image = json_string_value(json_object_get(meta, "image"));
	json_t *ep = json_object_get(meta, "entrypoint");
	if (json_is_array(ep) && !(spec->entrypoint = json_deep_copy(ep)))
		return cell_err(err, ENOMEM, "create from snapshot");
	if (create_snapshot_defaults(spec, err) < 0)
		return -EINVAL;
	int rc = limits_resolve(spec->resource_limits, &spec->limits, true, err);
	if (rc == 0)
		rc = create_snapshot_disk(spec, err);
	if (rc < 0)
		return rc;
	create_snapshot_record(spec, CREATE_NAMED_SUDO | (fork ? 0 : CREATE_NAMED_NETWORK));
	return create_snapshot_rootfs(spec, "templateID", err);
}

int e2b_create_spec(json_t *body, bool fork, struct create_spec *spec, const char **template_id,
		    struct cell_error *err)
{
	if (check_unsupported(body, err) < 0)
		return -EINVAL;
	if (field_string(body, "templateID", "templateID", true, template_id, err) < 0)
		return -EINVAL;
	if (!(*template_id)[0] || strlen(*template_id) > TEMPLATE_ID_MAX)
		return field_fail(err, "templateID must be 1-%d bytes", TEMPLATE_ID_MAX);
	int64_t timeout = TIMEOUT_DEFAULT;
	bool auto_pause = false;
	int has_auto_pause;
	if (field_int(body, "timeout", "timeout", 1, TIMEOUT_MAX, &timeout, err) < 0 ||
	    field_string_map(body, "envVars", "envVars", &spec->env, err) < 0 ||
	    field_string_map(body, "metadata", "metadata", &spec->metadata, err) < 0 ||
	    (has_auto_pause = field_bool(body, "autoPause", "autoPause", &auto_pause, err)) < 0)
		return -EINVAL;
	if ((spec->env && create_check_env(spec->env, "envVars", err) < 0) ||
	    (spec->metadata &&
	     field_check_map_caps(spec->metadata, "metadata", &create_metadata_caps, err) < 0))
		return -EINVAL;
	spec->timeout = timeout;
	/* E2B's templates let their user run sudo without a password, and agents written for
	 * E2B rely on it (cell-policy(5), SUDO). */
	spec->sudo = true;
	/* E2B's timeout is a sandbox's clock: no idle timer pauses it before, unless the
	 * operator's policy caps idleTimeout (it refuses 0 then: its default applies). */
	json_t *no_idle = json_pack("{s:s}", "cell.idleTimeout", "0");
	struct cell_error ignored = {0};
	if (!no_idle || timer_policy_resolve(no_idle, &spec->timers, &ignored) < 0) {
		if (timer_policy_resolve(NULL, &spec->timers, err) < 0) {
			json_decref(no_idle);
			return -EINVAL;
		}
	}
	json_decref(no_idle);
	/* autoPause: the end of the timeout stops the sandbox (disk kept: connect starts it
	 * again) rather than deleting it; absent, the operator's default. */
	if (has_auto_pause)
		spec->timers.on_timeout = auto_pause ? SBX_TIMEOUT_STOP : SBX_TIMEOUT_DELETE;
	int rc = limits_resolve(NULL, &spec->limits, true, err);
	if (rc < 0)
		return rc;
	const char *mode = NULL;
	json_t *policy = NULL;
	/* autoResume {"enabled": false}: E2B's traffic does not wake it (checked above). */
	spec->manual_resume =
	    json_is_false(json_object_get(json_object_get(body, "autoResume"), "enabled"));
	bool public_traffic;
	if (parse_network(body, &mode, &policy, &public_traffic, err) < 0)
		return -EINVAL;
	spec->public_ports = public_traffic;
	rc = network_spec(mode, policy, NULL, &spec->network, err);
	json_decref(policy);
	if (rc < 0) {
		err->code = EINVAL;
		return -EINVAL;
	}
	/* Last: the only checks that look at the host, the operator's catalogue first: a
	 * template the map lists is its image; else an image of that name (unless the map
	 * refuses unlisted ids); else one of the caller's own snapshots, by id or name. No
	 * snapshot shadows an image or a template, nor another tenant's snapshot. */
	/* An image the host has is taken before a snapshot; a registry image is pulled only
	 * after the caller's snapshots (a snapshot's id never goes to a registry). */
	struct cell_error ierr = {0};
	bool listed = e2b_template_listed(*template_id);
	const char *image = NULL;
	bool mapped = e2b_template_image(*template_id, &image) == 0;
	spec->image = image;
	spec->pull = CREATE_PULL_NEVER;
	spec->interpreter_asked = listed && e2b_template_interpreter(*template_id);
	if (mapped && create_spec_image(spec, &ierr) == 0)
		return 0;
	if (!listed) {
		spec->image = NULL;
		spec->rootfs[0] = '\0';
		rc = snapshot_find(spec->owner, *template_id, &spec->snapshot, err);
		if (rc == 0)
			return from_snapshot(spec, fork, err);
		if (rc != -ENOENT)
			return rc;
		*err = (struct cell_error){0};
	}
	if (mapped) {
		spec->image = image;
		spec->pull = CREATE_PULL_IF_NOT_PRESENT;
		ierr = (struct cell_error){0};
		if (create_spec_image(spec, &ierr) == 0)
			return 0;
	}
	return cell_err_msg(err, ENOENT, "template '%.128s' not found%s%.512s%s", *template_id,
			    ierr.msg[0] ? " (" : "", ierr.msg, ierr.msg[0] ? ")" : ""),
	       -ENOENT;
}

int e2b_sandbox_create(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	struct create_spec spec = {.owner = http_principal(r)};
	struct cell_error err = {0};
	const char *template_id = NULL;
	int rc = e2b_create_spec(body, false, &spec, &template_id, &err);
	if (rc == -ENOENT) /* as E2B answers a template it does not know */
		e2b_error(r, 404, "%s", err.msg);
	else if (rc < 0)
		http_internal(r, &err);
	struct sandbox *sb = NULL;
	bool created = false;
	if (rc == 0 && (rc = lifecycle_create(&spec, &sb, &created, &err)) < 0)
		http_internal(r, &err);
	if (rc == 0) {
		/* Its creator's signed URLs are looked for among what it used (e2b_recent.c). */
		struct peer_key client;
		if (http_peer(r, &client))
			e2b_recent_note(&client, sb->id);
		json_t *o = e2b_sandbox_json(sb, template_id);
		if (o)
			http_json(r, 201, o);
		else
			http_no_memory(r);
		sandbox_unref(sb);
	}
	create_spec_free(&spec);
	json_decref(body);
	return 0;
}

/* ---- list ---- */

struct list_query {
	bool running, paused; /* the states asked for */
	json_t *filter;	      /* metadata that must match, or NULL */
	int64_t limit;
	bool desc;
	time_t started_after;		 /* 0: none */
	const char *image;		 /* the template's image, or NULL */
	bool no_template;		 /* a template the map refuses: nothing matches */
	struct e2b_page_token token;	 /* the page starts after it (created_ms, id) */
	const struct adm_principal *who; /* who asks: only what it sees (tenancy.h) */
};

/* state: "running", "paused", repeated or joined by commas. */
static int parse_states(struct http_req *r, struct list_query *q)
{
	const char *vals[STATES_MAX];
	size_t n = http_query_all(r, "state", vals, STATES_MAX);
	if (!n) {
		q->running = q->paused = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *buf = strdup(vals[i]);
		if (!buf)
			return http_no_memory(r), -ENOMEM;
		char *save = NULL;
		for (char *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
			if (!strcmp(s, "running"))
				q->running = true;
			else if (!strcmp(s, "paused"))
				q->paused = true;
			else
				return e2b_error(r, 400,
						 "state '%.32s' is not one of running, paused", s),
				       -EINVAL;
		}
	}
	return 0;
}

static int list_parse(struct http_req *r, struct list_query *q, bool v2)
{
	q->limit = v2 ? LIST_LIMIT_MAX : INT64_MAX;
	if (!v2)
		q->running = true; /* the v1 list: running sandboxes */
	else if (parse_states(r, q) < 0)
		return -EINVAL;
	struct cell_error err = {0};
	const char *md = http_query(r, "metadata");
	if (md && metafilter_parse(md, true, &q->filter, &err) < 0)
		return http_internal(r, &err), -EINVAL;
	if (!v2)
		return 0;
	const char *limit = http_query(r, "limit"), *token = http_query(r, "nextToken");
	const char *order = http_query(r, "order"), *after = http_query(r, "startedAfter");
	const char *tmpl = http_query(r, "template");
	if (limit && parse_int64(limit, 1, LIST_LIMIT_MAX, &q->limit) < 0)
		return e2b_error(r, 400, "limit must be between 1 and %d", LIST_LIMIT_MAX), -EINVAL;
	if (token && token[0] && e2b_page_token_parse(token, &q->token) < 0)
		return e2b_error(r, 400, "nextToken is not one this server gave"), -EINVAL;
	if (order && strcmp(order, "asc") && strcmp(order, "desc"))
		return e2b_error(r, 400, "order must be asc or desc"), -EINVAL;
	/* Newest first unless asked otherwise, as E2B lists them. */
	q->desc = !order || !strcmp(order, "desc");
	if (after && celld_parse_time(after, &q->started_after) < 0)
		return e2b_error(r, 400, "startedAfter must be an RFC 3339 time"), -EINVAL;
	if (tmpl && tmpl[0])
		q->no_template = e2b_template_image(tmpl, &q->image) < 0;
	return 0;
}

/* sb comes after the page token in the list's order. */
static bool after_token(const struct list_query *q, const struct sandbox *sb)
{
	if (!q->token.set)
		return true;
	int c = e2b_page_token_cmp(&q->token, sb->created_ms, sb->id);
	return q->desc ? c < 0 : c > 0;
}

static bool list_matches_locked(const struct sandbox *sb, void *cls)
{
	const struct list_query *q = cls;
	bool running = state_running(sb->state);
	if (!(running ? q->running : q->paused) || q->no_template ||
	    !tenancy_sees(q->who, sb->owner))
		return false;
	if (q->image && strcmp(sb->image, q->image))
		return false;
	/* startedAfter names a second (the SDK sends a startedAt back, to the second): a
	 * sandbox started within it is included. */
	if (q->started_after && sb->created_at < q->started_after)
		return false;
	return after_token(q, sb) && (!q->filter || metafilter_matches(sb->metadata, q->filter));
}

static int list(struct http_req *r, bool v2)
{
	struct list_query q = {.who = http_principal(r)};
	if (list_parse(r, &q, v2) < 0) {
		json_decref(q.filter);
		return 0;
	}
	struct sandbox_page page;
	int rc = sandbox_select(list_matches_locked, &q, q.desc, 0, (size_t)q.limit, &page);
	json_decref(q.filter);
	if (rc < 0)
		return http_no_memory(r);
	size_t taken = page.n;
	bool more = page.total > taken;
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < taken; i++) {
		struct view vw;
		view_take(page.v[i], &vw);
		if (json_array_append_new(arr, listed_obj(page.v[i], &vw)) < 0) {
			json_decref(arr);
			arr = NULL;
		}
		view_release(&vw);
	}
	char token[E2B_PAGE_TOKEN_MAX];
	if (more && taken)
		e2b_page_token_format(token, page.v[taken - 1]->created_ms, page.v[taken - 1]->id);
	sandbox_page_free(&page);
	if (!arr)
		return http_no_memory(r);
	return e2b_page(r, arr, more && taken ? token : NULL);
}

int e2b_sandbox_list(struct http_req *r)
{
	return list(r, false);
}

int e2b_sandbox_list_v2(struct http_req *r)
{
	return list(r, true);
}

/* ---- one sandbox ---- */

int e2b_sandbox_get(struct http_req *r)
{
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	struct view v;
	view_take(sb, &v);
	json_t *o = detail_obj(sb, &v);
	view_release(&v);
	sandbox_unref(sb);
	return o ? http_json(r, 200, o) : http_no_memory(r);
}

int e2b_sandbox_kill(struct http_req *r)
{
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = lifecycle_delete(sb, &err);
	sandbox_unref(sb);
	if (rc == -ENOENT) /* the SDK's kill() reads the code 404 as "not there": false */
		return e2b_error(r, 404, "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_empty(r, 204);
}

/* A new expiry for sb: at (0: none), as lifecycle_renew records it. */
static int set_expiry(struct http_req *r, struct sandbox *sb, time_t at)
{
	struct cell_error err = {0};
	int rc = lifecycle_renew(sb, at, &err);
	return rc < 0 ? (e2b_change_failed(r, rc, &err), rc) : 0;
}

/* POST /sandboxes/{id}/timeout {"timeout": seconds}: the sandbox ends that long from now
 * (shorter or longer than before). */
int e2b_sandbox_timeout(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	int64_t secs = 0;
	struct cell_error err = {0};
	if (field_int(body, "timeout", "timeout", 1, TIMEOUT_MAX, &secs, &err) <= 0) {
		json_decref(body);
		return e2b_error(r, 400, "%s", err.msg[0] ? err.msg : "timeout is required");
	}
	json_decref(body);
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	sandbox_touch(sb); /* a timeout set is activity too */
	int rc = set_expiry(r, sb, from_now(secs));
	sandbox_unref(sb);
	return rc < 0 ? 0 : http_empty(r, 204);
}

/* E2B's update of the policy in force: the whole of it replaced by the one translated
 * from the body (cls, moved). A sandbox without a network stays without: the replace
 * refuses it. */
static int replace_whole(struct netpolicy *p, bool has_network, void *cls, struct cell_error *err)
{
	(void)has_network;
	(void)err;
	struct netpolicy *asked = cls;
	netpolicy_free(p);
	*p = *asked;
	*asked = (struct netpolicy){0};
	return 1;
}

/* PUT /sandboxes/{id}/network {allowOut, denyOut, allow_internet_access, rules,
 * egressProxy}: the sandbox's egress replaced as a whole (an omitted field cleared), with
 * the create's translation, live (network_policy_edit: resolver, nftables, record, under
 * the lock OpenSandbox's edits take too). A sandbox without a network (created with
 * nothing allowed) cannot be given one: 409. */
int e2b_sandbox_network(struct http_req *r)
{
	static const char *const known[] = {"allowOut", "denyOut", "allow_internet_access", "rules",
					    "egressProxy"};
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	struct cell_error err = {0};
	struct netpolicy p = {0};
	json_t *policy = NULL;
	bool internet = true, parsed = false;
	size_t n = 0;
	const char *key;
	json_t *v;
	int rc = json_is_object(body) ? 0 : field_fail(&err, "the body must be an object");
	json_object_foreach(rc == 0 ? body : NULL, key, v)
	{
		size_t i = 0;
		while (i < CELL_ARRAY_SIZE(known) && strcmp(key, known[i]))
			i++;
		if (i == CELL_ARRAY_SIZE(known)) {
			rc = field_fail(&err, "%.64s: unknown field of a network update", key);
			break;
		}
	}
	if (rc == 0 && (field_bool(body, "allow_internet_access", "allow_internet_access",
				   &internet, &err) < 0 ||
			network_refused(body, "", &err) < 0 ||
			egress_policy(body, "", internet, &policy, &n, &err) < 0 ||
			netpolicy_from_json(policy, "network", &p, &err) < 0))
		rc = -EINVAL;
	parsed = rc == 0;
	json_decref(policy);
	if (!parsed) {
		err.code = EINVAL;
		http_internal(r, &err);
		json_decref(body);
		return 0;
	}
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb) {
		netpolicy_free(&p);
		json_decref(body);
		return 0;
	}
	registry_lock();
	bool running = state_running(sb->state);
	registry_unlock();
	if (!running) {
		e2b_error(r, 409, "Sandbox \"%s\" is paused: connect to it (resume it) first",
			  sb->id);
		goto out;
	}
	struct netpolicy now;
	rc = network_policy_edit(sb, replace_whole, &p, &now, &err);
	netpolicy_free(&now);
	/* A network decision: the audit log has the change asked and whether it took. */
	audit_log(sb->id, "network.policy",
		  json_pack("{s:s, s:O, s:b}", "op", "replace", "change", body, "ok", rc == 0));
	if (rc == 0)
		events_emit(sb->id, "network.policy", json_pack("{s:s}", "op", "replace"));
	if (rc == -ENOTSUP)
		e2b_error(r, 409,
			  "sandbox %s has no network (it was created with nothing allowed out): "
			  "its egress cannot be opened; create it with allow_internet_access or "
			  "network.allowOut instead (%s)",
			  sb->id, err.msg);
	else if (rc < 0)
		http_internal(r, &err);
	else
		http_empty(r, 204);
out:
	sandbox_unref(sb);
	netpolicy_free(&p);
	json_decref(body);
	return 0;
}

/* POST /sandboxes/{id}/refreshes {"duration": seconds}: the sandbox lives at least that
 * long from now (a later expiry is kept; none stays none). */
int e2b_sandbox_refresh(struct http_req *r)
{
	json_t *body;
	if (body_or_empty(r, &body) < 0)
		return 0;
	int64_t secs = 0;
	struct cell_error err = {0};
	if (field_int(body, "duration", "duration", 0, REFRESH_MAX, &secs, &err) < 0) {
		json_decref(body);
		return e2b_error(r, 400, "%s", err.msg);
	}
	json_decref(body);
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	sandbox_touch(sb);
	registry_lock();
	time_t cur = sb->expires_at;
	registry_unlock();
	time_t at = from_now(secs);
	int rc = cur && secs && at > cur ? set_expiry(r, sb, at) : 0;
	sandbox_unref(sb);
	return rc < 0 ? 0 : http_empty(r, 204);
}

/* POST /sandboxes/{id}/pause {"memory"?}: paused (frozen, memory kept), or with memory
 * false stopped (memory freed, disk kept, as E2B's filesystem-only pause). A paused sandbox
 * has no timeout, as on E2B: connect gives it one again. 409 when it is not running. */
int e2b_sandbox_pause(struct http_req *r)
{
	json_t *body;
	if (body_or_empty(r, &body) < 0)
		return 0;
	bool memory = true;
	struct cell_error err = {0};
	int rc = field_bool(body, "memory", "memory", &memory, &err);
	json_decref(body);
	if (rc < 0)
		return e2b_error(r, 400, "%s", err.msg);
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	rc = memory ? lifecycle_pause(sb, &err) : lifecycle_stop(sb, 0, "on request", &err);
	if (rc < 0) {
		e2b_change_failed(r, rc, &err);
		sandbox_unref(sb);
		return 0;
	}
	/* Paused it is, whatever becomes of the expiry (a change that raced in keeps it). */
	if (lifecycle_renew(sb, 0, &err) < 0)
		log_warn("sandbox %s: paused through E2B, its expiry kept: %s", sb->id, err.msg);
	sandbox_unref(sb);
	return http_empty(r, 204);
}

/* Start sb again unless it runs (memory false: from its disk, a paused one stopped first).
 * 0 with *resumed, or answered and -errno. */
static int wake(struct http_req *r, struct sandbox *sb, bool memory, bool *resumed)
{
	struct cell_error err = {0};
	registry_lock();
	enum sbx_state st = sb->state;
	registry_unlock();
	*resumed = false;
	if (state_running(st))
		return 0;
	int rc = 0;
	if (!memory && st == SBX_PAUSED && (rc = lifecycle_stop(sb, 0, "on request", &err)) < 0 &&
	    rc != -EALREADY)
		return e2b_change_failed(r, rc, &err), rc;
	rc = lifecycle_resume(sb, &err);
	if (rc == -EALREADY) /* another call woke it first */
		return 0;
	if (rc < 0)
		return e2b_change_failed(r, rc, &err), rc;
	*resumed = true;
	return 0;
}

/* The answer of resume and connect: the Sandbox, 201 when it was started. */
static int answer_sandbox(struct http_req *r, struct sandbox *sb, unsigned status)
{
	json_t *o = e2b_sandbox_json(sb, NULL);
	return o ? http_json(r, status, o) : http_no_memory(r);
}

/* The body of resume and connect: timeout (seconds) and memory. */
static int resume_body(struct http_req *r, int64_t *timeout, bool *has_timeout, bool *memory)
{
	json_t *body;
	if (body_or_empty(r, &body) < 0)
		return -EINVAL;
	struct cell_error err = {0};
	int t = field_int(body, "timeout", "timeout", 1, TIMEOUT_MAX, timeout, &err);
	int rc = t < 0 || field_bool(body, "memory", "memory", memory, &err) < 0 ? -EINVAL : 0;
	if (rc == 0 && present(body, "autoPause"))
		rc = field_fail(&err, "autoPause: a sandbox's timeout action is set at its "
				      "create");
	json_decref(body);
	*has_timeout = t > 0;
	if (rc < 0)
		e2b_error(r, 400, "%s", err.msg);
	return rc;
}

/* POST /sandboxes/{id}/resume (deprecated): a paused sandbox started again, 201; 409 when
 * it runs. */
int e2b_sandbox_resume(struct http_req *r)
{
	int64_t timeout = TIMEOUT_DEFAULT;
	bool has_timeout, memory = true, resumed;
	if (resume_body(r, &timeout, &has_timeout, &memory) < 0)
		return 0;
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	registry_lock();
	bool running = state_running(sb->state);
	registry_unlock();
	if (running)
		e2b_error(r, 409, "sandbox %s is running", sb->id);
	else if (wake(r, sb, memory, &resumed) == 0 && set_expiry(r, sb, from_now(timeout)) == 0)
		answer_sandbox(r, sb, 201);
	sandbox_unref(sb);
	return 0;
}

/* POST [v2/]sandboxes/{id}/connect {"timeout", "memory"?}: 200 for a running sandbox (its
 * expiry moved later when the timeout reaches further; none stays none), 201 for one
 * started again (its expiry the timeout from now). */
int e2b_sandbox_connect(struct http_req *r)
{
	int64_t timeout = TIMEOUT_DEFAULT;
	bool has_timeout, memory = true, resumed;
	if (resume_body(r, &timeout, &has_timeout, &memory) < 0)
		return 0;
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	sandbox_touch(sb);
	if (wake(r, sb, memory, &resumed) < 0) {
		sandbox_unref(sb);
		return 0;
	}
	registry_lock();
	time_t cur = sb->expires_at;
	registry_unlock();
	time_t at = from_now(timeout);
	int rc = 0;
	if (resumed || (cur && has_timeout && at > cur))
		rc = set_expiry(r, sb, at);
	if (rc == 0)
		answer_sandbox(r, sb, resumed ? 201 : 200);
	sandbox_unref(sb);
	return 0;
}

/* ---- metrics ---- */

int e2b_sample(struct sandbox *sb, struct e2b_sample *out)
{
	struct cell_cgroup_usage a, b;
	struct timespec t0, t1, pause = {0, SAMPLE_MS * 1000000L};
	if (!celld.cgroup->usage)
		return -ENOTSUP;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = celld.cgroup->usage(sb->cgroup_rel, &a, NULL);
	if (rc < 0)
		return rc;
	nanosleep(&pause, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if ((rc = celld.cgroup->usage(sb->cgroup_rel, &b, NULL)) < 0)
		return rc;
	double window = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
	memset(out, 0, sizeof(*out));
	out->at = time(NULL);
	out->cpu_count = cpu_count(sb);
	if (window > 0 && b.cpu_usec >= a.cpu_usec)
		out->cpu_used_pct =
		    (double)(b.cpu_usec - a.cpu_usec) / (window * out->cpu_count) * 100.0;
	if (out->cpu_used_pct > 100.0)
		out->cpu_used_pct = 100.0;
	out->mem_used = b.memory_current;
	out->mem_total = memory_total(sb);
	struct cell_quota_usage du;
	if (usage_disk(sb, &du)) {
		out->disk_used = du.used_bytes;
		out->disk_total = du.limit_bytes;
	}
	return 0;
}

/* GET /sandboxes/{id}/metrics?start&end: one sample taken now (cell keeps no history of
 * them) when now is within [start, end] (Unix seconds, either may be left out), else [];
 * [] too for a sandbox that has no cgroup (stopped). */
int e2b_sandbox_metrics(struct http_req *r)
{
	static const char *const bounds[] = {"start", "end"};
	int64_t range[2] = {0, INT64_MAX};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(bounds); i++) {
		const char *v = http_query(r, bounds[i]);
		if (v && parse_int64(v, 0, INT64_MAX, &range[i]) < 0)
			return e2b_error(r, 400, "%s must be a Unix time in seconds", bounds[i]);
	}
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	struct e2b_sample s;
	json_t *arr = json_array();
	int64_t now = time(NULL);
	if (arr && now >= range[0] && now <= range[1] && e2b_sample(sb, &s) == 0)
		json_array_append_new(
		    arr, json_pack("{s:o, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp",
				   celld_time_json(s.at), "timestampUnix", (json_int_t)s.at,
				   "cpuCount", (json_int_t)s.cpu_count, "cpuUsedPct",
				   s.cpu_used_pct, "memUsed", (json_int_t)s.mem_used, "memTotal",
				   (json_int_t)s.mem_total, "memCache", (json_int_t)0, "diskUsed",
				   (json_int_t)s.disk_used, "diskTotal", (json_int_t)s.disk_total));
	sandbox_unref(sb);
	return arr ? http_json(r, 200, arr) : http_no_memory(r);
}
