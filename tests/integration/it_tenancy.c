/* Tenancy: from a second API key on (--api-keys-file), every sandbox belongs to the key
 * that created it and another key's answers 404 on every route, in lists and session
 * keys; the Unix socket (the operator) sees and acts on all. With one key, that key and
 * the operator share everything, as they always did. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

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
	 * the port proxy, snapshots, egress, stats and top */
	static const struct {
		const char *method, *fmt, *body;
	} routes[] = {
	    {"GET", "/v1/sandboxes/%s", NULL},
	    {"GET", "/v1/sandboxes/%s/inspect", NULL},
	    {"GET", "/v1/sandboxes/%s/events", NULL},
	    {"GET", "/v1/sandboxes/%s/logs", NULL},
	    {"GET", "/v1/sandboxes/%s/commands", NULL},
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
	    {"GET", "/v1/sandboxes/%s/top", NULL},
	    {"GET", "/v1/stats?id=%s", NULL},
	    {"DELETE", "/v1/sandboxes/%s", NULL},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		char *path = h_fmt(routes[i].fmt, a);
		struct h_resp r;
		long st = h_as(h_bob, routes[i].method, path, routes[i].body, &r);
		ck_assert_msg(st == 404, "bob %s %s: HTTP %ld %s", routes[i].method, path, st,
			      r.body);
		ck_assert_msg(!strstr(r.body, "\"state\""), "%s leaks its state: %s", path, r.body);
		/* not found is the sandbox, never something in it (its commands' logs) */
		ck_assert_msg(strcmp(h_err_code(&r), "COMMAND_NOT_FOUND"), "%s: %s", path, r.body);
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
	ck_assert(h_listed(h_alice, "/v1/stats", a));
	ck_assert(!h_listed(h_bob, "/v1/stats", a));
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

/* ---- snapshots and named volumes ---- */

/* The E2B listener of these tests' celld: a port free when a test first asks (each test
 * runs in a process of its own), not a fixed one another process may hold. */
static unsigned e2b_port(void)
{
	static unsigned port;
	if (!port)
		port = h_free_port();
	return port;
}

static const char *e2b_listen(void)
{
	static char addr[32];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", e2b_port());
	return addr;
}

static const char *const *e2b_flags(void)
{
	static const char *flags[3];
	flags[0] = "--e2b-listen";
	flags[1] = e2b_listen();
	return flags;
}

/* method path (body may be NULL) on the E2B listener with key (X-API-Key); the status,
 * the answer's JSON into *out (a new reference, NULL when it is none). */
static long e2b_as(const char *key, const char *method, const char *path, const char *body,
		   json_t **out)
{
	char *rq = h_fmt("%s %s HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n%sContent-Length: "
			 "%zu\r\nConnection: close\r\n\r\n%s",
			 method, path, key, body ? "Content-Type: application/json\r\n" : "",
			 body ? strlen(body) : 0, body ? body : "");
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e2b_port())};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {.tv_sec = 120};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, rq, strlen(rq), MSG_NOSIGNAL), (ssize_t)strlen(rq));
	char *all = NULL;
	size_t len = 0;
	char buf[4096];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		all = realloc(all, len + (size_t)n + 1);
		memcpy(all + len, buf, (size_t)n);
		len += (size_t)n;
		all[len] = '\0';
	}
	close(fd);
	ck_assert_msg(all, "no answer to %s %s", method, path);
	long status = 0;
	sscanf(all, "HTTP/1.%*d %ld", &status);
	char *b = strstr(all, "\r\n\r\n");
	if (out)
		*out = b ? json_loads(b + 4, 0, NULL) : NULL;
	free(all);
	free(rq);
	return status;
}

static const char *e2b_str(json_t *o, const char *name)
{
	const char *v = json_string_value(json_object_get(o, name));
	return v ? v : "";
}

/* An E2B create of template as key: its status; a sandbox made is tracked, its id in *id
 * (malloc'd) when id is not NULL. */
static long e2b_create(const char *key, const char *template, char **id)
{
	char *body = h_fmt("{\"templateID\":\"%s\",\"timeout\":600}", template);
	json_t *o = NULL;
	long st = e2b_as(key, "POST", "/sandboxes", body, &o);
	if (st == 201 || st == 200)
		h_track_sandbox(e2b_str(o, "sandboxID"));
	if (id)
		*id = strdup(e2b_str(o, "sandboxID"));
	json_decref(o);
	free(body);
	return st;
}

/* A snapshot of sandbox id named name (NULL: none) through the OpenSandbox API as headers
 * (NULL: the operator); its id (malloc'd). */
static char *snapshot_as(const char *const *headers, const char *id, const char *name)
{
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", id);
	char *body = name ? h_fmt("{\"name\":\"%s\"}", name) : strdup("{}");
	struct h_resp r;
	long st = headers ? h_as(headers, "POST", path, body, &r) : h_http("POST", path, body, &r);
	ck_assert_msg(st == 202, "snapshot of %s: HTTP %ld %s", id, st, r.body);
	char *sid = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	free(body);
	free(path);
	return sid;
}

/* Every snapshot removed (by the operator): what a test made, or one before it left. */
static void delete_snapshots(void)
{
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/snapshots?pageSize=200", NULL, &r), 200);
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(r.json, "items"), i, s)
	{
		char *path = h_fmt("/v1/snapshots/%s", json_string_value(json_object_get(s, "id")));
		ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 204);
		free(path);
	}
	h_resp_free(&r);
}

/* Sandbox id's /root/who (through the operator's socket), trimmed; "" when there is none. */
static char *who_of(const char *id)
{
	ck_assert_str_eq(h_wait_state(id, "Running", 60), "Running");
	return h_trim(h_sh(id, "cat /root/who 2>/dev/null; true"));
}

START_TEST(another_keys_snapshot_is_not_found)
{
	h_two_tenants_with(e2b_flags());
	delete_snapshots();
	char *a = create_as(h_alice, NULL), *b = create_as(h_bob, NULL);
	free(h_sh(a, "echo alice > /root/who"));
	free(h_sh(b, "echo bob > /root/who"));
	/* one name, each tenant's own snapshot of it: alice's first, bob's newer */
	char *sa = snapshot_as(h_alice, a, "work");
	char *sb = snapshot_as(h_bob, b, "work");

	/* OpenSandbox: bob gets, lists, deletes and boots nothing of alice's */
	char *path = h_fmt("/v1/snapshots/%s", sa);
	struct h_resp r;
	ck_assert_int_eq(h_as(h_bob, "GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SNAPSHOT_NOT_FOUND");
	h_resp_free(&r);
	ck_assert(!h_listed(h_bob, "/v1/snapshots?pageSize=200", sa));
	ck_assert(h_listed(h_bob, "/v1/snapshots?pageSize=200", sb));
	ck_assert(h_listed(h_alice, "/v1/snapshots?pageSize=200", sa));
	ck_assert(!h_listed(h_alice, "/v1/snapshots?pageSize=200", sb));
	ck_assert(h_listed(NULL, "/v1/snapshots?pageSize=200", sa));
	ck_assert(h_listed(NULL, "/v1/snapshots?pageSize=200", sb));
	ck_assert_int_eq(h_as(h_bob, "DELETE", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SNAPSHOT_NOT_FOUND");
	h_resp_free(&r);
	char *from = h_fmt("{\"snapshotId\":\"%s\"}", sa);
	ck_assert_int_eq(h_as(h_bob, "POST", "/v1/sandboxes", from, &r), 400);
	ck_assert_str_eq(h_err_code(&r), "SNAPSHOT_NOT_FOUND");
	h_resp_free(&r);
	/* alice boots her own by id, the operator anyone's */
	ck_assert_int_eq(h_as(h_alice, "POST", "/v1/sandboxes", from, &r), 202);
	h_track_sandbox(h_jstr(r.json, "id"));
	char *got = who_of(h_jstr(r.json, "id"));
	ck_assert_str_eq(got, "alice");
	free(got);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);

	/* E2B: the same by id, and by name each finds its own */
	json_t *o = NULL;
	ck_assert_int_eq(e2b_as(H_BOB_KEY, "GET", "/snapshots", NULL, &o), 200);
	char *text = json_dumps(o, 0);
	ck_assert_msg(!strstr(text, sa) && strstr(text, sb), "bob's E2B list: %s", text);
	free(text);
	json_decref(o);
	char *tpl = h_fmt("/templates/%s", sa);
	ck_assert_int_eq(e2b_as(H_BOB_KEY, "DELETE", tpl, NULL, NULL), 404);
	ck_assert_int_eq(e2b_create(H_BOB_KEY, sa, NULL), 404);
	char *e = NULL;
	ck_assert_int_eq(e2b_create(H_ALICE_KEY, "work", &e), 201);
	got = who_of(e);
	ck_assert_msg(!strcmp(got, "alice"), "alice's \"work\" booted %s's disk", got);
	free(got);
	free(e);
	ck_assert_int_eq(e2b_create(H_BOB_KEY, "work", &e), 201);
	got = who_of(e);
	ck_assert_str_eq(got, "bob");
	free(got);
	free(e);
	/* alice's snapshot is still there, and hers to delete */
	ck_assert_int_eq(h_as(h_alice, "GET", path, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(e2b_as(H_ALICE_KEY, "DELETE", tpl, NULL, NULL), 204);
	free(path);
	path = h_fmt("/v1/snapshots/%s", sb);
	ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 204); /* the operator's */
	free(path);
	free(tpl);
	free(from);
	free(sa);
	free(sb);
	free(a);
	free(b);
	delete_snapshots();
}
END_TEST

/* meta.json of snapshot id (on disk) renamed to name: a snapshot made before names were
 * checked. */
static void rename_on_disk(const char *id, const char *name)
{
	char *file = h_fmt("%s/snapshots/%s/meta.json", h_state_dir(), id);
	json_t *m = json_load_file(file, 0, NULL);
	ck_assert_msg(m, "no %s", file);
	json_object_set_new(m, "name", json_string(name));
	ck_assert_int_eq(json_dump_file(m, file, JSON_COMPACT), 0);
	json_decref(m);
	free(file);
}

START_TEST(snapshot_names_never_shadow_the_catalogue)
{
	h_two_tenants_with(e2b_flags());
	delete_snapshots();
	char *a = create_as(h_alice, NULL);
	free(h_sh(a, "echo planted > /root/who"));
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", a);
	char *e2b_path = h_fmt("/sandboxes/%s/snapshots", a);
	/* an image's name and a listed template's (policies/e2b/templates.json: base), on
	 * both APIs, for the operator too */
	static const char *const taken[] = {"busybox", "base"};
	for (size_t i = 0; i < 2; i++) {
		char *body = h_fmt("{\"name\":\"%s\"}", taken[i]);
		struct h_resp r;
		ck_assert_int_eq(h_as(h_alice, "POST", path, body, &r), 400);
		ck_assert_msg(strstr(r.body, "name"), "%s", r.body);
		h_resp_free(&r);
		ck_assert_int_eq(h_http("POST", path, body, &r), 400);
		h_resp_free(&r);
		json_t *o = NULL;
		ck_assert_int_eq(e2b_as(H_ALICE_KEY, "POST", e2b_path, body, &o), 400);
		char *text = json_dumps(o, 0);
		ck_assert_msg(text && strstr(text, "name"), "%s", text ? text : "");
		free(text);
		json_decref(o);
		free(body);
	}
	/* one named so before the check, alice's own: E2B's templateID busybox is still the
	 * image */
	char *s = snapshot_as(h_alice, a, "plant");
	rename_on_disk(s, "busybox");
	char *e = NULL;
	ck_assert_int_eq(e2b_create(H_ALICE_KEY, "busybox", &e), 201);
	char *got = who_of(e);
	ck_assert_msg(!got[0], "templateID busybox booted a snapshot (%s)", got);
	free(got);
	free(e);
	/* the snapshot by its id is hers still */
	ck_assert_int_eq(e2b_create(H_ALICE_KEY, s, &e), 201);
	got = who_of(e);
	ck_assert_str_eq(got, "planted");
	free(got);
	free(e);
	free(s);
	free(e2b_path);
	free(path);
	free(a);
	delete_snapshots();
}
END_TEST

/* A create as headers (NULL: the operator) mounting named volume claim at /data; the
 * status, the answer in *r. A sandbox made is tracked. */
static long create_with_volume(const char *const *headers, const char *claim, bool create,
			       struct h_resp *r)
{
	char *body = h_fmt("{\"image\":{\"uri\":\"busybox\"},\"volumes\":[{\"name\":\"v\","
			   "\"mountPath\":\"/data\",\"readOnly\":false,\"pvc\":{\"claimName\":"
			   "\"%s\",\"createIfNotExists\":%s}}]}",
			   claim, create ? "true" : "false");
	long st = headers ? h_as(headers, "POST", "/v1/sandboxes", body, r)
			  : h_http("POST", "/v1/sandboxes", body, r);
	if (st == 202 || st == 200)
		h_track_sandbox(h_jstr(r->json, "id"));
	free(body);
	return st;
}

START_TEST(another_keys_volume_is_not_found)
{
	h_two_tenants();
	struct h_resp r;
	ck_assert_int_eq(create_with_volume(h_alice, "alices", true, &r), 202);
	char *a = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	/* bob neither gets, lists nor deletes it */
	ck_assert_int_eq(h_as(h_bob, "GET", "/v1/volumes/alices", NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "VOLUME_NOT_FOUND");
	h_resp_free(&r);
	ck_assert_int_eq(h_as(h_bob, "DELETE", "/v1/volumes/alices", NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "VOLUME_NOT_FOUND");
	h_resp_free(&r);
	ck_assert(!h_listed(h_bob, "/v1/volumes", "alices"));
	ck_assert(h_listed(h_alice, "/v1/volumes", "alices"));
	ck_assert(h_listed(NULL, "/v1/volumes", "alices"));
	/* nor mounts it: missing when it may not be made, a taken name when it may */
	long st = create_with_volume(h_bob, "alices", false, &r);
	ck_assert_msg(st == 400 && strstr(r.body, "does not exist"), "HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	st = create_with_volume(h_bob, "alices", true, &r);
	ck_assert_msg(st == 409 && strstr(r.body, "taken"), "HTTP %ld %s", st, r.body);
	ck_assert_msg(!strstr(r.body, a), "bob is told alice's sandbox: %s", r.body);
	h_resp_free(&r);
	/* the operator mounts it; alice is told of no sandbox of its */
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_int_eq(create_with_volume(NULL, "alices", false, &r), 202);
	char *op = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	ck_assert_int_eq(h_as(h_alice, "GET", "/v1/volumes/alices", NULL, &r), 200);
	ck_assert_msg(!strstr(r.body, op), "alice sees the operator's sandbox: %s", r.body);
	h_resp_free(&r);
	ck_assert(h_listed(NULL, "/v1/volumes/alices", op));
	st = create_with_volume(h_alice, "alices", false, &r);
	ck_assert_msg(st == 409 && strstr(r.body, "(not yours)") && !strstr(r.body, op),
		      "HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_as(h_alice, "DELETE", "/v1/volumes/alices", NULL, &r), 409);
	ck_assert_msg(!strstr(r.body, op), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_delete(op), 204);
	ck_assert_int_eq(h_as(h_alice, "DELETE", "/v1/volumes/alices", NULL, &r), 204);
	h_resp_free(&r);
	free(op);
	free(a);
}
END_TEST

/* A snapshot of id as headers that must be refused by the quota named what. */
static void snapshot_refused(const char *const *headers, const char *key, const char *id,
			     const char *what)
{
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", id);
	struct h_resp r;
	long st = h_as(headers, "POST", path, "{}", &r);
	ck_assert_msg(st == 429, "over the %s quota: HTTP %ld %s", what, st, r.body);
	ck_assert_str_eq(h_err_code(&r), "QUOTA_EXCEEDED");
	ck_assert_msg(strstr(r.body, what), "%s", r.body);
	h_resp_free(&r);
	char *e2b_path = h_fmt("/sandboxes/%s/snapshots", id);
	ck_assert_int_eq(e2b_as(key, "POST", e2b_path, "{}", NULL), 429);
	free(e2b_path);
	free(path);
}

static long long meta_bytes(const char *id)
{
	char *file = h_fmt("%s/snapshots/%s/meta.json", h_state_dir(), id);
	json_t *m = json_load_file(file, 0, NULL);
	ck_assert_msg(json_is_integer(json_object_get(m, "bytes")), "no bytes in %s", file);
	long long n = json_integer_value(json_object_get(m, "bytes"));
	json_decref(m);
	free(file);
	return n;
}

#define QUOTA_UNITS "\"sandboxes\": 10, \"runningCommands\": 10, \"streams\": 10"

START_TEST(snapshots_count_against_quotas)
{
	char *pol = h_policies_with_quotas("pol-snap",
					   "{\"perKey\": {" QUOTA_UNITS ", \"snapshots\": 2},"
					   " \"allKeys\": {" QUOTA_UNITS ", \"snapshots\": 3}}");
	const char *const flags[] = {"--policies", pol, "--e2b-listen", e2b_listen(), NULL};
	h_two_tenants_with(flags);
	delete_snapshots();
	char *a = create_as(h_alice, NULL), *b = create_as(h_bob, NULL);
	char *s1 = snapshot_as(h_alice, a, NULL), *s2 = snapshot_as(h_alice, a, NULL);
	snapshot_refused(h_alice, H_ALICE_KEY, a, "perKey.snapshots");
	char *b1 = snapshot_as(h_bob, b, NULL);
	snapshot_refused(h_bob, H_BOB_KEY, b, "allKeys.snapshots");
	/* the operator is not limited */
	char *op = snapshot_as(NULL, b, NULL);
	char *path = h_fmt("/v1/snapshots/%s", op);
	ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 204);
	free(path);
	/* counted again at a start, from the snapshots' meta.json */
	h_two_tenants_with(flags);
	snapshot_refused(h_alice, H_ALICE_KEY, a, "perKey.snapshots");
	/* a delete gives it back */
	path = h_fmt("/v1/snapshots/%s", s1);
	struct h_resp r;
	ck_assert_int_eq(h_as(h_alice, "DELETE", path, NULL, &r), 204);
	h_resp_free(&r);
	free(path);
	char *s3 = snapshot_as(h_alice, a, NULL);

	/* bytes: the copy's allocated blocks, measured after it */
	long long n = meta_bytes(s2) + meta_bytes(s3) + meta_bytes(b1);
	long long limit = n + (4ll << 20);
	char *q = h_fmt("{\"perKey\": {" QUOTA_UNITS ", \"snapshotBytes\": %lld},"
			" \"allKeys\": {" QUOTA_UNITS ", \"snapshotBytes\": \"1Ti\"}}",
			limit);
	char *pol2 = h_policies_with_quotas("pol-snap-bytes", q);
	const char *const flags2[] = {"--policies", pol2, "--e2b-listen", e2b_listen(), NULL};
	h_two_tenants_with(flags2);
	char *cmd = h_fmt("dd if=/dev/urandom of=/root/big bs=1M count=%lld 2>/dev/null && sync",
			  limit / (1 << 20) + 2);
	free(h_sh(b, cmd));
	snapshot_refused(h_bob, H_BOB_KEY, b, "perKey.snapshotBytes");
	char *list = h_fmt("/v1/snapshots?pageSize=200&sandboxId=%s", b);
	ck_assert_int_eq(h_as(h_bob, "GET", list, NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), 1); /* b1 alone */
	h_resp_free(&r);
	/* nothing of the refused copies is left */
	char *ls = h_fmt("ls -A %s/snapshots | grep -c '^\\.' || true", h_state_dir());
	char *const argv[] = {"/bin/sh", "-c", ls, NULL};
	struct h_proc p = {0};
	ck_assert_int_eq(h_run(argv, NULL, 30, &p), 0);
	ck_assert_msg(atoi(p.out) == 0, "left: %s", p.out);
	h_proc_free(&p);
	/* the operator's snapshots of it are not limited */
	op = snapshot_as(NULL, b, NULL);
	free(list);
	free(ls);
	free(cmd);
	free(q);
	free(pol2);
	free(op);
	free(s3);
	free(b1);
	free(s2);
	free(s1);
	free(a);
	free(b);
	free(pol);
	delete_snapshots();
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
	tcase_add_test(h_tcase(s, "another_keys_snapshot_is_not_found", 300),
		       another_keys_snapshot_is_not_found);
	tcase_add_test(h_tcase(s, "snapshot_names_never_shadow_the_catalogue", 300),
		       snapshot_names_never_shadow_the_catalogue);
	tcase_add_test(h_tcase(s, "another_keys_volume_is_not_found", 300),
		       another_keys_volume_is_not_found);
	tcase_add_test(h_tcase(s, "snapshots_count_against_quotas", 600),
		       snapshots_count_against_quotas);
	return s;
}

int main(void)
{
	return h_main(tenancy_suite());
}
