/* cell snapshot / cell fork: capture a sandbox's writable layer (POST
 * /v1/sandboxes/ID/snapshots), list and remove snapshots, and make a new sandbox from a
 * fresh snapshot in one step. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "table.h"

static void snapshot_usage(FILE *f)
{
	fprintf(f, "Usage: cell snapshot ID [--name NAME]\n"
		   "       cell snapshot ls [--json]\n"
		   "       cell snapshot rm SNAPSHOT...\n"
		   "\n"
		   "Capture the files of sandbox ID (its writable layer: everything it wrote) as\n"
		   "a snapshot and print the snapshot's id. A running sandbox is frozen for the\n"
		   "copy and thawed after; a paused or stopped one stays as it is. A snapshot\n"
		   "outlives its sandbox; `cell fork` or a create with snapshotId starts a new\n"
		   "sandbox on a copy of it. ls lists the snapshots, rm removes them.\n"
		   "\n"
		   "Options:\n"
		   "      --name NAME    a name for the snapshot (1-128 bytes)\n"
		   "      --json         (ls) print the snapshots as a JSON array\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void fork_usage(FILE *f)
{
	fprintf(f, "Usage: cell fork ID [--name NAME] [-e KEY=VALUE]...\n"
		   "\n"
		   "Snapshot sandbox ID and create a new sandbox from that snapshot: it starts\n"
		   "with ID's files, image, limits, environment and network policy, in its own\n"
		   "uid range; its writes never reach ID, nor ID's its. Prints the new id. The\n"
		   "snapshot is kept (cell snapshot ls, cell snapshot rm).\n"
		   "\n"
		   "Options:\n"
		   "      --name NAME    a name for the snapshot\n"
		   "  -e, --env K=V      an environment variable of the new sandbox (repeatable)\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

enum { OPT_NAME = 0x2000 };

/* The snapshot's id (malloc'd), or NULL with the error printed. */
static char *take(const char *id, const char *name)
{
	_cleanup_free_ char *path = NULL;
	struct cell_error err = {0};
	if (!(id = cli_resolve_id(id)))
		return NULL;
	if (asprintf(&path, "/v1/sandboxes/%s/snapshots", id) < 0)
		return NULL;
	json_t *body = name ? json_pack("{s:s}", "name", name) : json_object();
	json_t *resp = NULL;
	int r = cli_client_api("POST", path, body, "snapshot", &resp, NULL, &err);
	json_decref(body);
	if (r < 0) {
		cli_error("%s", err.msg);
		return NULL;
	}
	const char *sid = json_string_value(json_object_get(resp, "id"));
	char *out = sid ? strdup(sid) : NULL;
	if (!out)
		cli_error("snapshot: the answer has no id");
	json_decref(resp);
	return out;
}

static int snapshot_ls(void)
{
	json_t *resp, *items;
	int rc = cli_client_items("/v1/snapshots?pageSize=200", "list snapshots", &resp, &items);
	if (rc >= 0)
		return rc;
	struct cli_table t;
	cli_table_init(&t, 5);
	cli_table_add(&t, (const char *const[]){"ID", "SANDBOX", "NAME", "STATE", "CREATED"});
	size_t i;
	json_t *v;
	json_array_foreach(items, i, v)
	{
		const char *id = json_string_value(json_object_get(v, "id"));
		const char *sb = json_string_value(json_object_get(v, "sandboxId"));
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *state =
		    json_string_value(json_object_get(json_object_get(v, "status"), "state"));
		const char *at = json_string_value(json_object_get(v, "createdAt"));
		cli_table_add(&t,
			      (const char *const[]){id ? id : "?", sb ? sb : "?", name ? name : "",
						    state ? state : "?", at ? at : ""});
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(resp);
	return CLI_EXIT_OK;
}

static int remove_one(const char *id, void *cls, struct cell_error *err)
{
	(void)cls;
	_cleanup_free_ char *path = NULL;
	if (!cell_id_valid(id))
		return cell_err_msg(err, EINVAL, "invalid snapshot id '%s'", id);
	if (asprintf(&path, "/v1/snapshots/%s", id) < 0)
		return cell_err(err, ENOMEM, "remove snapshot");
	return cli_client_api("DELETE", path, NULL, "remove snapshot", NULL, NULL, err);
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_GLOBAL_LONGOPTS, {"name", required_argument, NULL, OPT_NAME}, {0}};
	const char *name = NULL;
	int c;
	/* "+": stop at the first operand (the id or subcommand); options may follow it. */
	const char *flags = "+h";
	const char *first = NULL;
	for (int pass = 0; pass < 2; pass++) {
		while ((c = getopt_long(argc, argv, flags, longopts, NULL)) != -1) {
			if (cli_global_opt(c, optarg))
				continue;
			if (c == 'h') {
				snapshot_usage(stdout);
				return CLI_EXIT_OK;
			}
			if (c == OPT_NAME) {
				name = optarg;
				continue;
			}
			return cli_error_option("snapshot", CLI_EXIT_USAGE);
		}
		if (pass == 0) {
			if (optind >= argc)
				return cli_error_usage("snapshot", CLI_EXIT_USAGE,
						       "expected a sandbox id, ls or rm");
			first = argv[optind++];
			if (!strcmp(first, "rm"))
				break; /* cli_each reads the rest */
			flags = "h";
		}
	}
	if (!strcmp(first, "ls")) {
		if (optind != argc)
			return cli_error_usage("snapshot", CLI_EXIT_USAGE,
					       "ls: unexpected argument '%s'", argv[optind]);
		return snapshot_ls();
	}
	if (!strcmp(first, "rm"))
		return cli_each(argc, argv, "snapshot", "snapshot id", false, remove_one, NULL);
	if (optind != argc)
		return cli_error_usage("snapshot", CLI_EXIT_USAGE, "unexpected argument '%s'",
				       argv[optind]);
	_cleanup_free_ char *sid = take(first, name);
	if (!sid)
		return CLI_EXIT_FAIL;
	printf("%s\n", sid);
	return CLI_EXIT_OK;
}

int cmd_fork(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_GLOBAL_LONGOPTS,
						 {"name", required_argument, NULL, OPT_NAME},
						 {"env", required_argument, NULL, 'e'},
						 {0}};
	const char *name = NULL;
	json_t *env = json_object();
	int c;
	while ((c = getopt_long(argc, argv, "he:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			fork_usage(stdout);
			json_decref(env);
			return CLI_EXIT_OK;
		}
		if (c == OPT_NAME) {
			name = optarg;
			continue;
		}
		const char *eq = c == 'e' ? strchr(optarg, '=') : NULL;
		if (c == 'e' && eq && eq != optarg) {
			_cleanup_free_ char *k = strndup(optarg, (size_t)(eq - optarg));
			if (k)
				json_object_set_new(env, k, json_string(eq + 1));
			continue;
		}
		json_decref(env);
		if (c == 'e')
			return cli_error_usage("fork", CLI_EXIT_USAGE,
					       "--env '%s': expected KEY=VALUE", optarg);
		return cli_error_option("fork", CLI_EXIT_USAGE);
	}
	if (optind + 1 != argc) {
		json_decref(env);
		return cli_error_usage("fork", CLI_EXIT_USAGE, "expected one sandbox id");
	}
	_cleanup_free_ char *sid = take(argv[optind], name);
	if (!sid) {
		json_decref(env);
		return CLI_EXIT_FAIL;
	}
	json_t *body = json_pack("{s:s, s:o}", "snapshotId", sid, "env", env);
	json_t *resp = NULL;
	struct cell_error err = {0};
	int r = cli_client_api("POST", "/v1/sandboxes", body, "create sandbox", &resp, NULL, &err);
	json_decref(body);
	if (r < 0) {
		cli_error("%s (snapshot %s is kept)", err.msg, sid);
		return CLI_EXIT_FAIL;
	}
	const char *id = json_string_value(json_object_get(resp, "id"));
	if (id)
		printf("%s\n", id);
	json_decref(resp);
	return id ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
