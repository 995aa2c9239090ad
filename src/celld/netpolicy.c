/* A sandbox's egress policy as data (netpolicy.h): parsing, validation, the egress API's
 * merge and delete, and the JSON form. Pure: unit suites link it alone. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

#define LABEL_MAX 63

static int fail(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct cell_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = cell_err_vmsg(err, EINVAL, fmt, ap);
	va_end(ap);
	return rc;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A decimal in [0, max] of 1..3 digits, no leading zero (so "010" is never read as octal by
 * one reader and decimal by another). Advances *s past it. */
static bool parse_small(const char **s, const char *end, unsigned max, unsigned *out)
{
	const char *p = *s;
	unsigned v = 0;
	size_t n = 0;
	while (p < end && is_digit(*p) && n < 4) {
		v = v * 10 + (unsigned)(*p - '0');
		p++;
		n++;
	}
	if (n == 0 || n > 3 || (n > 1 && **s == '0') || v > max)
		return false;
	*s = p;
	*out = v;
	return true;
}

/* A strict dotted quad filling all of [s, end). */
static bool parse_ipv4(const char *s, const char *end, uint32_t *out)
{
	uint32_t a = 0;
	for (int i = 0; i < 4; i++) {
		unsigned b;
		if (i > 0) {
			if (s >= end || *s != '.')
				return false;
			s++;
		}
		if (!parse_small(&s, end, 255, &b))
			return false;
		a = a << 8 | b;
	}
	if (s != end)
		return false;
	*out = a;
	return true;
}

static int parse_address(const char *t, size_t len, const char *field, struct netpolicy_rule *rule,
			 struct cell_error *err)
{
	const char *end = t + len;
	const char *slash = memchr(t, '/', len);
	uint32_t addr;
	if (!parse_ipv4(t, slash ? slash : end, &addr))
		return fail(err,
			    "%s: '%.*s' is not an IPv4 address (four decimals 0-255 without "
			    "leading zeros)",
			    field, (int)(slash ? slash - t : (ptrdiff_t)len), t);
	unsigned prefix = 32;
	if (slash) {
		const char *p = slash + 1;
		if (!parse_small(&p, end, 32, &prefix) || p != end)
			return fail(err, "%s: '%.*s' is not a CIDR prefix length (0-32)", field,
				    (int)(end - slash - 1), slash + 1);
		uint32_t host = prefix == 32 ? 0 : prefix == 0 ? UINT32_MAX : UINT32_MAX >> prefix;
		if (addr & host)
			return fail(err,
				    "%s: '%.*s' has host bits set: the network of /%u is "
				    "%u.%u.%u.%u/%u",
				    field, (int)len, t, prefix, (addr & ~host) >> 24,
				    (addr & ~host) >> 16 & 255, (addr & ~host) >> 8 & 255,
				    (addr & ~host) & 255, prefix);
	}
	rule->kind = slash ? NETPOLICY_CIDR4 : NETPOLICY_IPV4;
	rule->addr = addr;
	rule->prefix = prefix;
	memcpy(rule->target, t, len);
	rule->target[len] = '\0';
	return 0;
}

int netpolicy_parse_target(const char *target, size_t len, const char *field,
			   struct netpolicy_rule *rule, struct cell_error *err)
{
	if (len == 0)
		return fail(err, "%s: the target is empty", field);
	if (memchr(target, '\0', len))
		return fail(err, "%s: the target holds a NUL byte", field);
	if (len > NETPOLICY_TARGET_MAX + 1)
		return fail(err, "%s: the target is longer than %d bytes", field,
			    NETPOLICY_TARGET_MAX);
	if (len >= 3 && memmem(target, len, "://", 3))
		return fail(err, "%s: '%.*s' is a URL: give its host name", field, (int)len,
			    target);
	if (memchr(target, ':', len))
		return fail(err,
			    "%s: '%.*s': IPv6 targets are not supported (a sandbox has no "
			    "IPv6); use a domain, an IPv4 address or an IPv4 CIDR",
			    field, (int)len, target);
	/* A trailing dot is the root: "example.com." is example.com. */
	if (len > 1 && target[len - 1] == '.')
		len--;
	if (len > NETPOLICY_TARGET_MAX)
		return fail(err, "%s: the target is longer than %d bytes", field,
			    NETPOLICY_TARGET_MAX);

	/* The last label decides: all digits (or a '/') is an address, never a name (no
	 * top-level domain is numeric), so "10.1" or "1.2.3.04" is refused as an address
	 * rather than looked up as a name. */
	const char *last = target + len;
	while (last > target && last[-1] != '.')
		last--;
	bool numeric = last < target + len;
	for (const char *p = last; p < target + len; p++)
		if (!is_digit(*p) && *p != '/')
			numeric = false;
	if (memchr(target, '/', len) || numeric)
		return parse_address(target, len, field, rule, err);

	const char *p = target;
	const char *end = target + len;
	bool wildcard = len >= 2 && p[0] == '*' && p[1] == '.';
	if (wildcard)
		p += 2;
	if (p == end)
		return fail(err, "%s: '%.*s' names no domain", field, (int)len, target);
	char out[NETPOLICY_TARGET_MAX + 1];
	size_t o = 0;
	if (wildcard) {
		out[o++] = '*';
		out[o++] = '.';
	}
	unsigned label = 0;
	for (; p <= end; p++) {
		char c = p < end ? *p : '.';
		if (c == '.') {
			if (label == 0)
				return fail(err, "%s: '%.*s' has an empty label", field, (int)len,
					    target);
			if (out[o - 1] == '-')
				return fail(err, "%s: '%.*s': a label ends with '-'", field,
					    (int)len, target);
			if (p < end)
				out[o++] = '.';
			label = 0;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '*')
			return fail(err,
				    "%s: '%.*s': '*' is allowed only as the whole first label "
				    "(\"*.example.com\")",
				    field, (int)len, target);
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-'))
			return fail(err,
				    "%s: '%.*s' is not a domain: a label holds '%c' (use "
				    "letters, digits and '-')",
				    field, (int)len, target,
				    (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? c : '?');
		if (label == 0 && c == '-')
			return fail(err, "%s: '%.*s': a label begins with '-'", field, (int)len,
				    target);
		if (++label > LABEL_MAX)
			return fail(err, "%s: '%.*s': a label is longer than %d bytes", field,
				    (int)len, target, LABEL_MAX);
		out[o++] = c;
	}
	out[o] = '\0';
	rule->kind = wildcard ? NETPOLICY_WILDCARD : NETPOLICY_DOMAIN;
	rule->addr = 0;
	rule->prefix = 0;
	memcpy(rule->target, out, o + 1);
	return 0;
}

static int parse_action(json_t *v, const char *field, bool *allow, struct cell_error *err)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (!v)
		return fail(err, "%s is required (\"allow\" or \"deny\")", field);
	if (s && strlen(s) == json_string_length(v) && !strcmp(s, "allow"))
		*allow = true;
	else if (s && strlen(s) == json_string_length(v) && !strcmp(s, "deny"))
		*allow = false;
	else
		return fail(err, "%s must be \"allow\" or \"deny\"", field);
	return 0;
}

/* One {action, target} object, nothing else in it. */
static int parse_rule(json_t *o, const char *field, struct netpolicy_rule *rule,
		      struct cell_error *err)
{
	char name[256];
	if (!json_is_object(o))
		return fail(err, "%s must be an object {\"action\", \"target\"}", field);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "action") && strcmp(key, "target"))
			return fail(err, "%s: unknown field '%.64s' (a rule has action and target)",
				    field, key);
	}
	snprintf(name, sizeof(name), "%s.action", field);
	if (parse_action(json_object_get(o, "action"), name, &rule->allow, err) < 0)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.target", field);
	v = json_object_get(o, "target");
	if (!v)
		return fail(err, "%s is required", name);
	if (!json_is_string(v))
		return fail(err, "%s must be a string", name);
	return netpolicy_parse_target(json_string_value(v), json_string_length(v), name, rule, err);
}

int netpolicy_from_json(json_t *o, const char *field, struct netpolicy *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return fail(err, "%s must be an object {\"defaultAction\", \"egress\"}", field);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "defaultAction") && strcmp(key, "egress"))
			return fail(err,
				    "%s: unknown field '%.64s' (a policy has defaultAction and "
				    "egress)",
				    field, key);
	}
	char name[256];
	bool allow = false;
	v = json_object_get(o, "defaultAction");
	snprintf(name, sizeof(name), "%s.defaultAction", field);
	if (v && !json_is_null(v) && parse_action(v, name, &allow, err) < 0)
		return -EINVAL;
	json_t *egress = json_object_get(o, "egress");
	size_t n = 0;
	if (egress && !json_is_null(egress)) {
		if (!json_is_array(egress))
			return fail(err, "%s.egress must be an array of rules", field);
		n = json_array_size(egress);
		if (n > NETPOLICY_RULES_MAX)
			return fail(err, "%s.egress has %zu rules, more than %d", field, n,
				    NETPOLICY_RULES_MAX);
	}
	struct netpolicy_rule *rules = n ? calloc(n, sizeof(*rules)) : NULL;
	if (n && !rules)
		return cell_err(err, ENOMEM, "%s.egress", field);
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s.egress[%zu]", field, i);
		if (parse_rule(json_array_get(egress, i), name, &rules[i], err) < 0) {
			free(rules);
			return -EINVAL;
		}
	}
	out->default_allow = allow;
	out->rules = rules;
	out->n = n;
	return 0;
}

json_t *netpolicy_to_json(const struct netpolicy *p)
{
	json_t *egress = json_array();
	if (!egress)
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		json_t *r = json_pack("{s:s, s:s}", "action", p->rules[i].allow ? "allow" : "deny",
				      "target", p->rules[i].target);
		if (!r || json_array_append_new(egress, r) < 0) {
			json_decref(egress);
			return NULL;
		}
	}
	return json_pack("{s:s, s:o}", "defaultAction", p->default_allow ? "allow" : "deny",
			 "egress", egress);
}

static bool has_target(const struct netpolicy_rule *rules, size_t n, const char *target)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rules[i].target, target))
			return true;
	return false;
}

int netpolicy_merge(struct netpolicy *p, json_t *rules, struct cell_error *err)
{
	if (!json_is_array(rules))
		return fail(err, "rules must be a JSON array of {\"action\", \"target\"}");
	size_t n = json_array_size(rules);
	if (n == 0)
		return fail(err, "rules is empty: give at least one rule");
	if (n > NETPOLICY_RULES_MAX)
		return cell_err_msg(err, EFBIG, "rules has %zu rules, more than %d", n,
				    NETPOLICY_RULES_MAX);
	struct netpolicy_rule *in = calloc(n, sizeof(*in));
	if (!in)
		return cell_err(err, ENOMEM, "rules");
	/* The patch's rules, validated all before anything changes; later duplicates of a
	 * target dropped (the first wins). */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "rules[%zu]", i);
		if (parse_rule(json_array_get(rules, i), name, &in[k], err) < 0) {
			free(in);
			return -EINVAL;
		}
		if (!has_target(in, k, in[k].target))
			k++;
	}
	size_t kept = 0;
	for (size_t i = 0; i < p->n; i++)
		if (!has_target(in, k, p->rules[i].target))
			kept++;
	if (k + kept > NETPOLICY_RULES_MAX) {
		free(in);
		return cell_err_msg(err, EFBIG,
				    "rules: the policy would hold %zu rules, more than %d: delete "
				    "some first",
				    k + kept, NETPOLICY_RULES_MAX);
	}
	struct netpolicy_rule *all = calloc(k + kept, sizeof(*all));
	if (!all) {
		free(in);
		return cell_err(err, ENOMEM, "rules");
	}
	memcpy(all, in, k * sizeof(*in));
	size_t o = k;
	for (size_t i = 0; i < p->n; i++)
		if (!has_target(in, k, p->rules[i].target))
			all[o++] = p->rules[i];
	free(in);
	free(p->rules);
	p->rules = all;
	p->n = o;
	return 0;
}

int netpolicy_remove_targets(struct netpolicy *p, json_t *targets, struct cell_error *err)
{
	if (!json_is_array(targets))
		return fail(err, "targets must be a JSON array of target strings");
	size_t n = json_array_size(targets);
	if (n == 0)
		return fail(err, "targets is empty: give at least one target");
	if (n > NETPOLICY_RULES_MAX)
		return fail(err, "targets has %zu entries, more than %d", n, NETPOLICY_RULES_MAX);
	struct netpolicy_rule *gone = calloc(n, sizeof(*gone));
	if (!gone)
		return cell_err(err, ENOMEM, "targets");
	for (size_t i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "targets[%zu]", i);
		json_t *v = json_array_get(targets, i);
		if (!json_is_string(v)) {
			free(gone);
			return fail(err, "%s must be a string", name);
		}
		if (netpolicy_parse_target(json_string_value(v), json_string_length(v), name,
					   &gone[i], err) < 0) {
			free(gone);
			return -EINVAL;
		}
	}
	size_t o = 0;
	for (size_t i = 0; i < p->n; i++)
		if (!has_target(gone, n, p->rules[i].target))
			p->rules[o++] = p->rules[i];
	free(gone);
	size_t removed = p->n - o;
	p->n = o;
	return (int)removed;
}

static bool rule_matches_name(const struct netpolicy_rule *r, const char *name)
{
	if (r->kind == NETPOLICY_DOMAIN)
		return !strcmp(r->target, name);
	if (r->kind != NETPOLICY_WILDCARD)
		return false;
	/* "*.example.com": the suffix ".example.com" after at least one byte; never the
	 * apex. */
	const char *suffix = r->target + 1;
	size_t sl = strlen(suffix), nl = strlen(name);
	return nl > sl && !strcmp(name + nl - sl, suffix);
}

bool netpolicy_allows_name(const struct netpolicy *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (rule_matches_name(&p->rules[i], name))
			return p->rules[i].allow;
	return p->default_allow;
}

const char *netpolicy_mode(const struct netpolicy *p)
{
	if (p->n)
		return "enforcing";
	return p->default_allow ? "allow_all" : "deny_all";
}

int netpolicy_copy(const struct netpolicy *src, struct netpolicy *dst)
{
	memset(dst, 0, sizeof(*dst));
	if (src->n) {
		dst->rules = malloc(src->n * sizeof(*dst->rules));
		if (!dst->rules)
			return -ENOMEM;
		memcpy(dst->rules, src->rules, src->n * sizeof(*dst->rules));
	}
	dst->n = src->n;
	dst->default_allow = src->default_allow;
	return 0;
}

void netpolicy_free(struct netpolicy *p)
{
	if (!p)
		return;
	free(p->rules);
	p->rules = NULL;
	p->n = 0;
}
