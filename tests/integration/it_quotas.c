/* Quotas: what an API key (and all keys together) may hold at once — sandboxes, running
 * commands, open streams — so that no key holder fills celld's fd table or threads and
 * locks out the others or the operator; the Unix socket is never refused by a quota, and
 * when the host itself runs out (fds) the answer is 503, never a client error. Two tenants'
 * keys together reach the all-keys quota while each is under its own. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static long long info_int(const char *path)
{
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	long long v = h_jint(r.json, path);
	h_resp_free(&r);
	return v;
}

static void expect_quota(long st, struct h_resp *r, const char *what)
{
	ck_assert_msg(st == 429, "over the %s quota: HTTP %ld %s", what, st, r->body);
	ck_assert_str_eq(h_err_code(r), "QUOTA_EXCEEDED");
	ck_assert_msg(strstr(h_jstr(r->json, "message"), what), "%s", r->body);
}

static long command_via(const char *id, const char *cmd, bool background, enum h_via via,
			struct h_resp *r)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	char *body =
	    h_fmt("{\"command\":\"%s\",\"background\":%s}", cmd, background ? "true" : "false");
	struct h_req req = {.method = "POST", .path = path, .body = body, .via = via};
	long st = h_request(&req, r);
	free(body);
	free(path);
	return st;
}

static void wait_info(const char *path, long long want)
{
	for (int i = 0; i < 300 && info_int(path) != want; i++)
		h_sleep_ms(50);
	ck_assert_int_eq(info_int(path), want);
}

START_TEST(key_quotas_and_the_unix_socket)
{
	char *pol = h_policies_with_quotas(
	    "pol-small",
	    "{\"perKey\": {\"sandboxes\": 2, \"runningCommands\": 3, \"streams\": 2},"
	    " \"allKeys\": {\"sandboxes\": 3, \"runningCommands\": 4, \"streams\": 3}}");
	h_celld_restart_with((const char *const[]){"--policies", pol, NULL});

	/* sandboxes */
	struct h_resp r;
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &r), 202);
	char *a = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &r), 202);
	char *b = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	expect_quota(h_create_ex("busybox", NULL, H_TCP, &r), &r, "sandboxes");
	h_resp_free(&r);
	char *u = h_create("busybox", NULL); /* the operator is not limited */
	ck_assert_int_eq(info_int("quotas.sandboxes.used"), 2);
	ck_assert_int_eq(h_delete(b), 204);
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &r), 202);
	h_resp_free(&r);

	/* running commands: foreground or background, until they end */
	char *ids[3];
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(command_via(a, "sleep 600", true, H_TCP, &r), 200);
		json_t *init = json_loads(r.body, JSON_DISABLE_EOF_CHECK, NULL);
		ids[i] = strdup(h_jstr(init, "text")); /* the init event names the command */
		json_decref(init);
		h_resp_free(&r);
	}
	expect_quota(command_via(a, "sleep 600", true, H_TCP, &r), &r, "runningCommands");
	h_resp_free(&r);
	ck_assert_int_eq(command_via(a, "sleep 600", true, H_UNIX, &r), 200);
	h_resp_free(&r);
	for (int i = 0; i < 3; i++) {
		char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command?id=%s", a, ids[i]);
		ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 200);
		free(path);
		free(ids[i]);
	}
	wait_info("quotas.runningCommands.used", 0);
	ck_assert_int_eq(command_via(a, "echo again", false, H_TCP, &r), 200);
	ck_assert_msg(strstr(r.body, "execution_complete"), "%s", r.body);
	h_resp_free(&r);

	/* streams: answers that stay open count until they end */
	char *watch = h_fmt("/v1/sandboxes/%s/proxy/44772/metrics/watch", a);
	int s1 = h_open_stream(H_TCP, watch, 0), s2 = h_open_stream(H_TCP, watch, 0);
	struct h_req req = {.method = "GET", .path = watch, .via = H_TCP};
	expect_quota(h_request(&req, &r), &r, "streams");
	h_resp_free(&r);
	close(s1);
	close(s2);
	wait_info("quotas.streams.used", 0);
	char *logs_path = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=/etc/passwd", a);
	req.path = logs_path;
	ck_assert_int_eq(h_request(&req, &r), 200);
	h_resp_free(&r);
	free(logs_path);
	free(watch);
	free(u);
	free(b);
	free(a);
	free(pol);
}
END_TEST

/* A create as the tenant whose key headers hold; its status, the id registered for the
 * teardown when one was made. */
static long create_as(const char *const *headers, struct h_resp *r)
{
	long st = h_as(headers, "POST", "/v1/sandboxes", "{\"image\":{\"uri\":\"busybox\"}}", r);
	if (st == 202)
		h_track_sandbox(h_jstr(r->json, "id"));
	return st;
}

static char *created_as(const char *const *headers)
{
	struct h_resp r;
	long st = create_as(headers, &r);
	ck_assert_msg(st == 202, "create: HTTP %ld %s", st, r.body);
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	return id;
}

/* The all-keys quota is reached by two keys together, each under its own quota: the
 * refusal names allKeys, not perKey, and a delete by either key lifts it. */
START_TEST(all_keys_quota_reached_by_two_keys)
{
	char *pol = h_policies_with_quotas(
	    "pol-two", "{\"perKey\": {\"sandboxes\": 2, \"runningCommands\": 3, \"streams\": 2},"
		       " \"allKeys\": {\"sandboxes\": 3, \"runningCommands\": 4, \"streams\": 3}}");
	h_two_tenants_with((const char *const[]){"--policies", pol, NULL});
	char *a1 = created_as(h_alice), *a2 = created_as(h_alice), *b1 = created_as(h_bob);
	ck_assert_int_eq(info_int("quotas.sandboxes.used"), 3);

	/* bob holds 1 of his 2: only the keys together are at their 3 */
	struct h_resp r;
	expect_quota(create_as(h_bob, &r), &r, "allKeys.sandboxes");
	ck_assert_msg(!strstr(h_jstr(r.json, "message"), "perKey"), "%s", r.body);
	h_resp_free(&r);
	expect_quota(create_as(h_alice, &r), &r, "perKey.sandboxes");
	h_resp_free(&r);
	ck_assert_int_eq(info_int("quotas.sandboxes.used"), 3);
	free(h_create("busybox", NULL)); /* the operator is not limited */

	/* alice deletes one: bob's next create fits again, and then the keys are full again */
	char *path = h_fmt("/v1/sandboxes/%s", a2);
	ck_assert_int_eq(h_as(h_alice, "DELETE", path, NULL, NULL), 204);
	ck_assert_int_eq(info_int("quotas.sandboxes.used"), 2);
	char *b2 = created_as(h_bob);
	ck_assert_int_eq(info_int("quotas.sandboxes.used"), 3);
	expect_quota(create_as(h_alice, &r), &r, "allKeys.sandboxes");
	h_resp_free(&r);
	free(path);
	free(b2);
	free(b1);
	free(a2);
	free(a1);
	free(pol);
}
END_TEST

/* Whether this process holds CAP_SYS_RESOURCE (celld, started by it, holds the same). */
static bool has_sys_resource(void)
{
	char *status = h_read_file("/proc/self/status");
	char *eff = strstr(status, "CapEff:");
	ck_assert(eff);
	unsigned long long caps = strtoull(eff + strlen("CapEff:"), NULL, 16);
	free(status);
	return caps & (1ull << 24); /* CAP_SYS_RESOURCE */
}

/* A celld started with few descriptors (a plain sudo gives 1024:524288 or less) raises its
 * limit to what the kernel lets root have, fs.nr_open; without CAP_SYS_RESOURCE (some
 * container hosts withhold it) to its hard limit. Either way it says what it got. */
START_TEST(fd_limit_raised_to_nr_open)
{
	struct rlimit rl = {.rlim_cur = 1024, .rlim_max = 4096};
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0); /* inherited by the next celld */
	h_celld_restart_with(NULL);
	char *got = h_read_file("/proc/sys/fs/nr_open");
	got[strcspn(got, "\n")] = '\0';
	if (!has_sys_resource()) {
		free(got);
		got = strdup("4096");
	}
	char *limits = h_read_file(h_fmt("/proc/%d/limits", (int)h_celld_pid()));
	char *want = h_fmt("Max open files            %-20s %-20s", got, got);
	ck_assert_msg(strstr(limits, want), "want '%s' in %s", want, limits);
	ck_assert_msg(strstr(h_celld_log_tail(), h_fmt("file descriptors: up to %s ", got)), "%s",
		      h_celld_log_tail());
	free(want);
	free(limits);
	free(got);
}
END_TEST

/* celld's fd limit bounds what the keys may hold (it lowers their quotas at start to keep a
 * reserve): the operator's creates still work when the keys are at their limit, and when
 * the host really runs out of fds a create answers 503, never a client error. */
START_TEST(fd_limit_bounds_the_keys)
{
	h_celld_restart_with((const char *const[]){"--debug", "--fd-limit", "200", NULL});
	char *limits = h_read_file(h_fmt("/proc/%d/limits", (int)h_celld_pid()));
	ck_assert_msg(strstr(limits, "Max open files            200                  200"), "%s",
		      limits);
	free(limits);
	ck_assert_msg(strstr(h_celld_log_tail(), "cannot hold the quotas"), "%s",
		      h_celld_log_tail());
	long long cap = info_int("quotas.sandboxes.allKeys");
	ck_assert_msg(cap > 0 && cap < 100, "all keys may hold %lld sandboxes with 200 fds", cap);
	struct h_resp r;
	long st = 0;
	int made = 0;
	while ((st = h_create_ex("busybox", NULL, H_TCP, &r)) == 202 && made < 200) {
		made++;
		h_resp_free(&r);
	}
	expect_quota(st, &r, "sandboxes");
	h_resp_free(&r);
	ck_assert_int_eq(made, cap);
	free(h_create("busybox", NULL));

	/* the operator can go on until the host has no fd left: then 503 */
	for (int i = 0; i < 200; i++) {
		st = h_create_ex("busybox", NULL, H_UNIX, &r);
		if (st != 202)
			break;
		h_resp_free(&r);
	}
	ck_assert_msg(st == 503, "out of fds: HTTP %ld %s", st, r.body);
	ck_assert_str_eq(h_err_code(&r), "HOST_OUT_OF_CAPACITY");
	h_resp_free(&r);
}
END_TEST

static Suite *quotas_suite(void)
{
	Suite *s = suite_create("quotas");
	tcase_add_test(h_tcase(s, "key_quotas_and_the_unix_socket", 180),
		       key_quotas_and_the_unix_socket);
	tcase_add_test(h_tcase(s, "all_keys_quota_reached_by_two_keys", 180),
		       all_keys_quota_reached_by_two_keys);
	tcase_add_test(h_tcase(s, "fd_limit_raised_to_nr_open", 120), fd_limit_raised_to_nr_open);
	tcase_add_test(h_tcase(s, "fd_limit_bounds_the_keys", 300), fd_limit_bounds_the_keys);
	return s;
}

int main(void)
{
	return h_main(quotas_suite());
}
