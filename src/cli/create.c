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
	free(o->startup_script);
	o->allow_hosts = o->deny_hosts = o->skills = NULL;
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

int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err)
{
	if (out)
		*out = NULL;
	json_t *body = json_pack("{s:{s:s}}", "image", "uri", o->image ? o->image : "default");
	if (!body)
		return cell_err_msg(err, EINVAL, "image name is not valid UTF-8");
	json_t *ext = json_object();
	if (o->session)
		json_object_set_new(ext, "cell.sessionKey", json_string(o->session));
	if (o->seccomp)
		json_object_set_new(ext, "cell.seccomp", json_string(o->seccomp));
	if (o->seccomp_log)
		json_object_set_new(ext, "cell.seccompLog", json_string("true"));
	if (o->network)
		json_object_set_new(ext, "cell.network", json_string(o->network));
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
	if (r < 0)
		return r;
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
