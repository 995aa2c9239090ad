/* cell inspect (a sandbox's kernel-level details) and cell info (celld's own). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "parse.h"

/* Shared by inspect and info: GET path and print the JSON. */
static int get_and_print(const char *path, const char *what, json_t **keep)
{
	json_t *resp = NULL;
	struct cell_error err = {0};
	if (cli_client_api("GET", path, NULL, what, &resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (!resp) {
		cli_error("%s: celld sent an empty answer", what);
		return CLI_EXIT_FAIL;
	}
	if (keep) {
		*keep = resp;
		return CLI_EXIT_OK;
	}
	cli_output_json(resp);
	json_decref(resp);
	return CLI_EXIT_OK;
}

static void inspect_usage(FILE *f)
{
	fprintf(f, "Usage: cell inspect ID...\n"
		   "\n"
		   "Print each sandbox's kernel-level details as JSON: host pid of its init,\n"
		   "uid/gid maps, namespace ids, cgroup path, host pids of its processes, state\n"
		   "dir, seccomp profile (and, with --seccomp-log, its denied calls), with the\n"
		   "API's name, status, metadata, entrypoint (entrypointStatus: how its latest\n"
		   "run is doing) and resourceLimits. One ID: an object; several: an array. ID\n"
		   "is an id, a name or a unique start of an id.\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

/* The sandbox's kernel-level details with its API object's other members; NULL after
 * printing why. */
static json_t *inspect_one(const char *arg)
{
	const char *id = cli_resolve_id(arg);
	if (!id)
		return NULL;
	char path[128], what[96];
	json_t *sb = NULL, *kern = NULL;
	snprintf(what, sizeof(what), "inspect %s", id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	if (get_and_print(path, what, &sb) != CLI_EXIT_OK)
		return NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/inspect", id);
	if (get_and_print(path, what, &kern) != CLI_EXIT_OK) {
		json_decref(sb);
		return NULL;
	}
	/* The kernel-level view as it always was (its image a string, its state cell's);
	 * the API's members it lacks (name, status, metadata, resourceLimits...) added. */
	json_object_update_missing(kern, sb);
	json_decref(sb);
	return kern;
}

int cmd_inspect(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "inspect", inspect_usage);
	if (rc >= 0)
		return rc;
	if (argc - optind < 1)
		return cli_error_usage("inspect", CLI_EXIT_USAGE, "expected a sandbox id");
	json_t *all = json_array();
	rc = CLI_EXIT_OK;
	for (int i = optind; i < argc && all; i++) {
		json_t *one = inspect_one(argv[i]);
		if (!one) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		json_array_append_new(all, one);
	}
	if (json_array_size(all))
		cli_output_json(argc - optind == 1 ? json_array_get(all, 0) : all);
	json_decref(all);
	return rc;
}

static void info_usage(FILE *f)
{
	fprintf(f, "Usage: cell info\n"
		   "\n"
		   "Show celld's version, cgroup backend, state and images dirs, sandbox count.\n"
		   "\n"
		   "Options:\n"
		   "      --json         print the JSON answer\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

int cmd_info(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "info", info_usage);
	if (rc >= 0)
		return rc;
	if (optind != argc)
		return cli_error_usage("info", CLI_EXIT_USAGE, "takes no arguments");
	if (cli.json)
		return get_and_print("/v1/info", "info", NULL);
	json_t *resp = NULL;
	rc = get_and_print("/v1/info", "info", &resp);
	if (rc)
		return rc;
	printf("socket:     ");
	cli_output_safe(cli.socket, stdout);
	putchar('\n');
	const char *key;
	json_t *val;
	json_object_foreach(resp, key, val)
	{
		char label[64];
		snprintf(label, sizeof(label), "%s:", key);
		printf("%-11s ", label);
		if (json_is_string(val)) {
			cli_output_safe(json_string_value(val), stdout);
		} else {
			_cleanup_free_ char *s = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
			cli_output_safe(s ? s : "?", stdout);
		}
		putchar('\n');
	}
	json_decref(resp);
	return CLI_EXIT_OK;
}
