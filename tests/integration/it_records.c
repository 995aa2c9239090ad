/* A sandbox's record: what a client may store in it (metadata, env, entrypoint) is capped at
 * create and at PATCH, so it always fits what celld loads back after a restart; a sandbox
 * celld cannot adopt is stopped, never left running unmanaged; create-or-resume compares
 * the session key itself, not only the id its hash gives. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* {"<prefix><i>": value, ...} with n entries, as JSON text. */
static char *big_map(const char *prefix, size_t n, const char *value)
{
	size_t cap = n * (strlen(prefix) + strlen(value) + 24) + 16, len = 0;
	char *s = malloc(cap);
	ck_assert_ptr_nonnull(s);
	len += (size_t)snprintf(s + len, cap - len, "{");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s\"%s%zu\":\"%s\"", i ? "," : "",
					prefix, i, value);
	snprintf(s + len, cap - len, "}");
	return s;
}

static long create_raw(const char *body, struct h_resp *resp)
{
	struct h_req req = {.method = "POST", .path = "/v1/sandboxes", .body = body, .via = H_UNIX};
	long st = h_request(&req, resp);
	if (st / 100 == 2)
		h_track_sandbox(h_jstr(resp->json, "id"));
	return st;
}

static void expect_refused(const char *body, const char *needle)
{
	struct h_resp r;
	long st = create_raw(body, &r);
	ck_assert_msg(st == 400, "create answered %ld (want 400 naming %s): %.300s", st, needle,
		      r.body);
	ck_assert_str_eq(h_err_code(&r), "INVALID_ARGUMENT");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), needle), "message does not name %s: %s",
		      needle, r.body);
	h_resp_free(&r);
}

/* The finding: 70,000 empty metadata keys in a body under 1 MiB made a state.json over the
 * 1 MiB celld loads back. Every field a client stores is bounded at create. */
START_TEST(create_caps_what_the_record_holds)
{
	char *md = big_map("k", 70000, "");
	char *body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"metadata\":%s}", md);
	ck_assert_uint_lt(strlen(body), 1u << 20);
	expect_refused(body, "metadata");
	free(body);
	free(md);

	char *env = big_map("E", 70000, "");
	body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"env\":%s}", env);
	expect_refused(body, "env");
	free(body);
	free(env);

	char *v = malloc(5000);
	memset(v, 'v', 4999);
	v[4999] = '\0';
	body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"metadata\":{\"k\":\"%s\"}}", v);
	expect_refused(body, "metadata.k");
	free(body);

	char *ep = malloc(70000 * 4 + 64);
	size_t len = 0;
	for (int i = 0; i < 70000; i++)
		len += (size_t)sprintf(ep + len, "%s\"\"", i ? "," : "");
	body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"entrypoint\":[%s]}", ep);
	expect_refused(body, "entrypoint");
	free(body);
	free(ep);
	free(v);
	ck_assert_int_eq(h_sandbox_count(), 0);

	/* within the caps: accepted, and the sandbox is adopted after a restart */
	md = big_map("key", 128, "value");
	body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"metadata\":%s}", md);
	struct h_resp r;
	ck_assert_int_eq(create_raw(body, &r), 202);
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_int_eq(json_object_size(json_object_get(r.json, "metadata")), 128);
	h_resp_free(&r);
	free(path);
	free(body);
	free(md);
	free(id);
}
END_TEST

/* PATCH is held to the same caps, and a refused patch changes nothing. */
START_TEST(patch_caps_and_refusal_changes_nothing)
{
	json_t *extra = json_pack("{s:{s:s}}", "metadata", "keep", "me");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	char *path = h_fmt("/v1/sandboxes/%s/metadata", id);
	char *get = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;

	char *md = big_map("k", 200, "x");
	ck_assert_int_eq(h_http("PATCH", path, md, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "metadata"), "%s", r.body);
	h_resp_free(&r);
	free(md);

	char *big = malloc(600 << 10);
	memset(big, 'x', (600 << 10) - 1);
	big[(600 << 10) - 1] = '\0';
	char *body = h_fmt("{\"huge\":\"%s\"}", big);
	ck_assert_int_eq(h_http("PATCH", path, body, &r), 400);
	h_resp_free(&r);
	free(body);
	free(big);

	ck_assert_int_eq(h_http("GET", get, NULL, &r), 200);
	json_t *have = json_object_get(r.json, "metadata");
	ck_assert_int_eq(json_object_size(have), 1);
	ck_assert_str_eq(h_jstr(have, "keep"), "me");
	h_resp_free(&r);

	/* ordinary patches still merge */
	ck_assert_int_eq(h_http("PATCH", path, "{\"a\":\"1\",\"keep\":null}", &r), 200);
	have = json_object_get(r.json, "metadata");
	ck_assert_int_eq(json_object_size(have), 1);
	ck_assert_str_eq(h_jstr(have, "a"), "1");
	h_resp_free(&r);
	free(get);
	free(path);
	free(id);
}
END_TEST

/* A sandbox whose record celld cannot load back is stopped at the restart, not left running
 * unmanaged (past its expiry, invisible to the API, holding its uid range). */
START_TEST(unadoptable_sandbox_is_stopped)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "nohup sleep 4242 >/dev/null 2>&1 &"));
	json_t *ins = h_inspect(id);
	pid_t init = (pid_t)h_jint(ins, "pid");
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	json_decref(ins);
	ck_assert_int_gt(h_procs_in_uid_range(base, 65536, NULL), 1);

	h_celld_kill();
	char *state = h_fmt("%s/sandboxes/%s/state.json", H.state, id);
	h_write_file(state, "{ this is not a record", 0600);
	h_celld_start();

	/* celld logs the refusal once the sandbox's cgroup is gone: the processes die
	 * before that, so waiting for them alone would race its removal. */
	for (int i = 0; i < 100 && !strstr(h_celld_log_tail(), "not adopting"); i++)
		h_sleep_ms(100);
	ck_assert_msg(strstr(h_celld_log_tail(), "its processes were stopped"), "log: %s",
		      h_celld_log_tail());
	ck_assert_msg(!h_pid_alive(init), "the unadoptable sandbox's init %d still runs",
		      (int)init);
	pid_t left = 0;
	ck_assert_msg(h_procs_in_uid_range(base, 65536, &left) == 0,
		      "a process of the unadoptable sandbox still runs (pid %d)", (int)left);
	char where[1024];
	ck_assert_msg(!h_cgroup_exists(id, where, sizeof(where)), "its cgroup %s is left", where);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 404);

	/* its files were left for an operator; this test is that operator */
	char *dir = h_fmt("%s/sandboxes/%s", H.state, id);
	char *const rm[] = {"/bin/rm", "-rf", "--one-file-system", dir, NULL};
	struct h_proc p = {0};
	ck_assert_int_eq(h_run(rm, NULL, 60, &p), 0);
	h_proc_free(&p);
	free(dir);
	free(path);
	free(state);
	free(id);
}
END_TEST

/* create-or-resume hands out a sandbox only to the session key it was created with. A
 * record naming another key at the id this key's hash gives stands for a 64-bit collision
 * (or a key crafted to hit another tenant's id). */
START_TEST(session_key_is_compared_not_only_its_hash)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.sessionKey", "tenant-a-chat");
	char *id = h_create("busybox", extra);

	h_celld_kill();
	char *state = h_fmt("%s/sandboxes/%s/state.json", H.state, id);
	char *text = h_read_file(state);
	json_error_t jerr;
	json_t *rec = json_loads(text, 0, &jerr);
	ck_assert_ptr_nonnull(rec);
	json_object_set_new(rec, "sessionKey", json_string("tenant-b-chat"));
	char *edited = json_dumps(rec, JSON_INDENT(2));
	h_write_file(state, edited, 0600);
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");

	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	ck_assert_msg(st == 409, "create with the key answered %ld: %s", st, r.body);
	ck_assert_str_ne(h_jstr(r.json, "id"), id);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "another session key"), "%s", r.body);
	h_resp_free(&r);

	/* the sandbox itself is untouched and still answers by its id */
	char *out = h_sh(id, "echo still");
	ck_assert_str_eq(out, "still\n");
	free(out);
	free(edited);
	json_decref(rec);
	free(text);
	free(state);
	json_decref(extra);
	free(id);
}
END_TEST

static Suite *records_suite(void)
{
	Suite *s = suite_create("records");
	tcase_add_test(h_tcase(s, "create_caps_what_the_record_holds", 180),
		       create_caps_what_the_record_holds);
	tcase_add_test(h_tcase(s, "patch_caps_and_refusal_changes_nothing", 120),
		       patch_caps_and_refusal_changes_nothing);
	tcase_add_test(h_tcase(s, "unadoptable_sandbox_is_stopped", 180),
		       unadoptable_sandbox_is_stopped);
	tcase_add_test(h_tcase(s, "session_key_is_compared_not_only_its_hash", 180),
		       session_key_is_compared_not_only_its_hash);
	return s;
}

int main(void)
{
	return h_main(records_suite());
}
