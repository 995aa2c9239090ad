/* cell version: print the version of the CLI. */
#include <getopt.h>
#include <stdio.h>

#include "cell/version.h"
#include "commands.h"
#include "error.h"
#include "global.h"

static void version_usage(FILE *f)
{
	fprintf(f, "Usage: cell version\n\nPrint the version of the cell CLI.\n");
}

int cmd_version(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "+h", "version", version_usage);
	if (rc >= 0)
		return rc;
	if (optind != argc)
		return cli_error_usage("version", CLI_EXIT_USAGE, "takes no arguments");
	if (cli.json)
		printf("{\"version\": \"%s\"}\n", CELL_VERSION);
	else
		printf("cell %s\n", CELL_VERSION);
	return CLI_EXIT_OK;
}
