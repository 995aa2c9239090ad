/* cell ls: all sandboxes, as a table or JSON. */
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
#include "table.h"

static void ls_usage(FILE *f)
{
	fprintf(f, "Usage: cell ls [OPTIONS]\n"
		   "\n"
		   "List sandboxes, in every state (Running, Paused, Stopped, Failed):\n"
		   "ID NAME STATE IMAGE CREATED.\n"
		   "\n"
		   "Options:\n"
		   "  -a, --all          every sandbox (what ls lists anyway; docker's habit)\n"
		   "  -q, --quiet        only the ids, one a line\n"
		   "      --state STATE  only sandboxes in this state (Running, Paused, Stopped,\n"
		   "                     Failed; repeatable)\n"
		   "      --json         print the sandboxes as a JSON array\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static const char *str_or(json_t *j, const char *dflt)
{
	const char *s = json_string_value(j);
	return s && s[0] ? s : dflt;
}

int cmd_ls(int argc, char **argv)
{
	enum { OPT_STATE = 0x2000 };
	static const struct option longopts[] = {{"state", required_argument, NULL, OPT_STATE},
						 {"all", no_argument, NULL, 'a'},
						 {"quiet", no_argument, NULL, 'q'},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	bool quiet = false;
	char query[512] = "";
	size_t qlen = 0;
	int c;
	while ((c = getopt_long(argc, argv, "haq", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || c == 'a')
			continue;
		if (c == 'q') {
			quiet = true;
			continue;
		}
		if (c == 'h') {
			ls_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == OPT_STATE) {
			_cleanup_free_ char *enc = cell_client_urlencode(optarg);
			int n = enc ? snprintf(query + qlen, sizeof(query) - qlen, "&state=%s", enc)
				    : -1;
			if (n < 0 || (size_t)n >= sizeof(query) - qlen)
				return cli_error_usage("ls", CLI_EXIT_USAGE, "too many --state");
			qlen += (size_t)n;
			continue;
		}
		return cli_error_option("ls", CLI_EXIT_USAGE);
	}
	if (optind != argc)
		return cli_error_usage("ls", CLI_EXIT_USAGE, "unexpected argument '%s'",
				       argv[optind]);
	json_t *all = json_array();
	struct cell_error err = {0};
	if (cli_client_sandboxes(query, all, &err) < 0) {
		cli_error("%s", err.msg);
		json_decref(all);
		return CLI_EXIT_FAIL;
	}
	if (cli.json) {
		cli_output_json(all);
		json_decref(all);
		return CLI_EXIT_OK;
	}
	size_t i;
	json_t *sb;
	if (quiet) {
		json_array_foreach(all, i, sb)
		    printf("%s\n", str_or(json_object_get(sb, "id"), "?"));
		json_decref(all);
		return CLI_EXIT_OK;
	}
	struct cli_table t;
	cli_table_init(&t, 5);
	/* celld reports a Stopped sandbox as Paused with reason Stopped (for OpenSandbox
	 * clients, which know no Stopped); people are told what it is. */
	cli_table_add(&t, (const char *const[]){"ID", "NAME", "STATE", "IMAGE", "CREATED"});
	json_array_foreach(all, i, sb)
	{
		json_t *status = json_object_get(sb, "status");
		const char *reason = json_string_value(json_object_get(status, "reason"));
		bool stopped = reason && !strcmp(reason, "Stopped");
		const char *row[5] = {
		    str_or(json_object_get(sb, "id"), "?"),
		    str_or(json_object_get(sb, "name"), "-"),
		    stopped ? "Stopped" : str_or(json_object_get(status, "state"), "?"),
		    str_or(json_object_get(json_object_get(sb, "image"), "uri"), "-"),
		    str_or(json_object_get(sb, "createdAt"), "-"),
		};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(all);
	return CLI_EXIT_OK;
}
