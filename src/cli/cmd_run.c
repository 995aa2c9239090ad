/* cell run: create a sandbox, run one command in it with its output passed through
 * byte-exact, exit with its exit code, and delete the sandbox with --rm. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
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
#include "terminal.h"

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: cell run [OPTIONS] -- CMD [ARG...]\n"
	       "\n"
	       "Create a sandbox, run CMD in it (without a shell), stream its stdout and stderr\n"
	       "here, and exit with its exit code: 128+N when it was killed by signal N, 124 when\n"
	       "--timeout fired, 125 when cell itself failed.\n"
	       "\n"
	       "Options:\n"
	       "  -i, --interactive        pass this input to CMD (a terminal's with -t)\n"
	       "  -t, --tty                run CMD on a terminal in the sandbox (-it: a shell)\n"
	       "  -d, --detach             start CMD in the background, print the sandbox's id;\n"
	       "                           with -t or -i on a terminal session, its attach\n"
	       "                           command on stderr (cell attach ID SESSION)\n"
	       "  -p, --publish PORT       print PORT's preview URL on stderr (repeatable)\n"
	       "      --rm                 delete the sandbox when CMD ends (also on failure, ^C,\n"
	       "                           SIGTERM; with -d celld deletes it, not with "
	       "-dt/-di)\n" CLI_SANDBOX_HELP
	       "  -v, --volume SRC:DEST[:OPTS]  mount SRC on DEST (repeatable): a host path\n"
	       "                           (with a '/'), or the name of a named volume, made on\n"
	       "                           first use (cell volume); OPTS: ro, and for host\n"
	       "                           paths map=owner|range|identity (see cell(1))\n"
	       "  -w, --workdir DIR        working directory of CMD (default: the image's\n"
	       "                           WorkingDir, else /workspace)\n"
	       "  -e, --env K=V            environment variable of CMD (repeatable; K alone takes\n"
	       "                           the value from this environment)\n"
	       "      --timeout SECONDS    kill CMD after this long (exit code 124; not with -t;\n"
	       "                           with -d its status in cell exec's logs)\n"
	       "  -u, --user UID[:GID]     run CMD as this user and group (numbers, 0-65535; GID\n"
	       "                           defaults to UID; default: root). The default image's\n"
	       "                           ordinary account `user` is 1000; names are not\n"
	       "                           resolved; not with -t\n"
	       "  -s, --session KEY        create-or-resume the sandbox of this key\n"
	       "      --seccomp NAME       seccomp profile (policies/seccomp/NAME.json)\n"
	       "      --seccomp-log        record the sandbox's denied calls (cell "
	       "inspect)\n" CLI_NETWORK_HELP CLI_TIMER_HELP CLI_PROVISION_HELP
	       "      --socket PATH        celld's socket\n"
	       "  -h, --help               this help\n"
	       "\n"
	       "Examples: cell run --rm -v \"$PWD\":/src:ro -w /src -- make -n\n"
	       "          cell run -it --rm -- sh\n");
}

enum { OPT_RM = 0x2000, OPT_TIMEOUT };

struct run {
	struct cli_create_opts co;
	struct cli_exec_req xr;
	bool rm, detach, tty;
	unsigned ports[16];
	size_t n_ports;
};

/* -p PORT: kept until the sandbox exists. */
static int publish_opt(struct run *run, const char *arg)
{
	unsigned port;
	if (!cli_parse_port(arg, false, &port))
		return cli_error_usage("run", -1, "-p '%s': expected a port from 1 to 65535", arg);
	if (run->n_ports == CELL_ARRAY_SIZE(run->ports))
		return cli_error_usage("run", -1, "-p: at most %zu ports",
				       CELL_ARRAY_SIZE(run->ports));
	run->ports[run->n_ports++] = port;
	return 0;
}

/* run's own options (not create's nor exec's): 1 when c was one, 0 when not, -1 after a
 * usage error. */
static int run_opt(struct run *run, int c, const char *arg, json_t *vols)
{
	switch (c) {
	case OPT_RM:
		run->rm = true;
		return 1;
	case 'i':
		run->xr.input = true;
		return 1;
	case 't':
		run->tty = true;
		return 1;
	case 'd':
		run->detach = true;
		return 1;
	case 'p':
		return publish_opt(run, arg) < 0 ? -1 : 1;
	case 'v':
		return cli_parse_volume(vols, arg) < 0 ? -1 : 1;
	case 's':
		run->co.session = arg;
		return 1;
	default:
		return 0;
	}
}

/* What the options cannot mean together, and the old `-i IMAGE` (-i takes no value now:
 * `cell run -i busybox -- true` would run "busybox"). 0, or -1 after the usage error. */
static int check_run(const struct run *run, int argc, char **argv, int optind_)
{
	bool dashes = optind_ > 0 && !strcmp(argv[optind_ - 1], "--");
	for (int k = optind_; run->xr.input && !dashes && k < argc; k++)
		if (!strcmp(argv[k], "--"))
			return cli_error_usage("run", -1,
					       "-i is --interactive and takes no value: name an "
					       "image with --image %s (or -I %s)",
					       argv[optind_], argv[optind_]);
	if (optind_ >= argc || !argv[optind_][0])
		return cli_error_usage("run", -1, "expected a command after '--'");
	/* A detached terminal session lives until its process ends or it is deleted, and
	 * celld learns of that end only when someone attached asks. */
	if (run->detach && (run->tty || run->xr.input) &&
	    (run->rm || run->xr.timeout_ms || run->xr.set_user))
		return cli_error_usage("run", -1, "-d %s does not take %s", run->tty ? "-t" : "-i",
				       run->rm		    ? "--rm"
				       : run->xr.timeout_ms ? "--timeout"
							    : "--user");
	return 0;
}

/* -p's URLs, on stderr: stdout belongs to the command (or, with -d, to the id). */
static int print_ports(const struct run *run, const char *id)
{
	for (size_t i = 0; i < run->n_ports; i++) {
		_cleanup_free_ char *url = NULL;
		struct cell_error err = {0};
		if (cli_client_preview_url(id, run->ports[i], &url, NULL, &err) < 0) {
			cli_error("-p %u: %s", run->ports[i], err.msg);
			return -1;
		}
		fprintf(stderr, "cell: port %u: %s\n", run->ports[i], url);
	}
	return 0;
}

/* -d with -t or -i: CMD on a terminal session nobody is attached to yet; the sandbox's id
 * on stdout (as -d's), how to attach on stderr. */
static int start_session(const struct cli_exec_req *xr)
{
	_cleanup_free_ char *sid = NULL;
	if (cli_exec_tty_start(xr, "run", false, &sid) < 0)
		return CLI_EXIT_RUN_FAIL;
	struct cell_error err = {0};
	if (cli_term_start(xr->id, sid, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_RUN_FAIL;
	}
	printf("%s\n", xr->id);
	fprintf(stderr, "cell: session %s: cell attach %s %s\n", sid, xr->id, sid);
	return CLI_EXIT_OK;
}

/* CMD in the sandbox: on a terminal (-t), started in the background (-d) or streamed. */
static int run_command(const struct run *run, const char *id)
{
	struct cli_exec_req xr = run->xr;
	xr.id = id;
	if (run->detach && (run->tty || xr.input))
		return start_session(&xr);
	if (run->tty)
		return cli_exec_tty(&xr, "run", xr.input);
	int code = CLI_EXIT_RUN_FAIL;
	struct cell_error err = {0};
	xr.background = run->detach;
	xr.delete_sandbox = run->detach && run->rm;
	if (cli_exec_stream(&xr, &code, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_RUN_FAIL;
	}
	if (run->detach && code == 0)
		printf("%s\n", id);
	return code;
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {{"rm", no_argument, NULL, OPT_RM},
						 {"interactive", no_argument, NULL, 'i'},
						 {"tty", no_argument, NULL, 't'},
						 {"detach", no_argument, NULL, 'd'},
						 {"publish", required_argument, NULL, 'p'},
						 {"volume", required_argument, NULL, 'v'},
						 {"session", required_argument, NULL, 's'},
						 {"workdir", required_argument, NULL, 'w'},
						 {"env", required_argument, NULL, 'e'},
						 {"timeout", required_argument, NULL, OPT_TIMEOUT},
						 {"user", required_argument, NULL, 'u'},
						 CLI_SANDBOX_LONGOPTS,
						 CLI_SECCOMP_LONGOPTS,
						 CLI_TIMER_LONGOPTS,
						 CLI_NETWORK_LONGOPTS,
						 CLI_PROVISION_LONGOPTS,
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct run run = {0};
	json_t *envs = json_object();
	json_t *vols = json_array();
	int code = CLI_EXIT_RUN_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hitdp:I:v:w:e:u:s:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || cli_create_seccomp_opt(c, optarg, &run.co))
			continue;
		int nr = cli_create_timer_opt(c, optarg, &run.co);
		if (nr == 0)
			nr = cli_create_network_opt(c, optarg, &run.co);
		if (nr == 0)
			nr = cli_create_provision_opt(c, optarg, &run.co);
		if (nr == 0)
			nr = cli_create_sandbox_opt(c, optarg, &run.co);
		if (nr == 0)
			nr = run_opt(&run, c, optarg, vols);
		if (nr == 0 && c == CLI_OPT_ENV_FILE)
			nr = cli_parse_env_file(envs, optarg) < 0 ? -1 : 1;
		if (nr == 0)
			nr = cli_exec_opt(c == OPT_TIMEOUT ? 't' : c, optarg, &run.xr, envs);
		if (nr < 0)
			goto out;
		if (nr > 0)
			continue;
		if (c == 'h') {
			usage(stdout);
			code = CLI_EXIT_OK;
		} else {
			cli_error_option("run", CLI_EXIT_RUN_FAIL);
		}
		goto out;
	}
	if (check_run(&run, argc, argv, optind) < 0)
		goto out;
	run.co.volumes = vols;
	run.xr.argv = argv + optind;
	run.xr.envs = envs;
	if (run.tty && run.xr.input && !run.detach && !isatty(0)) {
		cli_error("run -it: the input is not a terminal (pipe input with -i alone)");
		goto out;
	}

	/* From here on a signal must not kill the CLI before --rm has deleted the sandbox. */
	cli_signals_install();
	char id[CELL_ID_MAX + 1];
	struct cell_error err = {0};
	if (cli_create_sandbox(&run.co, id, sizeof(id), NULL, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (cli_signals_caught)
		code = 128 + cli_signals_caught;
	else if (print_ports(&run, id) == 0)
		code = run_command(&run, id);
	/* A detached command that started is celld's to delete the sandbox after. */
	if (run.rm && !(run.detach && code == 0)) {
		struct cell_error derr = {0};
		if (cli_delete_sandbox(id, &derr) < 0) {
			cli_error("%s", derr.msg);
			if (code == 0)
				code = CLI_EXIT_RUN_FAIL;
		}
	} else if (!run.detach) {
		/* stdout belongs to the command: say on stderr which sandbox was kept. */
		fprintf(stderr, "cell: sandbox %s kept (cell exec %s -- ..., cell rm %s)\n", id, id,
			id);
	}
out:
	cli_create_opts_free(&run.co);
	json_decref(envs);
	json_decref(vols);
	return code;
}
