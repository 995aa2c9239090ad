/* cell attach: this terminal back on a PTY session of a sandbox (one detached with ^P^Q, or
 * made through the API). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "parse.h"
#include "signals.h"
#include "terminal.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell attach [OPTIONS] ID SESSION\n"
		   "\n"
		   "Wire this terminal to PTY session SESSION of sandbox ID again: what it wrote\n"
		   "meanwhile is shown first (as much as its scrollback keeps), then it goes on\n"
		   "live. Exits with its process's exit code when it ends; ^P^Q detaches again.\n"
		   "A session another client holds is refused unless --takeover.\n"
		   "\n"
		   "Options:\n"
		   "      --since OFFSET  replay from this output offset (default 0: all kept)\n"
		   "      --no-replay     show only what comes from now on\n"
		   "      --takeover      take the session from the client that holds it\n"
		   "      --socket PATH   celld's socket\n"
		   "  -h, --help          this help\n");
}

enum { OPT_SINCE = 0x2000, OPT_NO_REPLAY, OPT_TAKEOVER };

int cmd_attach(int argc, char **argv)
{
	static const struct option longopts[] = {{"since", required_argument, NULL, OPT_SINCE},
						 {"no-replay", no_argument, NULL, OPT_NO_REPLAY},
						 {"takeover", no_argument, NULL, OPT_TAKEOVER},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct cli_term_attach a = {.since = 0, .input = true};
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		char *end;
		switch (c) {
		case OPT_SINCE:
			a.since = strtoll(optarg, &end, 10);
			if (*end || a.since < 0)
				return cli_error_usage(
				    "attach", CLI_EXIT_RUN_FAIL,
				    "--since '%s': expected an offset (0 or more)", optarg);
			continue;
		case OPT_NO_REPLAY:
			a.since = -1;
			continue;
		case OPT_TAKEOVER:
			a.takeover = true;
			continue;
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_error_option("attach", CLI_EXIT_RUN_FAIL);
		}
	}
	if (optind + 2 != argc)
		return cli_error_usage("attach", CLI_EXIT_RUN_FAIL,
				       "expected a sandbox id and a session id");
	a.session = argv[optind + 1];
	if (!(a.id = cli_resolve_id(argv[optind])))
		return CLI_EXIT_RUN_FAIL;
	if (!*a.session || strspn(a.session, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					     "0123456789_.-") != strlen(a.session))
		return cli_error_usage("attach", CLI_EXIT_RUN_FAIL, "'%s' is not a session id",
				       a.session);
	cli_signals_install();
	struct cell_error err = {0};
	int code = CLI_EXIT_RUN_FAIL;
	if (cli_term_attach(&a, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
	return code;
}
