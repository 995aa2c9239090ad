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

/* At start: read policies/network/public.json (the blocked ranges) and limited.json (the
 * limited mode's policy), name the table. Touches nothing of the host. */
int network_load_policies(struct cell_error *err);
/* The record's "network" of a create (a new reference in *out) from
 * extensions["cell.network"] (mode_name, NULL if absent), networkPolicy (NULL if absent)
 * and resourceLimits["cell.egress"] (a rate, "20Mbit": egressBytesPerSecond): -EINVAL
 * naming the field. */
int network_spec(const char *mode_name, json_t *policy_json, json_t *resource_limits, json_t **out,
		 struct cell_error *err);

/* The text of sb's /etc/resolv.conf, or "" for a sandbox without a network. */
int network_resolv_conf(struct sandbox *sb, char *buf, size_t size, struct cell_error *err);
/* An fd of the network namespace of sb's init (O_RDONLY, for setns), checked to still be
 * that process's after opening it (its pidfd live: the pid was not recycled); -ESRCH when
 * it has no init. Any mode, none included: every sandbox has its own namespace. */
int network_open_netns(struct sandbox *sb, struct cell_error *err);
/* Give sb, whose init runs (sb->pid, sb->pidfd), its network: the host side made first if
 * needed, then its chain, veth, addresses, routes and resolver. Nothing is left on
 * failure. 0 at once for mode none. */
int network_attach(struct sandbox *sb, struct cell_error *err);
/* Remove sb's chain, set elements and resolver socket (after its processes are gone; its
 * veth goes with its network namespace, in the kernel's time). */
void network_detach(struct sandbox *sb);
/* After a restart of celld, for a running sandbox: take its network back (chain and pinned
 * answers kept, resolver socket opened again). -ENODEV when its interface is gone. */
int network_adopt(struct sandbox *sb, struct cell_error *err);
/* After adoption: remove from the table what belongs to no sandbox of the registry. */
void network_reconcile(void);
/* At celld's stop (listeners closed): the table is removed when it holds no sandbox's
 * chain, so a celld whose networked sandboxes are all gone leaves nothing in the host's
 * nftables; a table still in use stays for the next celld to adopt. */
void network_shutdown(void);

/* What cell inspect shows of sb's network: mode, policy, interface, addresses, nftables
 * counters (connections allowed, packets blocked/denied/spoofed), resolver counters. */
json_t *network_inspect_json(struct sandbox *sb);
/* The bytes the sandbox received and sent on its interface (its veth's counters, since
 * its start, asked of celld's namespace over rtnetlink under the network's lock): 0, or
 * -ENOENT without a network (mode none), -ENODEV without an interface (not running). */
int network_bytes(struct sandbox *sb, uint64_t *rx, uint64_t *tx);

/* An edit's change of the policy in force, p (has_network false: the sandbox has none and
 * p is empty): 1 to put p in force, 0 to leave the policy as it is, -errno with err. */
typedef int network_policy_change(struct netpolicy *p, bool has_network, void *cls,
				  struct cell_error *err);
/* Read sb's policy, change it with fn and put the result in force live (the resolver's
 * rules, the nft allowed set's static addresses, the record; a change of defaultAction
 * writes the sandbox's chains again; the mode becomes "custom"), as one step: every edit,
 * whichever API asks for it, takes the same lock, so none undoes another's. *p: the policy
 * after (as read when fn left it), the caller's to free (netpolicy_free). 0 put in force,
 * 1 left as it was, -errno with err: -ENOTSUP for a sandbox whose mode is "none" (it has
 * no interface to open). */
int network_policy_edit(struct sandbox *sb, network_policy_change *fn, void *cls,
			struct netpolicy *p, struct cell_error *err);
/* sb's policy in force, copied into *out (netpolicy_free), and its mode (mode may be
 * NULL). -ENOTSUP for mode "none". */
int network_policy_get(struct sandbox *sb, enum network_mode *mode, struct netpolicy *out,
		       struct cell_error *err);
