/* The cell CLI's connection to celld: one `struct cell_client` (cell/client.h) for the
 * process, on the socket of --socket / $CELL_SOCKET, aborted by SIGINT/SIGTERM/SIGHUP
 * during streams and transfers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/client.h"
#include "cell/error.h"

/* The CLI's handle, made on first use from cli.socket (set the options first). */
struct cell_client *cli_client(void);

/* Release it (the handle keeps the connection to celld open between calls). */
void cli_client_cleanup(void);

/* One JSON request (cell_client_api). path is the URL path + query ("/v1/sandboxes?page=1").
 * body may be NULL. On a 2xx answer returns 0 and sets *out to the parsed JSON (NULL for an
 * empty body) and *status. On a transport failure or a non-2xx answer returns -errno with
 * err naming what failed; *status is the HTTP status (0 when none). `what` prefixes the
 * message ("create sandbox"). */
int cli_client_api(const char *method, const char *path, json_t *body, const char *what,
		   json_t **out, long *status, struct cell_error *err);

/* GET path, whose answer lists "items" (skills, snapshots, volumes): -1 with the answer in
 * *resp (to json_decref) and its items in *items, for the caller to print as a table; or
 * the exit status once done here (the failure printed, or with --json the items). */
int cli_client_items(const char *path, const char *what, json_t **resp, json_t **items);

/* Like cli_client_api, but the caller gets the server's error code ("FILE_NOT_FOUND") too. */
int cli_client_api_code(const char *method, const char *path, json_t *body, const char *what,
			json_t **out, long *status, char *code, size_t code_size,
			struct cell_error *err);

/* The loop of the commands that act on each of several names (rm, pause, resume, volume
 * rm): one(name) for each argument from optind on, its name printed on success, its error
 * otherwise, every one tried unless celld cannot be reached. ids: each must be a sandbox
 * id. what names the arguments for the usage error when there are none. Returns the exit
 * status. */
int cli_each(int argc, char **argv, const char *command, const char *what, bool ids,
	     int (*one)(const char *name, void *cls, struct cell_error *err), void *cls);

/* GET the endpoint of port in sandbox id: 0 with its preview URL in *url (malloc'd), or
 * -errno with err naming the port; a port of celld's own (no "url") is -ENOENT. *ans, when
 * not NULL, takes the whole answer. */
int cli_client_preview_url(const char *id, unsigned port, char **url, json_t **ans,
			   struct cell_error *err);

/* Every page of GET /v1/sandboxes (state_query: "" or "&state=S...") into all. */
int cli_client_sandboxes(const char *state_query, json_t *all, struct cell_error *err);

/* A sandbox as the user names it: its id, its name (--name; unique on the host, celld
 * sees to it) or a start of its id that no other id has, resolved through the list. The
 * id (valid until cli_client_cleanup), or NULL after printing why: no such sandbox, or an
 * ambiguous start, with the ids it starts. Every command that takes an id asks this. */
const char *cli_resolve_id(const char *arg);
