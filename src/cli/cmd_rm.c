/* cell rm: delete sandboxes (every process killed, disk removed). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "delete.h"
#include "error.h"
#include "global.h"
#include "parse.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell rm [-f] ID...\n"
		"       cell rm --all [-f]\n"
		"\n"
		"Delete each sandbox, whatever its state: its processes are killed and its\n"
		"disk removed. Every id is tried (unless celld cannot be reached); the exit\n"
		"status is 1 when any of them failed, with one message per failed id. ID is an\n"
		"id, a name or a unique start of an id.\n"
		"\n"
		"Options:\n"
		"  -f, --force        accepted as docker's: a running sandbox is deleted anyway;\n"
		"                     with --all, every sandbox, running ones too\n"
		"  -a, --all          every stopped or failed sandbox (with -f: every one)\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n");
}

static int delete_one(const char *id, void *cls, struct cell_error *err)
{
	(void)cls;
	return cli_delete_sandbox(id, err);
}

/* Would --all (with -f: force) delete sb? Stopped ones are listed as Paused with reason
 * Stopped (for OpenSandbox's clients). */
static bool all_takes(json_t *sb, bool force)
{
	json_t *status = json_object_get(sb, "status");
	const char *state = json_string_value(json_object_get(status, "state"));
	const char *reason = json_string_value(json_object_get(status, "reason"));
	return force || (reason && !strcmp(reason, "Stopped")) ||
	       (state && (!strcmp(state, "Failed") || !strcmp(state, "Stopped")));
}

/* --all: each sandbox all_takes, deleted and printed; 1 when any delete failed. */
static int delete_all(bool force)
{
	json_t *all = json_array();
	struct cell_error err = {0};
	if (!all || cli_client_sandboxes("", all, &err) < 0) {
		cli_error("%s", err.msg[0] ? err.msg : "out of memory");
		json_decref(all);
		return CLI_EXIT_FAIL;
	}
	int rc = CLI_EXIT_OK;
	size_t i;
	json_t *sb;
	json_array_foreach(all, i, sb)
	{
		const char *id = json_string_value(json_object_get(sb, "id"));
		if (!id || !all_takes(sb, force))
			continue;
		struct cell_error derr = {0};
		if (cli_delete_sandbox(id, &derr) < 0 && derr.code != ENOENT) {
			cli_error("%s", derr.msg);
			rc = CLI_EXIT_FAIL;
		} else {
			printf("%s\n", id);
		}
	}
	json_decref(all);
	return rc;
}

int cmd_rm(int argc, char **argv)
{
	static const struct option longopts[] = {{"force", no_argument, NULL, 'f'},
						 {"all", no_argument, NULL, 'a'},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	bool force = false, all = false;
	int c;
	while ((c = getopt_long(argc, argv, "hfa", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'f' || c == 'a') {
			*(c == 'f' ? &force : &all) = true;
			continue;
		}
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		return cli_error_option("rm", CLI_EXIT_USAGE);
	}
	if (all && optind < argc)
		return cli_error_usage("rm", CLI_EXIT_USAGE, "--all takes no id ('%s')",
				       argv[optind]);
	if (all)
		return delete_all(force);
	return cli_each(argc, argv, "rm", "sandbox id", true, delete_one, NULL);
}
