/* The errno table (errors.c) and the answers http.c writes through it, in both APIs' error
 * bodies: the host out of memory, fds or disk is a 503 whichever API asks, an I/O error a
 * 500, a sandbox's full layer a 507. The suite's own MHD_queue_response keeps the status
 * instead of answering a connection; each API's body is kept as it was made. (http.c logs
 * each 5xx it writes: the suite's output has those lines.) */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>
#include <microhttpd.h>

#include "cell/error.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/http_req.h"
#include "unit.h"

static unsigned queued;
static json_t *body;

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
				   struct MHD_Response *response)
{
	(void)connection;
	(void)response;
	queued = status_code;
	return MHD_YES;
}

static json_t *keep(json_t *b)
{
	json_decref(body);
	body = json_incref(b);
	return b;
}

static json_t *named(unsigned status, const char *code, const char *message)
{
	return keep(errors_body_named(status, code, message));
}

static json_t *numbered(unsigned status, const char *code, const char *message)
{
	return keep(errors_body_numbered(status, code, message));
}

static const struct http_api opensandbox = {.name = "opensandbox", .error_body = named};
static const struct http_api e2b = {.name = "e2b", .error_body = numbered};

/* A request of api not answered yet. */
static void fresh(struct http_req *r, const struct http_api *api)
{
	memset(r, 0, sizeof(*r));
	r->api = api;
	strcpy(r->request_id, "test");
	queued = 0;
	json_decref(body);
	body = NULL;
}

static void teardown(void)
{
	json_decref(body);
	body = NULL;
}

/* The errnos the fronts route, and what the table answers for each. */
static const struct {
	int errnum;
	unsigned status;
	const char *code;
} routed[] = {
    {ENOMEM, 503, "HOST_OUT_OF_CAPACITY"},
    {EMFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENOSPC, 503, "HOST_OUT_OF_CAPACITY"},
    {EAGAIN, 503, "HOST_OUT_OF_CAPACITY"},
    {EIO, 500, "INTERNAL"},
    {EPROTO, 500, "INTERNAL"},
    {ETIMEDOUT, 500, "INTERNAL"},
    {EDQUOT, 507, "INSUFFICIENT_STORAGE"},
};

START_TEST(table_rows)
{
	for (size_t i = 0; i < sizeof(routed) / sizeof(routed[0]); i++) {
		const struct errors_answer *a = errors_lookup(routed[i].errnum);
		ck_assert_uint_eq(a->status, routed[i].status);
		ck_assert_str_eq(a->code, routed[i].code);
		ck_assert(errors_host_short(routed[i].errnum) == (routed[i].status == 503));
	}
	ck_assert(!errors_host_short(0));
	ck_assert(!errors_host_short(ENOENT));
	ck_assert(!errors_host_short(ECONNREFUSED));
}
END_TEST

/* The RPC names (Connect's and gRPC's codes) the table gives: finer than the status where
 * those protocols are, and only names the protocols have (a misspelt one would read as
 * "internal" wherever it is looked up). */
START_TEST(rpc_names)
{
	static const struct {
		int errnum;
		const char *rpc;
	} rows[] = {
	    {ENOENT, "not_found"},
	    {ESRCH, "not_found"},
	    {EEXIST, "already_exists"},
	    {ENOTEMPTY, "invalid_argument"},
	    {EACCES, "permission_denied"},
	    {ENOMEM, "resource_exhausted"},
	    {EMFILE, "resource_exhausted"},
	    {EDQUOT, "resource_exhausted"},
	    {EBUSY, "unavailable"},
	    {EAGAIN, "unavailable"},
	    {ETIMEDOUT, "deadline_exceeded"},
	    {EPIPE, "failed_precondition"},
	    {EIO, "internal"},
	    {EPROTO, "internal"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_str_eq(errors_lookup(rows[i].errnum)->rpc, rows[i].rpc);
	static const char *const names[] = {
	    "canceled",
	    "unknown",
	    "invalid_argument",
	    "deadline_exceeded",
	    "not_found",
	    "already_exists",
	    "permission_denied",
	    "resource_exhausted",
	    "failed_precondition",
	    "aborted",
	    "out_of_range",
	    "unimplemented",
	    "internal",
	    "unavailable",
	    "data_loss",
	    "unauthenticated",
	};
	for (int e = 1; e < 134; e++) {
		const char *rpc = errors_lookup(e)->rpc;
		bool known = false;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !known; i++)
			known = !strcmp(rpc, names[i]);
		ck_assert_msg(known, "errno %d: rpc code '%s' is no RPC code", e, rpc);
	}
}
END_TEST

START_TEST(fail_in_the_named_body)
{
	struct http_req r;
	for (size_t i = 0; i < sizeof(routed) / sizeof(routed[0]); i++) {
		fresh(&r, &opensandbox);
		ck_assert_int_eq(http_fail(&r, routed[i].errnum, NULL, "step %zu", i), 0);
		ck_assert_uint_eq(queued, routed[i].status);
		ck_assert_str_eq(json_string_value(json_object_get(body, "code")), routed[i].code);
		char want[32];
		snprintf(want, sizeof(want), "step %zu", i);
		ck_assert_str_eq(json_string_value(json_object_get(body, "message")), want);
	}
}
END_TEST

START_TEST(fail_in_the_numbered_body)
{
	struct http_req r;
	for (size_t i = 0; i < sizeof(routed) / sizeof(routed[0]); i++) {
		fresh(&r, &e2b);
		ck_assert_int_eq(http_fail(&r, routed[i].errnum, NULL, "step %zu", i), 0);
		ck_assert_uint_eq(queued, routed[i].status);
		ck_assert(json_is_integer(json_object_get(body, "code")));
		ck_assert_int_eq(json_integer_value(json_object_get(body, "code")),
				 routed[i].status);
	}
}
END_TEST

/* Out of memory is 503 in both bodies, never a hand-written 500. */
START_TEST(no_memory_in_both)
{
	struct http_req r;
	fresh(&r, &opensandbox);
	http_no_memory(&r);
	ck_assert_uint_eq(queued, 503);
	ck_assert_str_eq(json_string_value(json_object_get(body, "code")), "HOST_OUT_OF_CAPACITY");
	ck_assert_str_eq(json_string_value(json_object_get(body, "message")), "out of memory");
	fresh(&r, &e2b);
	http_no_memory(&r);
	ck_assert_uint_eq(queued, 503);
	ck_assert_int_eq(json_integer_value(json_object_get(body, "code")), 503);
	ck_assert_str_eq(json_string_value(json_object_get(body, "message")), "out of memory");
}
END_TEST

/* A lower layer's cell_error: its code through the table, its message as it is. */
START_TEST(internal_reads_the_code)
{
	struct cell_error err = {0};
	cell_err(&err, EMFILE, "a socket in the sandbox's network namespace");
	struct http_req r;
	fresh(&r, &e2b);
	http_internal(&r, &err);
	ck_assert_uint_eq(queued, 503);
	ck_assert_int_eq(json_integer_value(json_object_get(body, "code")), 503);
	ck_assert_str_eq(json_string_value(json_object_get(body, "message")), err.msg);
	cell_err(&err, EIO, "reading");
	fresh(&r, &opensandbox);
	http_internal(&r, &err);
	ck_assert_uint_eq(queued, 500);
	ck_assert_str_eq(json_string_value(json_object_get(body, "code")), "INTERNAL");
}
END_TEST

/* A route names the code more precisely; the status is still the table's. */
START_TEST(route_names_the_code)
{
	struct http_req r;
	fresh(&r, &opensandbox);
	http_fail(&r, EAGAIN, "STDIN_FULL", "the command's stdin is full");
	ck_assert_uint_eq(queued, 503);
	ck_assert_str_eq(json_string_value(json_object_get(body, "code")), "STDIN_FULL");
}
END_TEST

/* An upload's first failure is kept, its status the table's, and answered at the end. */
START_TEST(later_keeps_the_first)
{
	struct http_later l = {0};
	ck_assert_int_eq(http_later_fail_errno(&l, ENOSPC, NULL, "writing %s", "a"), -EIO);
	ck_assert_int_eq(http_later_fail_errno(&l, EIO, NULL, "then %s", "b"), -EIO);
	struct http_req r;
	fresh(&r, &opensandbox);
	http_later_answer(&r, &l);
	ck_assert_uint_eq(queued, 503);
	ck_assert_str_eq(json_string_value(json_object_get(body, "code")), "HOST_OUT_OF_CAPACITY");
	ck_assert_str_eq(json_string_value(json_object_get(body, "message")), "writing a");
	l = (struct http_later){0};
	http_later_fail_errno(&l, EDQUOT, "FILE_WRITE_FAILED", "full");
	fresh(&r, &e2b);
	http_later_answer(&r, &l);
	ck_assert_uint_eq(queued, 507);
	ck_assert_int_eq(json_integer_value(json_object_get(body, "code")), 507);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, table_rows);
	tcase_add_test(tc, rpc_names);
	tcase_add_test(tc, fail_in_the_named_body);
	tcase_add_test(tc, fail_in_the_numbered_body);
	tcase_add_test(tc, no_memory_in_both);
	tcase_add_test(tc, internal_reads_the_code);
	tcase_add_test(tc, route_names_the_code);
	tcase_add_test(tc, later_keeps_the_first);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(suite());
}
