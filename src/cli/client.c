/* The cell CLI's connection to celld: the client library's handle, set up from the global
 * options. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <getopt.h>

#include "cell/cleanup.h"
#include "client.h"
#include "error.h"
#include "parse.h"
#include "global.h"
#include "output.h"
#include "signals.h"

#define LS_PAGE_SIZE 200
#define LS_MAX_PAGES 10000 /* a server that always says hasNextPage cannot loop us forever */

/* The ids cli_resolve_id handed out, freed with the client. */
static char *resolved[64];
static size_t n_resolved;

static struct cell_client client;
static bool client_ready;

struct cell_client *cli_client(void)
{
	if (!client_ready) {
		cell_client_init(&client, cli.socket);
		client.user_agent = "cell-cli";
		/* Streams and transfers stop on ^C; a create or delete never does (aborting a
		 * create half-way would leave a sandbox the CLI never learnt the id of). */
		client.interrupt = &cli_signals_caught;
		client_ready = true;
	}
	return &client;
}

void cli_client_cleanup(void)
{
	for (size_t i = 0; i < n_resolved; i++)
		free(resolved[i]);
	n_resolved = 0;
	if (client_ready)
		cell_client_close(&client);
}

int cli_client_api_code(const char *method, const char *path, json_t *body, const char *what,
			json_t **out, long *status, char *code, size_t code_size,
			struct cell_error *err)
{
	struct cell_client_answer ans;
	int r = cell_client_api(cli_client(), method, path, body, what, &ans, err);
	if (status)
		*status = ans.status;
	if (code && code_size)
		snprintf(code, code_size, "%s", ans.code);
	if (out)
		*out = ans.json;
	else
		json_decref(ans.json);
	return r;
}

int cli_client_api(const char *method, const char *path, json_t *body, const char *what,
		   json_t **out, long *status, struct cell_error *err)
{
	return cli_client_api_code(method, path, body, what, out, status, NULL, 0, err);
}

int cli_each(int argc, char **argv, const char *command, const char *what, bool ids,
	     int (*one)(const char *name, void *cls, struct cell_error *err), void *cls)
{
	if (optind >= argc)
		return cli_error_usage(command, CLI_EXIT_USAGE, "expected at least one %s", what);
	int rc = CLI_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		const char *name = ids ? cli_resolve_id(argv[i]) : argv[i];
		if (!name) {
			rc = CLI_EXIT_FAIL;
			if (cli_client()->unreachable)
				break;
			continue;
		}
		struct cell_error err = {0};
		if (one(name, cls, &err) < 0) {
			cli_error("%s", err.msg);
			rc = CLI_EXIT_FAIL;
			if (cli_client()->unreachable) /* nothing later can succeed without celld */
				break;
			continue;
		}
		printf("%s\n", argv[i]);
	}
	return rc;
}

int cli_client_items(const char *path, const char *what, json_t **resp, json_t **items)
{
	struct cell_error err = {0};
	*resp = NULL;
	if (cli_client_api("GET", path, NULL, what, resp, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	*items = json_object_get(*resp, "items");
	if (!json_is_array(*items)) {
		json_decref(*resp);
		cli_error("%s: celld's answer has no items", what);
		return CLI_EXIT_FAIL;
	}
	if (cli.json) {
		cli_output_json(*items);
		json_decref(*resp);
		return CLI_EXIT_OK;
	}
	return -1;
}

int cli_client_preview_url(const char *id, unsigned port, char **url, json_t **ans,
			   struct cell_error *err)
{
	*url = NULL;
	if (ans)
		*ans = NULL;
	char path[128], what[96];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/endpoints/%u", id, port);
	snprintf(what, sizeof(what), "port %u of %s", port, id);
	json_t *a = NULL;
	int r = cli_client_api("GET", path, NULL, what, &a, NULL, err);
	if (r < 0)
		return r;
	const char *u = json_string_value(json_object_get(a, "url"));
	if (u && !(*url = strdup(u)))
		r = cell_err(err, ENOMEM, "%s", what);
	else if (!u)
		r = cell_err_msg(err, ENOENT,
				 "%s: celld's own port (execd or egress), reached with the API "
				 "key; it has no preview URL",
				 what);
	if (ans)
		*ans = a;
	else
		json_decref(a);
	return r;
}

int cli_client_sandboxes(const char *state_query, json_t *all, struct cell_error *err)
{
	for (int page = 1; page <= LS_MAX_PAGES; page++) {
		_cleanup_free_ char *path = NULL;
		if (asprintf(&path, "/v1/sandboxes?page=%d&pageSize=%d%s", page, LS_PAGE_SIZE,
			     state_query) < 0)
			return cell_err(err, ENOMEM, "list sandboxes");
		json_t *resp = NULL;
		int r = cli_client_api("GET", path, NULL, "list sandboxes", &resp, NULL, err);
		if (r < 0)
			return r;
		json_t *items = json_object_get(resp, "items");
		if (!json_is_array(items)) {
			json_decref(resp);
			return cell_err_msg(err, EPROTO,
					    "list sandboxes: celld's answer has no items");
		}
		json_array_extend(all, items);
		json_t *pg = json_object_get(resp, "pagination");
		bool more =
		    json_is_true(json_object_get(pg, "hasNextPage")) && json_array_size(items) > 0;
		json_decref(resp);
		if (!more)
			return 0;
	}
	return 0;
}

/* The one sandbox of all whose id is arg, else whose name is, else whose id starts with arg;
 * NULL with err saying why (none, or the candidates of an ambiguous prefix). */
static const char *match_sandbox(json_t *all, const char *arg, struct cell_error *err)
{
	size_t i, n_prefix = 0;
	json_t *sb;
	const char *prefixed = NULL;
	char cands[512] = "";
	/* An id first: a name never hides a sandbox whose id it spells. */
	json_array_foreach(all, i, sb)
	{
		const char *id = json_string_value(json_object_get(sb, "id"));
		if (id && !strcmp(id, arg))
			return id;
	}
	json_array_foreach(all, i, sb)
	{
		const char *id = json_string_value(json_object_get(sb, "id"));
		const char *name = json_string_value(json_object_get(sb, "name"));
		if (!id)
			continue;
		if (name && !strcmp(name, arg))
			return id;
		if (strncmp(id, arg, strlen(arg)))
			continue;
		prefixed = id;
		size_t len = strlen(cands);
		if (n_prefix++ < 8)
			snprintf(cands + len, sizeof(cands) - len, "%s%s", len ? ", " : "", id);
	}
	if (n_prefix == 1)
		return prefixed;
	if (n_prefix > 1)
		cell_err_msg(err, EINVAL, "'%s' is the start of %zu sandboxes' ids: %s%s", arg,
			     n_prefix, cands, n_prefix > 8 ? ", ..." : "");
	else
		cell_err_msg(err, ENOENT, "no sandbox has the id or name '%s'", arg);
	return NULL;
}

const char *cli_resolve_id(const char *arg)
{
	struct cell_error err = {0};
	if (!arg[0] || strlen(arg) > 128) {
		cli_error("'%s': expected a sandbox id, a unique start of one, or a name", arg);
		return NULL;
	}
	json_t *all = json_array();
	if (!all || cli_client_sandboxes("", all, &err) < 0) {
		cli_error("%s", err.msg[0] ? err.msg : "out of memory");
		json_decref(all);
		return NULL;
	}
	const char *id = match_sandbox(all, arg, &err);
	char *copy = id && n_resolved < CELL_ARRAY_SIZE(resolved) ? strdup(id) : NULL;
	json_decref(all);
	if (!id)
		cli_error("%s", err.msg);
	else if (!copy)
		cli_error("%s: too many sandboxes named at once", arg);
	else
		resolved[n_resolved++] = copy;
	return copy;
}
