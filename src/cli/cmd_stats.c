/* cell stats (what sandboxes use, as docker stats shows it) and cell top (the processes of
 * one). celld answers raw counters (GET /v1/stats: CPU time, bytes, pids); rates such as
 * CPU % come from two samples here, so one request a second covers every sandbox. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "signals.h"
#include "table.h"

#define STATS_EVERY_MS 1000
#define STATS_IDS_MAX  1024 /* what celld takes in one request */

static void stats_usage(FILE *f)
{
	fputs("Usage: cell stats [OPTIONS]\n"
	      "       cell stats [OPTIONS] ID...\n"
	      "\n"
	      "Show what sandboxes use: CPU %, memory and its limit, pids, disk used and\n"
	      "its limit, network bytes received / sent. On a terminal the table is drawn\n"
	      "again every second until Ctrl-C; elsewhere one table a second is printed.\n"
	      "CPU % is the CPU time of the last second over wall time (100% is one core),\n"
	      "so the first table comes after a second. Without IDs: every Running or\n"
	      "Paused sandbox (-a: every one). A sandbox with no cgroup (Stopped, Failed)\n"
	      "shows '-' for CPU, memory and pids; one without a network, for NET I/O.\n"
	      "\n"
	      "Options:\n"
	      "  -a, --all          every sandbox, Stopped and Failed ones too\n"
	      "      --no-stream    print one table (two samples a second apart) and exit\n"
	      "      --format F     table (the default) or json (the counters and cpuPercent\n"
	      "                     of each sandbox: an array, one line a sample when\n"
	      "                     streaming)\n"
	      "      --json         as --format json\n"
	      "      --socket PATH  celld's socket\n"
	      "  -h, --help         this help\n",
	      f);
}

struct stats_opts {
	bool all, no_stream;
	char *path; /* GET /v1/stats with the ids asked */
};

/* GET the stats; NULL after printing why. */
static json_t *fetch(const struct stats_opts *o)
{
	json_t *resp = NULL;
	struct cell_error err = {0};
	if (cli_client_api("GET", o->path, NULL, "stats", &resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return NULL;
	}
	json_t *list = json_incref(json_object_get(resp, "sandboxes"));
	json_decref(resp);
	if (!json_is_array(list)) {
		cli_error("stats: celld's answer has no sandboxes");
		json_decref(list);
		return NULL;
	}
	return list;
}

static json_t *by_id(json_t *list, const char *id)
{
	size_t i;
	json_t *sb;
	json_array_foreach(
	    list, i,
	    sb) if (!strcmp(json_string_value(json_object_get(sb, "id")) ?: "", id)) return sb;
	return NULL;
}

static uint64_t u64(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));
	return v > 0 ? (uint64_t)v : 0;
}

/* CPU time over wall time between two samples of a sandbox, in % of one core; -1 when
 * either lacks it. */
static double cpu_percent(json_t *before, json_t *now)
{
	if (!before || !json_object_get(before, "cpuUsageUsec") ||
	    !json_object_get(now, "cpuUsageUsec"))
		return -1;
	uint64_t a = u64(before, "cpuUsageUsec"), b = u64(now, "cpuUsageUsec");
	int64_t ms = (int64_t)u64(now, "timestamp") - (int64_t)u64(before, "timestamp");
	if (ms <= 0 || b < a)
		return -1;
	return (double)(b - a) / ((double)ms * 1000.0) * 100.0;
}

static bool shown(const struct stats_opts *o, json_t *sb)
{
	const char *state = json_string_value(json_object_get(sb, "state"));
	return o->all || (state && (!strcmp(state, "Running") || !strcmp(state, "Paused")));
}

/* "used / limit" of two members, "-" without the first, limit "-" when 0 (none). */
static void pair(char *buf, size_t size, json_t *sb, const char *used, const char *limit)
{
	if (!json_object_get(sb, used)) {
		snprintf(buf, size, "-");
		return;
	}
	char a[32], b[32] = "-";
	cli_output_size(u64(sb, used), a, sizeof(a));
	if (u64(sb, limit))
		cli_output_size(u64(sb, limit), b, sizeof(b));
	snprintf(buf, size, "%s / %s", a, b);
}

static void add_row(struct cli_table *t, json_t *sb, double pct)
{
	char cpu[16] = "-", mem[80], mempct[16] = "-", pids[48] = "-", disk[80], net[80];
	if (pct >= 0)
		snprintf(cpu, sizeof(cpu), "%.2f%%", pct);
	pair(mem, sizeof(mem), sb, "memoryBytes", "memoryLimitBytes");
	if (json_object_get(sb, "memoryBytes") && u64(sb, "memoryLimitBytes"))
		snprintf(mempct, sizeof(mempct), "%.2f%%",
			 (double)u64(sb, "memoryBytes") * 100.0 /
			     (double)u64(sb, "memoryLimitBytes"));
	if (json_object_get(sb, "pidsCurrent"))
		snprintf(pids, sizeof(pids), "%llu", (unsigned long long)u64(sb, "pidsCurrent"));
	pair(disk, sizeof(disk), sb, "diskUsedBytes", "diskLimitBytes");
	if (json_object_get(sb, "networkRxBytes")) {
		char rx[32], tx[32];
		cli_output_size(u64(sb, "networkRxBytes"), rx, sizeof(rx));
		cli_output_size(u64(sb, "networkTxBytes"), tx, sizeof(tx));
		snprintf(net, sizeof(net), "%s / %s", rx, tx);
	} else {
		snprintf(net, sizeof(net), "-");
	}
	const char *name = json_string_value(json_object_get(sb, "name"));
	const char *row[] = {json_string_value(json_object_get(sb, "id")) ?: "?",
			     name && name[0] ? name : "-",
			     cpu,
			     mem,
			     mempct,
			     pids,
			     disk,
			     net};
	cli_table_add(t, row);
}

/* One table (or JSON array) of now, with CPU % against before. */
static void print_sample(const struct stats_opts *o, json_t *before, json_t *now, bool redraw)
{
	struct cli_table t;
	json_t *out = cli.json ? json_array() : NULL;
	cli_table_init(&t, 8);
	cli_table_add(&t, (const char *const[]){"ID", "NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %",
						"PIDS", "DISK USED / LIMIT", "NET RX / TX"});
	size_t i;
	json_t *sb;
	json_array_foreach(now, i, sb)
	{
		if (!shown(o, sb))
			continue;
		const char *id = json_string_value(json_object_get(sb, "id"));
		double pct = cpu_percent(id ? by_id(before, id) : NULL, sb);
		if (out) {
			json_t *one = json_deep_copy(sb);
			json_object_set_new(one, "cpuPercent",
					    pct >= 0 ? json_real(pct) : json_null());
			json_array_append_new(out, one);
		} else {
			add_row(&t, sb, pct);
		}
	}
	if (out && o->no_stream) {
		cli_output_json(out);
	} else if (out) {
		_cleanup_free_ char *line = json_dumps(out, JSON_COMPACT);
		printf("%s\n", line ? line : "[]");
	} else {
		if (redraw)
			fputs("\033[H\033[J", stdout); /* home, clear to the end */
		cli_table_print(&t, stdout);
	}
	fflush(stdout);
	json_decref(out);
	cli_table_free(&t);
}

/* A second's wait, cut short by Ctrl-C; false then. */
static bool wait_tick(void)
{
	struct timespec nap = {STATS_EVERY_MS / 1000, (STATS_EVERY_MS % 1000) * 1000000L};
	while (!cli_signals_caught && nanosleep(&nap, &nap) < 0 && errno == EINTR)
		;
	return !cli_signals_caught;
}

static int run_stats(const struct stats_opts *o)
{
	cli_signals_install();
	bool redraw = !cli.json && !o->no_stream && isatty(STDOUT_FILENO);
	json_t *before = fetch(o);
	if (!before)
		return CLI_EXIT_FAIL;
	int rc = CLI_EXIT_OK;
	while (wait_tick()) {
		json_t *now = fetch(o);
		if (!now) {
			rc = cli_signals_caught ? CLI_EXIT_OK : CLI_EXIT_FAIL;
			break;
		}
		print_sample(o, before, now, redraw);
		json_decref(before);
		before = now;
		if (o->no_stream)
			break;
	}
	json_decref(before);
	return rc;
}

/* "/v1/stats?id=A&id=B" of the ids the arguments name; NULL after printing why. */
static char *stats_path(int argc, char **argv)
{
	if (argc > STATS_IDS_MAX) {
		cli_error_usage("stats", CLI_EXIT_USAGE, "at most %d ids", STATS_IDS_MAX);
		return NULL;
	}
	size_t size = 16 + (size_t)argc * 72;
	char *path = malloc(size);
	if (!path)
		return NULL;
	size_t len = (size_t)snprintf(path, size, "/v1/stats");
	for (int i = 0; i < argc; i++) {
		const char *id = cli_resolve_id(argv[i]);
		if (!id) {
			free(path);
			return NULL;
		}
		len += (size_t)snprintf(path + len, size - len, "%cid=%s", i ? '&' : '?', id);
	}
	return path;
}

int cmd_stats(int argc, char **argv)
{
	enum { OPT_NO_STREAM = 0x2000, OPT_FORMAT };
	static const struct option longopts[] = {{"all", no_argument, NULL, 'a'},
						 {"no-stream", no_argument, NULL, OPT_NO_STREAM},
						 {"format", required_argument, NULL, OPT_FORMAT},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct stats_opts o = {0};
	int c;
	while ((c = getopt_long(argc, argv, "ha", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			stats_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'a') {
			o.all = true;
		} else if (c == OPT_NO_STREAM) {
			o.no_stream = true;
		} else if (c == OPT_FORMAT &&
			   (!strcmp(optarg, "json") || !strcmp(optarg, "table"))) {
			cli.json = !strcmp(optarg, "json");
		} else if (c == OPT_FORMAT) {
			return cli_error_usage("stats", CLI_EXIT_USAGE,
					       "--format: '%s' is not table or json", optarg);
		} else {
			return cli_error_option("stats", CLI_EXIT_USAGE);
		}
	}
	/* Sandboxes named are shown whatever their state. */
	o.all |= optind < argc;
	o.path = stats_path(argc - optind, argv + optind);
	if (!o.path)
		return CLI_EXIT_FAIL;
	int rc = run_stats(&o);
	free(o.path);
	return rc;
}

/* ---- cell top ---- */

static void top_usage(FILE *f)
{
	fprintf(f, "Usage: cell top ID\n"
		   "\n"
		   "List the processes of a Running or Paused sandbox: PID and UID as the\n"
		   "sandbox sees them, STATE (R running, S sleeping, D disk, Z zombie, T\n"
		   "stopped), TIME (CPU time), RSS, STARTED and COMMAND (its command line;\n"
		   "bytes outside printable ASCII shown as \\xNN). At most 4096 processes.\n"
		   "\n"
		   "Options:\n"
		   "      --json         print celld's answer as JSON\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void top_row(struct cli_table *t, json_t *p)
{
	char pid[24], uid[24], time_s[32], rss[32], started[32] = "-";
	snprintf(pid, sizeof(pid), "%lld",
		 (long long)json_integer_value(json_object_get(p, "pid")));
	json_int_t u = json_integer_value(json_object_get(p, "uid"));
	snprintf(uid, sizeof(uid), u >= 0 ? "%lld" : "-", (long long)u);
	uint64_t cpu_s = u64(p, "cpuUsec") / 1000000;
	snprintf(time_s, sizeof(time_s), "%llu:%02llu", (unsigned long long)(cpu_s / 60),
		 (unsigned long long)(cpu_s % 60));
	cli_output_size(u64(p, "rssBytes"), rss, sizeof(rss));
	time_t at = (time_t)(u64(p, "startedAt") / 1000);
	struct tm tm;
	if (at && localtime_r(&at, &tm))
		strftime(started, sizeof(started), "%Y-%m-%d %H:%M:%S", &tm);
	const char *row[] = {
	    pid, uid,	  json_string_value(json_object_get(p, "state")) ?: "?",  time_s,
	    rss, started, json_string_value(json_object_get(p, "command")) ?: "?"};
	cli_table_add(t, row);
}

int cmd_top(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "top", top_usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_error_usage("top", CLI_EXIT_USAGE, "expected one sandbox id");
	const char *id = cli_resolve_id(argv[optind]);
	if (!id)
		return CLI_EXIT_FAIL;
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/top", id);
	json_t *resp = NULL;
	struct cell_error err = {0};
	if (cli_client_api("GET", path, NULL, "top", &resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (cli.json) {
		cli_output_json(resp);
		json_decref(resp);
		return CLI_EXIT_OK;
	}
	struct cli_table t;
	cli_table_init(&t, 7);
	cli_table_add(
	    &t, (const char *const[]){"PID", "UID", "STATE", "TIME", "RSS", "STARTED", "COMMAND"});
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(resp, "processes"), i, p) top_row(&t, p);
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	if (json_is_true(json_object_get(resp, "truncated")))
		fprintf(stderr, "cell: top: more processes than the %zu shown\n", i);
	json_decref(resp);
	return CLI_EXIT_OK;
}
