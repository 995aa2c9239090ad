/* network.c: a sandbox's network: its veth pair, addresses and routes (include/cell/netlink.h),
 * its chain and sets in celld's nftables table (include/cell/nft.h), its DNS resolver
 * (resolver.h) and its egress policy (netpolicy.h).
 *
 * Modes: "none" (loopback only: no veth, nothing on the host), "public" (every address
 * outside the blocked ranges of policies/network/public.json), "limited" (the domains of
 * policies/network/limited.json), and "custom" (a client's networkPolicy). The operator's
 * blocked ranges bound every mode: a policy can narrow what a sandbox reaches, never open
 * them.
 *
 * Addresses come from the sandbox's uid slot, which is unique host-wide: host side
 * base + 2 * (slot + 1), sandbox base + 2 * (slot + 1) + 1 of celld --subnet; the host-side
 * interface is "cell<slot>". Nothing of the host is touched before the first sandbox that
 * has a network: then the table is created (or reused after a restart) and IPv4 forwarding
 * is turned on, and celld logs what it found and made. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "netpolicy.h"

struct sandbox;

enum network_mode { NETWORK_NONE, NETWORK_PUBLIC, NETWORK_LIMITED, NETWORK_CUSTOM };

/* "none", "public", "limited", "custom"; and back (-EINVAL for another name). */
const char *network_mode_name(enum network_mode mode);
int network_mode_parse(const char *name, enum network_mode *out);

/* What GET /policy answers: {"mode", "policy": NetworkPolicy} of sb, a new reference; NULL
 * with err (-ENOENT) for a sandbox without a network. */
json_t *network_policy_json(struct sandbox *sb, struct cell_error *err);
/* Replace sb's policy with p (validated by netpolicy.c) live: the resolver's rules, the
 * nft allowed set's static addresses, the record. The mode becomes "custom". -ENOTSUP
 * with err for a sandbox whose mode is "none" (it has no interface to open). */
int network_policy_replace(struct sandbox *sb, const struct netpolicy *p, struct cell_error *err);
/* sb's policy in force, copied into *out (netpolicy_free). -ENOTSUP for mode "none". */
int network_policy_get(struct sandbox *sb, struct netpolicy *out, struct cell_error *err);
