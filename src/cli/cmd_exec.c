/* cell exec: run one command in an existing sandbox, output and exit code passed through. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "commands.h"
#include "error.h"
#include "exec.h"
#include "global.h"
#include "parse.h"
#include "signals.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cell exec [OPTIONS] ID -- CMD [ARG...]\n"
	    "\n"
	    "Run CMD (without a shell) in sandbox ID, stream its stdout and stderr here, and\n"
	    "exit with its exit code: 128+N when killed by signal N, 124 when --timeout\n"
	    "fired, 125 when cell itself failed. ^C interrupts CMD.\n"
	    "With -it, CMD runs on a terminal in the sandbox (a PTY session) wired to this one:\n"
	    "raw mode, the window size followed, ^C and job control inside; ^P^Q detaches\n"
	    "(cell attach comes back).\n"
	    "\n"
	    "Options:\n"
	    "  -i, --interactive      pass this terminal's input to CMD (with -t)\n"
	    "  -t, --tty              run CMD on a terminal in the sandbox\n"
	    "  -w, --workdir DIR      working directory (default: the image's WorkingDir,\n"
	    "                         else /workspace)\n"
	    "  -e, --env K=V          environment variable (repeatable)\n"
	    "  -T, --timeout SECONDS  kill CMD after this long (exit code 124; not with -t)\n"
	    "  -u, --user UID[:GID]   run CMD as this user and group (numbers, 0-65535; GID\n"
	    "                         defaults to UID; default: root). The default image's\n"
	    "                         ordinary account `user` is 1000; names are not resolved;\n"
	    "                         not with -t\n"
	    "      --socket PATH      celld's socket\n"
	    "  -h, --help             this help\n"
	    "\n"
	    "Examples: cell exec 3f2a9c0d1b2e4f5a -- sh -c 'echo $HOME'\n"
	    "          cell exec -it 3f2a9c0d1b2e4f5a -- top\n");
}

int cmd_exec(int argc, char **argv)
{
	static const struct option longopts[] = {{"interactive", no_argument, NULL, 'i'},
						 {"tty", no_argument, NULL, 't'},
						 {"workdir", required_argument, NULL, 'w'},
						 {"env", required_argument, NULL, 'e'},
						 {"timeout", required_argument, NULL, 'T'},
						 {"user", required_argument, NULL, 'u'},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	bool tty = false, interactive = false;
	struct cli_exec_req xr = {0};
	json_t *envs = json_object();
	int code = CLI_EXIT_RUN_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hitw:e:T:u:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'i' || c == 't') {
			*(c == 'i' ? &interactive : &tty) = true;
			continue;
		}
		/* exec's -t is the terminal (as users know it); the timeout is -T here. */
		int r = cli_exec_opt(c == 'T' ? 't' : c, optarg, &xr, envs);
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
	if (!(xr.id = cli_resolve_id(argv[optind++])))
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
	if (tty) {
		code = cli_exec_tty(&xr, "exec", interactive);
		goto out;
	}
	xr.input = interactive;
	struct cell_error err = {0};
	if (cli_exec_stream(&xr, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
out:
	json_decref(envs);
	return code;
}
