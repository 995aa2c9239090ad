/* Hostile and broken client input: each gets a clear 4xx with a JSON error, and celld keeps
 * serving (a following create and exec work). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

/* The answer is a client error with a JSON {"code","message"} body. */
static void expect_4xx(const char *what, long status, struct h_resp *r)
{
	ck_assert_msg(status >= 400 && status < 500, "%s: HTTP %ld (want 4xx): %.300s", what,
		      status, r->body);
	ck_assert_msg(*h_err_code(r), "%s: HTTP %ld without a JSON error code: %.300s", what,
		      status, r->body);
	ck_assert_msg(*h_jstr(r->json, "message"), "%s: no message: %.300s", what, r->body);
	ck_assert_msg(r->request_id && *r->request_id, "%s: no X-Request-ID", what);
}

static void expect_status(const char *what, long want, long status, struct h_resp *r)
{
	ck_assert_msg(status == want, "%s: HTTP %ld (want %ld): %.300s", what, status, want,
		      r->body);
	expect_4xx(what, status, r);
}

/* celld still answers, creates and execs. */
static void still_serving(const char *id)
{
	ck_assert_msg(h_celld_alive(), "celld died");
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	h_resp_free(&r);
	char *out = h_sh(id, "echo ok");
	ck_assert_str_eq(out, "ok\n");
	free(out);
}

static void still_creates(void)
{
	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, "echo fresh");
	ck_assert_str_eq(out, "fresh\n");
	free(out);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}

static long post(const char *path, const char *body, size_t len, struct h_resp *r)
{
	struct h_req req = {.method = "POST", .path = path, .body = body, .body_len = len};
	return h_request(&req, r);
}

static const char *const malformed[] = {
    "{",
    "not json",
    "[]",
    "null",
    "\"str\"",
    "{\"image\":",
    "{\"image\":{\"uri\":\"busybox\"}",
    "{\"a\":1,}",
    "{'image':1}",
    "\xff\xfe{}",
    "{\"image\":{\"uri\":\"busy\\ud800box\"}}",
};

START_TEST(malformed_json)
{
	char *id = h_create("busybox", NULL);
	char *cmd_path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	struct h_resp r;
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		char *what = h_fmt("create with body '%s'", malformed[i]);
		expect_status(what, 400, post("/v1/sandboxes", malformed[i], 0, &r), &r);
		h_resp_free(&r);
		free(what);
		what = h_fmt("command with body '%s'", malformed[i]);
		expect_status(what, 400, post(cmd_path, malformed[i], 0, &r), &r);
		h_resp_free(&r);
		free(what);
	}
	/* an empty body */
	struct h_req req = {.method = "POST", .path = "/v1/sandboxes"};
	expect_status("create without a body", 400, h_request(&req, &r), &r);
	h_resp_free(&r);
	/* deep nesting (a parser stack bomb) */
	size_t depth = 200000;
	char *deep = malloc(2 * depth + 1);
	memset(deep, '[', depth);
	memset(deep + depth, ']', depth);
	deep[2 * depth] = '\0';
	expect_status("deeply nested body", 400, post("/v1/sandboxes", deep, 0, &r), &r);
	h_resp_free(&r);
	free(deep);
	/* a JSON text followed by garbage */
	expect_status("trailing garbage", 400,
		      post("/v1/sandboxes", "{\"image\":{\"uri\":\"busybox\"}} xyz", 0, &r), &r);
	h_resp_free(&r);
	still_serving(id);
	still_creates();
	free(cmd_path);
	free(id);
}
END_TEST

static const char *const bad_creates[] = {
    "{\"image\":\"busybox\"}",
    "{\"image\":{\"uri\":5}}",
    "{\"image\":{\"uri\":null}}",
    "{\"image\":{}}",
    "{}",
    "{\"image\":{\"uri\":\"busybox\"},\"entrypoint\":\"/bin/sh\"}",
    "{\"image\":{\"uri\":\"busybox\"},\"entrypoint\":[1]}",
    "{\"image\":{\"uri\":\"busybox\"},\"timeout\":\"60\"}",
    "{\"image\":{\"uri\":\"busybox\"},\"timeout\":-5}",
    "{\"image\":{\"uri\":\"busybox\"},\"metadata\":[]}",
    "{\"image\":{\"uri\":\"busybox\"},\"metadata\":{\"a\":1}}",
    "{\"image\":{\"uri\":\"busybox\"},\"env\":[\"A=B\"]}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.sessionKey\":5}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":[]}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":5}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":\"\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":\"../x\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":\"a b\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":\"_lead\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":"
    "\"a12345678901234567890123456789012345678901234567890123456789012345\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"resourceLimits\":\"big\"}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.volumes\":\"not json\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.volumes\":"
    "\"[{\\\"host\\\":\\\"relative\\\",\\\"dest\\\":\\\"/mnt\\\"}]\"}}",
    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.volumes\":"
    "\"[{\\\"host\\\":\\\"/tmp\\\",\\\"dest\\\":\\\"../../mnt\\\"}]\"}}",
};

static const char *const bad_commands[] = {
    "{\"command\":5}",
    "{\"command\":[\"ls\"]}",
    "{\"command\":null}",
    "{}",
    "{\"command\":\"true\",\"timeout\":\"5\"}",
    "{\"command\":\"true\",\"timeout\":-1}",
    "{\"command\":\"true\",\"background\":\"yes\"}",
    "{\"command\":\"true\",\"deleteSandboxOnExit\":true}",
    "{\"command\":\"true\",\"background\":true,\"deleteSandboxOnExit\":1}",
    "{\"command\":\"true\",\"envs\":[\"A=B\"]}",
    "{\"command\":\"true\",\"envs\":{\"A\":1}}",
    "{\"command\":\"true\",\"envs\":{\"A=B\":\"c\"}}",
    "{\"command\":\"true\",\"cwd\":7}",
    "{\"command\":\"true\",\"uid\":\"0\"}",
    "{\"command\":\"true\",\"uid\":-1}",
    "{\"argv\":\"ls\"}",
    "{\"argv\":[1]}",
    "{\"argv\":[]}",
};

START_TEST(wrong_types)
{
	char *id = h_create("busybox", NULL);
	char *cmd_path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	struct h_resp r;
	for (size_t i = 0; i < sizeof(bad_creates) / sizeof(bad_creates[0]); i++) {
		char *what = h_fmt("create %s", bad_creates[i]);
		long st = post("/v1/sandboxes", bad_creates[i], 0, &r);
		if (st >= 200 && st < 300) /* clean up before failing */
			h_delete(h_jstr(r.json, "id"));
		expect_status(what, 400, st, &r);
		h_resp_free(&r);
		free(what);
	}
	for (size_t i = 0; i < sizeof(bad_commands) / sizeof(bad_commands[0]); i++) {
		char *what = h_fmt("command %s", bad_commands[i]);
		expect_status(what, 400, post(cmd_path, bad_commands[i], 0, &r), &r);
		h_resp_free(&r);
		free(what);
	}
	still_serving(id);
	still_creates();
	free(cmd_path);
	free(id);
}
END_TEST

static const char *const bad_images[] = {
    "no-such-image",
    "../busybox",
    "/busybox",
    "busybox/../busybox",
    ".",
    "..",
    "",
    "busybox/",
    "BUSYBOX",
    "busybox\n",
    ".build-busybox",
    "busybox:1.36",
    "busybox:",
    ":latest",
    "../busybox:latest",
};

START_TEST(unknown_image)
{
	struct h_resp r;
	for (size_t i = 0; i < sizeof(bad_images) / sizeof(bad_images[0]); i++) {
		char *what = h_fmt("image '%s'", bad_images[i]);
		long st = h_create_ex(bad_images[i], NULL, H_UNIX, &r);
		expect_status(what, 400, st, &r);
		if (i == 0)
			ck_assert_str_eq(h_err_code(&r), "IMAGE_NOT_FOUND");
		h_resp_free(&r);
		free(what);
	}
	/* A tag of "latest" names the image itself (clients configured with a repository and
	 * a tag send it); the sandbox reports the image as it was asked for. */
	long st = h_create_ex("busybox:latest", NULL, H_TCP, &r);
	ck_assert_msg(st == 202, "busybox:latest: HTTP %ld %s", st, r.body);
	ck_assert_str_eq(h_jstr(r.json, "image.uri"), "busybox:latest");
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	char *out = h_sh(id, "echo ok");
	ck_assert_str_eq(out, "ok\n");
	free(out);
	h_delete(id);
	free(id);
	still_creates();
}
END_TEST

static const char *const bad_ids[] = {
    "..",
    "%2e%2e",
    "%2E%2E",
    "%2e%2e%2f%2e%2e%2fetc",
    "a%2fb",
    "ABC",
    "a;b",
    "a%00b",
    "-a",
    "a%20b",
    "a.b",
    "%2f",
    "a%0ab",
    "%c3%a9",
    "0123456789abcdef0",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 65 */
};

START_TEST(bad_ids_refused)
{
	char *id = h_create("busybox", NULL);
	struct h_resp r;
	static const char *const routes[] = {"",
					     "/inspect",
					     "/endpoints/44772",
					     "/proxy/44772/ping",
					     "/proxy/44772/files/info?path=/",
					     "/logs?follow=true&tail=1",
					     "/commands",
					     "/top"};
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		for (size_t j = 0; j < sizeof(routes) / sizeof(routes[0]); j++) {
			char *path = h_fmt("/v1/sandboxes/%s%s", bad_ids[i], routes[j]);
			long st = h_http("GET", path, NULL, &r);
			expect_4xx(path, st, &r);
			h_resp_free(&r);
			free(path);
		}
		char *path = h_fmt("/v1/sandboxes/%s", bad_ids[i]);
		expect_4xx(path, h_http("DELETE", path, NULL, &r), &r);
		h_resp_free(&r);
		free(path);
		path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", bad_ids[i]);
		expect_4xx(path, post(path, "{\"command\":\"true\"}", 0, &r), &r);
		h_resp_free(&r);
		free(path);
		/* as a query parameter of the stats of many */
		char *enc = h_urlencode(bad_ids[i]);
		path = h_fmt("/v1/stats?id=%s&id=%s", id, enc);
		expect_4xx(path, h_http("GET", path, NULL, &r), &r);
		h_resp_free(&r);
		free(path);
		free(enc);
	}
	/* ".." segments are not resolved into another route */
	static const char *const dotted[] = {
	    "/v1/sandboxes/../sandboxes",
	    "/v1/sandboxes/./",
	    "/v1/sandboxes/x/../../info",
	    "/v1/sandboxes//inspect",
	};
	for (size_t i = 0; i < sizeof(dotted) / sizeof(dotted[0]); i++) {
		expect_4xx(dotted[i], h_http("GET", dotted[i], NULL, &r), &r);
		h_resp_free(&r);
	}
	/* a well-formed id nobody created */
	expect_status("unknown id", 404, h_http("GET", "/v1/sandboxes/0000000000000000", NULL, &r),
		      &r);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	still_serving(id);
	still_creates();
	free(id);
}
END_TEST

static char *big_json(size_t size)
{
	static const char head[] = "{\"image\":{\"uri\":\"busybox\"},\"metadata\":{\"x\":\"";
	char *b = malloc(size + 1);
	size_t hl = strlen(head);
	memcpy(b, head, hl);
	memset(b + hl, 'a', size - hl - 3);
	memcpy(b + size - 3, "\"}}", 3);
	b[size] = '\0';
	return b;
}

START_TEST(body_too_large)
{
	char *id = h_create("busybox", NULL);
	size_t size = 2u << 20;
	char *body = big_json(size);
	struct h_resp r;
	expect_status("2 MiB create body", 413, post("/v1/sandboxes", body, size, &r), &r);
	ck_assert_str_eq(h_err_code(&r), "REQUEST_TOO_LARGE");
	h_resp_free(&r);
	struct h_req req = {.method = "POST",
			    .path = "/v1/sandboxes",
			    .body = body,
			    .body_len = size,
			    .chunked = true};
	expect_status("2 MiB chunked create body", 413, h_request(&req, &r), &r);
	h_resp_free(&r);
	/* without Expect: 100-continue the body arrives whole: still 413 */
	static const char *const no_expect[] = {"Expect:", NULL};
	req = (struct h_req){.method = "POST",
			     .path = "/v1/sandboxes",
			     .body = body,
			     .body_len = size,
			     .headers = no_expect};
	expect_status("2 MiB create body without Expect", 413, h_request(&req, &r), &r);
	h_resp_free(&r);

	char *cmd_path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	char *cmd = malloc(size + 64);
	int n = snprintf(cmd, 64, "{\"command\":\"echo ");
	memset(cmd + n, 'b', size);
	strcpy(cmd + n + size, "\"}");
	expect_status("2 MiB command", 413, post(cmd_path, cmd, 0, &r), &r);
	h_resp_free(&r);

	/* just under the limit is accepted as a body (the command itself may fail) */
	char *ok = big_json((1u << 20) - 64);
	long st = post("/v1/sandboxes", ok, 0, &r);
	if (st >= 200 && st < 300)
		h_track_sandbox(h_jstr(r.json, "id"));
	ck_assert_msg(st != 413, "a body under 1 MiB was refused as too large");
	h_resp_free(&r);
	free(ok);
	free(cmd);
	free(cmd_path);
	free(body);
	still_serving(id);
	still_creates();
	free(id);
}
END_TEST

START_TEST(nul_bytes_refused)
{
	char *id = h_create("busybox", NULL);
	char *cmd_path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	static const char *const bodies[] = {
	    "{\"command\":\"echo a\\u0000b\"}",
	    "{\"command\":\"true\",\"cwd\":\"/tmp\\u0000/x\"}",
	    "{\"command\":\"true\",\"envs\":{\"A\":\"x\\u0000y\"}}",
	    "{\"command\":\"true\",\"envs\":{\"A\\u0000B\":\"x\"}}",
	    "{\"argv\":[\"/bin/echo\",\"a\\u0000b\"]}",
	};
	struct h_resp r;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		expect_status(bodies[i], 400, post(cmd_path, bodies[i], 0, &r), &r);
		h_resp_free(&r);
	}
	expect_status("image uri with NUL", 400,
		      post("/v1/sandboxes", "{\"image\":{\"uri\":\"busybox\\u0000x\"}}", 0, &r),
		      &r);
	h_resp_free(&r);
	/* a raw NUL byte in the body */
	static const char raw[] = "{\"command\":\"echo a\0b\"}";
	expect_4xx("raw NUL in body", post(cmd_path, raw, sizeof(raw) - 1, &r), &r);
	h_resp_free(&r);
	/* file paths with NUL */
	char *url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=/etc%%00/passwd", id);
	expect_4xx("path with %00", h_http("GET", url, NULL, &r), &r);
	h_resp_free(&r);
	free(url);
	url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=relative/path", id);
	expect_4xx("relative file path", h_http("GET", url, NULL, &r), &r);
	h_resp_free(&r);
	free(url);
	url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download", id);
	expect_4xx("download without path", h_http("GET", url, NULL, &r), &r);
	h_resp_free(&r);
	free(url);
	still_serving(id);
	still_creates();
	free(cmd_path);
	free(id);
}
END_TEST

START_TEST(unauthenticated_tcp)
{
	char *id = h_create("busybox", NULL);
	struct h_resp r;
	struct h_req req = {.method = "GET", .path = "/v1/sandboxes", .via = H_TCP_NOKEY};
	expect_status("TCP without key", 401, h_request(&req, &r), &r);
	ck_assert_str_eq(h_err_code(&r), "UNAUTHORIZED");
	h_resp_free(&r);
	req.via = H_TCP_BADKEY;
	expect_status("TCP with a wrong key", 401, h_request(&req, &r), &r);
	h_resp_free(&r);
	req.via = H_TCP;
	ck_assert_int_eq(h_request(&req, &r), 200);
	h_resp_free(&r);

	/* nothing is done for an unauthenticated request */
	long st = h_create_ex("busybox", NULL, H_TCP_NOKEY, &r);
	expect_status("create without key", 401, st, &r);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "sandboxes"), 1);
	h_resp_free(&r);
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	req = (struct h_req){.method = "POST",
			     .path = path,
			     .body = "{\"command\":\"touch /workspace/pwned\"}",
			     .via = H_TCP_NOKEY};
	expect_status("command without key", 401, h_request(&req, &r), &r);
	h_resp_free(&r);
	free(path);
	path = h_fmt("/v1/sandboxes/%s", id);
	req = (struct h_req){.method = "DELETE", .path = path, .via = H_TCP_BADKEY};
	expect_status("delete with a wrong key", 401, h_request(&req, &r), &r);
	h_resp_free(&r);
	free(path);
	ck_assert_int_ne(h_sh_code(id, "test -e /workspace/pwned"), 0);

	/* with the key, TCP works end to end */
	char *tid = NULL;
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &r), 202);
	tid = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	struct h_exec_opts o = {.via = H_TCP};
	struct h_exec e;
	h_exec(tid, "echo over-tcp", &o, &e);
	ck_assert_str_eq(e.out, "over-tcp\n");
	h_exec_free(&e);
	free(tid);
	still_serving(id);
	free(id);
}
END_TEST

/* A TCP API key must never mount host paths. */
START_TEST(volumes_forbidden_over_tcp)
{
	char *hostdir = h_fmt("%s/tcp-volume", H.dir);
	ck_assert_int_eq(mkdir(hostdir, 0755), 0);
	char *vol = h_fmt("[{\"host\":\"%s\",\"dest\":\"/mnt\",\"readOnly\":false}]", hostdir);
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.volumes", vol);
	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_TCP, &r);
	if (st >= 200 && st < 300)
		h_delete(h_jstr(r.json, "id"));
	expect_status("volumes over TCP", 403, st, &r);
	ck_assert_str_eq(h_err_code(&r), "FORBIDDEN");
	h_resp_free(&r);
	json_decref(extra);
	free(vol);
	free(hostdir);
	still_creates();
}
END_TEST

START_TEST(unknown_routes)
{
	struct h_resp r;
	static const char *const paths[] = {"/", "/v1", "/v1/nope", "/v2/sandboxes",
					    "/v1/sandboxes/0000000000000000/nope"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		expect_4xx(paths[i], h_http("GET", paths[i], NULL, &r), &r);
		h_resp_free(&r);
	}
	struct h_req req = {.method = "PUT", .path = "/v1/sandboxes", .body = "{}"};
	expect_4xx("PUT /v1/sandboxes", h_request(&req, &r), &r);
	h_resp_free(&r);
	req = (struct h_req){.method = "BREW", .path = "/v1/sandboxes"};
	expect_4xx("BREW /v1/sandboxes", h_request(&req, &r), &r);
	h_resp_free(&r);
	still_creates();
}
END_TEST

/* X-Request-ID: a valid client value is echoed (on success and on errors), anything else
 * (too long, bad characters, empty) is replaced by one celld makes, and a request without
 * one gets a fresh id. */
static char *rid_of(const char *header, long *status)
{
	const char *hdrs[] = {header, NULL};
	struct h_req req = {
	    .method = "GET", .path = "/v1/sandboxes", .headers = header ? hdrs : NULL};
	struct h_resp r;
	*status = h_request(&req, &r);
	char *rid = r.request_id ? strdup(r.request_id) : NULL;
	h_resp_free(&r);
	ck_assert_msg(rid && *rid, "no X-Request-ID on the answer");
	return rid;
}

START_TEST(request_id_echoed)
{
	long st;
	char *rid = rid_of("X-Request-ID: 0f8e3c1a-7b2d-4c5e-9a10-1234567890ab", &st);
	ck_assert_int_eq(st, 200);
	ck_assert_str_eq(rid, "0f8e3c1a-7b2d-4c5e-9a10-1234567890ab");
	free(rid);
	const char *hdrs[] = {"X-Request-ID: trace.42:abc+/=~_", NULL};
	struct h_req req = {
	    .method = "GET", .path = "/v1/sandboxes/0000000000000000", .headers = hdrs};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 404);
	ck_assert_str_eq(r.request_id, "trace.42:abc+/=~_");
	h_resp_free(&r);

	char longid[160];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	char *too_long = h_fmt("X-Request-ID: %.*s", 129, longid);
	char *max = h_fmt("X-Request-ID: %.*s", 128, longid);
	rid = rid_of(max, &st);
	ck_assert_uint_eq(strlen(rid), 128);
	free(rid);
	const char *bad[] = {too_long,
			     "X-Request-ID: has space",
			     "X-Request-ID: semi;colon",
			     "X-Request-ID: quote\"d",
			     "X-Request-ID: \xc3\xa9t\xc3\xa9",
			     NULL};
	for (size_t i = 0; bad[i]; i++) {
		rid = rid_of(bad[i], &st);
		ck_assert_int_eq(st, 200);
		ck_assert_msg(!strstr(bad[i], rid) && strlen(rid) <= 128 &&
				  strspn(rid, "abcdefghijklmnopqrstuvwxyz0123456789") ==
				      strlen(rid),
			      "'%s' came back as '%s'", bad[i], rid);
		free(rid);
	}
	free(too_long);
	free(max);
	/* Without one: made fresh per request. */
	char *a = rid_of(NULL, &st), *b = rid_of(NULL, &st);
	ck_assert_str_ne(a, b);
	free(a);
	free(b);
}
END_TEST

/* A create field cell cannot honour is a 400 naming it (over TCP as on the socket), never
 * silently dropped; what the SDK sends on every create, and the forms cell can honour,
 * still create. */
START_TEST(unhonoured_create_fields)
{
	static const struct {
		const char *extra, *name;
	} bad[] = {
	    {"{\"snapshotId\":\"snap-1\"}", "snapshotId"},
	    {"{\"image\":{\"uri\":\"busybox\",\"auth\":\"u:p\"}}", "image.auth"},
	    {"{\"secureAccess\":true}", "secureAccess"},
	    {"{\"secureAccess\":\"no\"}", "secureAccess"},
	    {"{\"resourceRequests\":{\"cpu\":\"1\"}}", "resourceRequests"},
	    {"{\"credentialProxy\":{\"enabled\":true}}", "credentialProxy"},
	    {"{\"volumes\":[{\"name\":\"ws\",\"mountPath\":\"/workspace\",\"ossfs\":{\"bucket\":"
	     "\"b\"}}]}",
	     "volumes[0].ossfs"},
	    {"{\"networkPolicy\":{\"defaultAction\":\"maybe\"}}", "networkPolicy.defaultAction"},
	    {"{\"networkPolicy\":{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
	     "\"target\":\"example.com\"}]},\"extensions\":{\"cell.network\":\"none\"}}",
	     "extensions.cell.network"},
	    {"{\"networkPolicy\":{\"defaultAction\":\"deny\"},\"extensions\":{\"cell.network\":"
	     "\"public\"}}",
	     "extensions.cell.network"},
	    {"{\"extensions\":{\"cell.network\":\"wide\"}}", "extensions.cell.network"},
	    {"{\"resourceLimits\":{\"cell.egress\":\"fast\"}}", "resourceLimits.cell.egress"},
	    {"{\"resourceLimits\":{\"cell.egress\":\"200Gbit\"}}", "resourceLimits.cell.egress"},
	    {"{\"resourceLimits\":{\"cell.egress\":\"20Mbit\"},\"extensions\":{\"cell.network\":"
	     "\"none\"}}",
	     "resourceLimits.cell.egress"},
	    {"{\"networkPolicy\":\"deny\"}", "networkPolicy"},
	    {"{\"platform\":{\"os\":\"windows\",\"arch\":\"amd64\"}}", "platform.os"},
	    {"{\"platform\":{\"os\":\"linux\",\"arch\":\"riscv64\"}}", "platform.arch"},
	    {"{\"extensions\":{\"cell.sesionKey\":\"typo\"}}", "extensions.cell.sesionKey"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (int tcp = 0; tcp < 2; tcp++) {
			json_error_t je;
			json_t *extra = json_loads(bad[i].extra, 0, &je);
			ck_assert_msg(extra, "%s: %s", bad[i].extra, je.text);
			struct h_resp r;
			long st = h_create_ex("busybox", extra, tcp ? H_TCP : H_UNIX, &r);
			json_decref(extra);
			if (st >= 200 && st < 300)
				h_delete(h_jstr(r.json, "id"));
			expect_status(bad[i].extra, 400, st, &r);
			ck_assert_str_eq(h_err_code(&r), "INVALID_ARGUMENT");
			ck_assert_msg(strstr(h_jstr(r.json, "message"), bad[i].name),
				      "%s: the answer does not name %s: %s", bad[i].extra,
				      bad[i].name, r.body);
			h_resp_free(&r);
		}
	}
	/* The SDK's create body (its defaults), and what cell honours as asked. */
#if defined(__x86_64__)
	const char *arch = "amd64";
#else
	const char *arch = "arm64";
#endif
	json_t *ok = json_pack(
	    "{s:b, s:{}, s:{}, s:{s:s, s:s}, s:[], s:{s:s, s:[{s:s, s:s}]}, s:{s:s, s:s}, s:n, "
	    "s:n, s:{}}",
	    "secureAccess", 0, "env", "metadata", "extensions", "poolRef", "another provider's",
	    "cell.network", "none", "volumes", "networkPolicy", "defaultAction", "deny", "egress",
	    "action", "deny", "target", "example.com", "platform", "os", "linux", "arch", arch,
	    "snapshotId", "credentialProxy", "resourceRequests");
	ck_assert_ptr_nonnull(ok);
	struct h_resp r;
	long st = h_create_ex("busybox", ok, H_TCP, &r);
	ck_assert_msg(st == 202, "the SDK's defaults: HTTP %ld: %s", st, r.body);
	ck_assert_int_eq(h_delete(h_jstr(r.json, "id")), 204);
	h_resp_free(&r);
	json_decref(ok);
	still_creates();
}
END_TEST

static Suite *badinput_suite(void)
{
	Suite *s = suite_create("badinput");
	tcase_add_test(h_tcase(s, "malformed_json", 120), malformed_json);
	tcase_add_test(h_tcase(s, "wrong_types", 120), wrong_types);
	tcase_add_test(h_tcase(s, "unknown_image", 120), unknown_image);
	tcase_add_test(h_tcase(s, "bad_ids_refused", 180), bad_ids_refused);
	tcase_add_test(h_tcase(s, "body_too_large", 120), body_too_large);
	tcase_add_test(h_tcase(s, "nul_bytes_refused", 120), nul_bytes_refused);
	tcase_add_test(h_tcase(s, "unauthenticated_tcp", 120), unauthenticated_tcp);
	tcase_add_test(h_tcase(s, "volumes_forbidden_over_tcp", 120), volumes_forbidden_over_tcp);
	tcase_add_test(h_tcase(s, "unknown_routes", 120), unknown_routes);
	tcase_add_test(h_tcase(s, "request_id_echoed", 60), request_id_echoed);
	tcase_add_test(h_tcase(s, "unhonoured_create_fields", 180), unhonoured_create_fields);
	return s;
}

int main(void)
{
	return h_main(badinput_suite());
}
