/* cell exec: run one command in an existing sandbox, output and exit code passed through. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "client.h"
#include "commands.h"
#include "error.h"
#include "exec.h"
#include "global.h"
#include "parse.h"
#include "signals.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell exec [OPTIONS] ID -- CMD [ARG...]\n"
		"\n"
		"Run CMD (without a shell) in sandbox ID, stream its stdout and stderr here, and\n"
		"exit with its exit code: 128+N when killed by signal N, 124 when --timeout\n"
		"fired, 125 when cell itself failed. ^C interrupts CMD.\n"
		"\n"
		"Options:\n"
		"  -w, --workdir DIR      working directory (default: /workspace)\n"
		"  -e, --env K=V          environment variable (repeatable)\n"
		"  -t, --timeout SECONDS  kill CMD after this long (exit code 124)\n"
		"  -u, --user UID[:GID]   run CMD as this user and group (numbers, 0-65535; GID\n"
		"                         defaults to UID; default: root). The default image's\n"
		"                         ordinary account `user` is 1000; names are not resolved\n"
		"      --socket PATH      celld's socket\n"
		"  -h, --help             this help\n"
		"\n"
		"Example: cell exec 3f2a9c0d1b2e4f5a -- sh -c 'echo $HOME'\n");
}

int cmd_exec(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_EXEC_LONGOPTS, CLI_GLOBAL_LONGOPTS, {0}};
	struct cli_exec_req xr = {0};
	json_t *envs = json_object();
	int code = CLI_EXIT_RUN_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hw:e:t:u:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		int r = cli_exec_opt(c, optarg, &xr, envs);
		if (r < 0)
			goto out;
		if (r > 0)
			continue;
		if (c == 'h') {
			usage(stdout);
			code = CLI_EXIT_OK;
		} else {
			cli_error_option("exec", CLI_EXIT_RUN_FAIL);
		}
		goto out;
	}
	if (optind >= argc) {
		cli_error_usage("exec", CLI_EXIT_RUN_FAIL, "expected a sandbox id");
		goto out;
	}
	xr.id = argv[optind++];
	if (!cli_parse_id(xr.id))
		goto out;
	/* The id may be followed by "--" when getopt stopped at the id itself. */
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (optind >= argc) {
		cli_error_usage("exec", CLI_EXIT_RUN_FAIL, "expected a command after the id");
		goto out;
	}
	xr.argv = argv + optind;
	xr.envs = envs;
	cli_signals_install();
	struct cell_error err = {0};
	if (cli_exec_stream(&xr, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
out:
	json_decref(envs);
	return code;
}
