/* cell pause / resume / stop / keepalive: the lifecycle verbs that take ids: freeze every
 * process of sandboxes (memory kept), thaw or start them, stop them (disk kept, after a
 * grace for their processes to end), and start their idle timers again. */
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

#define STOP_GRACE_DEFAULT 10  /* s, as docker's stop */
#define STOP_GRACE_MAX	   300 /* s, celld's bound */

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
		   "A Stopped sandbox, or a Failed one (its init died), is started again on\n"
		   "its kept disk: its files are as they were, its processes are not.\n"
		   "The exit status is 1 when any id failed (a running one included).\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void stop_usage(FILE *f)
{
	fprintf(f,
		"Usage: cell stop [-t SECONDS] ID...\n"
		"\n"
		"Stop each sandbox: every process ends and its memory is freed; its files,\n"
		"installed packages, network policy and settings are kept. `cell resume`, an\n"
		"exec or a file operation starts it again on that disk (a cold start: no\n"
		"process of before survives). The processes of a running sandbox get SIGTERM\n"
		"and SECONDS to end; what is left then is killed. A paused sandbox is stopped\n"
		"as it is, its processes killed at once.\n"
		"The exit status is 1 when any id failed (already stopped included).\n"
		"\n"
		"Options:\n"
		"  -t, --time SECONDS  grace before the kill, 0 to %d (default %d; 0: at once)\n"
		"      --socket PATH   celld's socket\n"
		"  -h, --help          this help\n",
		STOP_GRACE_MAX, STOP_GRACE_DEFAULT);
}

/* POST /v1/sandboxes/ID/stop?timeout=SECONDS. */
static int stop_one(const char *id, void *grace, struct cell_error *err)
{
	_cleanup_free_ char *path = NULL, *what = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s/stop?timeout=%ld", id, *(long *)grace) < 0 ||
	    asprintf(&what, "stop %s", id) < 0)
		return cell_err(err, ENOMEM, "stop");
	return cli_client_api("POST", path, NULL, what, NULL, NULL, err);
}

static void keepalive_usage(FILE *f)
{
	fprintf(f, "Usage: cell keepalive ID...\n"
		   "\n"
		   "Count as activity for each sandbox: its idle timer (cell.idleTimeout) starts\n"
		   "again, and so do the stop and delete timers of a paused or stopped one.\n"
		   "The sandbox is not woken.\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

/* POST /v1/sandboxes/ID/VERB. */
static int post_one(const char *id, void *verb, struct cell_error *err)
{
	_cleanup_free_ char *path = NULL, *what = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s/%s", id, (const char *)verb) < 0 ||
	    asprintf(&what, "%s %s", (const char *)verb, id) < 0)
		return cell_err(err, ENOMEM, "%s", (const char *)verb);
	return cli_client_api("POST", path, NULL, what, NULL, NULL, err);
}

static int each(int argc, char **argv, const char *verb)
{
	return cli_each(argc, argv, verb, "sandbox id", true, post_one, (void *)verb);
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

int cmd_stop(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"time", required_argument, NULL, 't'}, CLI_GLOBAL_LONGOPTS, {0}};
	long grace = STOP_GRACE_DEFAULT;
	int c;
	while ((c = getopt_long(argc, argv, "ht:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 't') {
			char *end;
			errno = 0;
			grace = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || grace < 0 || grace > STOP_GRACE_MAX)
				return cli_error_usage("stop", CLI_EXIT_USAGE,
						       "-t/--time must be a number of seconds from "
						       "0 to %d ('%s')",
						       STOP_GRACE_MAX, optarg);
			continue;
		}
		if (c == 'h') {
			stop_usage(stdout);
			return CLI_EXIT_OK;
		}
		return cli_error_option("stop", CLI_EXIT_USAGE);
	}
	return cli_each(argc, argv, "stop", "sandbox id", true, stop_one, &grace);
}

int cmd_keepalive(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "keepalive", keepalive_usage);
	return rc >= 0 ? rc : each(argc, argv, "keepalive");
}
