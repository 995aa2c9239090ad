/* cell shell: an interactive login shell in a sandbox, on a terminal wired to this one. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "parse.h"
#include "signals.h"
#include "terminal.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell shell [OPTIONS] ID\n"
		"\n"
		"Open a login shell (bash, or sh where the image has none) in sandbox ID on a\n"
		"terminal in the sandbox wired to this one: raw mode, the window size followed,\n"
		"^C and job control inside. Exits with the shell's exit code. ^P^Q detaches and\n"
		"leaves the shell running (cell attach ID SESSION comes back); otherwise the\n"
		"session is removed when the shell ends.\n"
		"\n"
		"Options:\n"
		"  -w, --workdir DIR   working directory (default: /workspace)\n"
		"      --socket PATH   celld's socket\n"
		"  -h, --help          this help\n");
}

int cmd_shell(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"workdir", required_argument, NULL, 'w'}, CLI_GLOBAL_LONGOPTS, {0}};
	const char *cwd = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "hw:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'w') {
			cwd = optarg;
			continue;
		}
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		return cli_error_option("shell", CLI_EXIT_RUN_FAIL);
	}
	if (optind + 1 != argc)
		return cli_error_usage("shell", CLI_EXIT_RUN_FAIL, "expected one sandbox id");
	const char *id = cli_resolve_id(argv[optind]);
	if (!id)
		return CLI_EXIT_RUN_FAIL;
	if (!isatty(0))
		return cli_error("shell: the input is not a terminal"), CLI_EXIT_RUN_FAIL;
	cli_signals_install();
	struct cell_error err = {0};
	_cleanup_free_ char *sid = NULL;
	if (cli_term_create(id, NULL, cwd, &sid, &err) < 0)
		return cli_error("%s", err.msg), CLI_EXIT_RUN_FAIL;
	struct cli_term_attach a = {
	    .id = id, .session = sid, .since = 0, .input = true, .remove_at_end = true};
	int code = CLI_EXIT_RUN_FAIL;
	if (cli_term_attach(&a, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
	return code;
}
