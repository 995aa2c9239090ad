/* The idle timers' policy. An operator sets what a sandbox gets when its create names no
 * timer, and the most a create may ask for ("maximum"; 0 there: no cap, and a create may
 * ask for 0, never). Seconds throughout. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/log.h"
#include "config.h"
#include "fields.h"
#include "timer_policy.h"

#define POLICY_FILE "lifecycle/default.json"
#define POLICY_MAX  (64u << 10)
#define SECONDS_MAX INT64_C(315360000) /* ten years: more is never */

enum { T_IDLE, T_STOP, T_RECLAIM, T_COUNT };

static const char *const timer_names[T_COUNT] = {"idleTimeout", "stopAfter", "reclaimAfter"};

static struct {
	int64_t defaults[T_COUNT], maximum[T_COUNT];
	enum sbx_on_timeout on_timeout;
} policy = {
    /* Built in, as the file shipped in policies/ says: five minutes idle → paused, an
     * hour paused → stopped, a week stopped → deleted; no caps. */
    .defaults = {300, 3600, 604800},
    .on_timeout = SBX_TIMEOUT_DELETE,
};

static int64_t *timer_of(struct sbx_timers *t, int i)
{
	int64_t *v[T_COUNT] = {&t->idle_timeout, &t->stop_after, &t->reclaim_after};
	return v[i];
}

static int on_timeout_parse(const char *s, enum sbx_on_timeout *out)
{
	if (!strcmp(s, "delete"))
		*out = SBX_TIMEOUT_DELETE;
	else if (!strcmp(s, "stop"))
		*out = SBX_TIMEOUT_STOP;
	else
		return -EINVAL;
	return 0;
}

static int policy_fail(struct cell_error *err, const char *field, const char *what)
{
	return cell_err_msg(err, EINVAL, "%s/%s: %s %s", celld.policies_dir, POLICY_FILE, field,
			    what);
}

static int load_seconds(json_t *section, const char *sname, int i, int64_t *out,
			struct cell_error *err)
{
	json_t *v = json_object_get(section, timer_names[i]);
	char name[64];
	snprintf(name, sizeof(name), "%s.%s", sname, timer_names[i]);
	if (!v)
		return 0; /* the built-in value stays */
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > SECONDS_MAX)
		return policy_fail(err, name, "must be whole seconds, 0-315360000");
	*out = json_integer_value(v);
	return 0;
}

static int load_root(json_t *root, struct cell_error *err)
{
	json_t *def = json_object_get(root, "defaults"), *max = json_object_get(root, "maximum");
	if (def && !json_is_object(def))
		return policy_fail(err, "defaults", "must be an object");
	if (max && !json_is_object(max))
		return policy_fail(err, "maximum", "must be an object");
	for (int i = 0; i < T_COUNT; i++) {
		int r = def ? load_seconds(def, "defaults", i, &policy.defaults[i], err) : 0;
		if (r == 0 && max)
			r = load_seconds(max, "maximum", i, &policy.maximum[i], err);
		if (r < 0)
			return r;
		int64_t cap = policy.maximum[i], d = policy.defaults[i];
		if (cap && (d == 0 || d > cap)) {
			char name[64];
			snprintf(name, sizeof(name), "defaults.%s", timer_names[i]);
			return policy_fail(err, name, "must be 1 to its maximum");
		}
	}
	json_t *on = def ? json_object_get(def, "onTimeout") : NULL;
	if (on && (!json_is_string(on) ||
		   on_timeout_parse(json_string_value(on), &policy.on_timeout) < 0))
		return policy_fail(err, "defaults.onTimeout", "must be \"delete\" or \"stop\"");
	return 0;
}

int timer_policy_load(struct cell_error *err)
{
	json_t *root;
	int r = config_policy_json(POLICY_FILE, POLICY_MAX, &root, err);
	if (r == -ENOENT) {
		log_info("idle timers: no %s/%s; built-in defaults", celld.policies_dir,
			 POLICY_FILE);
	} else if (r < 0) {
		return r;
	} else {
		r = load_root(root, err);
		json_decref(root);
		if (r < 0)
			return r;
	}
	log_info("idle timers: pause after %" PRId64 " s idle, stop after %" PRId64
		 " s paused, delete after %" PRId64 " s stopped (0: never); on timeout: %s",
		 policy.defaults[T_IDLE], policy.defaults[T_STOP], policy.defaults[T_RECLAIM],
		 policy.on_timeout == SBX_TIMEOUT_STOP ? "stop" : "delete");
	return 0;
}

/* A timer named in the extensions: whole seconds as a string, within the policy's cap. */
static int resolve_one(json_t *ext, int i, int64_t *out, struct cell_error *err)
{
	char key[64], field[96];
	snprintf(key, sizeof(key), "cell.%s", timer_names[i]);
	snprintf(field, sizeof(field), "extensions.%s", key);
	const char *text;
	int r = field_string(ext, key, field, false, &text, err);
	if (r <= 0)
		return r;
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (!text[0] || *end || errno || v < 0 || v > SECONDS_MAX || text[0] == '+' ||
	    text[0] == ' ')
		return field_fail(err,
				  "%s must be whole seconds, 0-315360000 (0: never), not "
				  "'%.32s'",
				  field, text);
	int64_t cap = policy.maximum[i];
	if (cap && (v == 0 || v > cap))
		return field_fail(err, "%s must be 1-%" PRId64 " seconds here (the operator's cap)",
				  field, cap);
	*out = v;
	return 0;
}

int timer_policy_resolve(json_t *extensions, struct sbx_timers *out, struct cell_error *err)
{
	for (int i = 0; i < T_COUNT; i++)
		*timer_of(out, i) = policy.defaults[i];
	out->on_timeout = policy.on_timeout;
	if (!extensions)
		return 0;
	for (int i = 0; i < T_COUNT; i++) {
		int r = resolve_one(extensions, i, timer_of(out, i), err);
		if (r < 0)
			return r;
	}
	const char *on;
	int r = field_string(extensions, "cell.onTimeout", "extensions.cell.onTimeout", false, &on,
			     err);
	if (r < 0)
		return r;
	if (r > 0 && on_timeout_parse(on, &out->on_timeout) < 0)
		return field_fail(err, "extensions.cell.onTimeout must be \"delete\" or \"stop\"");
	return 0;
}

json_t *timer_policy_json(const struct sbx_timers *t)
{
	return json_pack("{s:I, s:I, s:I, s:s}", "idleTimeout", (json_int_t)t->idle_timeout,
			 "stopAfter", (json_int_t)t->stop_after, "reclaimAfter",
			 (json_int_t)t->reclaim_after, "onTimeout",
			 t->on_timeout == SBX_TIMEOUT_STOP ? "stop" : "delete");
}
