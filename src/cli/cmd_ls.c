/* cell ls: all sandboxes, as a table, JSON, their ids or a template of their fields. */
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
#include "table.h"

static void ls_usage(FILE *f)
{
	fprintf(f, "Usage: cell ls [OPTIONS]\n"
		   "\n"
		   "List sandboxes, in every state (Running, Paused, Stopped, Failed):\n"
		   "ID NAME STATE IMAGE CREATED. A sandbox stays Running when its entrypoint\n"
		   "ends; STATE then says so: \"Running (entrypoint exited 3)\" (cell logs ID).\n"
		   "\n"
		   "Options:\n"
		   "  -a, --all          every sandbox (what ls lists anyway; docker's habit)\n"
		   "  -q, --quiet        only the ids, one a line\n"
		   "      --format F     table (the default), json (as --json), or a template\n"
		   "                     printed for each sandbox: {{.ID}} {{.Name}} {{.State}}\n"
		   "                     {{.Image}} {{.Created}} replaced, \\t and \\n as tab and\n"
		   "                     newline (e.g. '{{.ID}} {{.Name}}')\n"
		   "      --state STATE  only sandboxes in this state (Running, Paused, Stopped,\n"
		   "                     Failed; repeatable)\n"
		   "      --json         print the sandboxes as a JSON array (the API's objects)\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static const char *str_or(json_t *j, const char *dflt)
{
	const char *s = json_string_value(j);
	return s && s[0] ? s : dflt;
}

/* A row's fields, in the table's order; the template's names for them. */
enum { F_ID, F_NAME, F_STATE, F_IMAGE, F_CREATED, F_COUNT };
static const char *const field_names[F_COUNT] = {".ID", ".Name", ".State", ".Image", ".Created"};

/* A sandbox whose entrypoint ended stays Running (a computer, not a process): its state
 * says so, with the code, into buf. */
static const char *state_text(json_t *sb, const char *state, char *buf, size_t size)
{
	json_t *ep = json_object_get(sb, "entrypointStatus");
	if (!json_is_object(ep) || !json_is_false(json_object_get(ep, "running")) ||
	    (strcmp(state, "Running") && strcmp(state, "Paused")))
		return state;
	json_t *code = json_object_get(ep, "exitCode");
	if (json_is_integer(code))
		snprintf(buf, size, "%s (entrypoint exited %lld)", state,
			 (long long)json_integer_value(code));
	else
		snprintf(buf, size, "%s (entrypoint ended)", state);
	return buf;
}

#define STATE_TEXT_MAX 64

static void row_fields(json_t *sb, const char *row[F_COUNT], char state[STATE_TEXT_MAX])
{
	/* celld reports a Stopped sandbox as Paused with reason Stopped (for OpenSandbox
	 * clients, which know no Stopped); people are told what it is. */
	json_t *status = json_object_get(sb, "status");
	const char *reason = json_string_value(json_object_get(status, "reason"));
	bool stopped = reason && !strcmp(reason, "Stopped");
	row[F_ID] = str_or(json_object_get(sb, "id"), "?");
	row[F_NAME] = str_or(json_object_get(sb, "name"), "-");
	row[F_STATE] = stopped ? "Stopped"
			       : state_text(sb, str_or(json_object_get(status, "state"), "?"),
					    state, STATE_TEXT_MAX);
	row[F_IMAGE] = str_or(json_object_get(json_object_get(sb, "image"), "uri"), "-");
	row[F_CREATED] = str_or(json_object_get(sb, "createdAt"), "-");
}

/* The field a "{{" at p opens: its index, *len the bytes up to and past "}}"; -1 when it
 * names no field (the message printed). */
static int template_field(const char *p, size_t *len)
{
	const char *end = strstr(p, "}}");
	size_t n = end ? (size_t)(end - p - 2) : 0;
	const char *name = p + 2 + strspn(p + 2, " ");
	size_t nlen = end ? (size_t)(end - name) : 0;
	while (nlen && name[nlen - 1] == ' ')
		nlen--;
	for (int f = 0; end && f < F_COUNT; f++)
		if (strlen(field_names[f]) == nlen && !strncmp(name, field_names[f], nlen)) {
			*len = n + 4;
			return f;
		}
	cli_error("--format: %.*s is not a field (known: {{.ID}} {{.Name}} {{.State}} "
		  "{{.Image}} {{.Created}})",
		  end ? (int)(n + 4) : (int)strlen(p), p);
	return -1;
}

/* The template for one sandbox, or only checked (sb NULL) before anything is printed. */
static int print_template(const char *tpl, json_t *sb)
{
	const char *row[F_COUNT];
	char state[STATE_TEXT_MAX];
	if (sb)
		row_fields(sb, row, state);
	for (const char *p = tpl; *p;) {
		if (!strncmp(p, "{{", 2)) {
			size_t len;
			int f = template_field(p, &len);
			if (f < 0)
				return -1;
			if (sb)
				cli_output_safe(row[f], stdout);
			p += len;
		} else if (p[0] == '\\' && (p[1] == 't' || p[1] == 'n')) {
			if (sb)
				putchar(p[1] == 't' ? '\t' : '\n');
			p += 2;
		} else {
			if (sb)
				putchar(*p);
			p++;
		}
	}
	if (sb)
		putchar('\n');
	return 0;
}

static void print_table(json_t *all)
{
	struct cli_table t;
	cli_table_init(&t, F_COUNT);
	cli_table_add(&t, (const char *const[]){"ID", "NAME", "STATE", "IMAGE", "CREATED"});
	size_t i;
	json_t *sb;
	json_array_foreach(all, i, sb)
	{
		const char *row[F_COUNT];
		char state[STATE_TEXT_MAX];
		row_fields(sb, row, state);
		cli_table_add(&t, row);
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
}

int cmd_ls(int argc, char **argv)
{
	enum { OPT_STATE = 0x2000, OPT_FORMAT };
	static const struct option longopts[] = {{"state", required_argument, NULL, OPT_STATE},
						 {"all", no_argument, NULL, 'a'},
						 {"quiet", no_argument, NULL, 'q'},
						 {"format", required_argument, NULL, OPT_FORMAT},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	const char *format = NULL;
	char query[512] = "";
	size_t qlen = 0;
	int c;
	while ((c = getopt_long(argc, argv, "haq", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg) || c == 'a')
			continue;
		if (c == 'h') {
			ls_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'q' || c == OPT_FORMAT) {
			format = c == 'q' ? "{{.ID}}" : optarg;
			continue;
		}
		if (c == OPT_STATE) {
			_cleanup_free_ char *enc = cell_client_urlencode(optarg);
			int n = enc ? snprintf(query + qlen, sizeof(query) - qlen, "&state=%s", enc)
				    : -1;
			if (n < 0 || (size_t)n >= sizeof(query) - qlen)
				return cli_error_usage("ls", CLI_EXIT_USAGE, "too many --state");
			qlen += (size_t)n;
			continue;
		}
		return cli_error_option("ls", CLI_EXIT_USAGE);
	}
	if (optind != argc)
		return cli_error_usage("ls", CLI_EXIT_USAGE, "unexpected argument '%s'",
				       argv[optind]);
	if (format && !strcmp(format, "json"))
		cli.json = true;
	bool table = !format || !strcmp(format, "table") || cli.json;
	if (!table && (!format[0] || print_template(format, NULL) < 0))
		return !format[0] ? cli_error_usage("ls", CLI_EXIT_USAGE, "--format is empty")
				  : CLI_EXIT_USAGE;
	json_t *all = json_array();
	struct cell_error err = {0};
	if (cli_client_sandboxes(query, all, &err) < 0) {
		cli_error("%s", err.msg);
		json_decref(all);
		return CLI_EXIT_FAIL;
	}
	if (cli.json) {
		cli_output_json(all);
	} else if (table) {
		print_table(all);
	} else {
		size_t i;
		json_t *sb;
		json_array_foreach(all, i, sb) print_template(format, sb);
	}
	json_decref(all);
	return CLI_EXIT_OK;
}
