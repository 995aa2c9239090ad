/* Creating a sandbox: the POST /v1/sandboxes body from the CLI's options, and what the
 * answer says (warnings on stderr, a sandbox that failed to start). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "client.h"
#include "create.h"
#include "error.h"
#include "global.h"

#define PROVISION_SCRIPT_READ_MAX (16u << 10)

bool cli_create_seccomp_opt(int c, const char *arg, struct cli_create_opts *o)
{
	if (c == CLI_OPT_SECCOMP)
		o->seccomp = arg;
	else if (c == CLI_OPT_SECCOMP_LOG)
		o->seccomp_log = true;
	return c == CLI_OPT_SECCOMP || c == CLI_OPT_SECCOMP_LOG;
}

/* Whole seconds, as cell(1) gives the timers; their range and the operator's caps are
 * celld's to judge. */
static bool whole_seconds(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* A bad value is a usage error naming the flag: celld's answer would name its extension,
 * which the user never typed. */
int cli_create_timer_opt(int c, const char *arg, struct cli_create_opts *o)
{
	const char **slot = c == CLI_OPT_IDLE_TIMEOUT	 ? &o->idle_timeout
			    : c == CLI_OPT_STOP_AFTER	 ? &o->stop_after
			    : c == CLI_OPT_RECLAIM_AFTER ? &o->reclaim_after
							 : NULL;
	const char *flag = c == CLI_OPT_IDLE_TIMEOUT ? "--idle-timeout"
			   : c == CLI_OPT_STOP_AFTER ? "--stop-after"
						     : "--reclaim-after";
	if (slot && !whole_seconds(arg)) {
		cli_error("%s '%s': expected whole seconds (0: never)", flag, arg);
		return -1;
	}
	if (slot) {
		*slot = arg;
		return 1;
	}
	if (c != CLI_OPT_ON_TIMEOUT)
		return 0;
	if (strcmp(arg, "delete") && strcmp(arg, "stop")) {
		cli_error("--on-timeout '%s': expected delete or stop", arg);
		return -1;
	}
	o->on_timeout = arg;
	return 1;
}

/* docker's sizes ("512m", "2g": powers of 1024, a trailing b dropped) as the API's
 * quantities ("512Mi"); anything else ("512Mi", "10G") as given, for celld to judge. */
static char *size_quantity(const char *arg)
{
	size_t n = strlen(arg);
	if (n > 1 && (arg[n - 1] == 'b' || arg[n - 1] == 'B') && arg[n - 2] >= '0' &&
	    arg[n - 2] <= '9')
		return strndup(arg, n - 1);
	const char *units = "kmgtKMGT";
	if (n > 1 && strchr(units, arg[n - 1]) && arg[n - 2] >= '0' && arg[n - 2] <= '9') {
		char *q = NULL;
		char unit = arg[n - 1] >= 'a' ? (char)(arg[n - 1] - 'a' + 'A') : arg[n - 1];
		return asprintf(&q, "%.*s%ci", (int)(n - 1), arg, unit) < 0 ? NULL : q;
	}
	return strdup(arg);
}

/* One resourceLimits key from its flag's value. */
static int limit_opt(struct cli_create_opts *o, const char *key, const char *flag, const char *arg,
		     bool size)
{
	_cleanup_free_ char *q = size ? size_quantity(arg) : strdup(arg);
	if (!o->limits)
		o->limits = json_object();
	if (!q || !arg[0] || !o->limits ||
	    json_object_set_new(o->limits, key, json_string(q)) < 0) {
		cli_error("%s '%s': expected a value", flag, arg);
		return -1;
	}
	return 1;
}

/* --label K=V: K non-empty, both valid UTF-8. */
static int label_opt(struct cli_create_opts *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		cli_error("--label '%s': expected KEY=VALUE", arg);
		return -1;
	}
	_cleanup_free_ char *key = strndup(arg, (size_t)(eq - arg));
	if (!o->labels)
		o->labels = json_object();
	if (!key || !o->labels || json_object_set_new(o->labels, key, json_string(eq + 1)) < 0) {
		cli_error("--label '%s': not valid UTF-8", arg);
		return -1;
	}
	return 1;
}

/* --entrypoint "PROG [ARG...]": the words between spaces. */
static int entrypoint_opt(struct cli_create_opts *o, const char *arg)
{
	json_decref(o->entrypoint);
	o->entrypoint = json_array();
	for (const char *p = arg; o->entrypoint && *p;) {
		size_t len = strcspn(p, " \t");
		if (len && json_array_append_new(o->entrypoint, json_stringn(p, len)) < 0) {
			cli_error("--entrypoint '%s': not valid UTF-8", arg);
			return -1;
		}
		p += len;
		p += strspn(p, " \t");
	}
	if (!json_array_size(o->entrypoint)) {
		cli_error("--entrypoint '%s': expected a program", arg);
		return -1;
	}
	return 1;
}

int cli_create_sandbox_opt(int c, const char *arg, struct cli_create_opts *o)
{
	switch (c) {
	case 'I':
		o->image = arg;
		return 1;
	case CLI_OPT_SNAPSHOT:
		o->snapshot = arg;
		return 1;
	case CLI_OPT_NAME:
		o->name = arg;
		return 1;
	case CLI_OPT_LABEL:
		return label_opt(o, arg);
	case CLI_OPT_MEMORY:
		return limit_opt(o, "memory", "--memory", arg, true);
	case CLI_OPT_CPUS:
		return limit_opt(o, "cpu", "--cpus", arg, false);
	case CLI_OPT_PIDS_LIMIT:
		return limit_opt(o, "pids", "--pids-limit", arg, false);
	case CLI_OPT_DISK:
		return limit_opt(o, "disk", "--disk", arg, true);
	case CLI_OPT_ENTRYPOINT:
		return entrypoint_opt(o, arg);
	case CLI_OPT_CODE_INTERPRETER:
		o->code_interpreter = true;
		return 1;
	default:
		return 0;
	}
}

int cli_create_network_opt(int c, const char *arg, struct cli_create_opts *o)
{
	json_t **list = c == CLI_OPT_ALLOW_HOST	 ? &o->allow_hosts
			: c == CLI_OPT_DENY_HOST ? &o->deny_hosts
						 : NULL;
	if (c == CLI_OPT_NETWORK) {
		o->network = arg;
		return 1;
	}
	if (!list)
		return 0;
	if (!*list)
		*list = json_array();
	if (!*list || json_array_append_new(*list, json_string(arg)) < 0) {
		cli_error_usage(c == CLI_OPT_ALLOW_HOST ? "--allow-host" : "--deny-host",
				CLI_EXIT_USAGE, "'%s' is not valid UTF-8", arg);
		return -1;
	}
	return 1;
}

int cli_create_provision_opt(int c, const char *arg, struct cli_create_opts *o)
{
	if (c == CLI_OPT_STARTUP_TIMEOUT) {
		o->startup_timeout = arg;
		return 1;
	}
	if (c == CLI_OPT_SKILL) {
		if (!strchr(arg, '@') || strchr(arg, ',')) {
			cli_error_usage("--skill", CLI_EXIT_USAGE, "'%s': expected NAME@VERSION",
					arg);
			return -1;
		}
		if (!o->skills)
			o->skills = json_array();
		json_array_append_new(o->skills, json_string(arg));
		return 1;
	}
	if (c != CLI_OPT_STARTUP_SCRIPT)
		return 0;
	FILE *f = fopen(arg, "re");
	char *buf = malloc(PROVISION_SCRIPT_READ_MAX + 1);
	size_t n = f && buf ? fread(buf, 1, PROVISION_SCRIPT_READ_MAX + 1, f) : 0;
	bool bad = !f || !buf || ferror(f) || n > PROVISION_SCRIPT_READ_MAX;
	if (f)
		fclose(f);
	if (bad) {
		free(buf);
		cli_error_usage("--startup-script", CLI_EXIT_USAGE,
				"%s: cannot read it, or larger than 16 KiB", arg);
		return -1;
	}
	buf[n] = '\0';
	free(o->startup_script);
	o->startup_script = buf;
	return 1;
}

void cli_create_opts_free(struct cli_create_opts *o)
{
	json_decref(o->allow_hosts);
	json_decref(o->deny_hosts);
	json_decref(o->skills);
	json_decref(o->labels);
	json_decref(o->limits);
	json_decref(o->entrypoint);
	free(o->startup_script);
	o->allow_hosts = o->deny_hosts = o->skills = NULL;
	o->labels = o->limits = o->entrypoint = NULL;
	o->startup_script = NULL;
}

/* The networkPolicy of --allow-host/--deny-host: denials first (the first rule that
 * matches a host wins), then the allowed hosts. NULL when neither was given. */
static json_t *network_policy(const struct cli_create_opts *o)
{
	if (!json_array_size(o->allow_hosts) && !json_array_size(o->deny_hosts))
		return NULL;
	json_t *egress = json_array();
	size_t i;
	json_t *h;
	json_array_foreach(o->deny_hosts, i, h)
	    json_array_append_new(egress, json_pack("{s:s, s:O}", "action", "deny", "target", h));
	json_array_foreach(o->allow_hosts, i, h)
	    json_array_append_new(egress, json_pack("{s:s, s:O}", "action", "allow", "target", h));
	return json_pack("{s:s, s:o}", "defaultAction",
			 json_array_size(o->allow_hosts) ? "deny" : "allow", "egress", egress);
}

/* celld names the API's fields; the user typed flags. Each field a create's flags set,
 * longest first where one is the start of another. */
static const char *const field_flags[][2] = {
    {"resourceLimits.memory", "--memory"},
    {"resourceLimits.cpu", "--cpus"},
    {"resourceLimits.pids", "--pids-limit"},
    {"resourceLimits.disk", "--disk"},
    {"extensions.cell.name", "--name"},
    {"extensions.cell.codeInterpreter", "--code-interpreter"},
    {"extensions.cell.network", "--network"},
    {"extensions.cell.seccomp", "--seccomp"},
    {"extensions.cell.idleTimeout", "--idle-timeout"},
    {"extensions.cell.stopAfter", "--stop-after"},
    {"extensions.cell.reclaimAfter", "--reclaim-after"},
    {"extensions.cell.startupTimeout", "--startup-timeout"},
    {"extensions.cell.sessionKey", "--session"},
    {"extensions.cell.startupScript", "--startup-script"},
    {"extensions.cell.onTimeout", "--on-timeout"},
    {"extensions.cell.skills", "--skill"},
    {"extensions.cell.volumes", "-v"},
    {"secretEnv", "--secret"},
    {"image.uri", "--image"},
    {"snapshotId", "--snapshot"},
    {"entrypoint", "--entrypoint"},
    {"metadata", "--label"},
};

/* err's message with every API field of field_flags named by its flag instead. */
static void name_flags(struct cell_error *err)
{
	char out[sizeof(err->msg)];
	size_t o = 0;
	for (const char *p = err->msg; *p && o + 1 < sizeof(out);) {
		size_t i = 0;
		while (i < CELL_ARRAY_SIZE(field_flags) &&
		       strncmp(p, field_flags[i][0], strlen(field_flags[i][0])))
			i++;
		if (i == CELL_ARRAY_SIZE(field_flags)) {
			out[o++] = *p++;
			continue;
		}
		int n = snprintf(out + o, sizeof(out) - o, "%s", field_flags[i][1]);
		o = n < 0 || (size_t)n >= sizeof(out) - o ? sizeof(out) - 1 : o + (size_t)n;
		p += strlen(field_flags[i][0]);
	}
	out[o] = '\0';
	memcpy(err->msg, out, o + 1);
}

int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err)
{
	if (out)
		*out = NULL;
	if (o->snapshot && o->image)
		return cell_err_msg(err, EINVAL,
				    "--image and --snapshot: give one of them (a snapshot "
				    "carries its image)");
	json_t *body =
	    o->snapshot ? json_pack("{s:s}", "snapshotId", o->snapshot)
			: json_pack("{s:{s:s}}", "image", "uri", o->image ? o->image : "default");
	if (!body)
		return cell_err_msg(err, EINVAL, "%s is not valid UTF-8",
				    o->snapshot ? "--snapshot" : "--image");
	json_t *ext = json_object();
	if (o->name)
		json_object_set_new(ext, "cell.name", json_string(o->name));
	if (o->labels)
		json_object_set(body, "metadata", o->labels);
	if (o->limits)
		json_object_set(body, "resourceLimits", o->limits);
	if (o->entrypoint)
		json_object_set(body, "entrypoint", o->entrypoint);
	if (o->session)
		json_object_set_new(ext, "cell.sessionKey", json_string(o->session));
	if (o->seccomp)
		json_object_set_new(ext, "cell.seccomp", json_string(o->seccomp));
	if (o->seccomp_log)
		json_object_set_new(ext, "cell.seccompLog", json_string("true"));
	if (o->network)
		json_object_set_new(ext, "cell.network", json_string(o->network));
	if (o->code_interpreter)
		json_object_set_new(ext, "cell.codeInterpreter", json_string("true"));
	const char *timers[][2] = {{"cell.idleTimeout", o->idle_timeout},
				   {"cell.stopAfter", o->stop_after},
				   {"cell.reclaimAfter", o->reclaim_after},
				   {"cell.onTimeout", o->on_timeout}};
	for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++)
		if (timers[i][1])
			json_object_set_new(ext, timers[i][0], json_string(timers[i][1]));
	if (o->startup_script)
		json_object_set_new(ext, "cell.startupScript", json_string(o->startup_script));
	if (o->startup_timeout)
		json_object_set_new(ext, "cell.startupTimeout", json_string(o->startup_timeout));
	if (json_array_size(o->skills)) {
		size_t si;
		json_t *sk;
		_cleanup_free_ char *list = NULL;
		json_array_foreach(o->skills, si, sk)
		{
			char *next = NULL;
			if (asprintf(&next, "%s%s%s", list ? list : "", list ? "," : "",
				     json_string_value(sk)) < 0)
				break;
			free(list);
			list = next;
		}
		if (list)
			json_object_set_new(ext, "cell.skills", json_string(list));
	}
	json_t *np = network_policy(o);
	if (np)
		json_object_set_new(body, "networkPolicy", np);
	/* Named volumes go in the API's volumes[]; host paths in cell.volumes, as a JSON
	 * string (the extensions map holds strings only). */
	json_t *named = json_array(), *host = json_array();
	size_t k;
	json_t *vol;
	json_array_foreach(o->volumes, k, vol)
	    json_array_append(json_object_get(vol, "pvc") ? named : host, vol);
	if (json_array_size(host)) {
		_cleanup_free_ char *v = json_dumps(host, JSON_COMPACT);
		if (v)
			json_object_set_new(ext, "cell.volumes", json_string(v));
	}
	json_decref(host);
	if (json_array_size(named))
		json_object_set_new(body, "volumes", named);
	else
		json_decref(named);
	if (json_object_size(ext))
		json_object_set_new(body, "extensions", ext);
	else
		json_decref(ext);
	if (o->env && json_object_size(o->env))
		json_object_set(body, "env", o->env);
	if (o->secrets && json_object_size(o->secrets))
		json_object_set(body, "secretEnv", o->secrets);
	if (o->timeout_s > 0)
		json_object_set_new(body, "timeout", json_integer(o->timeout_s));

	json_t *resp = NULL;
	int r = cli_client_api("POST", "/v1/sandboxes", body, "create sandbox", &resp, NULL, err);
	json_decref(body);
	if (r < 0) {
		name_flags(err);
		return r;
	}
	const char *sid = json_string_value(json_object_get(resp, "id"));
	if (!sid || !cell_id_valid(sid) || strlen(sid) >= id_size) {
		json_decref(resp);
		return cell_err_msg(err, EPROTO, "create sandbox: celld's answer has no valid id");
	}
	snprintf(id, id_size, "%s", sid);
	/* What celld says about the request (how a volume's ids were mapped, say): never
	 * silent, never on stdout, where scripts read the id. */
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(resp, "warnings"), i, w) if (json_is_string(w))
	    fprintf(stderr, "cell: warning: %s\n", json_string_value(w));
	json_t *status = json_object_get(resp, "status");
	const char *state = json_string_value(json_object_get(status, "state"));
	if (state && !strcmp(state, "Failed")) {
		const char *msg = json_string_value(json_object_get(status, "message"));
		cell_err(err, 0, "create sandbox: sandbox %s failed to start: %s", id,
			 msg ? msg : "no reason given");
		json_decref(resp);
		return -EIO;
	}
	if (out)
		*out = resp;
	else
		json_decref(resp);
	return 0;
}
