/* Lifecycle routes under /v1: create, list, get, delete, endpoints, inspect, renew,
 * metadata, info and the SDK's metrics events. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/quota.h"
#include "cell/version.h"
#include "api.h"
#include "usage.h"
#include "commands.h"
#include "config.h"
#include "images.h"
#include "snapshots.h"
#include "registry.h"
#include "network.h"
#include "provision.h"
#include "seccomp_log.h"
#include "secrets.h"
#include "seccomp_policy.h"
#include "timefmt.h"
#include "timer_policy.h"
#include "volumes.h"
#include "fields.h"
#include "resource_policy.h"
#include "http/url.h"
#include "admission.h"
#include "http/http.h"
#include "lifecycle.h"
#include "metafilter.h"
#include "sandbox.h"
#include "sandbox_select.h"
#include "tenancy.h"

#define TIMEOUT_MAX	(10LL * 365 * 24 * 3600)
#define SESSION_KEY_MAX 512
#define PAGE_SIZE_MAX	1000

/* metadata and env: create_metadata_caps, create_env_caps (create_spec.c). */
static const struct field_caps entrypoint_caps = {
    .items = 1024, .value_len = 32 << 10, .total = 64 << 10};
static const struct field_caps resource_limits_caps = {
    .items = 16, .key_len = 64, .value_len = 128, .total = 1 << 10};

static unsigned long metrics_events;

/* ---- the Sandbox JSON ---- */

/* What a sandbox's JSON shows, read under the registry lock in O(1): the json members are
 * immutable once published (metadata is replaced whole, never changed in place), so they
 * are shared by reference and serialised after the lock is released. */
struct sandbox_view {
	enum sbx_state state;
	time_t transition_at, expires_at;
	char *reason;
	json_t *metadata;
	json_t *provision_result;
};

static void view_take_locked(const struct sandbox *sb, struct sandbox_view *v)
{
	v->state = sb->state;
	v->transition_at = sb->transition_at;
	v->expires_at = sb->expires_at;
	v->reason = sb->reason ? strdup(sb->reason) : NULL;
	v->metadata = json_incref(sb->metadata);
	v->provision_result = json_incref(sb->provision_result);
}

static void view_release(struct sandbox_view *v)
{
	free(v->reason);
	json_decref(v->metadata);
	json_decref(v->provision_result);
}

/* status: {state, reason?, message?, lastTransitionAt}. A Stopped sandbox is reported as
 * Paused with reason "Stopped": OpenSandbox has no Stopped state, and its clients act on a
 * Paused one by resuming it, which is right for a Stopped one too (FastGPT's adapter maps
 * a state it does not know to an error and gives the session up). */
static json_t *status_json(const struct sandbox_view *v)
{
	bool stopped = v->state == SBX_STOPPED;
	json_t *status =
	    json_pack("{s:s, s:o}", "state", sandbox_state_name(stopped ? SBX_PAUSED : v->state),
		      "lastTransitionAt", celld_time_json(v->transition_at));
	if (!status)
		return NULL;
	if (stopped) {
		char msg[512];
		snprintf(msg, sizeof(msg),
			 "stopped%s%s: processes and memory are gone, the disk is kept; resume "
			 "(or any use) starts it again",
			 v->reason ? ", " : "", v->reason ? v->reason : "");
		json_object_set_new(status, "reason", json_string("Stopped"));
		json_object_set_new(status, "message", json_string(msg));
	} else if (v->reason) {
		json_object_set_new(status, "reason", json_string(v->reason));
		json_object_set_new(status, "message", json_string(v->reason));
	} else if (status && v->state == SBX_RUNNING && provision_reason(v->provision_result)) {
		/* Provisioning that went wrong does not fail a start: it is said here. */
		json_object_set_new(status, "reason",
				    json_string(provision_reason(v->provision_result)));
		json_object_set_new(status, "message",
				    json_string(provision_message(v->provision_result)));
	}
	return status;
}

static json_t *view_json(const struct sandbox *sb, const struct sandbox_view *v)
{
	json_t *status = status_json(v);
	json_t *o =
	    json_pack("{s:s, s:{s:s?}, s:o, s:O, s:o, s:o, s:o}", "id", sb->id, "image", "uri",
		      sb->image, "status", status, "metadata", v->metadata, "entrypoint",
		      sb->entrypoint ? json_incref(sb->entrypoint) : json_array(), "resourceLimits",
		      sb->resource_limits ? json_incref(sb->resource_limits) : json_object(),
		      "createdAt", celld_time_json(sb->created_at));
	if (o && v->expires_at)
		json_object_set_new(o, "expiresAt", celld_time_json(v->expires_at));
	if (o && sb->snapshot_id)
		json_object_set_new(o, "snapshotId", json_string(sb->snapshot_id));
	if (o && sb->name)
		json_object_set_new(o, "name", json_string(sb->name));
	/* A sandbox stays Running when its entrypoint ends (it is a computer, not a process):
	 * how the entrypoint's latest run is doing is said beside the state. */
	struct command *ep = cmd_table_entrypoint(sb->cmds);
	if (o && ep)
		json_object_set_new(o, "entrypointStatus", command_state_json(ep));
	command_unref(ep);
	return o;
}

static json_t *sandbox_json(struct sandbox *sb)
{
	struct sandbox_view v;
	registry_lock();
	view_take_locked(sb, &v);
	registry_unlock();
	json_t *o = view_json(sb, &v);
	view_release(&v);
	return o;
}

/* ---- create ---- */

/* cell.seccomp names a loaded profile (policies/seccomp/); cell.seccompLog "true" logs
 * the sandbox's denied calls. */
static int parse_seccomp(json_t *ext, struct create_spec *spec, struct cell_error *err)
{
	const char *name = NULL, *log = NULL;
	const char *log_field = "extensions.cell.seccompLog";
	if (field_string(ext, "cell.seccomp", "extensions.cell.seccomp", false, &name, err) < 0 ||
	    field_string(ext, "cell.seccompLog", log_field, false, &log, err) < 0)
		return -EINVAL;
	if (name && !seccomp_policy_exists(name)) {
		char names[256];
		seccomp_policy_names(names, sizeof(names));
		return field_fail(err, "extensions.cell.seccomp: no profile '%.64s' (have: %s)",
				  name, names);
	}
	if (log && strcmp(log, "true") && strcmp(log, "false"))
		return field_fail(err, "extensions.cell.seccompLog must be \"true\" or \"false\"");
	spec->seccomp_profile = name;
	spec->seccomp_log = log && !strcmp(log, "true");
	return 0;
}

/* A flag of cell's extensions, "true" or "false": 1 when given (*out set), 0 when not.
 * cell.sudo "true": no_new_privs stays off, so sudo and other set-user-ID programs raise
 * a command to the sandbox's root (cell-policy(5), SUDO). cell.codeInterpreter "true":
 * the code interpreter runs as the entrypoint, cell's own service when the image has none
 * (interp_service.h). */
static int parse_flag(json_t *ext, const char *key, bool *out, struct cell_error *err)
{
	char name[64];
	snprintf(name, sizeof(name), "extensions.%s", key);
	const char *v = NULL;
	if (field_string(ext, key, name, false, &v, err) < 0)
		return -EINVAL;
	if (v && strcmp(v, "true") && strcmp(v, "false"))
		return field_fail(err, "%s must be \"true\" or \"false\"", name);
	if (v)
		*out = !strcmp(v, "true");
	return v ? 1 : 0;
}

/* Every refusal of a field is -EINVAL, whatever errno the helper that found it used. */
static int invalid(int rc, struct cell_error *err)
{
	if (rc >= 0)
		return rc;
	err->code = EINVAL;
	return -EINVAL;
}

/* cell's extensions. over_tcp: the request came with an API key, which may never mount
 * host paths (-EPERM): only the local socket may. */
/* extensions["cell.pullPolicy"]: IfNotPresent (the default), Always or Never. */
static int parse_pull_policy(json_t *ext, struct create_spec *spec, struct cell_error *err)
{
	const char *p = NULL;
	if (field_string(ext, "cell.pullPolicy", "extensions.cell.pullPolicy", false, &p, err) < 0)
		return -EINVAL;
	if (!p || !strcmp(p, "IfNotPresent"))
		spec->pull = CREATE_PULL_IF_NOT_PRESENT;
	else if (!strcmp(p, "Always"))
		spec->pull = CREATE_PULL_ALWAYS;
	else if (!strcmp(p, "Never"))
		spec->pull = CREATE_PULL_NEVER;
	else
		return field_fail(
		    err, "extensions.cell.pullPolicy must be IfNotPresent, Always or Never");
	return 0;
}

/* image.auth {username, password}: the registry credentials of this pull alone. */
static int parse_image_auth(json_t *image, struct create_spec *spec, struct cell_error *err)
{
	json_t *auth = json_object_get(image, "auth");
	if (!auth || json_is_null(auth))
		return 0;
	if (!json_is_object(auth))
		return field_fail(err, "image.auth must be an object {username, password}");
	if (field_string(auth, "username", "image.auth.username", true, &spec->pull_user, err) <
		0 ||
	    field_string(auth, "password", "image.auth.password", true, &spec->pull_password, err) <
		0)
		return -EINVAL;
	if (!spec->pull_user[0] || strlen(spec->pull_user) > 255 ||
	    strlen(spec->pull_password) > 1023)
		return field_fail(err, "image.auth.username must be 1-255 bytes and "
				       "image.auth.password at most 1023");
	return 0;
}

/* extensions cell.name: docker's names, [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most NAME_MAX_LEN,
 * so a name is never an id's prefix by accident of punctuation and never a path. Its
 * uniqueness is the registry's, checked at publish. */
#define NAME_MAX_LEN 64
static int parse_name(json_t *ext, struct create_spec *spec, struct cell_error *err)
{
	const char *name = NULL;
	int r = field_string(ext, "cell.name", "extensions.cell.name", false, &name, err);
	if (r <= 0)
		return r < 0 ? -EINVAL : 0;
	size_t len = strlen(name);
	bool ok =
	    len > 0 && len <= NAME_MAX_LEN && isalnum((unsigned char)name[0]) &&
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
		len;
	if (!ok)
		return field_fail(err,
				  "extensions.cell.name '%.80s': expected 1-%d characters of "
				  "[a-zA-Z0-9_.-], the first a letter or digit",
				  name, NAME_MAX_LEN);
	spec->name = name;
	return 0;
}

static int parse_extensions(json_t *body, bool over_tcp, struct create_spec *spec,
			    struct cell_error *err)
{
	json_t *ext = NULL;
	if (field_string_map(body, "extensions", "extensions", &ext, err) < 0)
		return -EINVAL;
	if (!ext) { /* the policy's timers; secrets from secretEnv alone */
		if (timer_policy_resolve(NULL, &spec->timers, err) < 0)
			return -EINVAL;
		return secrets_parse(json_object_get(body, "secretEnv"), NULL, &spec->secrets, err);
	}
	int rc = 0;
	const char *key = NULL, *vols = NULL;
	/* Keys of other providers are theirs; a "cell." key cell does not know (a typo) would
	 * otherwise be dropped without a word. */
	static const char *const known[] = {
	    "cell.sessionKey",	    "cell.volumes",   "cell.seccomp",	    "cell.seccompLog",
	    "cell.network",	    "cell.secrets",   "cell.idleTimeout",   "cell.stopAfter",
	    "cell.reclaimAfter",    "cell.onTimeout", "cell.startupScript", "cell.startupTimeout",
	    "cell.packages",	    "cell.skills",    "cell.sudo",	    "cell.pullPolicy",
	    "cell.codeInterpreter", "cell.name"};
	const char *k;
	json_t *v;
	json_object_foreach(ext, k, v)
	{
		if (rc || strncmp(k, "cell.", 5))
			continue;
		bool found = false;
		for (size_t i = 0; i < CELL_ARRAY_SIZE(known); i++)
			found = found || !strcmp(k, known[i]);
		if (!found)
			rc = field_fail(err, "extensions.%.64s is not one of cell's extensions", k);
	}
	if (!rc && field_string(ext, "cell.sessionKey", "extensions.cell.sessionKey", false, &key,
				err) > 0) {
		if (!key[0] || strlen(key) > SESSION_KEY_MAX)
			rc = field_fail(err, "extensions.cell.sessionKey must be 1-%d bytes",
					SESSION_KEY_MAX);
		spec->session_key = key;
	}
	if (!rc)
		rc = parse_name(ext, spec, err);
	if (!rc &&
	    field_string(ext, "cell.volumes", "extensions.cell.volumes", false, &vols, err) > 0) {
		if (over_tcp)
			rc = cell_err_msg(err, EPERM,
					  "extensions.cell.volumes is only accepted on the Unix "
					  "socket");
		else
			rc = invalid(volumes_parse(vols, spec, err), err);
	}
	if (!rc)
		rc = invalid(parse_seccomp(ext, spec, err), err);
	if (!rc && (rc = invalid(parse_flag(ext, "cell.sudo", &spec->sudo, err), err)) > 0)
		rc = 0;
	int interp = 0;
	if (!rc &&
	    (interp = invalid(
		 parse_flag(ext, "cell.codeInterpreter", &spec->interpreter_asked, err), err)) < 0)
		rc = interp;
	if (!rc && interp && spec->snapshot)
		rc = field_fail(err, "extensions.cell.codeInterpreter is for an image: a sandbox "
				     "made from a snapshot runs what its source ran");
	if (!rc)
		rc = parse_pull_policy(ext, spec, err);
	if (!rc && field_string(ext, "cell.network", "extensions.cell.network", false,
				&spec->network_mode, err) < 0)
		rc = -EINVAL;
	if (!rc)
		rc = timer_policy_resolve(ext, &spec->timers, err);
	const char *secrets = NULL;
	if (!rc &&
	    (field_string(ext, "cell.secrets", "extensions.cell.secrets", false, &secrets, err) <
		 0 ||
	     secrets_parse(json_object_get(body, "secretEnv"), secrets, &spec->secrets, err) < 0))
		rc = -EINVAL;
	/* A skill that is not registered: -ENOPKG, answered SKILL_NOT_FOUND. */
	if (!rc && (rc = provision_parse(ext, spec->owner, &spec->provision, err)) == -ENOENT)
		rc = -ENOPKG;
	/* The strings stay valid: body (their owner) outlives the spec. */
	json_decref(ext);
	return rc;
}

/* ---- fields of the API that cell cannot honour ---- */

static bool present(json_t *body, const char *key)
{
	json_t *v = json_object_get(body, key);
	return v && !json_is_null(v);
}

/* platform: the host's, or nothing can satisfy it. */
static int check_platform(json_t *pf, struct cell_error *err)
{
	if (!json_is_object(pf))
		return field_fail(err, "platform must be an object");
	const char *os = NULL, *arch = NULL;
	if (field_string(pf, "os", "platform.os", false, &os, err) < 0 ||
	    field_string(pf, "arch", "platform.arch", false, &arch, err) < 0)
		return -EINVAL;
#if defined(__x86_64__)
	static const char host_arch[] = "amd64";
#elif defined(__aarch64__)
	static const char host_arch[] = "arm64";
#else
	static const char host_arch[] = "";
#endif
	if (os && strcmp(os, "linux"))
		return field_fail(
		    err, "platform.os '%.32s' cannot be honoured: sandboxes run on linux", os);
	if (arch && strcmp(arch, host_arch))
		return field_fail(err,
				  "platform.arch '%.32s' cannot be honoured: this host runs %s",
				  arch, host_arch[0] ? host_arch : "another architecture");
	return 0;
}

/* A field of the create request cell does not honour is refused by name, never dropped
 * (the SDK sends env, metadata, extensions, resourceLimits and secureAccess:false on every
 * create: those are honoured). Fields the API does not define are ignored. */
static int check_unsupported(json_t *body, struct cell_error *err)
{
	json_t *v;
	if ((v = json_object_get(body, "secureAccess")) && !json_is_null(v)) {
		if (!json_is_boolean(v))
			return field_fail(err, "secureAccess must be a boolean");
		if (json_is_true(v))
			return field_fail(err, "secureAccess: true is not supported (endpoints are "
					       "reached through celld, with its API key)");
	}
	if ((v = json_object_get(body, "resourceRequests")) && !json_is_null(v) &&
	    !(json_is_object(v) && !json_object_size(v)))
		return field_fail(err, "resourceRequests: cell reserves nothing ahead; give "
				       "resourceLimits");
	if (present(body, "credentialProxy"))
		return field_fail(err, "credentialProxy: cell has no credential proxy");
	if (present(body, "platform") && check_platform(json_object_get(body, "platform"), err) < 0)
		return -EINVAL;
	return 0;
}

/* ---- a create with snapshotId ---- */

/* The snapshot (its meta kept in spec->snapshot) and its image: -ESRCH when there is no
 * such snapshot (400 SNAPSHOT_NOT_FOUND). */
static int snapshot_source(json_t *body, struct create_spec *spec, struct cell_error *err)
{
	const char *sid = NULL;
	if (field_string(body, "snapshotId", "snapshotId", true, &sid, err) < 0)
		return -EINVAL;
	int r = snapshot_get(spec->owner, sid, &spec->snapshot, err);
	if (r == -ENOENT)
		return -ESRCH;
	if (r < 0)
		return r;
	spec->image = json_string_value(json_object_get(spec->snapshot, "image"));
	return 0;
}

/* What the request leaves out comes from the snapshot's source (create_snapshot_defaults);
 * the entrypoint is OpenSandbox's default for a restore: tail -f /dev/null. */
static int snapshot_defaults(struct create_spec *spec, struct cell_error *err)
{
	if (!spec->entrypoint &&
	    !(spec->entrypoint = json_pack("[s, s, s]", "tail", "-f", "/dev/null")))
		return cell_err(err, ENOMEM, "create from snapshot");
	return create_snapshot_defaults(spec, err);
}

/* The source's network policy, seccomp profile and sudo, unless the request names its
 * own. */
static void snapshot_record(json_t *body, struct create_spec *spec)
{
	json_t *ext = json_object_get(body, "extensions");
	unsigned named = 0;
	if (present(body, "networkPolicy") || json_object_get(ext, "cell.network"))
		named |= CREATE_NAMED_NETWORK;
	if (json_object_get(ext, "cell.seccomp"))
		named |= CREATE_NAMED_SECCOMP;
	if (json_object_get(ext, "cell.sudo"))
		named |= CREATE_NAMED_SUDO;
	create_snapshot_record(spec, named);
}

/* The create request into spec: 0, -EINVAL (err names the field), -EPERM (see
 * parse_extensions), -ENOENT (image.uri names no local image), or what limits_resolve
 * and image_resolve say of the host. */
static int parse_create(json_t *body, bool over_tcp, struct create_spec *spec,
			struct cell_error *err)
{
	if (check_unsupported(body, err) < 0)
		return -EINVAL;
	json_t *image = json_object_get(body, "image");
	bool from_snapshot = present(body, "snapshotId");
	if (from_snapshot && image && !json_is_null(image))
		return field_fail(err, "image and snapshotId: give exactly one of them");
	if (from_snapshot) {
		int sr = snapshot_source(body, spec, err);
		if (sr < 0)
			return sr;
	} else {
		if (!image || json_is_null(image))
			return field_fail(err, "image or snapshotId is required");
		if (!json_is_object(image))
			return field_fail(err, "image must be an object");
		if (field_string(image, "uri", "image.uri", true, &spec->image, err) < 0 ||
		    parse_image_auth(image, spec, err) < 0)
			return -EINVAL;
	}
	int64_t timeout = 0;
	if (field_string_array(body, "entrypoint", "entrypoint", &spec->entrypoint, err) < 0 ||
	    field_int(body, "timeout", "timeout", 60, TIMEOUT_MAX, &timeout, err) < 0 ||
	    field_string_map(body, "env", "env", &spec->env, err) < 0 ||
	    field_string_map(body, "metadata", "metadata", &spec->metadata, err) < 0 ||
	    field_string_map(body, "resourceLimits", "resourceLimits", &spec->resource_limits,
			     err) < 0 ||
	    (spec->env && create_check_env(spec->env, "env", err) < 0))
		return -EINVAL;
	if ((spec->entrypoint &&
	     field_check_array_caps(spec->entrypoint, "entrypoint", &entrypoint_caps, err) < 0) ||
	    (spec->metadata &&
	     field_check_map_caps(spec->metadata, "metadata", &create_metadata_caps, err) < 0) ||
	    (spec->resource_limits && field_check_map_caps(spec->resource_limits, "resourceLimits",
							   &resource_limits_caps, err) < 0))
		return -EINVAL;
	if (from_snapshot && snapshot_defaults(spec, err) < 0)
		return -EINVAL;
	int rc = limits_resolve(spec->resource_limits, &spec->limits, true, err);
	if (rc == 0 && from_snapshot)
		rc = create_snapshot_disk(spec, err);
	if (rc < 0)
		return rc;
	spec->timeout = timeout;
	rc = parse_extensions(body, over_tcp, spec, err);
	json_t *np = json_object_get(body, "networkPolicy");
	if (rc == 0)
		rc = invalid(network_spec(spec->network_mode, json_is_null(np) ? NULL : np,
					  spec->resource_limits, &spec->network, err),
			     err);
	if (rc == 0 && from_snapshot)
		snapshot_record(body, spec);
	if (rc == 0)
		rc = invalid(
		    volumes_parse_api(json_object_get(body, "volumes"), over_tcp, spec, err), err);
	if (rc == 0)
		rc = invalid(volumes_finish(spec, err), err);
	if (rc < 0)
		return rc;
	if (from_snapshot)
		return create_snapshot_rootfs(spec, "snapshotId", err); /* 400 IMAGE_NOT_FOUND */
	/* Last: the only check that looks at the host. A name that is not valid names no
	 * image either. */
	rc = create_spec_image(spec, err);
	if (rc == -EINVAL)
		err->code = ENOENT;
	return rc == -EINVAL ? -ENOENT : rc;
}

int api_sandbox_create(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	struct create_spec spec = {.owner = http_principal(r)};
	struct cell_error err = {0};
	int rc = parse_create(body, http_is_tcp(r), &spec, &err);
	/* The OpenSandbox API answers an image the host does not have as a bad argument of
	 * the create (400 IMAGE_NOT_FOUND), not as a missing resource. */
	if (rc == -ENOENT)
		http_fail(r, EINVAL, "IMAGE_NOT_FOUND", "%s", err.msg);
	else if (rc == -ENOPKG)
		http_fail(r, EINVAL, "SKILL_NOT_FOUND", "%s", err.msg);
	else if (rc == -ESRCH) /* the same, as the spec lists no 404 for a create */
		http_error(r, 400, "SNAPSHOT_NOT_FOUND", "%s", err.msg);
	else if (rc < 0)
		http_internal(r, &err);
	if (rc < 0) {
		create_spec_free(&spec);
		json_decref(body);
		return 0;
	}
	struct sandbox *sb;
	bool created;
	rc = lifecycle_create(&spec, &sb, &created, &err);
	json_decref(body);
	if (rc < 0) {
		create_spec_free(&spec);
		return http_internal(r, &err);
	}
	json_t *o = sandbox_json(sb);
	/* cell's own, on the create's answer only: what the client should know about what it
	 * asked for (a volume whose ids were mapped otherwise than it may expect). */
	if (o && created && json_array_size(spec.warnings))
		json_object_set(o, "warnings", spec.warnings);
	create_spec_free(&spec);
	http_json(r, created ? 202 : 200, o);
	sandbox_unref(sb);
	return 0;
}

/* ---- list ---- */

/* A page of the list, streamed: the page's entries are chosen (and the totals counted)
 * once, under the registry lock but without copying anything; each item's JSON is then
 * built when the client is ready for it. However large the page and its metadata, a slow
 * client holds one item's text and the page's references, never the whole body. */
struct list_stream {
	struct sandbox **page; /* referenced */
	size_t n, next;
	char *tail; /* "],\"pagination\":{...}}" */
	char *text; /* the piece being sent */
	size_t off, len;
	bool started, done;
};

static void list_stream_free(void *cls)
{
	struct list_stream *ls = cls;
	sandbox_unref_all(ls->page, ls->n);
	free(ls->tail);
	free(ls->text);
	free(ls);
}

/* The next piece of the body into ls->text; false at the end (or out of memory, which cuts
 * the body short: the client sees invalid JSON rather than a wrong list). */
static bool list_next_piece(struct list_stream *ls)
{
	free(ls->text);
	ls->text = NULL;
	ls->off = ls->len = 0;
	if (!ls->started) {
		ls->started = true;
		ls->text = strdup("{\"items\":[");
	} else if (ls->next < ls->n) {
		json_t *o = sandbox_json(ls->page[ls->next]);
		char *item = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (item && asprintf(&ls->text, "%s%s", ls->next ? "," : "", item) < 0)
			ls->text = NULL;
		free(item);
		ls->next++;
	} else if (!ls->done) {
		ls->done = true;
		ls->text = ls->tail;
		ls->tail = NULL;
	}
	if (!ls->text)
		return false;
	ls->len = strlen(ls->text);
	return true;
}

static ssize_t list_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct list_stream *ls = cls;
	while (ls->off == ls->len)
		if (!list_next_piece(ls))
			return ls->done ? MHD_CONTENT_READER_END_OF_STREAM
					: MHD_CONTENT_READER_END_WITH_ERROR;
	size_t n = ls->len - ls->off < max ? ls->len - ls->off : max;
	memcpy(buf, ls->text + ls->off, n);
	ls->off += n;
	return (ssize_t)n;
}

struct list_query {
	enum sbx_state want[16];
	size_t n_states;
	json_t *filter;
	int64_t page, page_size;
	const struct adm_principal *who; /* who asks: only what it sees (tenancy.h) */
};

static bool list_matches_locked(const struct sandbox *sb, void *cls)
{
	const struct list_query *q = cls;
	if (!tenancy_sees(q->who, sb->owner))
		return false;
	bool ok = q->n_states == 0;
	/* A Stopped sandbox is reported Paused (status_json): state=Paused finds it too. */
	for (size_t k = 0; k < q->n_states; k++)
		ok |= sb->state == q->want[k] ||
		      (q->want[k] == SBX_PAUSED && sb->state == SBX_STOPPED);
	return ok && (!q->filter || metafilter_matches(sb->metadata, q->filter));
}

static int list_parse(struct http_req *r, struct list_query *q)
{
	const char *states[CELL_ARRAY_SIZE(q->want)];
	q->n_states = http_query_all(r, "state", states, CELL_ARRAY_SIZE(states));
	for (size_t i = 0; i < q->n_states; i++)
		if (sandbox_state_parse(states[i], &q->want[i]) < 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "state '%.32s' is not one of Pending, Running, Paused, "
					  "Stopped, Failed",
					  states[i]),
			       -EINVAL;
	q->page = 1;
	q->page_size = 20;
	const char *p = http_query(r, "page"), *ps = http_query(r, "pageSize");
	if (p && parse_int64(p, 1, INT_MAX, &q->page) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "page must be an integer >= 1"),
		       -EINVAL;
	if (ps && parse_int64(ps, 1, PAGE_SIZE_MAX, &q->page_size) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "pageSize must be between 1 and %d",
				  PAGE_SIZE_MAX),
		       -EINVAL;
	struct cell_error err = {0};
	const char *md = http_query(r, "metadata");
	if (md && metafilter_parse(md, false, &q->filter, &err) < 0)
		return http_internal(r, &err), -EINVAL;
	return 0;
}

int api_sandbox_list(struct http_req *r)
{
	struct list_query q = {.who = http_principal(r)};
	if (list_parse(r, &q) < 0)
		return 0;
	struct list_stream *ls = calloc(1, sizeof(*ls));
	struct sandbox_page page;
	if (!ls ||
	    sandbox_select(list_matches_locked, &q, false, (size_t)((q.page - 1) * q.page_size),
			   (size_t)q.page_size, &page) < 0) {
		free(ls);
		json_decref(q.filter);
		return http_no_memory(r);
	}
	json_decref(q.filter);
	ls->page = page.v;
	ls->n = page.n;
	int64_t total = (int64_t)page.total;
	int64_t pages = (total + q.page_size - 1) / q.page_size;
	if (asprintf(&ls->tail,
		     "],\"pagination\":{\"page\":%lld,\"pageSize\":%lld,\"totalItems\":%lld,"
		     "\"totalPages\":%lld,\"hasNextPage\":%s}}",
		     (long long)q.page, (long long)q.page_size, (long long)total, (long long)pages,
		     q.page < pages ? "true" : "false") < 0) {
		ls->tail = NULL;
		list_stream_free(ls);
		return http_no_memory(r);
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 64 << 10, list_read, ls, list_stream_free);
	if (!resp) {
		list_stream_free(ls);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return http_respond(r, 200, resp);
}

/* ---- one sandbox ---- */

int api_sandbox_get(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	json_t *o = sandbox_json(sb);
	/* What the cgroup's own counters say (absent when the sandbox has no cgroup). */
	struct cell_quota_usage du;
	json_t *usage = usage_json(sb, usage_disk(sb, &du) ? &du : NULL);
	if (o && usage)
		json_object_set_new(o, "usage", usage);
	else
		json_decref(usage);
	http_json(r, 200, o);
	sandbox_unref(sb);
	return 0;
}

int api_sandbox_delete(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = lifecycle_delete(sb, &err);
	sandbox_unref(sb);
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "SANDBOX_NOT_FOUND", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_empty(r, 204);
}

/* The Host header is echoed back in endpoints: only a plain host[:port] is accepted. */
static const char *endpoint_host(struct http_req *r)
{
	const char *h = http_header(r, "Host");
	if (!h || !h[0] || strlen(h) > 255)
		return "localhost";
	for (const char *p = h; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]_",
			    *p))
			return "localhost";
	return h;
}

int api_sandbox_endpoint(struct http_req *r)
{
	int64_t port;
	if (parse_int64(http_param(r, 1), 1, 65535, &port) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "port must be between 1 and 65535");
	/* OpenSandbox's signed endpoint: a token that dies after the Unix second expires. */
	const char *exp_text = http_query(r, "expires");
	uint64_t expires = 0;
	if (exp_text) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(exp_text, &end, 10);
		if (!exp_text[0] || *end || errno || !isdigit((unsigned char)exp_text[0]) ||
		    (exp_text[0] == '0' && exp_text[1]) || strlen(exp_text) > 20 || v == 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "expires must be a Unix time in seconds (1 to 2^64-1)");
		const char *proxy = http_query(r, "use_server_proxy");
		if (proxy && !strcmp(proxy, "true"))
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "expires cannot be combined with use_server_proxy=true");
		if (port == 44772 || port == 18080)
			return http_error(
			    r, 400, "INVALID_ARGUMENT",
			    "expires is for an app's port: port %lld takes the API key",
			    (long long)port);
		expires = v;
	}
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	char ep[512];
	/* execd's and egress's ports: celld's own routes, with the API key. */
	if (port == 44772 || port == 18080) {
		snprintf(ep, sizeof(ep), "%s/v1/sandboxes/%s/proxy/%lld", endpoint_host(r), sb->id,
			 (long long)port);
		sandbox_unref(sb);
		return http_json(r, 200, json_pack("{s:s}", "endpoint", ep));
	}
	/* An app's port, for a browser too: over the Unix socket the Host means nothing, so
	 * the TCP listener's address is named. */
	const char *host = endpoint_host(r);
	char listen_host[96];
	if (!http_is_tcp(r) && celld.listen) {
		/* A wildcard address is this host's loopback too. */
		const char *colon = strrchr(celld.listen, ':');
		bool any =
		    !strncmp(celld.listen, "0.0.0.0:", 8) || !strncmp(celld.listen, "[::]:", 5);
		snprintf(listen_host, sizeof(listen_host), "%s%s", any ? "localhost" : celld.listen,
			 any && colon ? colon : "");
		host = listen_host;
	}
	json_t *o = api_preview_endpoint(r, sb->id, (unsigned)port, host, expires);
	sandbox_unref(sb);
	if (!o)
		return http_error(r, 500, "INTERNAL", "making the preview token failed");
	return http_json(r, 200, o);
}

static json_t *namespaces_json(pid_t pid)
{
	static const char *const kinds[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
	json_t *o = json_object();
	for (size_t i = 0; i < CELL_ARRAY_SIZE(kinds); i++) {
		char path[64], link[128];
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, kinds[i]);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		json_object_set_new(o, kinds[i], json_string(link));
	}
	return o;
}

int api_sandbox_inspect(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	registry_lock();
	pid_t pid = sb->pid;
	uint64_t st = sb->starttime;
	json_t *o = json_pack("{s:s, s:s, s:s?, s:o, s:s, s:s?}", "id", sb->id, "state",
			      sandbox_state_name(sb->state), "image", sb->image, "createdAt",
			      celld_time_json(sb->created_at), "dir", sb->dir, "sessionKey",
			      sb->session_key);
	/* A store image: its digest and layers (what the sandbox's files sit on). */
	if (o && sb->image_digest)
		json_object_set_new(o, "imageDigest", json_string(sb->image_digest));
	if (o && sb->image_layers)
		json_object_set_new(o, "imageLayers", json_incref(sb->image_layers));
	registry_unlock();
	/* Only a pid that is still the recorded init is described (never a recycled one). */
	bool alive = pid > 0 && st && cell_proc_starttime(pid) == st;
	json_t *map = json_pack("{s:i, s:I, s:I}", "insideStart", 0, "hostStart",
				(json_int_t)sb->uid_base, "length", (json_int_t)CELL_UID_RANGE);
	json_object_set_new(o, "pid", alive ? json_integer(pid) : json_null());
	json_object_set_new(o, "uidMap", json_deep_copy(map));
	json_object_set_new(o, "gidMap", map);
	json_object_set_new(o, "namespaces", alive ? namespaces_json(pid) : json_object());
	char path[512];
	celld.cgroup->describe(sb->cgroup_rel, path, sizeof(path));
	json_object_set_new(o, "cgroup",
			    json_pack("{s:s, s:s}", "backend", celld.cgroup->name, "path", path));
	json_t *pids = json_array();
	pid_t *list = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	if (celld.cgroup->list_pids(sb->cgroup_rel, &list, &n, &err) == 0)
		for (size_t i = 0; i < n; i++)
			json_array_append_new(pids, json_integer(list[i]));
	free(list);
	json_object_set_new(o, "pids", pids);
	/* The limits as enforced (policy defaults filled in; 0 = unlimited) and the usage. */
	json_object_set_new(o, "limits", limits_json(&sb->limits));
	/* One reading of the writable layer serves both "usage" and "disk". */
	struct cell_quota_usage du;
	bool have_du = usage_disk(sb, &du);
	json_t *usage = usage_json(sb, have_du ? &du : NULL);
	if (usage)
		json_object_set_new(o, "usage", usage);
	if (have_du) {
		json_t *disk =
		    json_pack("{s:s, s:I, s:I, s:I}", "quota", cell_quota_kind_name(du.kind),
			      "limitBytes", (json_int_t)du.limit_bytes, "usedBytes",
			      (json_int_t)du.used_bytes, "availBytes", (json_int_t)du.avail_bytes);
		json_object_set_new(o, "disk", disk);
	}
	if (sb->volumes)
		json_object_set_new(o, "volumes", json_deep_copy(sb->volumes));
	json_object_set_new(o, "seccomp",
			    seccomp_log_json(sb->id, sb->seccomp_profile, sb->seccomp_log));
	json_object_set_new(o, "sudo", json_boolean(sb->sudo));
	json_object_set_new(o, "network", network_inspect_json(sb));
	registry_lock();
	struct sbx_timers timers = sb->timers;
	registry_unlock();
	json_object_set_new(o, "timers", timer_policy_json(&timers));
	/* The names of its secrets, never their values. */
	json_object_set_new(o, "secretNames", secrets_names(sb->dirfd));
	json_object_set_new(o, "provision", provision_inspect_json(sb));
	sandbox_unref(sb);
	return http_json(r, 200, o);
}

int api_sandbox_renew(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	json_t *body = NULL;
	const char *text;
	time_t t;
	struct cell_error err = {0};
	if (http_json_body(r, &body) < 0)
		goto out;
	if (field_string(body, "expiresAt", "expiresAt", true, &text, &err) < 0) {
		http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
		goto out;
	}
	if (celld_parse_time(text, &t) < 0) {
		http_error(r, 400, "INVALID_ARGUMENT", "expiresAt must be an RFC 3339 time");
		goto out;
	}
	if (t <= time(NULL)) {
		http_error(r, 400, "INVALID_ARGUMENT", "expiresAt must be in the future");
		goto out;
	}
	sandbox_touch(sb); /* a renewal is activity too */
	int rc = lifecycle_renew(sb, t, &err);
	if (rc == -EBUSY) {
		http_error(r, 409, "CONFLICT", "%s", err.msg);
		goto out;
	}
	if (rc < 0) {
		http_internal(r, &err);
		goto out;
	}
	http_json(r, 200, json_pack("{s:o}", "expiresAt", celld_time_json(t)));
out:
	json_decref(body);
	sandbox_unref(sb);
	return 0;
}

int api_sandbox_patch_metadata(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	json_t *body = NULL;
	struct cell_error err = {0};
	if (http_json_body(r, &body) < 0)
		goto out;
	bool saved = lifecycle_patch_metadata(sb, body, &create_metadata_caps, &err) == 0;
	if (saved)
		http_json(r, 200, sandbox_json(sb));
	else
		http_internal(r, &err);
out:
	json_decref(body);
	sandbox_unref(sb);
	return 0;
}

/* The answer to a state change that returned rc: 202 once the new state holds (the work is
 * synchronous); 409 with conflict (the OpenSandbox server's code) when the sandbox is not
 * in a state the call can start from. */
static int answer_change(struct http_req *r, int rc, const char *conflict,
			 const struct cell_error *err)
{
	if (rc == -EALREADY || rc == -EBUSY)
		return http_fail(r, -rc, conflict, "%s", err->msg);
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "SANDBOX_NOT_FOUND", "%s", err->msg);
	if (rc < 0)
		return http_internal(r, err);
	return http_empty(r, 202);
}

int api_sandbox_pause(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = lifecycle_pause(sb, &err);
	sandbox_unref(sb);
	return answer_change(r, rc, "DOCKER::SANDBOX_NOT_RUNNING", &err);
}

int api_sandbox_resume(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = lifecycle_resume(sb, &err);
	sandbox_unref(sb);
	return answer_change(r, rc, "DOCKER::SANDBOX_NOT_PAUSED", &err);
}

/* Stopped: processes ended, memory and cgroup freed, disk kept. ?timeout=N gives a running
 * sandbox's processes SIGTERM and N seconds to end before they are killed (docker's stop
 * -t); without it they are killed at once, as a client that knows nothing of it expects. */
int api_sandbox_stop(struct http_req *r)
{
	int64_t grace = 0;
	const char *t = http_query(r, "timeout");
	if (t && parse_int64(t, 0, LIFECYCLE_STOP_GRACE_MAX, &grace) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "timeout must be a number of seconds from 0 to %d",
				  LIFECYCLE_STOP_GRACE_MAX);
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = lifecycle_stop(sb, (unsigned)grace, "on request", &err);
	sandbox_unref(sb);
	return answer_change(r, rc, "DOCKER::SANDBOX_NOT_RUNNING", &err);
}

/* The idle timer starts again (a paused or stopped sandbox stays so: its next use wakes
 * it, and its stop or reclaim timer starts again too). */
int api_sandbox_keepalive(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	sandbox_touch(sb);
	registry_lock();
	struct sbx_timers t = sb->timers;
	registry_unlock();
	json_t *o = json_pack("{s:o, s:o}", "lastActivityAt",
			      celld_time_json((time_t)sandbox_active_at(sb)), "timers",
			      timer_policy_json(&t));
	sandbox_unref(sb);
	return http_json(r, 200, o);
}

int api_metrics_event(struct http_req *r)
{
	__atomic_add_fetch(&metrics_events, 1, __ATOMIC_RELAXED);
	return http_empty(r, 204);
}

int api_info(struct http_req *r)
{
	uint64_t kept, budget;
	cmd_output_usage(&kept, &budget);
	return http_json(r, 200,
			 json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:{s:I, s:I}, s:o}", "version",
				   CELL_VERSION, "cgroup", celld.cgroup->name, "stateDir",
				   celld.state_dir, "imagesDir", celld.images_dir, "sandboxes",
				   (json_int_t)registry_count(), "metricsEvents",
				   (json_int_t)__atomic_load_n(&metrics_events, __ATOMIC_RELAXED),
				   "output", "keptBytes", (json_int_t)kept, "budgetBytes",
				   (json_int_t)budget, "quotas", admission_json()));
}
