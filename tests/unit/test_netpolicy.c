/* A sandbox's egress policy as data (src/celld/netpolicy.c): OpenSandbox's NetworkPolicy
 * parsed and printed back, every refusal of a hostile target with its message, the egress
 * API's PATCH merge (incoming rules first, first rule per target wins) and DELETE by target
 * (idempotent), and name matching (a wildcard never matches its apex). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../src/celld/netpolicy.h"
#include "unit.h"

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
	ck_assert_msg(j, "%s: %s", text, jerr.text);
	return j;
}

/* The compact JSON of p. */
static char *dump(const struct netpolicy *p)
{
	json_t *j = netpolicy_to_json(p);
	ck_assert_ptr_nonnull(j);
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	return s;
}

static void load(const char *text, struct netpolicy *p)
{
	json_t *o = parse(text);
	struct cell_error err = {0};
	int rc = netpolicy_from_json(o, "networkPolicy", p, &err);
	ck_assert_msg(rc == 0, "%s: %s", text, err.msg);
	json_decref(o);
}

static void ck_json(const struct netpolicy *p, const char *want)
{
	char *s = dump(p);
	ck_assert_str_eq(s, want);
	free(s);
}

/* The policy {"egress": [{"action": "allow", "target": target}]} refused with a message
 * holding needle (and the field's path). */
static void refused_target(const char *target_json, const char *needle)
{
	char text[1024];
	snprintf(text, sizeof(text), "{\"egress\":[{\"action\":\"allow\",\"target\":%s}]}",
		 target_json);
	json_t *o = parse(text);
	struct netpolicy p;
	struct cell_error err = {0};
	ck_assert_msg(netpolicy_from_json(o, "networkPolicy", &p, &err) == -EINVAL, "%s accepted",
		      target_json);
	ck_assert_msg(strstr(err.msg, "networkPolicy.egress[0].target"), "'%s' lacks the field",
		      err.msg);
	ck_assert_msg(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", target_json, err.msg,
		      needle);
	ck_assert_ptr_null(p.rules);
	json_decref(o);
}

/* The target accepted, stored as canonical, of kind. */
static void accepted_target(const char *target, const char *canonical, enum netpolicy_kind kind)
{
	struct netpolicy_rule r = {0};
	struct cell_error err = {0};
	int rc = netpolicy_parse_target(target, strlen(target), "t", &r, &err);
	ck_assert_msg(rc == 0, "%s refused: %s", target, err.msg);
	ck_assert_str_eq(r.target, canonical);
	ck_assert_int_eq(r.kind, kind);
}

START_TEST(round_trip)
{
	struct netpolicy p;
	load("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"pypi."
	     "org\"},"
	     "{\"action\":\"deny\",\"target\":\"*.Example.COM.\"},"
	     "{\"target\":\"203.0.113.7\",\"action\":\"allow\"},"
	     "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}",
	     &p);
	ck_assert(!p.default_allow);
	ck_assert_uint_eq(p.n, 4);
	ck_assert_int_eq(p.rules[0].kind, NETPOLICY_DOMAIN);
	ck_assert(p.rules[0].allow);
	ck_assert_int_eq(p.rules[1].kind, NETPOLICY_WILDCARD);
	ck_assert(!p.rules[1].allow);
	ck_assert_int_eq(p.rules[2].kind, NETPOLICY_IPV4);
	ck_assert_uint_eq(p.rules[2].addr, 0xcb007107u);
	ck_assert_uint_eq(p.rules[2].prefix, 32);
	ck_assert_int_eq(p.rules[3].kind, NETPOLICY_CIDR4);
	ck_assert_uint_eq(p.rules[3].addr, 0x0a000000u);
	ck_assert_uint_eq(p.rules[3].prefix, 8);
	const char *want = "{\"defaultAction\":\"deny\",\"egress\":["
			   "{\"action\":\"allow\",\"target\":\"pypi.org\"},"
			   "{\"action\":\"deny\",\"target\":\"*.example.com\"},"
			   "{\"action\":\"allow\",\"target\":\"203.0.113.7\"},"
			   "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}";
	ck_json(&p, want);
	ck_assert_str_eq(netpolicy_mode(&p), "enforcing");

	/* What it prints parses back to the same. */
	char *s = dump(&p);
	struct netpolicy q;
	load(s, &q);
	free(s);
	ck_json(&q, want);

	struct netpolicy c;
	ck_assert_int_eq(netpolicy_copy(&p, &c), 0);
	netpolicy_free(&p);
	ck_json(&c, want);
	netpolicy_free(&c);
	netpolicy_free(&q);
	ck_assert_ptr_null(q.rules);
	ck_assert_uint_eq(q.n, 0);
}
END_TEST

START_TEST(defaults)
{
	struct netpolicy p;
	/* The spec: an absent defaultAction is deny; no egress is no rule. */
	load("{}", &p);
	ck_assert(!p.default_allow);
	ck_json(&p, "{\"defaultAction\":\"deny\",\"egress\":[]}");
	ck_assert_str_eq(netpolicy_mode(&p), "deny_all");
	netpolicy_free(&p);
	load("{\"defaultAction\":\"allow\",\"egress\":null}", &p);
	ck_json(&p, "{\"defaultAction\":\"allow\",\"egress\":[]}");
	ck_assert_str_eq(netpolicy_mode(&p), "allow_all");
	netpolicy_free(&p);
	load("{\"defaultAction\":null,\"egress\":[]}", &p);
	ck_assert(!p.default_allow);
	netpolicy_free(&p);
}
END_TEST

START_TEST(policy_refusals)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"[]", "networkPolicy must be an object"},
	    {"\"deny\"", "networkPolicy must be an object"},
	    {"{\"defaultAction\":\"deny\",\"ingress\":[]}", "unknown field 'ingress'"},
	    {"{\"defaultAction\":\"Deny\"}", "networkPolicy.defaultAction must be \"allow\" or"},
	    {"{\"defaultAction\":\"block\"}", "networkPolicy.defaultAction must be"},
	    {"{\"defaultAction\":true}", "networkPolicy.defaultAction must be"},
	    {"{\"egress\":{}}", "networkPolicy.egress must be an array"},
	    {"{\"egress\":[\"example.com\"]}", "networkPolicy.egress[0] must be an object"},
	    {"{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\"},{\"target\":\"b.com\"}]}",
	     "networkPolicy.egress[1].action is required"},
	    {"{\"egress\":[{\"action\":\"allow\"}]}", "networkPolicy.egress[0].target is required"},
	    {"{\"egress\":[{\"action\":\"allow\",\"target\":7}]}",
	     "networkPolicy.egress[0].target must be a string"},
	    {"{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\",\"port\":443}]}",
	     "networkPolicy.egress[0]: unknown field 'port'"},
	    {"{\"egress\":[{\"action\":\"permit\",\"target\":\"a.com\"}]}",
	     "networkPolicy.egress[0].action must be \"allow\" or \"deny\""},
	    {"{\"egress\":[{\"action\":\"allow\\u0000\",\"target\":\"a.com\"}]}",
	     "networkPolicy.egress[0].action must be"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *o = parse(cases[i].text);
		struct netpolicy p;
		struct cell_error err = {0};
		ck_assert_msg(netpolicy_from_json(o, "networkPolicy", &p, &err) == -EINVAL,
			      "%s accepted", cases[i].text);
		ck_assert_msg(strstr(err.msg, cases[i].needle), "%s: message '%s' lacks '%s'",
			      cases[i].text, err.msg, cases[i].needle);
		json_decref(o);
	}
}
END_TEST

START_TEST(too_many_rules)
{
	json_t *egress = json_array();
	for (int i = 0; i <= NETPOLICY_RULES_MAX; i++) {
		char t[32];
		snprintf(t, sizeof(t), "h%d.example.com", i);
		json_array_append_new(egress,
				      json_pack("{s:s, s:s}", "action", "allow", "target", t));
	}
	json_t *o = json_pack("{s:s, s:O}", "defaultAction", "deny", "egress", egress);
	struct netpolicy p;
	struct cell_error err = {0};
	ck_assert_int_eq(netpolicy_from_json(o, "networkPolicy", &p, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "more than 256"), "%s", err.msg);
	/* Exactly the cap is fine. */
	json_array_remove(egress, 0);
	ck_assert_int_eq(netpolicy_from_json(o, "networkPolicy", &p, &err), 0);
	ck_assert_uint_eq(p.n, NETPOLICY_RULES_MAX);
	netpolicy_free(&p);
	json_decref(o);
	json_decref(egress);
}
END_TEST

START_TEST(targets_accepted)
{
	accepted_target("example.com", "example.com", NETPOLICY_DOMAIN);
	accepted_target("EXAMPLE.com.", "example.com", NETPOLICY_DOMAIN);
	accepted_target("localhost", "localhost", NETPOLICY_DOMAIN);
	accepted_target("a-b.x9.example", "a-b.x9.example", NETPOLICY_DOMAIN);
	accepted_target("1password.com", "1password.com", NETPOLICY_DOMAIN);
	accepted_target("*.Allowed.Test", "*.allowed.test", NETPOLICY_WILDCARD);
	accepted_target("*.test.", "*.test", NETPOLICY_WILDCARD);
	accepted_target("0.0.0.0", "0.0.0.0", NETPOLICY_IPV4);
	accepted_target("255.255.255.255", "255.255.255.255", NETPOLICY_IPV4);
	accepted_target("198.51.100.0/24", "198.51.100.0/24", NETPOLICY_CIDR4);
	accepted_target("0.0.0.0/0", "0.0.0.0/0", NETPOLICY_CIDR4);
	accepted_target("203.0.113.9/32", "203.0.113.9/32", NETPOLICY_CIDR4);
	/* A 63-byte label and a 253-byte name are the limits. */
	char name[300];
	memset(name, 'a', 63);
	strcpy(name + 63, ".com");
	accepted_target(name, name, NETPOLICY_DOMAIN);
	/* 253 bytes: 63 + 1 + 63 + 1 + 63 + 1 + 61. */
	memset(name, 'b', 253);
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	accepted_target(name, name, NETPOLICY_DOMAIN);
	/* With its root dot it is 254 bytes and still the same name. */
	char dotted[320];
	snprintf(dotted, sizeof(dotted), "%s.", name);
	accepted_target(dotted, name, NETPOLICY_DOMAIN);
}
END_TEST

START_TEST(targets_refused)
{
	refused_target("\"\"", "the target is empty");
	refused_target("\"a.com\\u0000.evil\"", "NUL byte");
	refused_target("\"::1\"", "IPv6 targets are not supported");
	refused_target("\"2001:db8::/32\"", "IPv6 targets are not supported");
	refused_target("\"[::ffff:10.0.0.1]\"", "IPv6");
	refused_target("\"10.0.0.0/33\"", "is not a CIDR prefix length");
	refused_target("\"10.0.0.0/\"", "is not a CIDR prefix length");
	refused_target("\"10.0.0.0/08\"", "is not a CIDR prefix length");
	refused_target("\"10.0.0.0/8/8\"", "is not a CIDR prefix length");
	refused_target("\"10.0.0.1/8\"", "has host bits set: the network of /8 is 10.0.0.0/8");
	refused_target("\"198.51.100.7/24\"", "the network of /24 is 198.51.100.0/24");
	refused_target("\"1.2.3.4/0\"", "host bits");
	refused_target("\"010.0.0.1\"", "is not an IPv4 address");
	refused_target("\"1.2.3.04\"", "is not an IPv4 address");
	refused_target("\"1.2.3.256\"", "is not an IPv4 address");
	refused_target("\"1.2.3\"", "is not an IPv4 address");
	refused_target("\"1.2.3.4.5\"", "is not an IPv4 address");
	refused_target("\"1..3.4\"", "is not an IPv4 address");
	refused_target("\"0x7f.0.0.1\"", "is not an IPv4 address");
	refused_target("\"2130706433\"", "is not an IPv4 address");
	refused_target("\"1.2.3.4 \"", "a label holds ' '");
	refused_target("\"example.com/24\"", "is not an IPv4 address");
	refused_target("\"*\"", "'*' is allowed only as the whole first label");
	refused_target("\"*.\"", "'*' is allowed only");
	refused_target("\"*example.com\"", "'*' is allowed only");
	refused_target("\"a.*.example.com\"", "'*' is allowed only");
	refused_target("\"*.*.example.com\"", "'*' is allowed only");
	refused_target("\"*.com*\"", "'*' is allowed only");
	refused_target("\"a..com\"", "has an empty label");
	refused_target("\".com\"", "has an empty label");
	refused_target("\".\"", "has an empty label");
	refused_target("\"example.com..\"", "has an empty label");
	refused_target("\"-a.com\"", "a label begins with '-'");
	refused_target("\"a-.com\"", "a label ends with '-'");
	refused_target("\"under_score.com\"", "a label holds '_'");
	refused_target("\"exa mple.com\"", "a label holds ' '");
	refused_target("\"http://example.com\"", "is a URL: give its host name");
	refused_target("\"example.com\\n\"", "a label holds '?'");
	refused_target("\"b\\u00fccher.de\"", "a label holds '?'");
	char t[400];
	memset(t, 'a', 64);
	strcpy(t + 64, ".com");
	char q[420];
	snprintf(q, sizeof(q), "\"%s\"", t);
	refused_target(q, "a label is longer than 63 bytes");
	/* 254 bytes without a root dot. */
	memset(t, 'b', 254);
	t[63] = t[127] = t[191] = '.';
	t[254] = '\0';
	snprintf(q, sizeof(q), "\"%s\"", t);
	refused_target(q, "longer than 253 bytes");
	memset(t, 'c', 399);
	t[399] = '\0';
	snprintf(q, sizeof(q), "\"%s\"", t);
	refused_target(q, "longer than 253 bytes");
}
END_TEST

START_TEST(merge_semantics)
{
	struct netpolicy p;
	load("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"a.test\"},"
	     "{\"action\":\"deny\",\"target\":\"*.b.test\"},"
	     "{\"action\":\"allow\",\"target\":\"c.test\"}]}",
	     &p);
	json_t *patch = parse("[{\"action\":\"allow\",\"target\":\"x.b.test\"},"
			      "{\"action\":\"deny\",\"target\":\"C.TEST.\"},"
			      "{\"action\":\"allow\",\"target\":\"c.test\"},"
			      "{\"action\":\"allow\",\"target\":\"d.test\"}]");
	struct cell_error err = {0};
	ck_assert_int_eq(netpolicy_merge(&p, patch, &err), 0);
	/* Incoming first in their order, the first per target (deny c.test) winning; then the
	 * existing rules the patch did not name; the default kept. */
	ck_json(&p, "{\"defaultAction\":\"deny\",\"egress\":["
		    "{\"action\":\"allow\",\"target\":\"x.b.test\"},"
		    "{\"action\":\"deny\",\"target\":\"c.test\"},"
		    "{\"action\":\"allow\",\"target\":\"d.test\"},"
		    "{\"action\":\"allow\",\"target\":\"a.test\"},"
		    "{\"action\":\"deny\",\"target\":\"*.b.test\"}]}");
	/* The incoming exception outranks the existing wildcard deny. */
	ck_assert(netpolicy_allows_name(&p, "x.b.test"));
	ck_assert(!netpolicy_allows_name(&p, "y.b.test"));
	ck_assert(!netpolicy_allows_name(&p, "c.test"));
	json_decref(patch);

	/* A patch of an existing target's same rule changes only the order. */
	patch = parse("[{\"action\":\"allow\",\"target\":\"a.test\"}]");
	ck_assert_int_eq(netpolicy_merge(&p, patch, &err), 0);
	ck_assert_uint_eq(p.n, 5);
	ck_assert_str_eq(p.rules[0].target, "a.test");
	json_decref(patch);
	netpolicy_free(&p);

	/* Onto an empty policy. */
	load("{\"defaultAction\":\"allow\"}", &p);
	patch = parse("[{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]");
	ck_assert_int_eq(netpolicy_merge(&p, patch, &err), 0);
	ck_json(&p, "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":\"deny\",\"target\":"
		    "\"10.0.0.0/8\"}]}");
	json_decref(patch);
	netpolicy_free(&p);
}
END_TEST

START_TEST(merge_refusals)
{
	struct netpolicy p;
	load("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.test\"}]}", &p);
	static const struct {
		const char *text, *needle;
		int rc;
	} cases[] = {
	    {"{\"action\":\"allow\",\"target\":\"b.test\"}", "rules must be a JSON array", -EINVAL},
	    {"[]", "rules is empty", -EINVAL},
	    {"[{\"action\":\"allow\",\"target\":\"b.test\"},{\"action\":\"allow\",\"target\":\"b_"
	     "\"}]",
	     "rules[1].target: 'b_' is not a domain", -EINVAL},
	    {"[{\"action\":\"maybe\",\"target\":\"b.test\"}]", "rules[0].action must be", -EINVAL},
	    {"[{\"action\":\"allow\",\"target\":\"b.test\",\"x\":1}]",
	     "rules[0]: unknown field 'x'", -EINVAL},
	    {"[\"b.test\"]", "rules[0] must be an object", -EINVAL},
	    {"[{\"action\":\"allow\",\"target\":\"fe80::1\"}]", "rules[0].target: 'fe80::1': IPv6",
	     -EINVAL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = parse(cases[i].text);
		struct cell_error err = {0};
		ck_assert_int_eq(netpolicy_merge(&p, j, &err), cases[i].rc);
		ck_assert_msg(strstr(err.msg, cases[i].needle), "%s: message '%s' lacks '%s'",
			      cases[i].text, err.msg, cases[i].needle);
		json_decref(j);
		/* p unchanged. */
		ck_json(&p, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
			    "\"target\":\"a.test\"}]}");
	}
	netpolicy_free(&p);
}
END_TEST

static json_t *rules_of(int from, int n)
{
	json_t *a = json_array();
	for (int i = from; i < from + n; i++) {
		char t[32];
		snprintf(t, sizeof(t), "h%d.test", i);
		json_array_append_new(a, json_pack("{s:s, s:s}", "action", "allow", "target", t));
	}
	return a;
}

START_TEST(merge_cap)
{
	struct netpolicy p;
	load("{}", &p);
	json_t *a = rules_of(0, 200);
	struct cell_error err = {0};
	ck_assert_int_eq(netpolicy_merge(&p, a, &err), 0);
	json_decref(a);
	/* 200 + 57 new would be 257. */
	a = rules_of(150, 107);
	ck_assert_int_eq(netpolicy_merge(&p, a, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "would hold 257 rules, more than 256"), "%s", err.msg);
	ck_assert_uint_eq(p.n, 200);
	json_decref(a);
	/* 200 + 56 new is 256: fine. */
	a = rules_of(150, 106);
	ck_assert_int_eq(netpolicy_merge(&p, a, &err), 0);
	ck_assert_uint_eq(p.n, 256);
	ck_assert_str_eq(p.rules[0].target, "h150.test");
	ck_assert_str_eq(p.rules[255].target, "h149.test");
	json_decref(a);
	/* A patch longer than the cap is refused before it is read. */
	a = rules_of(0, NETPOLICY_RULES_MAX + 1);
	ck_assert_int_eq(netpolicy_merge(&p, a, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "rules has 257 rules"), "%s", err.msg);
	json_decref(a);
	netpolicy_free(&p);
}
END_TEST

START_TEST(remove_semantics)
{
	struct netpolicy p;
	load("{\"defaultAction\":\"allow\",\"egress\":[{\"action\":\"deny\",\"target\":\"a.test\"},"
	     "{\"action\":\"deny\",\"target\":\"*.b.test\"},"
	     "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"},"
	     "{\"action\":\"deny\",\"target\":\"c.test\"}]}",
	     &p);
	json_t *t = parse("[\"*.B.test.\",\"nothere.test\",\"10.0.0.0/8\"]");
	struct cell_error err = {0};
	ck_assert_int_eq(netpolicy_remove_targets(&p, t, &err), 2);
	ck_json(&p, "{\"defaultAction\":\"allow\",\"egress\":["
		    "{\"action\":\"deny\",\"target\":\"a.test\"},"
		    "{\"action\":\"deny\",\"target\":\"c.test\"}]}");
	/* Idempotent: the same again removes nothing and is no error. */
	ck_assert_int_eq(netpolicy_remove_targets(&p, t, &err), 0);
	ck_assert_uint_eq(p.n, 2);
	json_decref(t);

	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"\"a.test\"", "targets must be a JSON array"},
	    {"[]", "targets is empty"},
	    {"[\"a.test\", 3]", "targets[1] must be a string"},
	    {"[\"a.test\", \"a..test\"]", "targets[1]: 'a..test' has an empty label"},
	    {"[\"::\"]", "targets[0]: '::': IPv6"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = parse(cases[i].text);
		ck_assert_int_eq(netpolicy_remove_targets(&p, j, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, cases[i].needle), "%s: message '%s' lacks '%s'",
			      cases[i].text, err.msg, cases[i].needle);
		json_decref(j);
		ck_assert_uint_eq(p.n, 2);
	}
	t = parse("[\"a.test\",\"c.test\"]");
	ck_assert_int_eq(netpolicy_remove_targets(&p, t, &err), 2);
	ck_assert_str_eq(netpolicy_mode(&p), "allow_all");
	ck_json(&p, "{\"defaultAction\":\"allow\",\"egress\":[]}");
	json_decref(t);
	netpolicy_free(&p);
}
END_TEST

START_TEST(name_matching)
{
	struct netpolicy p;
	load("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"allowed."
	     "test\"},{\"action\":\"allow\",\"target\":\"*.allowed.test\"},"
	     "{\"action\":\"deny\",\"target\":\"bad.wild.test\"},"
	     "{\"action\":\"allow\",\"target\":\"*.wild.test\"},"
	     "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\"}]}",
	     &p);
	ck_assert(netpolicy_allows_name(&p, "allowed.test"));
	ck_assert(netpolicy_allows_name(&p, "a.allowed.test"));
	ck_assert(netpolicy_allows_name(&p, "a.b.allowed.test"));
	ck_assert(!netpolicy_allows_name(&p, "notallowed.test"));
	ck_assert(!netpolicy_allows_name(&p, "allowed.test.evil"));
	/* A wildcard never matches its apex (the sidecar's rule). */
	ck_assert(!netpolicy_allows_name(&p, "wild.test"));
	ck_assert(netpolicy_allows_name(&p, "x.wild.test"));
	/* First match wins: the exact deny comes before the wildcard allow. */
	ck_assert(!netpolicy_allows_name(&p, "bad.wild.test"));
	/* An address rule matches no name. */
	ck_assert(!netpolicy_allows_name(&p, "198.51.100.1"));
	p.default_allow = true;
	ck_assert(netpolicy_allows_name(&p, "other.test"));
	netpolicy_free(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("netpolicy");
	TCase *tc = tcase_create("netpolicy");
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, policy_refusals);
	tcase_add_test(tc, too_many_rules);
	tcase_add_test(tc, targets_accepted);
	tcase_add_test(tc, targets_refused);
	tcase_add_test(tc, merge_semantics);
	tcase_add_test(tc, merge_refusals);
	tcase_add_test(tc, merge_cap);
	tcase_add_test(tc, remove_semantics);
	tcase_add_test(tc, name_matching);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
