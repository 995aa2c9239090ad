/* cell run: create a sandbox, run one command in it with its output passed through
 * byte-exact, exit with its exit code, and delete the sandbox with --rm. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/id.h"
#include "client.h"
#include "commands.h"
#include "create.h"
#include "delete.h"
#include "error.h"
#include "exec.h"
#include "global.h"
#include "parse.h"
#include "signals.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cell run [OPTIONS] -- CMD [ARG...]\n"
	    "\n"
	    "Create a sandbox, run CMD in it (without a shell), stream its stdout and stderr\n"
	    "here, and exit with its exit code: 128+N when it was killed by signal N, 124 when\n"
	    "--timeout fired, 125 when cell itself failed.\n"
	    "\n"
	    "Options:\n"
	    "      --rm                 delete the sandbox afterwards (also on failure, ^C,\n"
	    "                           SIGTERM)\n"
	    "  -i, --image NAME         image (default: default): one cell built, one of the\n"
	    "                           store (cell image ls), or a registry reference\n"
	    "                           (python:3.12-slim), pulled on first use\n"
	    "  -v, --volume SRC:DEST[:OPTS]  mount SRC on DEST (repeatable): a host path\n"
	    "                           (with a '/'), or the name of a named volume, made on\n"
	    "                           first use (cell volume); OPTS: ro, and for host\n"
	    "                           paths map=owner|range|identity (see cell(1))\n"
	    "  -w, --workdir DIR        working directory of CMD (default: the image's\n"
	    "                           WorkingDir, else /workspace)\n"
	    "  -e, --env K=V            environment variable of CMD (repeatable; K alone takes\n"
	    "                           the value from this environment)\n"
	    "  -t, --timeout SECONDS    kill CMD after this long (exit code 124)\n"
	    "  -u, --user UID[:GID]     run CMD as this user and group (numbers, 0-65535; GID\n"
	    "                           defaults to UID; default: root). The default image's\n"
	    "                           ordinary account `user` is 1000; names are not resolved\n"
	    "  -s, --session KEY        create-or-resume the sandbox of this key\n"
	    "      --seccomp NAME       seccomp profile (policies/seccomp/NAME.json)\n"
	    "      --seccomp-log        record the sandbox's denied calls (cell "
	    "inspect)\n" CLI_NETWORK_HELP CLI_TIMER_HELP CLI_PROVISION_HELP
	    "      --socket PATH        celld's socket\n"
	    "  -h, --help               this help\n"
	    "\n"
	    "Example: cell run --rm -v \"$PWD\":/src:ro -w /src -- make -n\n");
}

enum { OPT_RM = 0x2000 };

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {{"rm", no_argument, NULL, OPT_RM},
						 {"image", required_argument, NULL, 'i'},
						 {"volume", required_argument, NULL, 'v'},
						 {"session", required_argument, NULL, 's'},
						 CLI_EXEC_LONGOPTS,
						 CLI_SECCOMP_LONGOPTS,
						 CLI_TIMER_LONGOPTS,
						 CLI_NETWORK_LONGOPTS,
						 CLI_PROVISION_LONGOPTS,
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct cli_create_opts co = {0};
	struct cli_exec_req xr = {0};
	bool rm = false;
	json_t *envs = json_object();
	json_t *vols = json_array();
	int code = CLI_EXIT_RUN_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hi:v:w:e:t:u:s:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || cli_create_seccomp_opt(c, optarg, &co))
			continue;
		int nr = cli_create_timer_opt(c, optarg, &co);
		if (nr == 0)
			nr = cli_create_network_opt(c, optarg, &co);
		if (nr == 0)
			nr = cli_create_provision_opt(c, optarg, &co);
		if (nr < 0)
			goto out;
		if (nr > 0)
			continue;
		int r = cli_exec_opt(c, optarg, &xr, envs);
		if (r < 0)
			goto out;
		if (r > 0)
			continue;
		switch (c) {
		case 'h':
			usage(stdout);
			code = CLI_EXIT_OK;
			goto out;
		case OPT_RM:
			rm = true;
			break;
		case 'i':
			co.image = optarg;
			break;
		case 'v':
			if (cli_parse_volume(vols, optarg) < 0)
				goto out;
			break;
		case 's':
			co.session = optarg;
			break;
		default:
			cli_error_option("run", CLI_EXIT_RUN_FAIL);
			goto out;
		}
	}
	if (optind >= argc) {
		cli_error_usage("run", CLI_EXIT_RUN_FAIL, "expected a command after '--'");
		goto out;
	}
	co.volumes = vols;
	xr.argv = argv + optind;
	xr.envs = envs;

	/* From here on a signal must not kill the CLI before --rm has deleted the sandbox. */
	cli_signals_install();
	char id[CELL_ID_MAX + 1];
	struct cell_error err = {0};
	if (cli_create_sandbox(&co, id, sizeof(id), NULL, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	xr.id = id;
	if (cli_signals_caught) {
		code = 128 + cli_signals_caught;
	} else if (cli_exec_stream(&xr, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
	if (rm) {
		struct cell_error derr = {0};
		if (cli_delete_sandbox(id, &derr) < 0) {
			cli_error("%s", derr.msg);
			if (code == 0)
				code = CLI_EXIT_RUN_FAIL;
		}
	} else {
		/* stdout belongs to the command: say on stderr which sandbox was kept. */
		fprintf(stderr, "cell: sandbox %s kept (cell exec %s -- ..., cell rm %s)\n", id, id,
			id);
	}
out:
	cli_create_opts_free(&co);
	json_decref(envs);
	json_decref(vols);
	return code;
}
