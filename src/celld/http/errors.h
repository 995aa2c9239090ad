/* The one table from a failure's errno to what a client is answered: an HTTP status and a
 * code. Domain code (lifecycle, limits, relay, init's answers) reports -errno with a
 * struct cell_error and never a status; each API maps the errno here, once, and writes the
 * answer in its own error body (one of the two below, its struct http_api's error_body).
 * A route may name the code more precisely where its API's spec does (FILE_NOT_FOUND for a
 * 404 of a file), but the status comes from this table. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

struct errors_answer {
	int errnum;
	unsigned status;
	const char *code;
	/* The same failure as an RPC protocol's status code names it ("not_found"; Connect and
	 * gRPC share the names): finer than the HTTP status where those protocols are (an
	 * existing name is already_exists, not a conflict). */
	const char *rpc;
};

/* The row of errnum; 500 INTERNAL (rpc "internal") for an errno the table does not list.
 * Never NULL. */
const struct errors_answer *errors_lookup(int errnum);
/* errnum is the host out of something (a 503 of the table): celld's own failure, whatever
 * step met it, never what a sandbox or an app behind it answered. */
bool errors_host_short(int errnum);

/* The error bodies (a new reference, NULL when out of memory). OpenSandbox's names the
 * failure, {"code": code, "message"}; E2B's numbers it, {"code": status, "message"}. */
json_t *errors_body_named(unsigned status, const char *code, const char *message);
json_t *errors_body_numbered(unsigned status, const char *code, const char *message);
