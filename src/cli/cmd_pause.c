/* cell pause / resume / stop / keepalive: the lifecycle verbs that take only ids: freeze
 * every process of sandboxes (memory kept), thaw or start them, stop them (disk kept), and
 * start their idle timers again. */
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
	fprintf(f, "Usage: cell stop ID...\n"
		   "\n"
		   "Stop each sandbox: every process ends and its memory is freed; its files,\n"
		   "installed packages, network policy and settings are kept. `cell resume`, an\n"
		   "exec or a file operation starts it again on that disk (a cold start: no\n"
		   "process of before survives). A paused sandbox is stopped as it is.\n"
		   "The exit status is 1 when any id failed (already stopped included).\n"
		   "Every process is killed at once: there is no grace period (no -t).\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
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
	int rc = cli_global_opts_only(argc, argv, "h", "stop", stop_usage);
	return rc >= 0 ? rc : each(argc, argv, "stop");
}

int cmd_keepalive(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "keepalive", keepalive_usage);
	return rc >= 0 ? rc : each(argc, argv, "keepalive");
}
