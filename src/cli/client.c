/* The cell CLI's connection to celld: the client library's handle, set up from the global
 * options. */
#include <stdbool.h>
#include <stdio.h>

#include <getopt.h>

#include "client.h"
#include "error.h"
#include "parse.h"
#include "global.h"
#include "output.h"
#include "signals.h"

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
		if (ids && !cli_parse_id(argv[i])) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		struct cell_error err = {0};
		if (one(argv[i], cls, &err) < 0) {
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
