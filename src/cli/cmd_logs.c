/* cell logs: the kept output of a sandbox's entrypoint (or of a background command),
 * written byte-exact to stdout as docker logs does, and how that command ended on stderr.
 * GET /v1/sandboxes/{id}/logs; its headers say which command it is and how it is doing.
 * --list: the commands whose output is kept (GET /v1/sandboxes/{id}/commands). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "signals.h"
#include "table.h"

#define TAIL_MAX     8388608 /* celld keeps at most 8 MiB of a command: no more lines */
#define SINCE_MAX_MS (100LL * 366 * 24 * 3600 * 1000)

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: cell logs [OPTIONS] ID\n"
	       "\n"
	       "Print the output of a sandbox's entrypoint as celld keeps it (stdout and stderr\n"
	       "together, the newest 8 MiB, byte-exact); a sandbox without an entrypoint shows\n"
	       "its latest background command (cell run -d). When that command has ended, how\n"
	       "is said on stderr (\"cell: entrypoint exited with status 3\"). The exit status is\n"
	       "0 when the logs were printed, whatever the command's own status; 1 when they\n"
	       "could not be (no such sandbox, no such command, none kept), 2 on a usage error.\n"
	       "Output is kept in celld's memory: a restart of celld forgets it.\n"
	       "\n"
	       "Options:\n"
	       "  -f, --follow         keep printing new output until the command ends (or ^C)\n"
	       "      --since TIME     only output written since TIME: a duration before now\n"
	       "                       (30s, 10m, 1h30m), Unix seconds or an RFC 3339 time\n"
	       "                       (2026-11-29T15:00:00Z); to about a tenth of a second,\n"
	       "                       coarser for long logs\n"
	       "      --tail N         only the last N lines kept (all: every line, the default)\n"
	       "      --command CMD    another command's output instead (its id, as --list\n"
	       "                       shows it)\n"
	       "      --list           list the sandbox's commands whose output is kept (id,\n"
	       "                       kind, status, start, text) instead\n"
	       "      --json           with --list: the API's items\n"
	       "      --socket PATH    celld's socket\n"
	       "  -h, --help           this help\n");
}

/* A duration as Go and docker write it ("1h30m", "10m", "30s"): 0 with *ms, or -1. */
static int parse_duration(const char *s, long long *ms)
{
	long long total = 0;
	if (!*s)
		return -1;
	while (*s) {
		char *end;
		errno = 0;
		long long n = strtoll(s, &end, 10);
		if (end == s || errno || n < 0 || *s == '-' || *s == '+')
			return -1;
		long long unit = *end == 'h'   ? 3600000
				 : *end == 'm' ? 60000
				 : *end == 's' ? 1000
					       : 0;
		if (!unit || n > SINCE_MAX_MS / unit)
			return -1;
		total += n * unit;
		if (total > SINCE_MAX_MS)
			return -1;
		s = end + 1;
	}
	*ms = total;
	return 0;
}

/* Unix seconds ("1732890000", "1732890000.25") or what looks like an RFC 3339 time, left
 * for celld to judge: the characters of one. */
static bool absolute_time(const char *s)
{
	size_t digits = strspn(s, "0123456789");
	if (digits &&
	    (!s[digits] || (s[digits] == '.' && s[digits + 1] &&
			    strspn(s + digits + 1, "0123456789") == strlen(s + digits + 1))))
		return true;
	return strchr(s, 'T') && strlen(s) <= 40 && strspn(s, "0123456789-:+.TZtz") == strlen(s);
}

/* --since into the query's value (malloc'd), or NULL after the usage error. */
static char *since_value(const char *arg)
{
	long long ago;
	if (parse_duration(arg, &ago) == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 - ago;
		char *v = NULL;
		if (asprintf(&v, "%lld.%03lld", ms / 1000, ms % 1000) < 0)
			return NULL;
		return v;
	}
	if (absolute_time(arg))
		return cell_client_urlencode(arg);
	cli_error_usage("logs", CLI_EXIT_USAGE,
			"--since '%s': expected a duration (30s, 10m, 1h30m), Unix seconds or an "
			"RFC 3339 time (2026-11-29T15:00:00Z)",
			arg);
	return NULL;
}

static int to_stdout(void *cls, const void *data, size_t len, struct cell_error *err)
{
	(void)cls;
	int r = cell_write_all(STDOUT_FILENO, data, len);
	return r < 0 ? cell_err(err, -r, "writing to stdout") : 0;
}

/* How the command is doing, from the answer's headers. */
struct logs_state {
	char *id, *kind, *running, *exit_code, *error, *dropped;
};

static void state_free(struct logs_state *st)
{
	free(st->id);
	free(st->kind);
	free(st->running);
	free(st->exit_code);
	free(st->error);
	free(st->dropped);
	*st = (struct logs_state){0};
}

static void state_read(struct cell_client_buf *headers, struct logs_state *st)
{
	struct cell_client_resp resp = {.headers = *headers};
	state_free(st);
	st->id = cell_client_resp_header(&resp, "X-Cell-Command-Id");
	st->kind = cell_client_resp_header(&resp, "X-Cell-Command-Kind");
	st->running = cell_client_resp_header(&resp, "X-Cell-Command-Running");
	st->exit_code = cell_client_resp_header(&resp, "X-Cell-Command-Exit-Code");
	st->error = cell_client_resp_header(&resp, "X-Cell-Command-Error");
	st->dropped = cell_client_resp_header(&resp, "X-Cell-Log-Dropped");
}

/* GET the logs at query into stdout (state from the answer's headers): 0 or -errno. */
static int get_logs(const char *id, const char *query, struct logs_state *st,
		    struct cell_error *err)
{
	_cleanup_free_ char *path = NULL, *what = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s/logs?%s", id, query) < 0 ||
	    asprintf(&what, "logs of %s", id) < 0)
		return cell_err(err, ENOMEM, "logs");
	struct cell_client_buf headers = {0};
	int r = cell_client_get_sink(cli_client(), path, what, to_stdout, NULL, &headers, err);
	if (r == 0)
		state_read(&headers, st);
	cell_client_buf_free(&headers);
	return r;
}

/* The end of the command, or its dropped output, on stderr (cli_error escapes what the
 * sandbox may have chosen: the error text). */
static void report(const struct logs_state *st)
{
	char who[CELL_ID_MAX + 16];
	bool ep = st->kind && !strcmp(st->kind, "entrypoint");
	snprintf(who, sizeof(who), "%s%s", ep ? "entrypoint" : "command ",
		 ep ? "" : (st->id ? st->id : "?"));
	if (st->dropped && !strcmp(st->dropped, "true"))
		cli_error("the output of %s was dropped: the sandbox's kept output reached its cap",
			  who);
	if (!st->running || !strcmp(st->running, "true"))
		return;
	if (st->exit_code)
		cli_error("%s exited with status %s%s%s%s", who, st->exit_code,
			  st->error ? " (" : "", st->error ? st->error : "", st->error ? ")" : "");
	else
		cli_error("%s ended: %s", who, st->error ? st->error : "status unknown");
}

/* A command's status as the list says it: running, exited N, or ended (why). */
static void status_text(json_t *cmd, char *buf, size_t size)
{
	json_t *code = json_object_get(cmd, "exitCode");
	const char *why = json_string_value(json_object_get(cmd, "error"));
	if (json_is_true(json_object_get(cmd, "running")))
		snprintf(buf, size, "running");
	else if (json_is_integer(code))
		snprintf(buf, size, "exited %lld", (long long)json_integer_value(code));
	else
		snprintf(buf, size, "ended: %.60s", why ? why : "?");
}

/* The table's text of a command: one line (tabs and newlines as spaces), cut to size. */
static void content_text(json_t *cmd, char *buf, size_t size)
{
	const char *text = json_string_value(json_object_get(cmd, "content"));
	snprintf(buf, size, "%s", text ? text : "");
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\t' || *p == '\r')
			*p = ' ';
}

/* --list: the sandbox's commands, oldest first. */
static int list_commands(const char *id)
{
	char path[128], what[96];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/commands", id);
	snprintf(what, sizeof(what), "commands of %s", id);
	json_t *resp, *items;
	int rc = cli_client_items(path, what, &resp, &items);
	if (rc >= 0)
		return rc;
	struct cli_table t;
	cli_table_init(&t, 5);
	cli_table_add(&t, (const char *const[]){"COMMAND", "KIND", "STATUS", "STARTED", "TEXT"});
	size_t i;
	json_t *v;
	json_array_foreach(items, i, v)
	{
		char status[80], text[49];
		status_text(v, status, sizeof(status));
		content_text(v, text, sizeof(text));
		const char *cid = json_string_value(json_object_get(v, "commandId"));
		const char *kind = json_string_value(json_object_get(v, "kind"));
		const char *at = json_string_value(json_object_get(v, "startedAt"));
		cli_table_add(&t, (const char *const[]){cid ? cid : "?", kind ? kind : "?", status,
							at ? at : "", text});
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(resp);
	return CLI_EXIT_OK;
}

struct logs_opts {
	bool follow, list;
	const char *tail, *command;
	char *since;
};

enum { OPT_SINCE = 0x2000, OPT_TAIL, OPT_COMMAND, OPT_LIST };

/* One option of logs: 1 taken, 0 not one of ours, -1 after a usage error. */
static int logs_opt(struct logs_opts *o, int c, const char *arg)
{
	long long n;
	char *end;
	switch (c) {
	case 'f':
		o->follow = true;
		return 1;
	case OPT_SINCE:
		free(o->since);
		return (o->since = since_value(arg)) ? 1 : -1;
	case OPT_TAIL:
		errno = 0;
		n = strcmp(arg, "all") ? strtoll(arg, &end, 10) : 0;
		if (strcmp(arg, "all") &&
		    (!arg[0] || *end || errno || n < 0 || n > TAIL_MAX || arg[0] == '+'))
			return cli_error_usage("logs", -1,
					       "--tail '%s': expected a number of lines from 0 to "
					       "%d, or all",
					       arg, TAIL_MAX);
		o->tail = arg;
		return 1;
	case OPT_COMMAND:
		if (!cell_id_valid(arg))
			return cli_error_usage("logs", -1,
					       "--command '%s': expected a command's id", arg);
		o->command = arg;
		return 1;
	case OPT_LIST:
		o->list = true;
		return 1;
	default:
		return 0;
	}
}

/* The logs of sandbox id as o asks, and how their command ended: the exit status. */
static int show_logs(const struct logs_opts *o, const char *id)
{
	_cleanup_free_ char *query = NULL;
	if (asprintf(&query, "follow=%s%s%s%s%s%s%s", o->follow ? "true" : "false",
		     o->since ? "&since=" : "", o->since ? o->since : "", o->tail ? "&tail=" : "",
		     o->tail ? o->tail : "", o->command ? "&command=" : "",
		     o->command ? o->command : "") < 0) {
		cli_error("logs: out of memory");
		return CLI_EXIT_FAIL;
	}
	cli_signals_install();
	struct logs_state st = {0};
	struct cell_error err = {0};
	int r = get_logs(id, query, &st, &err);
	if (r == 0 && o->follow && st.id && cell_id_valid(st.id) && st.running &&
	    !strcmp(st.running, "true")) {
		/* The stream ended with the command: how it ended is asked for again. */
		free(query);
		query = NULL;
		if (asprintf(&query, "tail=0&command=%s", st.id) < 0)
			r = cell_err(&err, ENOMEM, "logs");
		else
			r = get_logs(id, query, &st, &err);
	}
	int code = CLI_EXIT_OK;
	if (r < 0 && !(r == -EINTR && cli_signals_caught)) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_FAIL;
	}
	if (r == 0)
		report(&st);
	state_free(&st);
	return code;
}

int cmd_logs(int argc, char **argv)
{
	static const struct option longopts[] = {{"follow", no_argument, NULL, 'f'},
						 {"since", required_argument, NULL, OPT_SINCE},
						 {"tail", required_argument, NULL, OPT_TAIL},
						 {"command", required_argument, NULL, OPT_COMMAND},
						 {"list", no_argument, NULL, OPT_LIST},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct logs_opts o = {0};
	int c, code = CLI_EXIT_USAGE;
	while ((c = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		int r = logs_opt(&o, c, optarg);
		if (r > 0)
			continue;
		/* Not an option of ours: the help, or getopt's complaint pointed at it. */
		if (r == 0 && c == 'h')
			usage(stdout);
		else if (r == 0)
			cli_error_option("logs", CLI_EXIT_USAGE);
		code = r == 0 && c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
		goto out;
	}
	if (argc - optind != 1) {
		cli_error_usage("logs", CLI_EXIT_USAGE, "expected exactly one sandbox ID");
		goto out;
	}
	if (o.list && (o.follow || o.since || o.tail || o.command)) {
		cli_error_usage("logs", CLI_EXIT_USAGE,
				"--list takes none of -f, --since, --tail, --command");
		goto out;
	}
	const char *id = cli_resolve_id(argv[optind]);
	code = !id ? CLI_EXIT_FAIL : o.list ? list_commands(id) : show_logs(&o, id);
out:
	free(o.since);
	return code;
}
