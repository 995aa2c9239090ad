/* The cell CLI's global options (--socket, --json), its exit codes and default paths. */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#define CLI_DEFAULT_SOCKET "/run/cell/cell.sock"
#define CLI_DEFAULT_IMAGES "/var/lib/cell/images"
#define CLI_EXECD_PREFIX   "/proxy/44772"

/* Exit codes of the CLI itself. `run` and `exec` pass the command's code through and use
 * CLI_EXIT_RUN_FAIL for their own failures (CONTRACT "CLI exit codes"). */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_TIMEOUT = 124,
	CLI_EXIT_RUN_FAIL = 125,
};

struct cli_global {
	const char *socket; /* --socket, $CELL_SOCKET, or CLI_DEFAULT_SOCKET */
	bool json;	    /* --json */
};

extern struct cli_global cli;

/* Long option values shared by every subcommand, so `cell ls --json` works as well as
 * `cell --json ls`. */
enum { CLI_OPT_SOCKET = 0x1000, CLI_OPT_JSON };

/* clang-format off */
#define CLI_GLOBAL_LONGOPTS                                    \
	{"socket", required_argument, NULL, CLI_OPT_SOCKET},   \
	{"json", no_argument, NULL, CLI_OPT_JSON},             \
	{"help", no_argument, NULL, 'h'}
/* clang-format on */

/* Handle a global option returned by getopt_long; true when it was one. */
bool cli_global_opt(int c, const char *arg);

/* Parse the options of a command that takes only the global ones and -h (optstring "h",
 * or "+h" to stop at the first operand). Returns the exit code when the command is done
 * (help printed, or a bad option), -1 when it should go on with argv[optind...]. */
int cli_global_opts_only(int argc, char **argv, const char *optstring, const char *cmd,
			 void (*help)(FILE *));
