/* An OCI bundle's config.json, parsed and validated (spec.h says what and why). */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/resource.h>

#include "cell/cleanup.h"
#include "spec.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define PATH_TEXT_MAX 192 /* "linux.resources.devices[12].access" and the like */

/* The field being read, for messages: "process.args[2]". */
struct at {
	char text[PATH_TEXT_MAX];
};

/* A name past PATH_TEXT_MAX (a long annotation key) ends in "...". */
static void at_cut(struct at *a, int n)
{
	if (n >= (int)sizeof(a->text))
		memcpy(a->text + sizeof(a->text) - 4, "...", 4);
}

static struct at at_key(const struct at *parent, const char *key)
{
	struct at a;
	at_cut(&a, snprintf(a.text, sizeof(a.text), "%s%s%s", parent ? parent->text : "",
			    parent && parent->text[0] ? "." : "", key));
	return a;
}

static struct at at_index(const struct at *parent, size_t i)
{
	struct at a;
	at_cut(&a, snprintf(a.text, sizeof(a.text), "%s[%zu]", parent->text, i));
	return a;
}

static int bad(struct cell_error *err, const struct at *a, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(struct cell_error *err, const struct at *a, const char *fmt, ...)
{
	char what[CELL_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cell_err_msg(err, EINVAL, "%s: %s", a->text, what);
}

static void warn(struct oci_spec *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(struct oci_spec *w, const char *fmt, ...)
{
	if (!w || w->n_warnings == OCI_WARNINGS_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *text = NULL;
	if (vasprintf(&text, fmt, ap) >= 0)
		w->warnings[w->n_warnings++] = text;
	va_end(ap);
}

/* ---- typed fields: absent is fine (out untouched) unless required ---- */

static json_t *field(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

static int want_object(json_t *v, const struct at *a, struct cell_error *err)
{
	return json_is_object(v) ? 0 : bad(err, a, "must be an object");
}

static int take_string(json_t *v, const struct at *a, char **out, struct cell_error *err)
{
	if (!json_is_string(v))
		return bad(err, a, "must be a string");
	size_t len = json_string_length(v);
	if (len > OCI_STRING_MAX)
		return bad(err, a, "longer than %u bytes", OCI_STRING_MAX);
	if (strlen(json_string_value(v)) != len)
		return bad(err, a, "holds a NUL byte");
	char *s = strdup(json_string_value(v));
	if (!s)
		return cell_err(err, ENOMEM, "%s", a->text);
	free(*out);
	*out = s;
	return 0;
}

static int get_string(json_t *obj, const char *key, const struct at *parent, bool required,
		      char **out, struct cell_error *err)
{
	struct at a = at_key(parent, key);
	json_t *v = field(obj, key);
	if (!v)
		return required ? bad(err, &a, "missing") : 0;
	return take_string(v, &a, out, err);
}

static int get_abs_path(json_t *obj, const char *key, const struct at *parent, bool required,
			char **out, struct cell_error *err)
{
	int r = get_string(obj, key, parent, required, out, err);
	if (r < 0 || !*out)
		return r;
	struct at a = at_key(parent, key);
	return (*out)[0] == '/' ? 0 : bad(err, &a, "'%.200s' is not an absolute path", *out);
}

static int get_bool(json_t *obj, const char *key, const struct at *parent, bool *out,
		    struct cell_error *err)
{
	struct at a = at_key(parent, key);
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return bad(err, &a, "must be true or false");
	*out = json_is_true(v);
	return 0;
}

static int get_int(json_t *obj, const char *key, const struct at *parent, int64_t min, int64_t max,
		   bool *has, int64_t *out, struct cell_error *err)
{
	struct at a = at_key(parent, key);
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return bad(err, &a, "must be an integer");
	json_int_t n = json_integer_value(v);
	if (n < min || n > max)
		return bad(err, &a, "%lld is out of range (%lld to %lld)", (long long)n,
			   (long long)min, (long long)max);
	*out = n;
	if (has)
		*has = true;
	return 0;
}

static int get_u32(json_t *obj, const char *key, const struct at *parent, bool *has, uint32_t *out,
		   struct cell_error *err)
{
	int64_t n = *out;
	int r = get_int(obj, key, parent, 0, UINT32_MAX, has, &n, err);
	*out = (uint32_t)n;
	return r;
}

/* An array of at most OCI_LIST_MAX entries, or absent (*n 0). */
static int get_array(json_t *obj, const char *key, const struct at *parent, json_t **arr,
		     struct cell_error *err)
{
	struct at a = at_key(parent, key);
	*arr = field(obj, key);
	if (!*arr)
		return 0;
	if (!json_is_array(*arr))
		return bad(err, &a, "must be an array");
	if (json_array_size(*arr) > OCI_LIST_MAX)
		return bad(err, &a, "more than %u entries", OCI_LIST_MAX);
	return 0;
}

static void strv_clear(struct oci_strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (struct oci_strv){0};
}

static int get_strv(json_t *obj, const char *key, const struct at *parent, struct oci_strv *out,
		    struct cell_error *err)
{
	json_t *arr;
	int r = get_array(obj, key, parent, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(parent, key);
	strv_clear(out);
	out->v = calloc(json_array_size(arr) + 1, sizeof(char *));
	if (!out->v)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		if ((r = take_string(json_array_get(arr, i), &ai, &out->v[i], err)) < 0)
			return r;
		out->n++;
	}
	return 0;
}

/* An object whose values are all strings (annotations, sysctl, unified), kept as JSON. */
static int get_string_map(json_t *obj, const char *key, const struct at *parent, json_t **out,
			  struct cell_error *err)
{
	struct at a = at_key(parent, key);
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	int r = want_object(v, &a, err);
	if (r < 0)
		return r;
	if (json_object_size(v) > OCI_LIST_MAX)
		return bad(err, &a, "more than %u entries", OCI_LIST_MAX);
	const char *k;
	json_t *val;
	json_object_foreach(v, k, val)
	{
		struct at ak = at_key(&a, k);
		if (strlen(k) > 1024)
			return bad(err, &a, "a key is longer than 1024 bytes");
		if (!json_is_string(val) || json_string_length(val) > OCI_STRING_MAX)
			return bad(err, &ak, "must be a string of at most %u bytes",
				   OCI_STRING_MAX);
	}
	*out = json_incref(v);
	return 0;
}

/* ---- process ---- */

static const struct {
	const char *name;
	int resource;
} rlimit_names[] = {
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
};

static int parse_rlimits(json_t *proc, const struct at *pa, struct oci_process *p,
			 struct cell_error *err)
{
	json_t *arr;
	int r = get_array(proc, "rlimits", pa, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(pa, "rlimits");
	if (json_array_size(arr) > CELL_ARRAY_SIZE(rlimit_names))
		return bad(err, &a, "more entries than there are rlimits");
	p->rlimits = calloc(json_array_size(arr) + 1, sizeof(*p->rlimits));
	if (!p->rlimits)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		_cleanup_free_ char *type = NULL;
		int64_t soft = 0, hard = 0;
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_string(e, "type", &ai, true, &type, err)) < 0 ||
		    (r = get_int(e, "soft", &ai, 0, INT64_MAX, NULL, &soft, err)) < 0 ||
		    (r = get_int(e, "hard", &ai, 0, INT64_MAX, NULL, &hard, err)) < 0)
			return r;
		struct at at = at_key(&ai, "type");
		size_t k = 0;
		while (k < CELL_ARRAY_SIZE(rlimit_names) && strcmp(rlimit_names[k].name, type))
			k++;
		if (k == CELL_ARRAY_SIZE(rlimit_names))
			return bad(err, &at, "unknown rlimit '%.64s'", type);
		for (size_t j = 0; j < p->n_rlimits; j++)
			if (p->rlimits[j].resource == rlimit_names[k].resource)
				return bad(err, &at, "%s given twice", type);
		if (soft > hard)
			return bad(err, &ai, "soft %lld is above hard %lld", (long long)soft,
				   (long long)hard);
		p->rlimits[p->n_rlimits++] =
		    (struct oci_rlimit){rlimit_names[k].resource, (uint64_t)soft, (uint64_t)hard};
	}
	return 0;
}

static int parse_cap_set(json_t *caps, const char *key, const struct at *ca, uint64_t *mask,
			 struct oci_spec *w, struct cell_error *err)
{
	struct oci_strv names = {0};
	int r = get_strv(caps, key, ca, &names, err);
	for (size_t i = 0; r == 0 && i < names.n; i++) {
		cap_value_t cap;
		if (cap_from_name(names.v[i], &cap) < 0 || cap < 0 || cap > 63) {
			warn(w, "%s.%s: capability '%.64s' is unknown here, dropped", ca->text, key,
			     names.v[i]);
			continue;
		}
		*mask |= 1ull << cap;
	}
	strv_clear(&names);
	return r;
}

static int parse_caps(json_t *proc, const struct at *pa, struct oci_caps *c, struct oci_spec *w,
		      struct cell_error *err)
{
	struct at a = at_key(pa, "capabilities");
	json_t *caps = field(proc, "capabilities");
	if (!caps)
		return 0;
	int r = want_object(caps, &a, err);
	c->given = true;
	if (r == 0)
		r = parse_cap_set(caps, "bounding", &a, &c->bounding, w, err);
	if (r == 0)
		r = parse_cap_set(caps, "effective", &a, &c->effective, w, err);
	if (r == 0)
		r = parse_cap_set(caps, "inheritable", &a, &c->inheritable, w, err);
	if (r == 0)
		r = parse_cap_set(caps, "permitted", &a, &c->permitted, w, err);
	if (r == 0)
		r = parse_cap_set(caps, "ambient", &a, &c->ambient, w, err);
	return r;
}

static int parse_user(json_t *proc, const struct at *pa, struct oci_process *p,
		      struct cell_error *err)
{
	struct at a = at_key(pa, "user");
	json_t *user = field(proc, "user");
	if (!user)
		return bad(err, &a, "missing");
	json_t *gids;
	int r;
	if ((r = want_object(user, &a, err)) < 0 ||
	    (r = get_u32(user, "uid", &a, NULL, &p->uid, err)) < 0 ||
	    (r = get_u32(user, "gid", &a, NULL, &p->gid, err)) < 0 ||
	    (r = get_u32(user, "umask", &a, &p->has_umask, &p->umask, err)) < 0 ||
	    (r = get_array(user, "additionalGids", &a, &gids, err)) < 0)
		return r;
	if (p->has_umask && p->umask > 0777) {
		struct at au = at_key(&a, "umask");
		return bad(err, &au, "%o is not a file mode mask", p->umask);
	}
	if (!gids)
		return 0;
	struct at ag = at_key(&a, "additionalGids");
	if (json_array_size(gids) > 65536)
		return bad(err, &ag, "more than 65536 groups");
	p->additional_gids = calloc(json_array_size(gids) + 1, sizeof(uint32_t));
	if (!p->additional_gids)
		return cell_err(err, ENOMEM, "%s", ag.text);
	for (size_t i = 0; i < json_array_size(gids); i++) {
		json_t *g = json_array_get(gids, i);
		struct at ai = at_index(&ag, i);
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > UINT32_MAX)
			return bad(err, &ai, "must be a gid (0 to %u)", UINT32_MAX);
		p->additional_gids[p->n_additional_gids++] = (uint32_t)json_integer_value(g);
	}
	return 0;
}

static int parse_process_obj(json_t *proc, const struct at *pa, struct oci_process *p,
			     struct oci_spec *w, struct cell_error *err)
{
	int r;
	int64_t adj = 0;
	if ((r = want_object(proc, pa, err)) < 0 ||
	    (r = get_bool(proc, "terminal", pa, &p->terminal, err)) < 0 ||
	    (r = parse_user(proc, pa, p, err)) < 0 ||
	    (r = get_strv(proc, "args", pa, &p->args, err)) < 0 ||
	    (r = get_strv(proc, "env", pa, &p->env, err)) < 0 ||
	    (r = get_abs_path(proc, "cwd", pa, true, &p->cwd, err)) < 0 ||
	    (r = parse_caps(proc, pa, &p->caps, w, err)) < 0 ||
	    (r = parse_rlimits(proc, pa, p, err)) < 0 ||
	    (r = get_bool(proc, "noNewPrivileges", pa, &p->no_new_privileges, err)) < 0 ||
	    (r = get_int(proc, "oomScoreAdj", pa, -1000, 1000, &p->has_oom_score_adj, &adj, err)) <
		0 ||
	    (r = get_string(proc, "apparmorProfile", pa, false, &p->apparmor_profile, err)) < 0 ||
	    (r = get_string(proc, "selinuxLabel", pa, false, &p->selinux_label, err)) < 0)
		return r;
	p->oom_score_adj = (int)adj;
	struct at aa = at_key(pa, "args");
	if (p->args.n == 0)
		return bad(err, &aa, "must name a program");
	struct at ae = at_key(pa, "env");
	for (size_t i = 0; i < p->env.n; i++)
		if (!strchr(p->env.v[i], '=') || p->env.v[i][0] == '=') {
			struct at ai = at_index(&ae, i);
			return bad(err, &ai, "'%.64s' is not NAME=VALUE", p->env.v[i]);
		}
	json_t *size = field(proc, "consoleSize");
	if (size) {
		struct at as = at_key(pa, "consoleSize");
		int64_t rows = 0, cols = 0;
		if ((r = want_object(size, &as, err)) < 0 ||
		    (r = get_int(size, "height", &as, 0, UINT16_MAX, NULL, &rows, err)) < 0 ||
		    (r = get_int(size, "width", &as, 0, UINT16_MAX, NULL, &cols, err)) < 0)
			return r;
		p->rows = (unsigned)rows;
		p->cols = (unsigned)cols;
	}
	return 0;
}

void oci_process_clear(struct oci_process *p)
{
	free(p->additional_gids);
	strv_clear(&p->args);
	strv_clear(&p->env);
	free(p->cwd);
	free(p->rlimits);
	free(p->apparmor_profile);
	free(p->selinux_label);
	*p = (struct oci_process){0};
}

static json_t *load(const char *text, size_t len, const char *what, struct cell_error *err)
{
	if (len > OCI_SPEC_FILE_MAX) {
		cell_err_msg(err, E2BIG, "%s is larger than %u bytes", what, OCI_SPEC_FILE_MAX);
		return NULL;
	}
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		cell_err_msg(err, EINVAL, "%s: line %d: %s", what, je.line, je.text);
	else if (!json_is_object(root)) {
		cell_err_msg(err, EINVAL, "%s: not a JSON object", what);
		json_decref(root);
		root = NULL;
	}
	return root;
}

int oci_process_parse(const char *text, size_t len, struct oci_process *out,
		      struct oci_spec *warnings, struct cell_error *err)
{
	json_t *root = load(text, len, "process", err);
	if (!root)
		return -err->code;
	*out = (struct oci_process){0};
	struct at a = {""};
	snprintf(a.text, sizeof(a.text), "process");
	int r = parse_process_obj(root, &a, out, warnings, err);
	json_decref(root);
	if (r < 0)
		oci_process_clear(out);
	return r;
}

/* ---- root, mounts, hooks ---- */

static int parse_root(json_t *cfg, struct oci_spec *s, struct cell_error *err)
{
	struct at a = at_key(NULL, "root");
	json_t *root = field(cfg, "root");
	if (!root)
		return bad(err, &a, "missing");
	int r;
	if ((r = want_object(root, &a, err)) < 0 ||
	    (r = get_string(root, "path", &a, true, &s->root_path, err)) < 0 ||
	    (r = get_bool(root, "readonly", &a, &s->root_readonly, err)) < 0)
		return r;
	struct at ap = at_key(&a, "path");
	return s->root_path[0] ? 0 : bad(err, &ap, "empty");
}

static int parse_mounts(json_t *cfg, struct oci_spec *s, struct cell_error *err)
{
	json_t *arr;
	int r = get_array(cfg, "mounts", NULL, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(NULL, "mounts");
	s->mounts = calloc(json_array_size(arr) + 1, sizeof(*s->mounts));
	if (!s->mounts)
		return cell_err(err, ENOMEM, "mounts");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		struct oci_mount *m = &s->mounts[s->n_mounts++];
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_abs_path(e, "destination", &ai, true, &m->destination, err)) < 0 ||
		    (r = get_string(e, "type", &ai, false, &m->type, err)) < 0 ||
		    (r = get_string(e, "source", &ai, false, &m->source, err)) < 0 ||
		    (r = get_strv(e, "options", &ai, &m->options, err)) < 0)
			return r;
		if (field(e, "uidMappings") || field(e, "gidMappings"))
			return bad(err, &ai, "idmapped mounts of the spec are not supported");
	}
	return 0;
}

static const char *const hook_keys[OCI_HOOK_KINDS] = {
    [OCI_HOOK_PRESTART] = "prestart",
    [OCI_HOOK_CREATE_RUNTIME] = "createRuntime",
    [OCI_HOOK_CREATE_CONTAINER] = "createContainer",
    [OCI_HOOK_START_CONTAINER] = "startContainer",
    [OCI_HOOK_POSTSTART] = "poststart",
    [OCI_HOOK_POSTSTOP] = "poststop",
};

static int parse_hooks(json_t *cfg, struct oci_spec *s, struct cell_error *err)
{
	struct at a = at_key(NULL, "hooks");
	json_t *hooks = field(cfg, "hooks");
	if (!hooks)
		return 0;
	int r = want_object(hooks, &a, err);
	for (int k = 0; r == 0 && k < OCI_HOOK_KINDS; k++) {
		json_t *arr;
		if ((r = get_array(hooks, hook_keys[k], &a, &arr, err)) < 0 || !arr)
			continue;
		struct at ak = at_key(&a, hook_keys[k]);
		s->hooks[k] = calloc(json_array_size(arr) + 1, sizeof(struct oci_hook));
		if (!s->hooks[k])
			return cell_err(err, ENOMEM, "%s", ak.text);
		for (size_t i = 0; r == 0 && i < json_array_size(arr); i++) {
			struct at ai = at_index(&ak, i);
			json_t *e = json_array_get(arr, i);
			struct oci_hook *h = &s->hooks[k][s->n_hooks[k]++];
			int64_t timeout = 0;
			if ((r = want_object(e, &ai, err)) < 0 ||
			    (r = get_abs_path(e, "path", &ai, true, &h->path, err)) < 0 ||
			    (r = get_strv(e, "args", &ai, &h->args, err)) < 0 ||
			    (r = get_strv(e, "env", &ai, &h->env, err)) < 0 ||
			    (r = get_int(e, "timeout", &ai, 1, 3600, NULL, &timeout, err)) < 0)
				break;
			h->timeout = (int)timeout;
		}
	}
	return r;
}

/* ---- linux ---- */

static const struct {
	const char *name;
	int flag;
} ns_types[] = {
    {"pid", CLONE_NEWPID},	 {"network", CLONE_NEWNET}, {"mount", CLONE_NEWNS},
    {"ipc", CLONE_NEWIPC},	 {"uts", CLONE_NEWUTS},	    {"user", CLONE_NEWUSER},
    {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
};

static int parse_namespaces(json_t *lx, const struct at *la, struct oci_spec *s,
			    struct cell_error *err)
{
	json_t *arr;
	int r = get_array(lx, "namespaces", la, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(la, "namespaces");
	if (json_array_size(arr) > CELL_ARRAY_SIZE(ns_types))
		return bad(err, &a, "more entries than there are namespace types");
	s->namespaces = calloc(json_array_size(arr) + 1, sizeof(*s->namespaces));
	if (!s->namespaces)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		_cleanup_free_ char *type = NULL;
		struct oci_namespace *ns = &s->namespaces[s->n_namespaces];
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_string(e, "type", &ai, true, &type, err)) < 0 ||
		    (r = get_abs_path(e, "path", &ai, false, &ns->path, err)) < 0)
			return r;
		s->n_namespaces++;
		struct at at = at_key(&ai, "type");
		size_t k = 0;
		while (k < CELL_ARRAY_SIZE(ns_types) && strcmp(ns_types[k].name, type))
			k++;
		if (k == CELL_ARRAY_SIZE(ns_types))
			return bad(err, &at, "unknown namespace type '%.32s'", type);
		if (oci_spec_namespace(s, ns_types[k].flag))
			return bad(err, &at, "%s given twice", type);
		ns->flag = ns_types[k].flag;
	}
	return 0;
}

static int parse_idmaps(json_t *lx, const char *key, const struct at *la, struct oci_idmap **out,
			size_t *n, struct cell_error *err)
{
	json_t *arr;
	int r = get_array(lx, key, la, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(la, key);
	if (json_array_size(arr) > 340) /* the kernel's limit of lines in uid_map */
		return bad(err, &a, "more than 340 ranges");
	*out = calloc(json_array_size(arr) + 1, sizeof(**out));
	if (!*out)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		struct oci_idmap *m = &(*out)[(*n)++];
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_u32(e, "containerID", &ai, NULL, &m->container_id, err)) < 0 ||
		    (r = get_u32(e, "hostID", &ai, NULL, &m->host_id, err)) < 0 ||
		    (r = get_u32(e, "size", &ai, NULL, &m->size, err)) < 0)
			return r;
		if (m->size == 0 || (uint64_t)m->container_id + m->size > UINT32_MAX ||
		    (uint64_t)m->host_id + m->size > UINT32_MAX)
			return bad(err, &ai, "an empty range or one past 2^32");
	}
	return 0;
}

static int parse_devices(json_t *lx, const struct at *la, struct oci_spec *s,
			 struct cell_error *err)
{
	json_t *arr;
	int r = get_array(lx, "devices", la, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(la, "devices");
	s->devices = calloc(json_array_size(arr) + 1, sizeof(*s->devices));
	if (!s->devices)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		struct oci_device *d = &s->devices[s->n_devices++];
		_cleanup_free_ char *type = NULL;
		bool has_major = false, has_minor = false;
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_string(e, "type", &ai, true, &type, err)) < 0 ||
		    (r = get_abs_path(e, "path", &ai, true, &d->path, err)) < 0 ||
		    (r = get_int(e, "major", &ai, 0, UINT32_MAX, &has_major, &d->major, err)) < 0 ||
		    (r = get_int(e, "minor", &ai, 0, UINT32_MAX, &has_minor, &d->minor, err)) < 0 ||
		    (r = get_u32(e, "fileMode", &ai, &d->has_mode, &d->mode, err)) < 0 ||
		    (r = get_u32(e, "uid", &ai, &d->has_uid, &d->uid, err)) < 0 ||
		    (r = get_u32(e, "gid", &ai, &d->has_gid, &d->gid, err)) < 0)
			return r;
		struct at at = at_key(&ai, "type");
		if (strlen(type) != 1 || !strchr("cbup", type[0]))
			return bad(err, &at, "'%.8s' is not one of c, b, u, p", type);
		d->type = type[0];
		if (d->type != 'p' && (!has_major || !has_minor))
			return bad(err, &ai, "a %c device needs major and minor", d->type);
		if (d->has_mode && d->mode > 07777)
			return bad(err, &ai, "fileMode %o has more than permission bits", d->mode);
	}
	return 0;
}

static int parse_device_rules(json_t *res, const struct at *ra, struct oci_resources *o,
			      struct cell_error *err)
{
	json_t *arr;
	int r = get_array(res, "devices", ra, &arr, err);
	if (r < 0 || !arr)
		return r;
	struct at a = at_key(ra, "devices");
	o->devices = calloc(json_array_size(arr) + 1, sizeof(*o->devices));
	if (!o->devices)
		return cell_err(err, ENOMEM, "%s", a.text);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		struct at ai = at_index(&a, i);
		json_t *e = json_array_get(arr, i);
		struct oci_device_rule *d = &o->devices[o->n_devices++];
		_cleanup_free_ char *type = NULL, *access = NULL;
		d->major = d->minor = -1;
		if ((r = want_object(e, &ai, err)) < 0 ||
		    (r = get_bool(e, "allow", &ai, &d->allow, err)) < 0 ||
		    (r = get_string(e, "type", &ai, false, &type, err)) < 0 ||
		    (r = get_int(e, "major", &ai, -1, UINT32_MAX, NULL, &d->major, err)) < 0 ||
		    (r = get_int(e, "minor", &ai, -1, UINT32_MAX, NULL, &d->minor, err)) < 0 ||
		    (r = get_string(e, "access", &ai, false, &access, err)) < 0)
			return r;
		d->type = type ? type[0] : 'a';
		if (type && (strlen(type) != 1 || !strchr("acb", type[0]))) {
			struct at at = at_key(&ai, "type");
			return bad(err, &at, "'%.8s' is not one of a, c, b", type);
		}
		const char *acc = access ? access : "rwm";
		if (strlen(acc) > 3 || strspn(acc, "rwm") != strlen(acc)) {
			struct at at = at_key(&ai, "access");
			return bad(err, &at, "'%.8s' is not made of r, w, m", acc);
		}
		snprintf(d->access, sizeof(d->access), "%s", acc);
	}
	return 0;
}

static int parse_resources(json_t *lx, const struct at *la, struct oci_resources *o,
			   struct cell_error *err)
{
	struct at a = at_key(la, "resources");
	json_t *res = field(lx, "resources");
	if (!res)
		return 0;
	int r;
	if ((r = want_object(res, &a, err)) < 0 || (r = parse_device_rules(res, &a, o, err)) < 0 ||
	    (r = get_string_map(res, "unified", &a, &o->unified, err)) < 0)
		return r;
	struct at am = at_key(&a, "memory"), ac = at_key(&a, "cpu"), ap = at_key(&a, "pids"),
		  ab = at_key(&a, "blockIO");
	json_t *mem = field(res, "memory"), *cpu = field(res, "cpu"), *pids = field(res, "pids"),
	       *bio = field(res, "blockIO");
	if (mem && ((r = want_object(mem, &am, err)) < 0 ||
		    (r = get_int(mem, "limit", &am, -1, INT64_MAX, &o->has_memory_limit,
				 &o->memory_limit, err)) < 0 ||
		    (r = get_int(mem, "reservation", &am, -1, INT64_MAX, &o->has_memory_reservation,
				 &o->memory_reservation, err)) < 0 ||
		    (r = get_int(mem, "swap", &am, -1, INT64_MAX, &o->has_memory_swap,
				 &o->memory_swap, err)) < 0))
		return r;
	int64_t shares = 0, period = 0;
	if (cpu &&
	    ((r = want_object(cpu, &ac, err)) < 0 ||
	     (r = get_int(cpu, "shares", &ac, 0, 262144, &o->has_cpu_shares, &shares, err)) < 0 ||
	     (r = get_int(cpu, "quota", &ac, -1, INT64_MAX, &o->has_cpu_quota, &o->cpu_quota,
			  err)) < 0 ||
	     (r = get_int(cpu, "period", &ac, 0, 1000000, &o->has_cpu_period, &period, err)) < 0 ||
	     (r = get_string(cpu, "cpus", &ac, false, &o->cpus, err)) < 0 ||
	     (r = get_string(cpu, "mems", &ac, false, &o->mems, err)) < 0))
		return r;
	o->cpu_shares = (uint64_t)shares;
	o->cpu_period = (uint64_t)period;
	if (pids && ((r = want_object(pids, &ap, err)) < 0 ||
		     (r = get_int(pids, "limit", &ap, INT64_MIN, INT64_MAX, &o->has_pids_limit,
				  &o->pids_limit, err)) < 0))
		return r;
	int64_t weight = 0;
	if (bio &&
	    ((r = want_object(bio, &ab, err)) < 0 ||
	     (r = get_int(bio, "weight", &ab, 0, 1000, &o->has_blkio_weight, &weight, err)) < 0))
		return r;
	o->blkio_weight = (uint16_t)weight;
	return 0;
}

static int parse_seccomp(json_t *lx, const struct at *la, struct oci_spec *s,
			 struct cell_error *err)
{
	struct at a = at_key(la, "seccomp");
	json_t *sc = field(lx, "seccomp");
	if (!sc)
		return 0;
	int r = want_object(sc, &a, err);
	if (r < 0)
		return r;
	struct at ad = at_key(&a, "defaultAction");
	json_t *def = field(sc, "defaultAction");
	if (!json_is_string(def))
		return bad(err, &ad, "must be a string");
	s->seccomp = json_incref(sc);
	return 0;
}

static int parse_linux(json_t *cfg, struct oci_spec *s, struct cell_error *err)
{
	struct at a = at_key(NULL, "linux");
	json_t *lx = field(cfg, "linux");
	if (!lx)
		return 0;
	int r;
	if ((r = want_object(lx, &a, err)) < 0 || (r = parse_namespaces(lx, &a, s, err)) < 0 ||
	    (r = parse_idmaps(lx, "uidMappings", &a, &s->uid_mappings, &s->n_uid_mappings, err)) <
		0 ||
	    (r = parse_idmaps(lx, "gidMappings", &a, &s->gid_mappings, &s->n_gid_mappings, err)) <
		0 ||
	    (r = parse_devices(lx, &a, s, err)) < 0 ||
	    (r = get_string(lx, "cgroupsPath", &a, false, &s->cgroups_path, err)) < 0 ||
	    (r = parse_resources(lx, &a, &s->resources, err)) < 0 ||
	    (r = get_string_map(lx, "sysctl", &a, &s->sysctl, err)) < 0 ||
	    (r = parse_seccomp(lx, &a, s, err)) < 0 ||
	    (r = get_string(lx, "rootfsPropagation", &a, false, &s->rootfs_propagation, err)) < 0 ||
	    (r = get_strv(lx, "maskedPaths", &a, &s->masked_paths, err)) < 0 ||
	    (r = get_strv(lx, "readonlyPaths", &a, &s->readonly_paths, err)) < 0)
		return r;
	struct at am = at_key(&a, "maskedPaths"), ar = at_key(&a, "readonlyPaths");
	for (size_t i = 0; i < s->masked_paths.n; i++)
		if (s->masked_paths.v[i][0] != '/') {
			struct at ai = at_index(&am, i);
			return bad(err, &ai, "'%.200s' is not an absolute path",
				   s->masked_paths.v[i]);
		}
	for (size_t i = 0; i < s->readonly_paths.n; i++)
		if (s->readonly_paths.v[i][0] != '/') {
			struct at ai = at_index(&ar, i);
			return bad(err, &ai, "'%.200s' is not an absolute path",
				   s->readonly_paths.v[i]);
		}
	if ((s->n_uid_mappings || s->n_gid_mappings) && !oci_spec_namespace(s, CLONE_NEWUSER))
		return bad(err, &a, "uidMappings/gidMappings without a user namespace");
	return 0;
}

/* ---- the whole spec ---- */

const struct oci_namespace *oci_spec_namespace(const struct oci_spec *s, int flag)
{
	for (size_t i = 0; i < s->n_namespaces; i++)
		if (s->namespaces[i].flag == flag)
			return &s->namespaces[i];
	return NULL;
}

static int parse_spec(json_t *cfg, struct oci_spec *s, struct cell_error *err)
{
	struct at top = {""};
	int r;
	if ((r = get_string(cfg, "ociVersion", &top, true, &s->oci_version, err)) < 0)
		return r;
	if (strncmp(s->oci_version, "1.", 2))
		return cell_err_msg(err, EINVAL, "ociVersion: '%.32s' is not a 1.x version",
				    s->oci_version);
	json_t *proc = field(cfg, "process");
	struct at pa = at_key(NULL, "process");
	s->has_process = proc != NULL;
	if ((r = parse_root(cfg, s, err)) < 0 ||
	    (proc && (r = parse_process_obj(proc, &pa, &s->process, s, err)) < 0) ||
	    (r = get_string(cfg, "hostname", &top, false, &s->hostname, err)) < 0 ||
	    (r = get_string(cfg, "domainname", &top, false, &s->domainname, err)) < 0 ||
	    (r = parse_mounts(cfg, s, err)) < 0 || (r = parse_hooks(cfg, s, err)) < 0 ||
	    (r = get_string_map(cfg, "annotations", &top, &s->annotations, err)) < 0 ||
	    (r = parse_linux(cfg, s, err)) < 0)
		return r;
	if (s->hostname && strlen(s->hostname) > 64)
		return cell_err_msg(err, EINVAL, "hostname: longer than 64 bytes");
	if (s->domainname && strlen(s->domainname) > 64)
		return cell_err_msg(err, EINVAL, "domainname: longer than 64 bytes");
	return 0;
}

int oci_spec_parse(const char *text, size_t len, struct oci_spec **out, struct cell_error *err)
{
	*out = NULL;
	json_t *cfg = load(text, len, "config.json", err);
	if (!cfg)
		return -err->code;
	struct oci_spec *s = calloc(1, sizeof(*s));
	if (!s) {
		json_decref(cfg);
		return cell_err(err, ENOMEM, "config.json");
	}
	int r = parse_spec(cfg, s, err);
	json_decref(cfg);
	if (r < 0) {
		oci_spec_free(s);
		return r;
	}
	*out = s;
	return 0;
}

void oci_spec_free(struct oci_spec *s)
{
	if (!s)
		return;
	free(s->oci_version);
	free(s->root_path);
	oci_process_clear(&s->process);
	free(s->hostname);
	free(s->domainname);
	for (size_t i = 0; i < s->n_mounts; i++) {
		free(s->mounts[i].destination);
		free(s->mounts[i].type);
		free(s->mounts[i].source);
		strv_clear(&s->mounts[i].options);
	}
	free(s->mounts);
	for (int k = 0; k < OCI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < s->n_hooks[k]; i++) {
			free(s->hooks[k][i].path);
			strv_clear(&s->hooks[k][i].args);
			strv_clear(&s->hooks[k][i].env);
		}
		free(s->hooks[k]);
	}
	json_decref(s->annotations);
	for (size_t i = 0; i < s->n_namespaces; i++)
		free(s->namespaces[i].path);
	free(s->namespaces);
	free(s->uid_mappings);
	free(s->gid_mappings);
	for (size_t i = 0; i < s->n_devices; i++)
		free(s->devices[i].path);
	free(s->devices);
	free(s->cgroups_path);
	free(s->resources.cpus);
	free(s->resources.mems);
	free(s->resources.devices);
	json_decref(s->resources.unified);
	json_decref(s->sysctl);
	json_decref(s->seccomp);
	free(s->rootfs_propagation);
	strv_clear(&s->masked_paths);
	strv_clear(&s->readonly_paths);
	for (size_t i = 0; i < s->n_warnings; i++)
		free(s->warnings[i]);
	free(s);
}
