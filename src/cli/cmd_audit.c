/* cell events (a sandbox's or the image store's events, kept and live) and cell audit
 * (celld's audit log). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "parse.h"
#include "signals.h"

static void events_usage(FILE *f)
{
	fprintf(f,
		"Usage: cell events [-f] [--since SEQ] ID\n"
		"       cell events --images [-f] [--since SEQ]\n"
		"\n"
		"Print a sandbox's events, oldest first: its state transitions, OOM kills,\n"
		"network and seccomp denials, provisioning output. One line each: time,\n"
		"seq, type and the rest as JSON (--json: each event's JSON).\n"
		"With --images, the image store's instead: pulls started, each layer fetched\n"
		"or found, pulls done or failed (a create's as well as cell image pull's),\n"
		"images imported, committed, tagged and removed, prunes.\n"
		"\n"
		"Options:\n"
		"  -f, --follow       then wait for new ones until ^C or the sandbox is deleted\n"
		"      --images       the image store's events (celld's Unix socket only)\n"
		"      --since SEQ    only events after this seq\n"
		"      --json         one JSON object a line\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n");
}

/* The rest of a line: the members not printed yet (rest, dropped here) as JSON, if any. */
static void end_line(json_t *rest, size_t flags)
{
	char *s = json_object_size(rest) ? json_dumps(rest, flags) : NULL;
	if (s) {
		fputs("  ", stdout);
		cli_output_safe(s, stdout);
	}
	fputc('\n', stdout);
	free(s);
	json_decref(rest);
}

/* "2026-11-24T15:00:00.123Z  #12  state  {op, from, to}" or the JSON line. */
static int print_event(void *ctx, const char *data, size_t len)
{
	(void)ctx;
	json_t *o = json_loadb(data, len, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return 0;
	}
	if (cli.json) {
		char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (s)
			printf("%s\n", s);
		free(s);
	} else {
		const char *t = json_string_value(json_object_get(o, "time"));
		const char *type = json_string_value(json_object_get(o, "type"));
		long long seq = json_integer_value(json_object_get(o, "seq"));
		json_t *rest = json_copy(o);
		json_object_del(rest, "time");
		json_object_del(rest, "type");
		json_object_del(rest, "seq");
		printf("%s  #%lld  ", t ? t : "?", seq);
		cli_output_safe(type ? type : "?", stdout);
		end_line(rest, JSON_COMPACT);
	}
	fflush(stdout);
	json_decref(o);
	return 0;
}

int cmd_events(int argc, char **argv)
{
	enum { OPT_SINCE = 0x2000, OPT_IMAGES };
	static const struct option longopts[] = {{"follow", no_argument, NULL, 'f'},
						 {"since", required_argument, NULL, OPT_SINCE},
						 {"images", no_argument, NULL, OPT_IMAGES},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	bool follow = false, images = false;
	const char *since = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			events_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'f') {
			follow = true;
			continue;
		}
		if (c == OPT_IMAGES) {
			images = true;
			continue;
		}
		if (c == OPT_SINCE) {
			since = optarg;
			if (strspn(since, "0123456789") != strlen(since) || !since[0] ||
			    strlen(since) > 19)
				return cli_error_usage("events", CLI_EXIT_USAGE,
						       "--since takes an event's seq (a number)");
			continue;
		}
		return cli_error_option("events", CLI_EXIT_USAGE);
	}
	if (images && argc - optind != 0)
		return cli_error_usage("events", CLI_EXIT_USAGE, "--images takes no sandbox id");
	if (!images && argc - optind != 1)
		return cli_error_usage("events", CLI_EXIT_USAGE,
				       "expected exactly one sandbox id (or --images)");
	const char *id = images ? NULL : argv[optind];
	if (id && !cli_parse_id(id))
		return CLI_EXIT_FAIL;
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/%s%s/events?follow=%s%s%s", images ? "images" : "sandboxes/",
		     images ? "" : id, follow ? "true" : "false", since ? "&since=" : "",
		     since ? since : "") < 0)
		return CLI_EXIT_FAIL;
	cli_signals_install();
	struct cell_client_req req = {.method = "GET", .path = path, .abortable = true};
	struct cell_error err = {0};
	long status = 0;
	int r = cell_client_stream(cli_client(), &req, print_event, NULL, "events", &status, &err);
	if (r == -EINTR && cli_signals_caught)
		return CLI_EXIT_OK;
	if (r < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static void audit_usage(FILE *f)
{
	fprintf(f, "Usage: cell audit [--since TIME] [--limit N] [ID]\n"
		   "\n"
		   "Print celld's audit log (the Unix socket only), oldest first: lifecycle\n"
		   "changes, commands, file changes and network decisions, each with its time,\n"
		   "request id, who asked (unix, or an API key's id) and sandbox. With ID, only\n"
		   "that sandbox's records.\n"
		   "\n"
		   "Options:\n"
		   "      --since TIME   records at or after TIME (RFC 3339 or Unix seconds)\n"
		   "      --limit N      the last N records (default 1000, at most 10000)\n"
		   "      --json         one JSON object a line\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void print_record(json_t *o)
{
	if (cli.json) {
		char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		if (s)
			printf("%s\n", s);
		free(s);
		return;
	}
	static const char *const head[] = {"time", "requestId", "who", "sandbox", "action"};
	json_t *rest = json_copy(o);
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++) {
		const char *v = json_string_value(json_object_get(o, head[i]));
		if (i)
			fputs("  ", stdout);
		cli_output_safe(v && v[0] ? v : "-", stdout);
		json_object_del(rest, head[i]);
	}
	end_line(rest, JSON_COMPACT | JSON_SORT_KEYS);
}

int cmd_audit(int argc, char **argv)
{
	enum { OPT_SINCE = 0x2000, OPT_LIMIT };
	static const struct option longopts[] = {{"since", required_argument, NULL, OPT_SINCE},
						 {"limit", required_argument, NULL, OPT_LIMIT},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	const char *since = NULL, *limit = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			audit_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == OPT_SINCE) {
			since = optarg;
			continue;
		}
		if (c == OPT_LIMIT) {
			limit = optarg;
			continue;
		}
		return cli_error_option("audit", CLI_EXIT_USAGE);
	}
	if (argc - optind > 1)
		return cli_error_usage("audit", CLI_EXIT_USAGE, "expected at most one sandbox id");
	const char *id = optind < argc ? argv[optind] : NULL;
	if (id && !cli_parse_id(id))
		return CLI_EXIT_FAIL;
	_cleanup_free_ char *es = since ? cell_client_urlencode(since) : NULL;
	_cleanup_free_ char *el = limit ? cell_client_urlencode(limit) : NULL;
	if ((since && !es) || (limit && !el))
		return CLI_EXIT_FAIL;
	char path[1024] = "/v1/audit";
	const char *names[] = {"sandbox", "since", "limit"}, *vals[] = {id, es, el};
	size_t n = strlen(path);
	for (size_t k = 0; k < 3; k++) {
		if (!vals[k])
			continue;
		int w = snprintf(path + n, sizeof(path) - n, "%c%s=%s", n > 9 ? '&' : '?', names[k],
				 vals[k]);
		if (w < 0 || (size_t)w >= sizeof(path) - n)
			return cli_error_usage("audit", CLI_EXIT_USAGE, "--since is too long");
		n += (size_t)w;
	}
	json_t *resp = NULL;
	struct cell_error err = {0};
	if (cli_client_api("GET", path, NULL, "audit", &resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	json_t *records = json_object_get(resp, "records"), *o;
	size_t i;
	json_array_foreach(records, i, o) print_record(o);
	json_decref(resp);
	return CLI_EXIT_OK;
}
