/* The format of state.json, one place: a sandbox's record encoded to JSON and decoded back,
 * every member checked, an error naming the first one that is wrong. Plain data in and
 * out (record.h); reading and writing the file, and the sandbox object, are store.c's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "timefmt.h"
#include "uidrange.h"
#include "sandbox.h"

#define PID_MAX_RECORDED (1 << 22) /* the kernel's PID_MAX_LIMIT */

/* A JSON value for a borrowed member: a new reference, or null. */
static json_t *ref_or_null(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

static json_t *limits_encode(const struct cell_limits *l)
{
	/* The shape of inspect's limits (limits_json); socketMemoryBytes null where socket
	 * buffers count in memoryBytes (cgroup v2), or the sandbox predates their limit. */
	return json_pack("{s:I, s:I, s:I, s:I, s:o}", "cpuMillis", (json_int_t)l->cpu_millis,
			 "memoryBytes", (json_int_t)l->memory_bytes, "pids", (json_int_t)l->pids,
			 "diskBytes", (json_int_t)l->disk_bytes, "socketMemoryBytes",
			 l->socket_bytes ? json_integer((json_int_t)l->socket_bytes) : json_null());
}

static const char *const on_timeout_names[] = {
    [SBX_TIMEOUT_DELETE] = "delete", [SBX_TIMEOUT_STOP] = "stop"};

static json_t *lifecycle_encode(const struct record *rec)
{
	const struct sbx_timers *t = &rec->timers;
	return json_pack("{s:I, s:I, s:I, s:s, s:o, s:I}", "idleTimeout",
			 (json_int_t)t->idle_timeout, "stopAfter", (json_int_t)t->stop_after,
			 "reclaimAfter", (json_int_t)t->reclaim_after, "onTimeout",
			 on_timeout_names[t->on_timeout], "lastActivityAt",
			 celld_time_json((time_t)rec->active_at), "runningSeconds",
			 (json_int_t)rec->running_seconds);
}

json_t *record_encode(const struct record *rec)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s?, s:I, "
		      "s:i, s:I, s:I, s:s?, s:s?, s:s?, s:s?, s:s?}",
		      "id", rec->id, "state", sandbox_state_name(rec->state), "image", rec->image,
		      "createdAt", celld_time_json(rec->created_at), "expiresAt",
		      celld_time_json(rec->expires_at), "lastTransitionAt",
		      celld_time_json(rec->transition_at), "metadata", ref_or_null(rec->metadata),
		      "env", ref_or_null(rec->env), "entrypoint", ref_or_null(rec->entrypoint),
		      "resourceLimits", ref_or_null(rec->resource_limits), "volumes",
		      ref_or_null(rec->volumes), "sessionKey", rec->session_key, "uidBase",
		      (json_int_t)rec->uid_base, "slot", rec->slot, "pid", (json_int_t)rec->pid,
		      "starttime", (json_int_t)rec->starttime, "cgroupRel", rec->cgroup_rel, "dir",
		      rec->dir, "reason", rec->reason, "rootfs", rec->rootfs, "owner", rec->owner);
	/* The limits as enforced, so that a policy changed since the create does not change
	 * what is reported for a sandbox whose cgroup still holds the old values. */
	if (o && rec->has_limits)
		json_object_set_new(o, "limits", limits_encode(&rec->limits));
	if (o && rec->snapshot_id)
		json_object_set_new(o, "snapshotId", json_string(rec->snapshot_id));
	if (o && rec->name)
		json_object_set_new(o, "name", json_string(rec->name));
	if (o && rec->image_digest)
		json_object_set_new(o, "imageDigest", json_string(rec->image_digest));
	if (o && rec->image_layers)
		json_object_set_new(o, "imageLayers", json_incref(rec->image_layers));
	if (o && rec->image_workdir)
		json_object_set_new(o, "imageWorkingDir", json_string(rec->image_workdir));
	if (o && rec->image_user)
		json_object_set_new(o, "imageUser", json_string(rec->image_user));
	if (o && rec->has_seccomp)
		json_object_set_new(o, "seccomp",
				    json_pack("{s:s, s:b}", "profile", rec->seccomp_profile, "log",
					      rec->seccomp_log));
	if (o && rec->created_ms)
		json_object_set_new(o, "createdAtMs", json_integer(rec->created_ms));
	if (o && rec->sudo)
		json_object_set_new(o, "sudo", json_true());
	if (o && rec->interpreter_bind)
		json_object_set_new(o, "interpreterService", json_true());
	if (o && (rec->manual_resume || rec->public_ports)) {
		json_t *e = json_object();
		if (e && rec->manual_resume)
			json_object_set_new(e, "manualResume", json_true());
		if (e && rec->public_ports)
			json_object_set_new(e, "publicPorts", json_true());
		json_object_set_new(o, "access", e);
	}
	if (o && rec->network)
		json_object_set(o, "network", rec->network);
	if (o && rec->has_lifecycle)
		json_object_set_new(o, "lifecycle", lifecycle_encode(rec));
	if (o && rec->provision)
		json_object_set(o, "provision", rec->provision);
	if (o && rec->provision_result)
		json_object_set(o, "provisionResult", rec->provision_result);
	return o;
}

/* ---- decoding: each step names the member it refuses ---- */

static int bad(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct cell_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = cell_err_vmsg(err, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

static int get_int(json_t *o, const char *key, json_int_t min, json_int_t max, json_int_t *out,
		   struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return bad(err, "%s must be an integer", key);
	*out = json_integer_value(v);
	if (*out < min || *out > max)
		return bad(err, "%s %lld is out of range", key, (long long)*out);
	return 0;
}

static int get_time(json_t *o, const char *key, bool nullable, time_t *out, struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	*out = 0;
	if (nullable && (!v || json_is_null(v)))
		return 0;
	if (!json_is_string(v) || celld_parse_time(json_string_value(v), out) < 0)
		return bad(err, "%s must be an RFC 3339 time%s", key, nullable ? " or null" : "");
	return 0;
}

/* An optional string (absent or null: NULL), a copy in *out. */
static int get_string(json_t *o, const char *key, bool required, char **out, struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!required && (!v || json_is_null(v)))
		return 0;
	if (!json_is_string(v))
		return bad(err, "%s must be a string", key);
	if (!(*out = strdup(json_string_value(v))))
		return -ENOMEM;
	return 0;
}

static bool is_string_map(const json_t *v)
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return false;
	json_object_foreach((json_t *)v, k, val) if (!json_is_string(val)) return false;
	return true;
}

static bool is_string_array(const json_t *v)
{
	size_t i;
	json_t *val;
	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, val) if (!json_is_string(val)) return false;
	return true;
}

static bool is_array(const json_t *v)
{
	return json_is_array(v);
}

static bool is_object(const json_t *v)
{
	return json_is_object(v);
}

/* An optional member of the given kind: a new reference in *out, or NULL. */
static int get_json(json_t *o, const char *key, bool (*ok)(const json_t *), const char *kind,
		    json_t **out, struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!ok(v))
		return bad(err, "%s must be %s", key, kind);
	*out = json_incref(v);
	return 0;
}

static int get_identity(json_t *o, const char *id, struct record *rec, struct cell_error *err)
{
	json_t *v = json_object_get(o, "id"), *st = json_object_get(o, "state");
	if (!json_is_string(v) || strcmp(json_string_value(v), id))
		return bad(err, "id must be \"%s\"", id);
	snprintf(rec->id, sizeof(rec->id), "%s", id);
	if (!json_is_string(st) || sandbox_state_parse(json_string_value(st), &rec->state) < 0)
		return bad(err, "state must be the name of a state");
	return 0;
}

static int get_process(json_t *o, struct record *rec, struct cell_error *err)
{
	json_int_t slot, base, pid, starttime;
	int r = get_int(o, "slot", 0, CELLD_SLOTS - 1, &slot, err);
	if (r == 0)
		r = get_int(o, "uidBase", 0, UINT32_MAX, &base, err);
	/* Never trust a recorded uid base: it must be the one its slot implies. */
	if (r == 0 && base != (json_int_t)uidrange_base((int)slot))
		r = bad(err, "uidBase %lld is not the base of slot %lld", (long long)base,
			(long long)slot);
	if (r == 0)
		r = get_int(o, "pid", 0, PID_MAX_RECORDED, &pid, err);
	if (r == 0)
		r = get_int(o, "starttime", 0, INT64_MAX, &starttime, err);
	if (r < 0)
		return r;
	rec->slot = (int)slot;
	rec->uid_base = (uint32_t)base;
	rec->pid = (pid_t)pid;
	rec->starttime = (uint64_t)starttime;
	return 0;
}

static int get_limits(json_t *o, struct record *rec, struct cell_error *err)
{
	json_t *l = json_object_get(o, "limits");
	rec->has_limits = false;
	if (!l || json_is_null(l))
		return 0;
	if (!json_is_object(l))
		return bad(err, "limits must be an object");
	static const char *const keys[] = {"cpuMillis", "memoryBytes", "pids", "diskBytes"};
	uint64_t *dst[] = {&rec->limits.cpu_millis, &rec->limits.memory_bytes, &rec->limits.pids,
			   &rec->limits.disk_bytes};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(l, keys[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return bad(err, "limits.%s must be an integer >= 0", keys[i]);
		*dst[i] = (uint64_t)json_integer_value(v);
	}
	json_t *sock = json_object_get(l, "socketMemoryBytes");
	if (sock && !json_is_null(sock) && (!json_is_integer(sock) || json_integer_value(sock) < 0))
		return bad(err, "limits.socketMemoryBytes must be an integer >= 0 or null");
	rec->limits.socket_bytes = json_is_integer(sock) ? (uint64_t)json_integer_value(sock) : 0;
	rec->has_limits = true;
	return 0;
}

/* Absent in a record older than profiles: "" (that sandbox runs without a filter). */
static int get_seccomp(json_t *o, struct record *rec, struct cell_error *err)
{
	json_t *sc = json_object_get(o, "seccomp");
	rec->has_seccomp = sc != NULL;
	rec->seccomp_profile[0] = '\0';
	rec->seccomp_log = false;
	if (!sc)
		return 0;
	const char *name = json_string_value(json_object_get(sc, "profile"));
	json_t *log = json_object_get(sc, "log");
	if (!name || (name[0] && !cell_seccomp_name_valid(name)))
		return bad(err, "seccomp.profile must be a profile's name");
	if (!json_is_boolean(log))
		return bad(err, "seccomp.log must be a boolean");
	snprintf(rec->seccomp_profile, sizeof(rec->seccomp_profile), "%s", name);
	rec->seccomp_log = json_is_true(log);
	return 0;
}

/* "createdAtMs": within createdAt's second, else (absent, or an older record) its start. */
static int get_created_ms(json_t *o, struct record *rec, struct cell_error *err)
{
	json_t *v = json_object_get(o, "createdAtMs");
	int64_t sec_ms = (int64_t)rec->created_at * 1000;
	rec->created_ms = sec_ms;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < sec_ms ||
	    json_integer_value(v) >= sec_ms + 1000)
		return bad(err, "createdAtMs must be milliseconds within createdAt's second");
	rec->created_ms = json_integer_value(v);
	return 0;
}

/* A flag written only when true: "sudo", "interpreterService". */
static int get_flag(json_t *o, const char *key, bool *out, struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	if (v && !json_is_boolean(v))
		return bad(err, "%s must be a boolean", key);
	*out = json_is_true(v);
	return 0;
}

/* "access": who may wake the sandbox and reach its ports, each written only when true.
 * A record written before the name was the core's own calls it "e2b" (the API that first
 * asked for them): read as the same, written back as "access". */
static int get_access(json_t *o, struct record *rec, struct cell_error *err)
{
	const char *key = json_object_get(o, "access") ? "access" : "e2b";
	json_t *e = json_object_get(o, key);
	if (!e)
		return 0;
	json_t *m = json_object_get(e, "manualResume"), *p = json_object_get(e, "publicPorts");
	if (!json_is_object(e) || (m && !json_is_boolean(m)) || (p && !json_is_boolean(p)))
		return bad(err, "%s must be {\"manualResume\": bool, \"publicPorts\": bool}", key);
	rec->manual_resume = json_is_true(m);
	rec->public_ports = json_is_true(p);
	return 0;
}

/* Absent in a record older than the idle timers: none run for that sandbox. */
static int get_lifecycle(json_t *o, struct record *rec, struct cell_error *err)
{
	json_t *lc = json_object_get(o, "lifecycle");
	rec->has_lifecycle = false;
	if (!lc || json_is_null(lc))
		return 0;
	if (!json_is_object(lc))
		return bad(err, "lifecycle must be an object");
	static const char *const keys[] = {"idleTimeout", "stopAfter", "reclaimAfter",
					   "runningSeconds"};
	int64_t *dst[] = {&rec->timers.idle_timeout, &rec->timers.stop_after,
			  &rec->timers.reclaim_after, &rec->running_seconds};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_int_t v;
		if (get_int(lc, keys[i], 0, INT64_MAX / 2, &v, err) < 0)
			return bad(err, "lifecycle.%s must be an integer >= 0", keys[i]);
		*dst[i] = v;
	}
	const char *on = json_string_value(json_object_get(lc, "onTimeout"));
	if (on && !strcmp(on, "stop"))
		rec->timers.on_timeout = SBX_TIMEOUT_STOP;
	else if (on && !strcmp(on, "delete"))
		rec->timers.on_timeout = SBX_TIMEOUT_DELETE;
	else
		return bad(err, "lifecycle.onTimeout must be \"delete\" or \"stop\"");
	time_t at;
	if (get_time(lc, "lastActivityAt", false, &at, err) < 0)
		return bad(err, "lifecycle.lastActivityAt must be an RFC 3339 time");
	rec->active_at = (int64_t)at;
	rec->has_lifecycle = true;
	return 0;
}

static int get_strings(json_t *o, struct record *rec, struct cell_error *err)
{
	int r = get_string(o, "image", true, &rec->image, err);
	if (r == 0)
		r = get_string(o, "rootfs", false, &rec->rootfs, err);
	if (r == 0)
		r = get_string(o, "sessionKey", false, &rec->session_key, err);
	if (r == 0)
		r = get_string(o, "reason", false, &rec->reason, err);
	if (r == 0)
		r = get_string(o, "owner", false, &rec->owner, err);
	if (r == 0)
		r = get_string(o, "snapshotId", false, &rec->snapshot_id, err);
	if (r == 0)
		r = get_string(o, "name", false, &rec->name, err);
	if (r == 0)
		r = get_string(o, "imageDigest", false, &rec->image_digest, err);
	if (r == 0)
		r = get_string(o, "imageWorkingDir", false, &rec->image_workdir, err);
	if (r == 0)
		r = get_string(o, "imageUser", false, &rec->image_user, err);
	return r;
}

static int get_members(json_t *o, struct record *rec, struct cell_error *err)
{
	int r = get_json(o, "metadata", is_string_map, "an object of strings", &rec->metadata, err);
	if (r == 0)
		r = get_json(o, "imageLayers", is_string_array, "an array of strings",
			     &rec->image_layers, err);
	if (r == 0)
		r = get_json(o, "env", is_string_map, "an object of strings", &rec->env, err);
	if (r == 0)
		r = get_json(o, "entrypoint", is_string_array, "an array of strings",
			     &rec->entrypoint, err);
	if (r == 0)
		r = get_json(o, "resourceLimits", is_string_map, "an object of strings",
			     &rec->resource_limits, err);
	if (r == 0)
		r = get_json(o, "volumes", is_array, "an array", &rec->volumes, err);
	if (r == 0)
		r = get_json(o, "network", is_object, "an object", &rec->network, err);
	if (r == 0)
		r = get_json(o, "provision", is_object, "an object", &rec->provision, err);
	if (r == 0)
		r = get_json(o, "provisionResult", is_object, "an object", &rec->provision_result,
			     err);
	return r;
}

int record_decode(json_t *o, const char *id, struct record *rec, struct cell_error *err)
{
	memset(rec, 0, sizeof(*rec));
	if (!json_is_object(o))
		return bad(err, "not a JSON object");
	int r = get_identity(o, id, rec, err);
	if (r == 0)
		r = get_process(o, rec, err);
	if (r == 0)
		r = get_time(o, "createdAt", false, &rec->created_at, err);
	if (r == 0)
		r = get_created_ms(o, rec, err);
	if (r == 0)
		r = get_time(o, "expiresAt", true, &rec->expires_at, err);
	if (r == 0)
		r = get_time(o, "lastTransitionAt", true, &rec->transition_at, err);
	if (r == 0)
		r = get_members(o, rec, err);
	if (r == 0)
		r = get_strings(o, rec, err);
	if (r == 0)
		r = get_limits(o, rec, err);
	if (r == 0)
		r = get_seccomp(o, rec, err);
	if (r == 0)
		r = get_flag(o, "sudo", &rec->sudo, err);
	if (r == 0)
		r = get_flag(o, "interpreterService", &rec->interpreter_bind, err);
	if (r == 0)
		r = get_access(o, rec, err);
	if (r == 0)
		r = get_lifecycle(o, rec, err);
	if (r == -ENOMEM)
		return cell_err(err, ENOMEM, "decoding the record of %s", id);
	return r;
}

void record_free(struct record *rec)
{
	json_decref(rec->metadata);
	json_decref(rec->env);
	json_decref(rec->entrypoint);
	json_decref(rec->resource_limits);
	json_decref(rec->volumes);
	json_decref(rec->network);
	json_decref(rec->provision);
	json_decref(rec->provision_result);
	free(rec->image);
	free(rec->rootfs);
	free(rec->session_key);
	free(rec->snapshot_id);
	free(rec->name);
	free(rec->image_digest);
	json_decref(rec->image_layers);
	free(rec->image_workdir);
	free(rec->image_user);
	free(rec->reason);
	free(rec->owner);
	free(rec->dir);
	free(rec->cgroup_rel);
	memset(rec, 0, sizeof(*rec));
}
