/* cell network: a sandbox's egress policy in force, and live changes to it, through the
 * egress API celld serves under the sandbox's endpoint of port 18080 (GET, PATCH and DELETE
 * /policy, the calls of OpenSandbox's SDK). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "parse.h"

#define CLI_EGRESS_PREFIX "/proxy/18080"

static void network_usage(FILE *f)
{
	fprintf(f,
		"Usage: cell network ID [--allow-host H]... [--deny-host H]... [--json]\n"
		"       cell network ID --remove H...\n"
		"\n"
		"Without options, print the egress policy in force in sandbox ID: its mode,\n"
		"its default action and its rules, in the order they are matched (the first\n"
		"rule that matches decides, else the default action).\n"
		"\n"
		"With --allow-host and --deny-host, change it live: the rules given come first,\n"
		"in the order given, and replace any rule of the same target; the other rules\n"
		"and the default action stay. H is a domain (example.com), a wildcard\n"
		"(*.example.com: every name below example.com, not example.com itself), an\n"
		"IPv4 address or an IPv4 CIDR. The operator's blocked ranges stay blocked\n"
		"whatever the rules say. A sandbox created with --network none has no network\n"
		"to open.\n"
		"\n"
		"Options:\n"
		"      --allow-host H  allow H (repeatable)\n"
		"      --deny-host H   deny H (repeatable)\n"
		"      --remove H      remove the rule of target H (repeatable; not with\n"
		"                      --allow-host or --deny-host; a target without a rule is\n"
		"                      no error)\n"
		"      --json          print celld's answer as JSON\n"
		"      --socket PATH   celld's socket\n"
		"  -h, --help          this help\n");
}

static void print_policy(json_t *resp)
{
	json_t *policy = json_object_get(resp, "policy");
	const char *mode = json_string_value(json_object_get(resp, "mode"));
	const char *reason = json_string_value(json_object_get(resp, "reason"));
	const char *dflt = json_string_value(json_object_get(policy, "defaultAction"));
	printf("mode:    ");
	cli_output_safe(mode ? mode : "?", stdout);
	if (reason) {
		printf(" (");
		cli_output_safe(reason, stdout);
		putchar(')');
	}
	printf("\ndefault: ");
	cli_output_safe(dflt ? dflt : "?", stdout);
	putchar('\n');
	json_t *egress = json_object_get(policy, "egress");
	if (!json_array_size(egress)) {
		printf("rules:   none\n");
		return;
	}
	printf("rules:\n");
	size_t i;
	json_t *rule;
	json_array_foreach(egress, i, rule)
	{
		const char *action = json_string_value(json_object_get(rule, "action"));
		const char *target = json_string_value(json_object_get(rule, "target"));
		printf("  %-5s ", action && !strcmp(action, "allow") ? "allow" : "deny");
		cli_output_safe(target ? target : "?", stdout);
		putchar('\n');
	}
}

int cmd_network(int argc, char **argv)
{
	enum { OPT_ALLOW = 0x2000, OPT_DENY, OPT_REMOVE };
	static const struct option longopts[] = {{"allow-host", required_argument, NULL, OPT_ALLOW},
						 {"deny-host", required_argument, NULL, OPT_DENY},
						 {"remove", required_argument, NULL, OPT_REMOVE},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	json_t *rules = json_array();
	json_t *remove = json_array();
	if (!rules || !remove) {
		json_decref(rules);
		json_decref(remove);
		cli_error("network: out of memory");
		return CLI_EXIT_FAIL;
	}
	/* Declared before the first goto out: their cleanup runs at every return. */
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *what = NULL;
	int rc = CLI_EXIT_OK;
	int c;
	/* getopt permutes: the options may come before or after the id. */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			network_usage(stdout);
			goto out;
		}
		if (c == OPT_ALLOW || c == OPT_DENY || c == OPT_REMOVE) {
			/* NULL for text that is not UTF-8 (or out of memory). */
			json_t *v = c == OPT_REMOVE ? json_string(optarg)
						    : json_pack("{s:s, s:s}", "action",
								c == OPT_ALLOW ? "allow" : "deny",
								"target", optarg);
			if (!v || json_array_append_new(c == OPT_REMOVE ? remove : rules, v) < 0) {
				rc = cli_error_usage("network", CLI_EXIT_USAGE,
						     "host '%s' is not valid text", optarg);
				goto out;
			}
			continue;
		}
		rc = cli_error_option("network", CLI_EXIT_USAGE);
		goto out;
	}
	if (argc - optind != 1) {
		rc = cli_error_usage("network", CLI_EXIT_USAGE, "expected exactly one sandbox id");
		goto out;
	}
	if (json_array_size(rules) && json_array_size(remove)) {
		rc =
		    cli_error_usage("network", CLI_EXIT_USAGE,
				    "--remove cannot be combined with --allow-host or --deny-host");
		goto out;
	}
	const char *id = cli_resolve_id(argv[optind]);
	if (!id) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	const char *method = json_array_size(rules)    ? "PATCH"
			     : json_array_size(remove) ? "DELETE"
						       : "GET";
	json_t *body = json_array_size(rules) ? rules : json_array_size(remove) ? remove : NULL;
	if (asprintf(&path, "/v1/sandboxes/%s" CLI_EGRESS_PREFIX "/policy", id) < 0 ||
	    asprintf(&what, "network %s", id) < 0) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	json_t *resp = NULL;
	struct cell_error err = {0};
	if (cli_client_api(method, path, body, what, &resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (!json_is_object(resp)) {
		cli_error("%s: celld sent no policy", what);
		json_decref(resp);
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (cli.json)
		cli_output_json(resp);
	else
		print_policy(resp);
	json_decref(resp);
out:
	json_decref(rules);
	json_decref(remove);
	return rc;
}
