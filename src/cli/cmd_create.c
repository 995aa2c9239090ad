/* cell create: make a sandbox and print its id. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell create [OPTIONS]\n"
		   "\n"
		   "Create a sandbox and print its id. With --session, an existing sandbox of the\n"
		   "same key is returned (resumed if paused or stopped) instead of a new one.\n"
		   "\n"
		   "Options:\n"
		   "  -i, --image NAME        local image (default: default)\n"
		   "  -s, --session KEY       create-or-resume by key (id = sha256(KEY)[0:16])\n"
		   "  -e, --env K=V           environment of the sandbox (repeatable)\n"
		   "  -v, --volume HOST:DEST[:OPTS]  bind-mount a host path (repeatable); OPTS:\n"
		   "                          ro, map=owner|range|identity (see cell(1))\n"
		   "  -t, --timeout SECONDS   delete the sandbox after this long (>= 60)\n"
		   "      --seccomp NAME      seccomp profile (default: default)\n"
		   "      --seccomp-log       record the sandbox's denied calls (cell inspect)\n"
		   "      --json              print the sandbox's JSON instead of its id\n"
		   "      --socket PATH       celld's socket\n"
		   "  -h, --help              this help\n");
}

bool cli_seccomp_opt(int c, const char *arg, struct cli_create_opts *o)
{
	if (c == CLI_OPT_SECCOMP)
		o->seccomp = arg;
	else if (c == CLI_OPT_SECCOMP_LOG)
		o->seccomp_log = true;
	return c == CLI_OPT_SECCOMP || c == CLI_OPT_SECCOMP_LOG;
}

int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err)
{
	if (out)
		*out = NULL;
	json_t *body = json_pack("{s:{s:s}}", "image", "uri", o->image ? o->image : "default");
	if (!body)
		return cli_fail(err, EINVAL, "image name is not valid UTF-8");
	json_t *ext = json_object();
	if (o->session)
		json_object_set_new(ext, "cell.sessionKey", json_string(o->session));
	if (o->seccomp)
		json_object_set_new(ext, "cell.seccomp", json_string(o->seccomp));
	if (o->seccomp_log)
		json_object_set_new(ext, "cell.seccompLog", json_string("true"));
	if (o->volumes && json_array_size(o->volumes)) {
		/* The extensions map holds strings only: the volume list is JSON in a string. */
		_cleanup_free_ char *v = json_dumps(o->volumes, JSON_COMPACT);
		if (v)
			json_object_set_new(ext, "cell.volumes", json_string(v));
	}
	if (json_object_size(ext))
		json_object_set_new(body, "extensions", ext);
	else
		json_decref(ext);
	if (o->env && json_object_size(o->env))
		json_object_set(body, "env", o->env);
	if (o->timeout_s > 0)
		json_object_set_new(body, "timeout", json_integer(o->timeout_s));

	json_t *resp = NULL;
	int r = cli_api("POST", "/v1/sandboxes", body, "create sandbox", &resp, NULL, err);
	json_decref(body);
	if (r < 0)
		return r;
	const char *sid = json_string_value(json_object_get(resp, "id"));
	if (!sid || !cell_id_valid(sid) || strlen(sid) >= id_size) {
		json_decref(resp);
		return cli_fail(err, EPROTO, "create sandbox: celld's answer has no valid id");
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

int cmd_create(int argc, char **argv)
{
	static const struct option longopts[] = {{"image", required_argument, NULL, 'i'},
						 {"session", required_argument, NULL, 's'},
						 {"env", required_argument, NULL, 'e'},
						 {"volume", required_argument, NULL, 'v'},
						 {"timeout", required_argument, NULL, 't'},
						 CLI_SECCOMP_LONGOPTS,
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct cli_create_opts o = {0};
	json_t *env = json_object();
	json_t *vols = json_array();
	int rc = CLI_EXIT_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hi:s:e:v:t:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || cli_seccomp_opt(c, optarg, &o))
			continue;
		switch (c) {
		case 'h':
			usage(stdout);
			rc = CLI_EXIT_OK;
			goto out;
		case 'i':
			o.image = optarg;
			break;
		case 's':
			o.session = optarg;
			break;
		case 'e':
			if (cli_parse_env(env, optarg) < 0)
				goto out;
			break;
		case 'v':
			if (cli_parse_volume(vols, optarg) < 0)
				goto out;
			break;
		case 't': {
			char *end = NULL;
			o.timeout_s = strtoll(optarg, &end, 10);
			if (end == optarg || *end || o.timeout_s <= 0) {
				rc = cli_usage_error("create", CLI_EXIT_USAGE,
						     "--timeout '%s': expected whole seconds",
						     optarg);
				goto out;
			}
			break;
		}
		default:
			rc = cli_bad_option("create", CLI_EXIT_USAGE);
			goto out;
		}
	}
	if (optind != argc) {
		rc = cli_usage_error("create", CLI_EXIT_USAGE, "unexpected argument '%s'",
				     argv[optind]);
		goto out;
	}
	o.env = env;
	o.volumes = vols;
	char id[CELL_ID_MAX + 1];
	json_t *sb = NULL;
	struct cell_error err = {0};
	if (cli_create_sandbox(&o, id, sizeof(id), &sb, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (cli.json)
		cli_print_json(sb);
	else
		printf("%s\n", id);
	json_decref(sb);
	rc = CLI_EXIT_OK;
out:
	json_decref(env);
	json_decref(vols);
	return rc;
}
