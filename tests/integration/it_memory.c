/* What a client can make celld hold in memory: responses stream from what celld keeps
 * (a command's log, the sandbox list) instead of being built whole and pinned until a slow
 * client reads them, and the output all sandboxes keep together stays within celld's
 * output budget. Memory is read from celld's VmRSS: a bound, not a timing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SLOW_READERS  100
#define RSS_BOUND_KIB (96 * 1024)

static void slow_readers(const char *path, const char *what)
{
	long before = h_celld_rss_kib();
	int fds[SLOW_READERS];
	for (int i = 0; i < SLOW_READERS; i++)
		fds[i] = h_open_stream(H_UNIX, path, 4096);
	long during = h_celld_rss_kib();
	for (int i = 0; i < SLOW_READERS; i++)
		close(fds[i]);
	ck_assert_msg(before > 0 && during > 0, "no VmRSS of celld");
	ck_assert_msg(during - before < RSS_BOUND_KIB,
		      "%d slow readers of %s took celld from %ld to %ld KiB", SLOW_READERS, what,
		      before, during);
}

/* The finding: each GET /command/{id}/logs copied the whole log (up to 8 MiB) and pinned it
 * until the client read it: 200 slow readers took celld from 36 to 1578 MiB. */
START_TEST(logs_stream_to_slow_readers)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.hash_stdout = true};
	struct h_exec e;
	ck_assert_int_eq(h_exec(id, "head -c 8000000 /dev/zero", &o, &e), 0);
	ck_assert_msg(e.complete && e.out_hashed == 8000000, "output %zu bytes", e.out_hashed);
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command/%s/logs", id, e.cmd_id);
	h_exec_free(&e);
	slow_readers(path, "an 8 MB log");

	/* an ordinary reader still gets all of it, and the next cursor */
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_uint_eq(r.len, 8000000);
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

/* GET /v1/sandboxes?pageSize=1000 built the whole page, metadata and all, in memory. */
START_TEST(list_streams_to_slow_readers)
{
	char value[4001];
	memset(value, 'm', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	json_t *md = json_object();
	for (int k = 0; k < 4; k++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", k);
		json_object_set_new(md, key, json_string(value));
	}
	json_t *extra = json_pack("{s:o}", "metadata", md);
	enum { N = 40 };
	char *ids[N];
	for (int i = 0; i < N; i++)
		ids[i] = h_create("busybox", extra);
	json_decref(extra);
	slow_readers("/v1/sandboxes?pageSize=1000", "a 40-sandbox list");

	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/sandboxes?pageSize=1000", NULL, &r), 200);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), N);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), N);
	h_resp_free(&r);
	for (int i = 0; i < N; i++)
		free(ids[i]);
}
END_TEST

/* Each sandbox keeps at most 64 MiB of output; all of them together at most the budget:
 * past it the oldest finished commands' logs go first, whichever sandbox they are in. */
START_TEST(output_budget_across_sandboxes)
{
	h_celld_restart_with((const char *const[]){"--output-budget", "16Mi", NULL});
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "output.budgetBytes"), 16 << 20);
	h_resp_free(&r);
	enum { N = 4 };
	char *ids[N], *cmds[N];
	struct h_exec_opts o = {.hash_stdout = true};
	for (int i = 0; i < N; i++) {
		ids[i] = h_create("busybox", NULL);
		struct h_exec e;
		ck_assert_int_eq(h_exec(ids[i], "head -c 6000000 /dev/zero", &o, &e), 0);
		ck_assert(e.complete);
		cmds[i] = strdup(e.cmd_id);
		h_exec_free(&e);
		ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
		long long kept = h_jint(r.json, "output.keptBytes");
		h_resp_free(&r);
		ck_assert_msg(kept > 0 && kept <= (16 << 20),
			      "after %d commands celld keeps %lld bytes of output (budget 16 MiB)",
			      i + 1, kept);
	}
	/* the oldest command's log went, and its status says why; the newest is whole */
	char *st0 = h_fmt("/v1/sandboxes/%s/proxy/44772/command/status/%s", ids[0], cmds[0]);
	ck_assert_int_eq(h_http("GET", st0, NULL, &r), 200);
	ck_assert_msg(json_is_true(json_object_get(r.json, "log_dropped")), "%s", r.body);
	h_resp_free(&r);
	char *logs = h_fmt("/v1/sandboxes/%s/proxy/44772/command/%s/logs", ids[N - 1], cmds[N - 1]);
	ck_assert_int_eq(h_http("GET", logs, NULL, &r), 200);
	ck_assert_uint_eq(r.len, 6000000);
	h_resp_free(&r);
	free(logs);
	free(st0);
	for (int i = 0; i < N; i++) {
		free(cmds[i]);
		free(ids[i]);
	}
}
END_TEST

static Suite *memory_suite(void)
{
	Suite *s = suite_create("memory");
	tcase_add_test(h_tcase(s, "logs_stream_to_slow_readers", 180), logs_stream_to_slow_readers);
	tcase_add_test(h_tcase(s, "list_streams_to_slow_readers", 240),
		       list_streams_to_slow_readers);
	tcase_add_test(h_tcase(s, "output_budget_across_sandboxes", 180),
		       output_budget_across_sandboxes);
	return s;
}

int main(void)
{
	return h_main(memory_suite());
}
