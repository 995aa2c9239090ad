/* The cell CLI's global options: one place that owns them, below every command. */
#include <getopt.h>
#include <stdio.h>

#include "error.h"
#include "global.h"

struct cli_global cli;

bool cli_global_opt(int c, const char *arg)
{
	switch (c) {
	case CLI_OPT_SOCKET:
		cli.socket = arg;
		return true;
	case CLI_OPT_JSON:
		cli.json = true;
		return true;
	default:
		return false;
	}
}

int cli_global_opts_only(int argc, char **argv, const char *optstring, const char *cmd,
			 void (*help)(FILE *))
{
	static const struct option longopts[] = {CLI_GLOBAL_LONGOPTS, {0}};
	int c;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			help(stdout);
			return CLI_EXIT_OK;
		}
		return cli_error_option(cmd, CLI_EXIT_USAGE);
	}
	return -1;
}
