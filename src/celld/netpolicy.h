/* netpolicy.c: a sandbox's egress policy as data: OpenSandbox's NetworkPolicy
 * ({defaultAction: allow|deny, egress: [{action: allow|deny, target}]}) parsed, validated,
 * merged and printed. No I/O and no celld state: the create request, the record, the egress
 * API (GET/PATCH/DELETE /policy) and the CLI all go through it.
 *
 * A target is a domain ("example.com": exactly that name), a wildcard ("*.example.com": every
 * name below it, at any depth, but not example.com itself, as OpenSandbox's egress sidecar
 * matches), an IPv4 address or an IPv4 CIDR. Targets are hostile input and stored canonical:
 * domains lowercase without a trailing dot, labels of 1..63 of [a-z0-9-] not beginning or
 * ending with '-', 253 bytes at most, "*." only as the whole first label; addresses as
 * dotted quads without leading zeros, a CIDR without host bits. IPv6 targets are refused (a
 * sandbox has no IPv6). Rules are evaluated in order, first match wins, else the default
 * action. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

/* Most rules in one policy (a create or a PATCH that would exceed it is refused). */
#define NETPOLICY_RULES_MAX  256
#define NETPOLICY_TARGET_MAX 253

enum netpolicy_kind {
	NETPOLICY_DOMAIN,   /* "example.com": exactly that name */
	NETPOLICY_WILDCARD, /* "*.example.com": target holds "*.example.com" */
	NETPOLICY_IPV4,	    /* "203.0.113.7": addr, prefix 32 */
	NETPOLICY_CIDR4,    /* "203.0.113.0/24": addr (no host bits), prefix */
};

struct netpolicy_rule {
	bool allow;
	enum netpolicy_kind kind;
	char target[NETPOLICY_TARGET_MAX + 1]; /* canonical: lowercase, no trailing dot */
	uint32_t addr;			       /* IPV4/CIDR4: host byte order */
	unsigned prefix;		       /* IPV4/CIDR4: 0..32 */
};

struct netpolicy {
	bool default_allow;
	struct netpolicy_rule *rules; /* malloc'd, n of them */
	size_t n;
};

/* Parse and validate a NetworkPolicy object (unknown members refused). field names the JSON
 * path for messages ("networkPolicy"): -EINVAL with err naming the first bad field
 * ("networkPolicy.egress[2].target: ..."). As the spec says, an absent defaultAction is
 * "deny" and an absent (or null) egress is no rule. *out is zeroed first and owned after
 * success. */
int netpolicy_from_json(json_t *o, const char *field, struct netpolicy *out,
			struct cell_error *err);
/* The NetworkPolicy object of p (a new reference; egress always an array), NULL on
 * allocation failure. */
json_t *netpolicy_to_json(const struct netpolicy *p);
/* PATCH semantics of the egress API (the sidecar's): rules is a non-empty JSON array of
 * rules. The result holds the patch's rules first, in their order, the first rule per
 * target winning over later ones of the same target; then p's rules whose target the patch
 * does not name, in their order. So an incoming rule both replaces an existing rule of its
 * target and takes priority over every existing rule (first match wins). The default action
 * is kept. -EINVAL with err naming the bad element ("rules[1].target: ..."), -EFBIG when the
 * result would hold more than NETPOLICY_RULES_MAX rules; p is unchanged on failure. */
int netpolicy_merge(struct netpolicy *p, json_t *rules, struct cell_error *err);
/* DELETE semantics: targets is a non-empty JSON array of target strings, each validated and
 * canonicalised as a rule's target ("Example.COM." is example.com); rules with those targets
 * are removed; a target not there is not an error (idempotent). Returns how many rules were
 * removed, or -EINVAL naming the bad element ("targets[0]: ..."); p unchanged on failure. */
int netpolicy_remove_targets(struct netpolicy *p, json_t *targets, struct cell_error *err);
/* One target string parsed into rule (kind, canonical target, addr/prefix; allow is left
 * as it was). -EINVAL with err saying what is wrong with it, naming field. */
int netpolicy_parse_target(const char *target, size_t len, const char *field,
			   struct netpolicy_rule *rule, struct cell_error *err);
/* The action of p for a name (lowercase, no trailing dot, as the resolver canonicalises a
 * query): the first domain or wildcard rule that matches it, else the default. */
bool netpolicy_allows_name(const struct netpolicy *p, const char *name);
/* "deny_all" (deny by default, no rule), "allow_all" (allow, no rule) or "enforcing": the
 * sidecar's derived mode of GET /policy. */
const char *netpolicy_mode(const struct netpolicy *p);
int netpolicy_copy(const struct netpolicy *src, struct netpolicy *dst);
void netpolicy_free(struct netpolicy *p);
