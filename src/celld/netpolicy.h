/* netpolicy.c: a sandbox's egress policy as data: OpenSandbox's NetworkPolicy
 * ({defaultAction: allow|deny, egress: [{action: allow|deny, target}]}) parsed, validated,
 * merged and printed. No I/O and no celld state: the create request, the record, the egress
 * API (GET/PATCH/DELETE /policy) and the CLI all go through it.
 *
 * A target is a domain ("example.com"), a wildcard ("*.example.com": the names below it), an
 * IPv4 address or an IPv4 CIDR. Rules are evaluated in order, first match wins, else the
 * default action. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

/* Most rules in one policy (a PATCH that would exceed it is refused). */
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

/* Parse and validate a NetworkPolicy object. field names the JSON path for messages
 * ("networkPolicy"): -EINVAL with err naming the first bad field
 * ("networkPolicy.egress[2].target: ..."). *out is zeroed first and owned after success. */
int netpolicy_from_json(json_t *o, const char *field, struct netpolicy *out,
			struct cell_error *err);
/* The NetworkPolicy object of p (a new reference), NULL on allocation failure. */
json_t *netpolicy_to_json(const struct netpolicy *p);
/* PATCH semantics of the egress API: rules is a JSON array of rules; for each target the
 * first rule of the patch wins and replaces any rule of p with that target, the others are
 * kept; new targets are added first (incoming rules win). -EINVAL names the bad element;
 * p is unchanged on failure. */
int netpolicy_merge(struct netpolicy *p, json_t *rules, struct cell_error *err);
/* DELETE semantics: targets is a JSON array of target strings; rules with those targets are
 * removed; a target not there is not an error (idempotent). p unchanged on failure. */
int netpolicy_remove_targets(struct netpolicy *p, json_t *targets, struct cell_error *err);
int netpolicy_copy(const struct netpolicy *src, struct netpolicy *dst);
void netpolicy_free(struct netpolicy *p);
