/* cell: the command-line client of celld. The command table, global flags and dispatch. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/version.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"

struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct cli_command commands[] = {
    {"run", cmd_run, "create a sandbox, run a command in it (-it: a terminal; -d: detached)"},
    {"create", cmd_create, "create a sandbox and print its id"},
    {"exec", cmd_exec, "run a command in an existing sandbox (-it: on a terminal)"},
    {"shell", cmd_shell, "open an interactive shell in a sandbox"},
    {"attach", cmd_attach, "wire this terminal to a sandbox's PTY session again"},
    {"ls", cmd_ls, "list sandboxes"},
    {"inspect", cmd_inspect, "show sandboxes' kernel-level details (JSON)"},
    {"stats", cmd_stats, "show what sandboxes use: CPU, memory, pids, disk, network"},
    {"top", cmd_top, "list the processes of a sandbox"},
    {"rm", cmd_rm, "delete sandboxes (--all: the stopped and failed ones)"},
    {"pause", cmd_pause, "freeze every process of sandboxes (memory kept)"},
    {"resume", cmd_resume, "thaw paused sandboxes, start stopped ones"},
    {"stop", cmd_stop, "stop sandboxes: processes and memory go, the disk stays"},
    {"keepalive", cmd_keepalive, "restart the idle timers of sandboxes"},
    {"logs", cmd_logs, "print a sandbox's entrypoint output (-f: and follow it)"},
    {"events", cmd_events, "print a sandbox's events (-f: and follow them)"},
    {"audit", cmd_audit, "print celld's audit log (of one sandbox, since a time)"},
    {"snapshot", cmd_snapshot, "capture a sandbox's files; list and remove snapshots"},
    {"fork", cmd_fork, "snapshot a sandbox and create a new one from it"},
    {"cp", cmd_cp, "copy a file into or out of a sandbox, a directory out of it"},
    {"fs", cmd_fs, "list, find, stat, make, move, chmod and remove files in a sandbox"},
    {"image", cmd_image, "pull, list, inspect, tag and remove images; build local ones"},
    {"volume", cmd_volume, "list and remove named volumes"},
    {"skill", cmd_skill, "register, list and remove skills (packages a sandbox installs)"},
    {"network", cmd_network, "show or change a sandbox's egress policy live"},
    {"port", cmd_port, "print the preview URL of a port in a sandbox (with its token)"},
    {"forward", cmd_forward, "forward a local TCP port to a port in a sandbox"},
    {"info", cmd_info, "show celld's version, cgroup backend and directories"},
    {"selftest", cmd_selftest, "run the escape battery on this host and kernel (TAP report)"},
    {"version", cmd_version, "print the version of cell"},
    {"completion", cmd_completion, "print a bash or zsh completion script for cell"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell [--socket PATH] [--json] COMMAND [ARGS...]\n"
		   "\n"
		   "Isolated Linux sandboxes, driven through celld.\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < CELL_ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(
	    f,
	    "\n"
	    "Global options:\n"
	    "  --socket PATH  celld's Unix socket (env CELL_SOCKET, default %s)\n"
	    "  --json         machine-readable output (ls, inspect, create, info, image ls, fs,\n"
	    "                 network, port)\n"
	    "  -h, --help     this help ('cell COMMAND --help' for one command)\n"
	    "  -V, --version  print the version\n"
	    "\n"
	    "ID, wherever a command takes one, is a sandbox's id, its --name, or a unique\n"
	    "start of its id.\n"
	    "\n"
	    "Example: cell run --rm -v \"$PWD\":/workspace/src -w /workspace/src -- make test\n",
	    CLI_DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_GLOBAL_LONGOPTS, {"version", no_argument, NULL, 'V'}, {0}};
	cli.socket = getenv("CELL_SOCKET");
	if (!cli.socket || !cli.socket[0])
		cli.socket = CLI_DEFAULT_SOCKET;

	int c;
	/* '+': stop at the command name; each command parses its own options. */
	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'V') {
			optind = 0; /* cmd_version parses its own (empty) argv from the start */
			return cmd_version(1, (char *[]){"version", NULL});
		}
		fprintf(stderr, "Try 'cell --help'.\n");
		return CLI_EXIT_USAGE;
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[optind];
	for (size_t i = 0; i < CELL_ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name))
			continue;
		int sub_argc = argc - optind;
		char **sub_argv = argv + optind;
		/* getopt's own messages then read "cell run: unrecognized option ...". */
		char prog[64];
		snprintf(prog, sizeof(prog), "cell %s", commands[i].name);
		sub_argv[0] = prog;
		optind = 0; /* full re-initialisation of getopt for the command's own parse */
		int rc = commands[i].fn(sub_argc, sub_argv);
		cli_client_cleanup();
		if (fflush(stdout) == EOF && rc == 0) {
			cli_error("writing to stdout: %s", strerror(errno));
			rc = CLI_EXIT_FAIL;
		}
		return rc;
	}
	if (!strcmp(name, "help")) {
		/* "cell help run" is "cell run --help". */
		for (size_t i = 0; optind + 1 < argc && i < CELL_ARRAY_SIZE(commands); i++) {
			if (strcmp(argv[optind + 1], commands[i].name))
				continue;
			char *help_argv[] = {(char *)commands[i].name, "--help", NULL};
			optind = 0;
			return commands[i].fn(2, help_argv);
		}
		if (optind + 1 < argc) {
			cli_error("help: unknown command '%s'", argv[optind + 1]);
			fprintf(stderr, "Try 'cell --help'.\n");
			return CLI_EXIT_USAGE;
		}
		usage(stdout);
		return CLI_EXIT_OK;
	}
	cli_error("unknown command '%s'", name);
	fprintf(stderr, "Try 'cell --help'.\n");
	return CLI_EXIT_USAGE;
}
