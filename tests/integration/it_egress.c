/* The egress API over HTTP (GET, PATCH and DELETE /policy under a sandbox's endpoint of port
 * 18080, as OpenSandbox's specs/egress-api.yaml has them) and `cell network`: the answer's
 * shape, merge and delete semantics, every bad body refused 400 naming the element, auth,
 * unknown sandboxes, and a sandbox without a network.
 *
 * The whole program runs in a network namespace of its own (main: unshare, loopback up), so
 * its celld and the sandboxes' networks can never send a packet off this machine nor touch
 * the host's interfaces, routes, sysctls or nftables. The sandboxes never need to reach
 * anything here: this suite checks the policy as data and its API. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define POLICY_OF(id) h_fmt("/v1/sandboxes/%s/proxy/18080/policy", (id))

static long policy_req(const char *method, const char *id, const char *body, enum h_via via,
		       struct h_resp *resp)
{
	char *path = POLICY_OF(id);
	struct h_req req = {.method = method, .path = path, .body = body, .via = via};
	long st = h_request(&req, resp);
	free(path);
	return st;
}

/* A sandbox denied everything but allowed.test, Running. */
static char *create_allow_only(void)
{
	json_t *extra = json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "networkPolicy", "defaultAction",
				  "deny", "egress", "action", "allow", "target", "allowed.test");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	return id;
}

/* The answer's policy, compact, keys in order. */
static char *policy_text(const struct h_resp *r)
{
	json_t *p = h_jget(r->json, "policy");
	ck_assert_msg(p, "no policy in %.300s", r->body);
	char *s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_ptr_nonnull(s);
	return s;
}

static void expect_policy(const struct h_resp *r, const char *mode, const char *want)
{
	ck_assert_str_eq(h_jstr(r->json, "status"), "ok");
	ck_assert_str_eq(h_jstr(r->json, "mode"), mode);
	ck_assert_str_eq(h_jstr(r->json, "enforcementMode"), "dns+nft");
	char *got = policy_text(r);
	ck_assert_msg(!strcmp(got, want), "policy %s, want %s", got, want);
	free(got);
}

/* A refusal of status with code, its message holding needle. */
static void expect_refused(const char *what, long st, const struct h_resp *r, long want,
			   const char *code, const char *needle)
{
	ck_assert_msg(st == want, "%s: HTTP %ld (want %ld): %.300s", what, st, want, r->body);
	ck_assert_msg(!strcmp(h_err_code(r), code), "%s: code '%s' (want %s)", what, h_err_code(r),
		      code);
	ck_assert_msg(strstr(h_jstr(r->json, "message"), needle), "%s: message '%s' lacks '%s'",
		      what, h_jstr(r->json, "message"), needle);
}

#define ALLOW_ONLY                                                                                 \
	"{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"allowed."      \
	"test\"}]}"

START_TEST(get_patch_delete)
{
	char *id = create_allow_only();
	struct h_resp r;

	/* The endpoint the SDK resolves first. */
	char *ep = h_fmt("/v1/sandboxes/%s/endpoints/18080", id);
	ck_assert_int_eq(h_http("GET", ep, NULL, &r), 200);
	char *tail = h_fmt("/v1/sandboxes/%s/proxy/18080", id);
	const char *got = h_jstr(r.json, "endpoint");
	ck_assert_msg(strlen(got) > strlen(tail) && !strcmp(got + strlen(got) - strlen(tail), tail),
		      "endpoint %s", got);
	h_resp_free(&r);
	free(tail);
	free(ep);

	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	expect_policy(&r, "enforcing", ALLOW_ONLY);
	h_resp_free(&r);

	/* Incoming rules first, first rule per target wins, replacing the existing one. */
	ck_assert_int_eq(policy_req("PATCH", id,
				    "[{\"action\":\"allow\",\"target\":\"*.allowed.test\"},"
				    "{\"action\":\"deny\",\"target\":\"ALLOWED.test.\"},"
				    "{\"action\":\"allow\",\"target\":\"allowed.test\"},"
				    "{\"action\":\"deny\",\"target\":\"203.0.113.0/24\"}]",
				    H_TCP, &r),
			 200);
	const char *merged = "{\"defaultAction\":\"deny\",\"egress\":["
			     "{\"action\":\"allow\",\"target\":\"*.allowed.test\"},"
			     "{\"action\":\"deny\",\"target\":\"allowed.test\"},"
			     "{\"action\":\"deny\",\"target\":\"203.0.113.0/24\"}]}";
	expect_policy(&r, "enforcing", merged);
	h_resp_free(&r);
	ck_assert_int_eq(policy_req("GET", id, NULL, H_UNIX, &r), 200);
	expect_policy(&r, "enforcing", merged);
	h_resp_free(&r);

	/* DELETE by target: canonicalised, idempotent, unknown targets ignored. */
	ck_assert_int_eq(policy_req("DELETE", id, "[\"Allowed.Test\",\"nothere.test\"]", H_TCP, &r),
			 200);
	const char *left = "{\"defaultAction\":\"deny\",\"egress\":["
			   "{\"action\":\"allow\",\"target\":\"*.allowed.test\"},"
			   "{\"action\":\"deny\",\"target\":\"203.0.113.0/24\"}]}";
	expect_policy(&r, "enforcing", left);
	h_resp_free(&r);
	ck_assert_int_eq(policy_req("DELETE", id, "[\"allowed.test\"]", H_TCP, &r), 200);
	expect_policy(&r, "enforcing", left);
	ck_assert_str_eq(h_jstr(r.json, "reason"), "no matching targets found");
	h_resp_free(&r);
	ck_assert_int_eq(
	    policy_req("DELETE", id, "[\"*.allowed.test\",\"203.0.113.0/24\"]", H_TCP, &r), 200);
	expect_policy(&r, "deny_all", "{\"defaultAction\":\"deny\",\"egress\":[]}");
	h_resp_free(&r);
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	expect_policy(&r, "deny_all", "{\"defaultAction\":\"deny\",\"egress\":[]}");
	h_resp_free(&r);

	/* Ranges: allowed and denied, an address inside a range apart from it. */
	ck_assert_int_eq(policy_req("PATCH", id,
				    "[{\"action\":\"allow\",\"target\":\"198.51.100.0/24\"},"
				    "{\"action\":\"deny\",\"target\":\"198.51.100.7\"}]",
				    H_TCP, &r),
			 200);
	expect_policy(&r, "enforcing",
		      "{\"defaultAction\":\"deny\",\"egress\":["
		      "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\"},"
		      "{\"action\":\"deny\",\"target\":\"198.51.100.7\"}]}");
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(bad_bodies)
{
	char *id = create_allow_only();
	static const struct {
		const char *method, *body, *code, *needle;
		long status;
	} cases[] = {
	    {"PATCH", "{\"action\":\"allow\",\"target\":\"a.test\"}", "INVALID_ARGUMENT",
	     "rules must be a JSON array", 400},
	    {"PATCH", "[]", "INVALID_ARGUMENT", "rules is empty", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"a.test\"", "INVALID_ARGUMENT",
	     "not valid JSON", 400},
	    {"PATCH", "[\"a.test\"]", "INVALID_ARGUMENT", "rules[0] must be an object", 400},
	    {"PATCH",
	     "[{\"action\":\"allow\",\"target\":\"a.test\"},{\"action\":\"allow\",\"target\":\"a "
	     "b.test\"}]",
	     "INVALID_ARGUMENT", "rules[1].target: 'a b.test' is not a domain", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"::1\"}]", "INVALID_ARGUMENT",
	     "rules[0].target: '::1': IPv6 targets are not supported", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"10.1.2.3/8\"}]", "INVALID_ARGUMENT",
	     "rules[0].target: '10.1.2.3/8' has host bits set", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"1.2.3.04\"}]", "INVALID_ARGUMENT",
	     "is not an IPv4 address", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"a.*.test\"}]", "INVALID_ARGUMENT",
	     "'*' is allowed only as the whole first label", 400},
	    {"PATCH", "[{\"action\":\"allow\",\"target\":\"a.test\",\"ports\":[443]}]",
	     "INVALID_ARGUMENT", "rules[0]: unknown field 'ports'", 400},
	    {"PATCH", "[{\"action\":\"ALLOW\",\"target\":\"a.test\"}]", "INVALID_ARGUMENT",
	     "rules[0].action must be \"allow\" or \"deny\"", 400},
	    {"PATCH", "[{\"target\":\"a.test\"}]", "INVALID_ARGUMENT",
	     "rules[0].action is required", 400},
	    {"PATCH", "[{\"action\":\"deny\",\"target\":\"a\\u0000.test\"}]", "INVALID_ARGUMENT",
	     "rules[0].target: the target holds a NUL byte", 400},
	    {"DELETE", "{\"targets\":[\"a.test\"]}", "INVALID_ARGUMENT",
	     "targets must be a JSON array", 400},
	    {"DELETE", "[]", "INVALID_ARGUMENT", "targets is empty", 400},
	    {"DELETE", "[\"a.test\",{}]", "INVALID_ARGUMENT", "targets[1] must be a string", 400},
	    {"DELETE", "[\"a.test\",\"-a.test\"]", "INVALID_ARGUMENT",
	     "targets[1]: '-a.test': a label begins with '-'", 400},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct h_resp r;
		long st = policy_req(cases[i].method, id, cases[i].body, H_TCP, &r);
		expect_refused(cases[i].body, st, &r, cases[i].status, cases[i].code,
			       cases[i].needle);
		h_resp_free(&r);
	}
	struct h_resp r;
	/* No body at all. */
	long st = policy_req("PATCH", id, NULL, H_TCP, &r);
	expect_refused("no body", st, &r, 400, "INVALID_ARGUMENT", "a JSON request body");
	h_resp_free(&r);

	/* More rules than a policy holds: 413, as the sidecar answers its own limit. */
	size_t cap = 300 * 64;
	char *many = malloc(cap);
	size_t o = (size_t)snprintf(many, cap, "[");
	for (int i = 0; i < 257; i++)
		o += (size_t)snprintf(many + o, cap - o,
				      "%s{\"action\":\"allow\",\"target\":\"h%d.test\"}",
				      i ? "," : "", i);
	snprintf(many + o, cap - o, "]");
	st = policy_req("PATCH", id, many, H_TCP, &r);
	expect_refused("257 rules", st, &r, 413, "REQUEST_TOO_LARGE", "more than 256");
	h_resp_free(&r);
	free(many);

	/* Nothing of that changed the policy. */
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	expect_policy(&r, "enforcing", ALLOW_ONLY);
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(auth_and_unknown)
{
	char *id = create_allow_only();
	struct h_resp r;
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP_NOKEY, &r), 401);
	h_resp_free(&r);
	ck_assert_int_eq(policy_req("PATCH", id, "[{\"action\":\"allow\",\"target\":\"x.test\"}]",
				    H_TCP_BADKEY, &r),
			 401);
	h_resp_free(&r);
	long st = policy_req("GET", "no-such-sandbox", NULL, H_TCP, &r);
	expect_refused("unknown", st, &r, 404, "SANDBOX_NOT_FOUND", "no-such-sandbox");
	h_resp_free(&r);
	st = policy_req("PATCH", "no-such-sandbox",
			"[{\"action\":\"allow\",\"target\":\"x.test\"}]", H_TCP, &r);
	expect_refused("unknown patch", st, &r, 404, "SANDBOX_NOT_FOUND", "no-such-sandbox");
	h_resp_free(&r);
	st = policy_req("DELETE", "no-such-sandbox", "[\"x.test\"]", H_TCP, &r);
	expect_refused("unknown delete", st, &r, 404, "SANDBOX_NOT_FOUND", "no-such-sandbox");
	h_resp_free(&r);
	st = policy_req("GET", "Bad_Id", NULL, H_TCP, &r);
	expect_refused("bad id", st, &r, 400, "INVALID_ID", "Bad_Id");
	h_resp_free(&r);
	/* The sidecar's POST (replace all) is not part of the spec: not served. */
	st = policy_req("POST", id, ALLOW_ONLY, H_TCP, &r);
	expect_refused("POST", st, &r, 405, "METHOD_NOT_ALLOWED", "POST");
	h_resp_free(&r);
	/* Nothing was let through. */
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	expect_policy(&r, "enforcing", ALLOW_ONLY);
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(no_network)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.network", "none");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	struct h_resp r;
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status"), "ok");
	ck_assert_str_eq(h_jstr(r.json, "mode"), "deny_all");
	char *p = policy_text(&r);
	ck_assert_str_eq(p, "{\"defaultAction\":\"deny\",\"egress\":[]}");
	free(p);
	ck_assert_msg(strstr(h_jstr(r.json, "reason"), "none"), "reason %s",
		      h_jstr(r.json, "reason"));
	h_resp_free(&r);
	long st =
	    policy_req("PATCH", id, "[{\"action\":\"allow\",\"target\":\"x.test\"}]", H_TCP, &r);
	expect_refused("patch none", st, &r, 409, "SANDBOX_NO_NETWORK", "has no network");
	h_resp_free(&r);
	/* Bad input is still 400 first... */
	st = policy_req("DELETE", id, "[\"x..test\"]", H_TCP, &r);
	expect_refused("delete none bad", st, &r, 400, "INVALID_ARGUMENT", "targets[0]");
	h_resp_free(&r);
	/* ...and removing a rule it does not have is no error. */
	ck_assert_int_eq(policy_req("DELETE", id, "[\"x.test\"]", H_TCP, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "mode"), "deny_all");
	h_resp_free(&r);
	free(id);
}
END_TEST

/* cell.network public: allow-all as a policy; a change makes it custom. */
START_TEST(public_sandbox)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.network", "public");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	struct h_resp r;
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	expect_policy(&r, "allow_all", "{\"defaultAction\":\"allow\",\"egress\":[]}");
	ck_assert_str_eq(h_jstr(r.json, "reason"), "cell.network public");
	h_resp_free(&r);
	ck_assert_int_eq(
	    policy_req("PATCH", id, "[{\"action\":\"deny\",\"target\":\"*.bad.test\"}]", H_TCP, &r),
	    200);
	expect_policy(
	    &r, "enforcing",
	    "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":\"deny\",\"target\":\"*."
	    "bad.test\"}]}");
	h_resp_free(&r);
	ck_assert_int_eq(policy_req("GET", id, NULL, H_TCP, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "reason"), "cell.network custom");
	expect_policy(
	    &r, "enforcing",
	    "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":\"deny\",\"target\":\"*."
	    "bad.test\"}]}");
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(cli_network)
{
	char *id = create_allow_only();
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "network", id, NULL), 0);
	ck_assert_msg(strstr(p.out, "mode:    enforcing"), "%s", p.out);
	ck_assert_msg(strstr(p.out, "default: deny\n"), "%s", p.out);
	ck_assert_msg(strstr(p.out, "  allow allowed.test\n"), "%s", p.out);
	h_proc_free(&p);

	ck_assert_int_eq(h_cell(&p, "network", id, "--deny-host", "bad.allowed.test",
				"--allow-host", "*.allowed.test", NULL),
			 0);
	ck_assert_msg(strstr(p.out, "rules:\n  deny  bad.allowed.test\n  allow *.allowed.test\n"
				    "  allow allowed.test\n"),
		      "%s", p.out);
	h_proc_free(&p);

	ck_assert_int_eq(h_cell(&p, "network", "--json", id, NULL), 0);
	json_error_t jerr;
	json_t *j = json_loads(p.out, 0, &jerr);
	ck_assert_msg(j, "not JSON: %s", p.out);
	ck_assert_str_eq(h_jstr(j, "status"), "ok");
	ck_assert_int_eq(json_array_size(h_jget(j, "policy.egress")), 3);
	json_decref(j);
	h_proc_free(&p);

	ck_assert_int_eq(h_cell(&p, "network", id, "--remove", "bad.allowed.test", NULL), 0);
	ck_assert_msg(!strstr(p.out, "bad.allowed.test"), "%s", p.out);
	h_proc_free(&p);

	/* celld's refusal, naming the element, and exit status 1. */
	ck_assert_int_eq(h_cell(&p, "network", id, "--allow-host", "fe80::1", NULL), 1);
	ck_assert_msg(strstr(p.err, "rules[0].target: 'fe80::1': IPv6"), "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(
	    h_cell(&p, "network", id, "--remove", "a.test", "--allow-host", "b.test", NULL), 2);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "network", NULL), 2);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "network", "--help", NULL), 0);
	ck_assert_msg(strstr(p.out, "--allow-host H"), "%s", p.out);
	h_proc_free(&p);
	free(id);
}
END_TEST

static Suite *egress_suite(void)
{
	Suite *s = suite_create("egress");
	TCase *tc = h_tcase(s, "egress", 120);
	tcase_add_test(tc, get_patch_delete);
	tcase_add_test(tc, bad_bodies);
	tcase_add_test(tc, auth_and_unknown);
	tcase_add_test(tc, no_network);
	tcase_add_test(tc, public_sandbox);
	tcase_add_test(tc, cli_network);
	return s;
}

int main(void)
{
	/* This program, its celld and everything they start live in a network namespace of
	 * their own, with only a loopback. */
	int r = h_netns_enter_private();
	if (r < 0) {
		fprintf(stderr, "%s: a private network namespace: %s\n", "it_egress", strerror(-r));
		return 1;
	}
	return h_main(egress_suite());
}
