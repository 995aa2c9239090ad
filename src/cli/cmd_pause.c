/* cell pause / cell resume: freeze every process of sandboxes (memory kept), thaw them. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "parse.h"

static void pause_usage(FILE *f)
{
	fprintf(f, "Usage: cell pause ID...\n"
		   "\n"
		   "Freeze every process of each sandbox; memory and files are kept. A paused\n"
		   "sandbox uses no CPU; `cell resume`, an exec or a file operation thaws it.\n"
		   "The exit status is 1 when any id failed (already paused included).\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void resume_usage(FILE *f)
{
	fprintf(f, "Usage: cell resume ID...\n"
		   "\n"
		   "Thaw each paused sandbox: its processes continue where they stopped.\n"
		   "A Failed sandbox (its init died) is started again on its kept disk: its\n"
		   "files are as they were, its processes are not.\n"
		   "The exit status is 1 when any id failed (a running one included).\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static int each(int argc, char **argv, const char *verb)
{
	if (optind >= argc)
		return cli_error_usage(verb, CLI_EXIT_USAGE, "expected at least one sandbox id");
	int rc = CLI_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		if (!cli_parse_id(argv[i])) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		struct cell_error err = {0};
		_cleanup_free_ char *path = NULL, *what = NULL;
		if (asprintf(&path, "/v1/sandboxes/%s/%s", argv[i], verb) < 0 ||
		    asprintf(&what, "%s %s", verb, argv[i]) < 0) {
			cli_error("out of memory");
			return CLI_EXIT_FAIL;
		}
		if (cli_client_api("POST", path, NULL, what, NULL, NULL, &err) < 0) {
			cli_error("%s", err.msg);
			rc = CLI_EXIT_FAIL;
			if (cli_client()->unreachable)
				break;
			continue;
		}
		printf("%s\n", argv[i]);
	}
	return rc;
}

int cmd_pause(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "pause", pause_usage);
	return rc >= 0 ? rc : each(argc, argv, "pause");
}

int cmd_resume(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "resume", resume_usage);
	return rc >= 0 ? rc : each(argc, argv, "resume");
}
