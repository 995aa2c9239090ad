/* cell create: make a sandbox and print its id. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "commands.h"
#include "create.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "parse.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell create [OPTIONS]\n"
		"\n"
		"Create a sandbox and print its id. With --session, an existing sandbox of the\n"
		"same key is returned (resumed if paused or stopped) instead of a new one.\n"
		"\n"
		"Options:\n" CLI_SANDBOX_HELP
		"  -s, --session KEY        create-or-resume by key (id = sha256(KEY)[0:16])\n"
		"  -e, --env K=V            environment of the sandbox (repeatable)\n"
		"      --secret NAME        a secret: $NAME of this environment, given to every\n"
		"                           command in the sandbox and shown nowhere (repeatable)\n"
		"  -v, --volume SRC:DEST[:OPTS]  mount SRC on DEST (repeatable): a host path\n"
		"                           (with a '/'), or the name of a named volume, made\n"
		"                           on first use (cell volume); OPTS: ro, and for host\n"
		"                           paths map=owner|range|identity (see cell(1))\n"
		"      --timeout SECONDS    delete the sandbox after this long (>= 60)\n"
		"      --seccomp NAME       seccomp profile (default: default)\n"
		"      --seccomp-log        record the sandbox's denied calls (cell "
		"inspect)\n" CLI_NETWORK_HELP CLI_TIMER_HELP CLI_PROVISION_HELP
		"      --json               print the sandbox's JSON instead of its id\n"
		"      --socket PATH        celld's socket\n"
		"  -h, --help               this help\n"
		"\n"
		"-i and -t are docker's --interactive and --tty, which belong to a command: a\n"
		"sandbox gets its terminal from cell run -it or cell exec -it.\n");
}

/* --secret NAME: the value comes from this environment, never from the command line,
 * where every user of the host could read it (ps). */
static int parse_secret(json_t *secrets, const char *name)
{
	if (strchr(name, '='))
		return cli_error_usage("create", CLI_EXIT_USAGE,
				       "--secret takes a NAME whose value is in this environment "
				       "(a value on the command line is visible in ps)");
	const char *val = getenv(name);
	if (!name[0] || !val)
		return cli_error_usage("create", CLI_EXIT_USAGE,
				       "--secret %s: not set in this environment", name);
	if (json_object_set_new(secrets, name, json_string(val)) < 0)
		return cli_error_usage("create", CLI_EXIT_USAGE,
				       "--secret %s: value is not valid UTF-8", name);
	return 0;
}

int cmd_create(int argc, char **argv)
{
	enum { OPT_SECRET = 0x2000, OPT_TIMEOUT };
	static const struct option longopts[] = {{"session", required_argument, NULL, 's'},
						 {"env", required_argument, NULL, 'e'},
						 {"volume", required_argument, NULL, 'v'},
						 {"timeout", required_argument, NULL, OPT_TIMEOUT},
						 {"secret", required_argument, NULL, OPT_SECRET},
						 {"interactive", no_argument, NULL, 'i'},
						 {"tty", no_argument, NULL, 't'},
						 CLI_SANDBOX_LONGOPTS,
						 CLI_SECCOMP_LONGOPTS,
						 CLI_TIMER_LONGOPTS,
						 CLI_NETWORK_LONGOPTS,
						 CLI_PROVISION_LONGOPTS,
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct cli_create_opts o = {0};
	json_t *env = json_object();
	json_t *secrets = json_object();
	json_t *vols = json_array();
	int rc = CLI_EXIT_FAIL;
	int c;
	while ((c = getopt_long(argc, argv, "+hitI:s:e:v:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || cli_create_seccomp_opt(c, optarg, &o))
			continue;
		int nr = cli_create_timer_opt(c, optarg, &o);
		if (nr == 0)
			nr = cli_create_network_opt(c, optarg, &o);
		if (nr == 0)
			nr = cli_create_provision_opt(c, optarg, &o);
		if (nr == 0)
			nr = cli_create_sandbox_opt(c, optarg, &o);
		if (nr == 0 && c == CLI_OPT_ENV_FILE)
			nr = cli_parse_env_file(env, optarg) < 0 ? -1 : 1;
		if (nr < 0) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
		if (nr > 0)
			continue;
		switch (c) {
		case 'h':
			usage(stdout);
			rc = CLI_EXIT_OK;
			goto out;
		case 'i':
		case 't':
			/* Old scripts' -i IMAGE and -t SECONDS must not mean something else. */
			rc =
			    cli_error_usage("create", CLI_EXIT_USAGE,
					    "-%c is docker's --%s, for a command: use cell run -it "
					    "or cell exec -it (an image is --image or -I, a "
					    "lifetime --timeout)",
					    c, c == 'i' ? "interactive" : "tty");
			goto out;
		case 's':
			o.session = optarg;
			break;
		case 'e':
			if (cli_parse_env(env, optarg) < 0)
				goto out;
			break;
		case 'v':
			if (cli_parse_volume(vols, optarg) < 0)
				goto out;
			break;
		case OPT_SECRET:
			if ((rc = parse_secret(secrets, optarg)) != 0)
				goto out;
			rc = CLI_EXIT_FAIL;
			break;
		case OPT_TIMEOUT: {
			char *end = NULL;
			o.timeout_s = strtoll(optarg, &end, 10);
			/* celld's bound is 60 s; said here as the flag, not its field. */
			if (end == optarg || *end || o.timeout_s < 60) {
				rc = cli_error_usage("create", CLI_EXIT_USAGE,
						     "--timeout '%s': expected whole seconds, at "
						     "least 60",
						     optarg);
				goto out;
			}
			break;
		}
		default:
			rc = cli_error_option("create", CLI_EXIT_USAGE);
			goto out;
		}
	}
	if (optind != argc) {
		rc = cli_error_usage("create", CLI_EXIT_USAGE, "unexpected argument '%s'",
				     argv[optind]);
		goto out;
	}
	o.env = env;
	o.secrets = secrets;
	o.volumes = vols;
	char id[CELL_ID_MAX + 1];
	json_t *sb = NULL;
	struct cell_error err = {0};
	if (cli_create_sandbox(&o, id, sizeof(id), &sb, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (cli.json)
		cli_output_json(sb);
	else
		printf("%s\n", id);
	json_decref(sb);
	rc = CLI_EXIT_OK;
out:
	cli_create_opts_free(&o);
	json_decref(env);
	json_decref(secrets);
	json_decref(vols);
	return rc;
}
