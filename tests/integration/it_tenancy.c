/* Tenancy: from a second API key on (--api-keys-file), every sandbox belongs to the key
 * that created it and another key's answers 404 on every route, in lists and session
 * keys; the Unix socket (the operator) sees and acts on all. With one key, that key and
 * the operator share everything, as they always did. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static char *create_as(const char *const *headers, const char *extra_json)
{
	char *body = h_fmt("{\"image\":{\"uri\":\"busybox\"}%s%s}", extra_json ? "," : "",
			   extra_json ? extra_json : "");
	struct h_resp r;
	long st = h_as(headers, "POST", "/v1/sandboxes", body, &r);
	ck_assert_msg(st == 202 || st == 200, "create: HTTP %ld %s", st, r.body);
	char *id = strdup(h_jstr(r.json, "id"));
	h_track_sandbox(id);
	h_resp_free(&r);
	free(body);
	return id;
}

#define LIST "/v1/sandboxes?pageSize=200"

START_TEST(another_keys_sandbox_is_not_found)
{
	h_two_tenants();
	char *a = create_as(h_alice, NULL);
	/* every kind of route of the sandbox: its record, lifecycle, execd, files, events,
	 * the port proxy, snapshots, egress */
	static const struct {
		const char *method, *fmt, *body;
	} routes[] = {
	    {"GET", "/v1/sandboxes/%s", NULL},
	    {"GET", "/v1/sandboxes/%s/inspect", NULL},
	    {"GET", "/v1/sandboxes/%s/events", NULL},
	    {"POST", "/v1/sandboxes/%s/pause", NULL},
	    {"POST", "/v1/sandboxes/%s/renew-expiration",
	     "{\"expiresAt\":\"2099-01-01T00:00:00Z\"}"},
	    {"PATCH", "/v1/sandboxes/%s/metadata", "{\"a\":\"b\"}"},
	    {"POST", "/v1/sandboxes/%s/proxy/44772/command", "{\"command\":\"true\"}"},
	    {"GET", "/v1/sandboxes/%s/proxy/44772/files/info?path=/etc/hostname", NULL},
	    {"GET", "/v1/sandboxes/%s/proxy/8080/", NULL},
	    {"GET", "/v1/sandboxes/%s/endpoints/8080", NULL},
	    {"POST", "/v1/sandboxes/%s/snapshots", "{}"},
	    {"GET", "/v1/sandboxes/%s/proxy/18080/policy", NULL},
	    {"DELETE", "/v1/sandboxes/%s", NULL},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		char *path = h_fmt(routes[i].fmt, a);
		struct h_resp r;
		long st = h_as(h_bob, routes[i].method, path, routes[i].body, &r);
		ck_assert_msg(st == 404, "bob %s %s: HTTP %ld %s", routes[i].method, path, st,
			      r.body);
		ck_assert_msg(!strstr(r.body, "\"state\""), "%s leaks its state: %s", path, r.body);
		h_resp_free(&r);
		free(path);
	}
	/* the default key is a tenant too now */
	char *path = h_fmt("/v1/sandboxes/%s", a);
	struct h_resp r;
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 404);
	h_resp_free(&r);
	/* still there, and alice's alone; the operator sees it */
	ck_assert_int_eq(h_as(h_alice, "GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	h_resp_free(&r);
	ck_assert(h_listed(h_alice, LIST, a));
	ck_assert(!h_listed(h_bob, LIST, a));
	ck_assert(h_listed(NULL, LIST, a));
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	free(path);
	/* the operator acts on it too */
	ck_assert_int_eq(h_delete(a), 204);
	free(a);
}
END_TEST

START_TEST(session_keys_are_each_tenants_own)
{
	h_two_tenants();
	const char *key = "\"extensions\":{\"cell.sessionKey\":\"chat-1\"}";
	char *a = create_as(h_alice, key);
	char *b = create_as(h_bob, key);
	ck_assert_msg(strcmp(a, b), "one session key gave both tenants sandbox %s", a);
	/* each resumes its own */
	char *a2 = create_as(h_alice, key);
	char *b2 = create_as(h_bob, key);
	ck_assert_str_eq(a, a2);
	ck_assert_str_eq(b, b2);
	ck_assert(!h_listed(h_alice, LIST, b));
	ck_assert(!h_listed(h_bob, LIST, a));
	free(a);
	free(b);
	free(a2);
	free(b2);
}
END_TEST

START_TEST(one_key_shares_with_the_operator)
{
	/* the suite's celld: one key */
	char *id = h_create("busybox", NULL);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 200);
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

START_TEST(a_bad_keys_file_refuses_the_start)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
	    {"alice " H_ALICE_KEY "\nbob short\n", "line 2"},
	    {"alice " H_ALICE_KEY "\nalice " H_BOB_KEY "\n", "named twice"},
	    {"alice " H_ALICE_KEY "\nbob " H_ALICE_KEY "\n", "has the key of tenant 'alice'"},
	    {"Alice " H_ALICE_KEY "\n", "line 1"},
	    {"default " H_ALICE_KEY "\n", "api-key file's key"},
	    {"alice " H_ALICE_KEY " extra\n", "more than NAME KEY"},
	};
	char *file = h_fmt("%s/keys", H.dir);
	const char *flags[] = {"--api-keys-file", file, NULL};
	struct h_world_opts o = {.name = "bad", .tcp = true, .flags = flags, .unstarted = true};
	struct h_world *w = h_world_add(&o);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h_write_file(file, bad[i].text, 0600);
		char why[4096];
		ck_assert_msg(!h_world_spawn(w, why, sizeof(why)), "started with %s", bad[i].text);
		ck_assert_msg(strstr(why, bad[i].says), "%s: %s", bad[i].text, why);
	}
	free(file);
}
END_TEST

static Suite *tenancy_suite(void)
{
	Suite *s = suite_create("tenancy");
	tcase_add_test(h_tcase(s, "another_keys_sandbox_is_not_found", 120),
		       another_keys_sandbox_is_not_found);
	tcase_add_test(h_tcase(s, "session_keys_are_each_tenants_own", 120),
		       session_keys_are_each_tenants_own);
	tcase_add_test(h_tcase(s, "one_key_shares_with_the_operator", 60),
		       one_key_shares_with_the_operator);
	tcase_add_test(h_tcase(s, "a_bad_keys_file_refuses_the_start", 120),
		       a_bad_keys_file_refuses_the_start);
	return s;
}

int main(void)
{
	return h_main(tenancy_suite());
}
