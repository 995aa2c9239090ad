/* cell rm: delete sandboxes (every process killed, disk removed). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "delete.h"
#include "error.h"
#include "global.h"
#include "parse.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell rm ID...\n"
		   "\n"
		   "Delete each sandbox: its processes are killed and its disk removed. Every id\n"
		   "is tried (unless celld cannot be reached); the exit status is 1 when any of\n"
		   "them failed, with one message per failed id.\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

int cmd_rm(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "rm", usage);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return cli_error_usage("rm", CLI_EXIT_USAGE, "expected at least one sandbox id");
	rc = CLI_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		if (!cli_parse_id(argv[i])) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		struct cell_error err = {0};
		if (cli_delete_sandbox(argv[i], &err) < 0) {
			cli_error("%s", err.msg);
			rc = CLI_EXIT_FAIL;
			if (cli_client()->unreachable) /* nothing later can succeed without celld */
				break;
			continue;
		}
		printf("%s\n", argv[i]);
	}
	return rc;
}
