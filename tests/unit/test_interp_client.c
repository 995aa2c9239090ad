/* celld's client of a sandbox's code-interpreter service (src/celld/interpreter.c) against
 * answers written here, as a hostile sandbox could write them: a unary answer by length and
 * chunked, a run's NDJSON lines split anywhere across chunks (empty lines skipped), the
 * context its head names, a refusal, and what is refused: no HTTP, a head over its bound, a
 * bad chunk size, a line that is no JSON object, a line over INTERP_LINE_MAX, a body cut
 * short. The connection is one end of a socketpair that this suite's portconn_open hands
 * out (the real one enters a sandbox's network namespace); the other end gets the answer,
 * from a thread when it is larger than a socket buffer. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpreter.h"
#include "sandbox.h"
#include "unit.h"

static int peer = -1; /* the service's end */
static int mine = -1; /* celld's end, handed out once */

static int refusals; /* connections refused before mine is handed out */
static int attempts;

int portconn_open(struct sandbox *sb, unsigned port, struct cell_error *err)
{
	(void)sb;
	(void)err;
	ck_assert_uint_eq(port, INTERP_PORT);
	attempts++;
	if (refusals > 0) {
		refusals--;
		return -ECONNREFUSED;
	}
	int fd = mine;
	mine = -1;
	return fd >= 0 ? fd : -ECONNREFUSED;
}

/* The registry's lock guards the sandbox's state: nothing to guard here. */
void registry_lock(void)
{
}

void registry_unlock(void)
{
}

static void setup(void)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK); /* portconn's sockets are non-blocking */
	mine = sv[0];
	peer = sv[1];
}

static void teardown(void)
{
	if (mine >= 0)
		close(mine);
	if (peer >= 0)
		close(peer);
	mine = peer = -1;
}

/* The service's answer: text, then (close_after) nothing more from it (its side of the
 * connection shut for writing: celld's request still goes in). */
static void answer(const char *text, bool close_after)
{
	ck_assert_int_eq(write(peer, text, strlen(text)), (ssize_t)strlen(text));
	if (close_after)
		shutdown(peer, SHUT_WR);
}

static struct sandbox sb = {.id = "sbx-test"};

/* head, then the parts as chunks of a chunked body and its last chunk (parts NULL-ended). */
static void answer_chunked(const char *head, const char *const parts[])
{
	char buf[4096];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "%sTransfer-Encoding: chunked\r\n\r\n", head);
	for (size_t i = 0; parts[i]; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%zx%s\r\n%s\r\n", strlen(parts[i]),
				      i == 1 ? ";ext=1" : "", parts[i]);
	snprintf(buf + n, sizeof(buf) - n, "0\r\n\r\n");
	answer(buf, false);
}

/* status line, then body with its Content-Length. */
static void answer_length(const char *status, const char *body)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "HTTP/1.1 %s\r\nContent-Length: %zu\r\n\r\n%s", status,
		 strlen(body), body);
	answer(buf, false);
}

START_TEST(unary_by_length_and_chunked)
{
	answer_length("200 OK", "{\"id\": \"c-1\"}");
	struct interp_answer a;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_call(&sb, "GET", "/contexts/c-1", NULL, &a, &err), 0);
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.body, "{\"id\": \"c-1\"}");
	interp_answer_free(&a);
	/* What was sent: one request, closing. */
	char req[512] = "";
	ck_assert_int_gt(read(peer, req, sizeof(req) - 1), 0);
	ck_assert_msg(!strncmp(req, "GET /contexts/c-1 HTTP/1.1\r\n", 28), "%s", req);
	ck_assert_ptr_nonnull(strstr(req, "Connection: close\r\n"));

	teardown();
	setup();
	answer_chunked("HTTP/1.1 404 Not Found\r\n",
		       (const char *const[]){"Conte", "xt c-2 not found", NULL});
	ck_assert_int_eq(interp_call(&sb, "GET", "/contexts/c-2", NULL, &a, &err), 0);
	ck_assert_int_eq(a.status, 404);
	ck_assert_str_eq(a.body, "Context c-2 not found");
	interp_answer_free(&a);
}
END_TEST

/* A run's lines, split across chunks at odd places: each line whole, in order. */
START_TEST(run_lines_across_chunks)
{
	answer_chunked("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
		       "X-Context-Id: ctx-9\r\n",
		       (const char *const[]){"{\"type\"",
					     ": \"stdout\", \"text\": ", "\"hi\\n\"}\n\n",
					     "{\"type\": \"end_of_execution", "\"}\n", NULL});
	shutdown(peer, SHUT_WR);
	json_t *req = json_pack("{s:s}", "code", "print('hi')");
	struct interp_run *run;
	struct interp_answer no;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_run_open(&sb, req, &run, &no, &err), 0);
	json_decref(req);
	ck_assert_str_eq(interp_run_context(run), "ctx-9");
	const char *want[] = {"stdout", "end_of_execution"};
	for (int i = 0; i < 2; i++) {
		json_t *line = NULL;
		int rc;
		while ((rc = interp_run_next(run, &line, &err)) == -EAGAIN)
			;
		ck_assert_msg(rc == 1, "line %d: %d %s", i, rc, err.msg);
		ck_assert_str_eq(json_string_value(json_object_get(line, "type")), want[i]);
		if (i == 0)
			ck_assert_str_eq(json_string_value(json_object_get(line, "text")), "hi\n");
		json_decref(line);
	}
	json_t *line = NULL;
	ck_assert_int_eq(interp_run_next(run, &line, &err), 0);
	interp_run_close(run);
}
END_TEST

/* A refusal before the run: 1 with the service's text. */
START_TEST(run_refused)
{
	answer_length("400 Bad Request", "no kernel for language 'java' (kernels here: python)");
	json_t *req = json_pack("{s:s, s:s}", "code", "1", "language", "java");
	struct interp_run *run;
	struct interp_answer no;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_run_open(&sb, req, &run, &no, &err), 1);
	json_decref(req);
	ck_assert_ptr_null(run);
	ck_assert_int_eq(no.status, 400);
	ck_assert_ptr_nonnull(strstr(no.body, "'java'"));
	interp_answer_free(&no);
}
END_TEST

/* A run's first line after text, or the error it ends with: rc of interp_run_next. */
static int first_line(const char *text, struct cell_error *err)
{
	answer(text, true);
	json_t *req = json_pack("{s:s}", "code", "1");
	struct interp_run *run = NULL;
	struct interp_answer no;
	int rc = interp_run_open(&sb, req, &run, &no, err);
	json_decref(req);
	if (rc != 0)
		return rc;
	json_t *line = NULL;
	while ((rc = interp_run_next(run, &line, err)) == -EAGAIN)
		;
	json_decref(line);
	interp_run_close(run);
	return rc;
}

START_TEST(hostile_answers_refused)
{
	static const char *const bad[] = {
	    "SSH-2.0-nope\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\n\r\n0\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1]\r\n1\r\n\n\r\n0\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n{\"type\":",
	    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"type\": \"stdout\"}",
	    "HTTP/1.1 200 OK\r\nHeader without colon\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cell_error err = {0};
		int rc = first_line(bad[i], &err);
		ck_assert_msg(rc < 0 && rc != -EAGAIN, "answer %zu: %d", i, rc);
		ck_assert_msg(err.code == EPROTO, "answer %zu: %s (%d)", i, err.msg, err.code);
		teardown();
		setup();
	}
	/* A head over 16 KiB. */
	char *head = malloc(20000);
	ck_assert_ptr_nonnull(head);
	strcpy(head, "HTTP/1.1 200 OK\r\nX-Pad: ");
	memset(head + strlen(head), 'a', 18000);
	head[24 + 18000] = '\0';
	struct cell_error err = {0};
	answer(head, true);
	json_t *req = json_pack("{s:s}", "code", "1");
	struct interp_run *run = NULL;
	struct interp_answer no;
	ck_assert_int_lt(interp_run_open(&sb, req, &run, &no, &err), 0);
	ck_assert_int_eq(err.code, EPROTO);
	json_decref(req);
	free(head);
}
END_TEST

/* A line that never ends: refused at INTERP_LINE_MAX, not held without bound. */
static void *endless(void *arg)
{
	(void)arg;
	static const char head[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n{\"text\": \"";
	if (send(peer, head, sizeof(head) - 1, MSG_NOSIGNAL) < 0)
		return NULL;
	static char x[1 << 16];
	memset(x, 'x', sizeof(x));
	for (size_t sent = 0; sent < INTERP_LINE_MAX + sizeof(x) * 4; sent += sizeof(x))
		if (send(peer, x, sizeof(x), MSG_NOSIGNAL) < 0)
			break;
	return NULL;
}

START_TEST(endless_line_bounded)
{
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, endless, NULL), 0);
	json_t *req = json_pack("{s:s}", "code", "1");
	struct interp_run *run = NULL;
	struct interp_answer no;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_run_open(&sb, req, &run, &no, &err), 0);
	json_decref(req);
	json_t *line = NULL;
	int rc;
	while ((rc = interp_run_next(run, &line, &err)) == -EAGAIN)
		;
	ck_assert_int_lt(rc, 0);
	ck_assert_int_eq(err.code, EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "line over"));
	interp_run_close(run); /* the writer's next write fails: it ends */
	close(peer);
	peer = -1;
	pthread_join(th, NULL);
}
END_TEST

/* Nothing listens: at once for a sandbox not just started (this one is Pending). */
START_TEST(nothing_listens)
{
	close(mine);
	mine = -1;
	attempts = 0;
	struct interp_answer a;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_call(&sb, "GET", "/contexts", NULL, &a, &err), -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(err.msg, "sbx-test"));
	ck_assert_int_eq(attempts, 1);
}
END_TEST

/* A sandbox that has just started: its service is given the moment it takes to listen. */
START_TEST(a_young_sandbox_is_waited_for)
{
	struct sandbox young = {
	    .id = "sbx-young", .state = SBX_RUNNING, .transition_at = time(NULL)};
	refusals = 3;
	attempts = 0;
	answer_length("200 OK", "[]");
	struct interp_answer a;
	struct cell_error err = {0};
	ck_assert_int_eq(interp_call(&young, "GET", "/contexts", NULL, &a, &err), 0);
	ck_assert_int_eq(a.status, 200);
	ck_assert_int_eq(attempts, 4);
	interp_answer_free(&a);
	/* Long running: refused at once. */
	young.transition_at = time(NULL) - INTERP_START_S - 1;
	refusals = 1;
	attempts = 0;
	ck_assert_int_eq(interp_call(&young, "GET", "/contexts", NULL, &a, &err), -ECONNREFUSED);
	ck_assert_int_eq(attempts, 1);
	refusals = 0;
}
END_TEST

static Suite *interp_client_suite(void)
{
	Suite *s = suite_create("interp_client");
	TCase *tc = tcase_create("interp_client");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, unary_by_length_and_chunked);
	tcase_add_test(tc, run_lines_across_chunks);
	tcase_add_test(tc, run_refused);
	tcase_add_test(tc, hostile_answers_refused);
	tcase_add_test(tc, endless_line_bounded);
	tcase_add_test(tc, nothing_listens);
	tcase_add_test(tc, a_young_sandbox_is_waited_for);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(interp_client_suite());
}
