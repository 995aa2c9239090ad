/* cell-oci: an OCI runtime with runc's command line, for containerd's runc shim
 * (BinaryName), dockerd (--add-runtime) and podman (--runtime): cell's isolation under
 * an engine. The global options come first, as the engines pass them:
 *
 *   cell-oci [--root DIR] [--log FILE] [--log-format text|json] [--systemd-cgroup]
 *            [--debug] COMMAND [ARGS...]
 *
 * Errors go to --log in the engine's format (containerd shows the last "error" line of
 * it) and to stderr; the exit code is 1, as runc's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/error.h"
#include "cell/log.h"
#include "cell/version.h"
#include "cli.h"
#include "commands.h"

#define DEFAULT_ROOT "/run/cell-oci"

static const struct {
	const char *name;
	oci_cmd_fn *fn;
	const char *help;
} commands[] = {
    {"create", oci_cmd_create, "create a container from a bundle, its process held"},
    {"start", oci_cmd_start, "start the process of a created container"},
    {"state", oci_cmd_state, "print a container's state (JSON)"},
    {"list", oci_cmd_list, "list containers"},
    {"kill", oci_cmd_kill, "send a signal to a container's process"},
    {"delete", oci_cmd_delete, "delete a stopped (or, with --force, any) container"},
    {"ps", oci_cmd_ps, "list the host pids of a container's processes"},
    {"pause", oci_cmd_pause, "freeze every process of a container"},
    {"resume", oci_cmd_resume, "thaw a paused container"},
    {"exec", oci_cmd_exec, "run a process in a running container"},
    {"features", oci_cmd_features, "print what this runtime supports (JSON)"},
    {"update", oci_cmd_update, "change a container's memory, cpu and pids limits"},
    {"events", oci_cmd_refused, "refused: read a container's counters from its cgroup"},
    {"checkpoint", oci_cmd_refused, "refused: no checkpoint of a container"},
    {"restore", oci_cmd_refused, "refused: no restore of a container"},
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: cell-oci [--root DIR] [--log FILE] [--log-format text|json]\n"
		     "                [--systemd-cgroup] [--debug] COMMAND [ARGS...]\n\n"
		     "An OCI runtime with runc's command line and cell's isolation.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\nGlobal options:\n"
		     "  --root DIR          containers' records (default " DEFAULT_ROOT ")\n"
		     "  --log FILE          log here instead of stderr\n"
		     "  --log-format F      text (default) or json ({level, msg, time})\n"
		     "  --systemd-cgroup    cgroupsPath in systemd's form (refused for now)\n"
		     "  --debug             log more\n"
		     "  --cell-init PATH    cell-init to run as each container's PID 1\n"
		     "  --policies DIR      cell's policies (its seccomp profile)\n"
		     "  -v, --version       print the version\n"
		     "  -h, --help          this help\n");
}

static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "cell-oci: --log %s: %s\n", path, strerror(errno));
		return -1;
	}
	cell_log_set_fd(fd);
	oci_log_to_file(fd);
	return 0;
}

static int parse_global(int argc, char **argv, struct oci_cli *cli)
{
	static const struct option opts[] = {
	    {"root", required_argument, NULL, 'r'},
	    {"log", required_argument, NULL, 'l'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"systemd-cgroup", no_argument, NULL, 's'},
	    {"debug", no_argument, NULL, 'd'},
	    {"cell-init", required_argument, NULL, 'i'},
	    {"policies", required_argument, NULL, 'p'},
	    {"version", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	*cli = (struct oci_cli){.root = DEFAULT_ROOT};
	for (int c; (c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1;) {
		switch (c) {
		case 'r':
			cli->root = optarg;
			break;
		case 'l':
			cli->log = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
				fprintf(stderr, "cell-oci: --log-format %s: text or json\n",
					optarg);
				return -1;
			}
			cli->log_json = !strcmp(optarg, "json");
			break;
		case 's':
			cli->systemd_cgroup = true;
			break;
		case 'd':
			cell_log_set_level(CELL_LOG_DEBUG);
			break;
		case 'i':
			cli->init = optarg;
			break;
		case 'p':
			cli->policies = optarg;
			break;
		case 'v':
			printf("cell-oci version %s\nspec: 1.2.0\n", CELL_VERSION);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	cell_log_set_prefix("cell-oci");
	struct oci_cli cli;
	if (parse_global(argc, argv, &cli) < 0)
		return 1;
	if (cli.log && open_log(cli.log) < 0)
		return 1;
	cell_log_set_runtime_json(cli.log_json);
	if (optind >= argc) {
		usage(stderr);
		return 1;
	}
	const char *name = argv[optind];
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return commands[i].fn(&cli, argc - optind, argv + optind);
	struct cell_error err = {0};
	cell_err_msg(&err, EINVAL, "unknown command '%s' ('cell-oci --help' lists them)", name);
	return oci_fail(&cli, &err);
}
