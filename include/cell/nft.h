/* celld's own nftables table, built with libnftnl batches over libmnl.
 *
 * celld never runs `nft` or `iptables`, and never reads, changes or deletes a table other
 * than its own: it coexists with a host firewall, Docker's and libvirt's rules. Every
 * operation below is one nfnetlink batch (NFNL_MSG_BATCH_BEGIN … END), so the kernel applies
 * all of it or none of it, and every message in it is ACKed; a failure comes back as -errno
 * with a cell_error naming the object ("adding chain sb-cellab12 to table inet cell: …").
 *
 * The table (family inet; name "cell" for the default state dir, "cell-<8 hex of the state
 * dir>" otherwise, like the cgroups: cell_nft_table_name):
 *
 *   set blocked4       { type ipv4_addr; flags interval }   ranges no sandbox may reach,
 *                                                           from policies/network/public.json
 *   set sandbox_ifs    { type ifname }                      the host-side veth of each sandbox
 *   set sandbox_dns    { type ifname . ipv4_addr }          each sandbox's host-side address
 *   map sandbox_chains { type ifname : verdict }            ifname -> jump sb-<ifname>
 *
 *   chain forward { type filter hook forward priority filter; policy accept;
 *     oifname @sandbox_ifs ct state established,related accept   replies to a sandbox
 *     oifname @sandbox_ifs counter drop           nothing else enters a sandbox: not the
 *                                                 host's LAN, not another sandbox
 *     iifname @sandbox_ifs meta nfproto ipv6 counter drop        no IPv6 ever leaves one
 *     iifname vmap @sandbox_chains                the sandbox's own chain decides
 *   }                                             other traffic: policy accept (not ours)
 *   chain input { type filter hook input priority filter; policy accept;
 *     iifname . ip daddr @sandbox_dns udp dport 53 accept    DNS to the sandbox's own
 *                                                            host-side address (celld's
 *                                                            resolver), nothing else of
 *                                                            the host: no address, no port
 *     iifname . ip daddr @sandbox_dns tcp dport 53 counter reject with tcp reset
 *                                                 celld serves no DNS over TCP: a host
 *                                                 service on *:53/tcp is never a sandbox's
 *     iifname @sandbox_ifs counter drop
 *   }
 *   chain raw-prerouting { type filter hook prerouting priority raw; policy accept;
 *     iifname . ip daddr @sandbox_dns udp dport 53 notrack   DNS with the resolver is never
 *   }                                                        tracked: a sandbox asking from
 *   chain raw-output { type filter hook output priority raw; many ports fills no table
 *     oifname . ip saddr @sandbox_dns udp sport 53 notrack
 *   }
 *   chain postrouting { type nat hook postrouting priority srcnat; policy accept;
 *     meta nfproto ipv4 iifname @sandbox_ifs masquerade   (by interface: a --subnet
 *                                                 changed under running sandboxes keeps
 *                                                 their egress)
 *   }
 *
 * and per sandbox (host-side interface IF, sandbox address A):
 *
 *   set sb-IF-allowed { type ipv4_addr; flags timeout; size 4096 }  DNS-pinned allowlist
 *   set sb-IF-ranges  { type ipv4_addr; flags interval }   the policy's allowed addresses
 *   set sb-IF-denied  { type ipv4_addr; flags interval }   and denied ones (IPs and CIDRs)
 *   chain sb-IF {
 *     ip saddr != A counter drop comment "spoofed"         anti-spoof
 *     ip daddr @blocked4 counter drop comment "blocked"    before anything that accepts, so
 *                                                          an allowlisted name resolving to
 *                                                          metadata or RFC 1918 stays blocked
 *     meta l4proto {udp,tcp} th dport 53 ip daddr != @sb-IF-ranges drop comment "dns"
 *                                                          DNS to any resolver but its own
 *                                                          (the input chain's) or one the
 *                                                          policy allows: denied
 *     ip daddr @sb-IF-denied counter drop comment "denied"  a deny rule wins over any allow
 *                                                          and ends open connections too
 *     ct state established,related accept                  a reply, or a connection opened
 *                                                          while its address was allowed
 *     ct state new ct count over N counter drop comment "conntrack"
 *                                                          (max_conns N): the host's one
 *                                                          conntrack table is everyone's
 *     public:    ct state new counter accept comment "allowed"
 *     allowlist: ip daddr @sb-IF-allowed ct state new counter accept comment "allowed"
 *                ip daddr @sb-IF-ranges ct state new counter accept comment "allowed"
 *     (all)      counter drop comment "denied"             none: everything ends here
 *   }
 *
 * The per-sandbox jump is a verdict map keyed by interface name rather than one
 * `iifname "cellXXXX" jump` rule per sandbox: a packet costs one hash lookup however many
 * sandboxes run, and adding or removing a sandbox is an element, never a rule handle.
 * Another sandbox is never reachable (the oifname drop), whatever the subnet; the host is
 * never reachable except its DNS port on the sandbox's own host-side address (the input
 * chain: any other local address, celld's API included, is dropped). Order of a create for
 * the caller: cell_nft_sandbox_add before the veth comes up, so no packet of the sandbox
 * passes before its chain exists (and a sandbox interface that is not in sandbox_ifs is not
 * a sandbox of this table).
 *
 * IPv6: IPv4 first. The network setup is to disable IPv6 inside each sandbox
 * (net.ipv6.conf.all.disable_ipv6=1 in its namespace, no IPv6 address on its eth0); the
 * table does not rely on that: the forward chain drops IPv6 from sandbox interfaces (one
 * rule) and the input chain drops everything of theirs but IPv4 DNS, so nothing leaks
 * should IPv6 be on.
 *
 * Counters (cell_nft_sandbox_counters): packets dropped as spoofed, as blocked ranges, by
 * the policy ("denied"), and connections accepted ("allowed": the first packet of each).
 *
 * The packet log (opts.log_group != 0): every drop of a sandbox's packets also hands the
 * packet's headers (CELL_NFT_LOG_SNAPLEN bytes) to NFLOG group log_group, with a prefix
 * naming the reason: "spoofed", "blocked", "denied" (its chain), "host" (the input chain),
 * "ipv6" (the forward chain). Each logging rule is limited in the kernel
 * (CELL_NFT_LOG_RATE a second, burst CELL_NFT_LOG_BURST: a flood costs one limit check a
 * packet, nothing reaches user space past it); the limit governs only the log, never the
 * drop. Nothing of the log is on the path of accepted traffic: a drop whose rule matches
 * something ("ip daddr @blocked4") jumps to a chain of its own that logs, then drops,
 *
 *   rule in sb-IF:  ip saddr != A counter jump sb-IF/spoofed comment "spoofed"
 *                   ip daddr @blocked4 counter jump sb-IF/blocked comment "blocked"
 *                   …
 *                   limit rate R/second burst B packets log prefix "denied" group G
 *                   counter drop comment "denied"
 *   chain sb-IF/spoofed, sb-IF/blocked, sb-IF/denied
 *                                      { limit … log prefix "<reason>" group G …; drop }
 *   chain drop-host, drop-ipv6         { limit … log prefix "host"/"ipv6" …; drop }
 *   forward: iifname @sandbox_ifs meta nfproto ipv6 counter jump drop-ipv6
 *   input:   iifname @sandbox_ifs counter jump drop-host
 *
 * so a packet that matched pays for the jump and the limit, one that did not pays nothing
 * more than before (the "denied" log rule is reached only by packets the next rule drops).
 * The limits of drop-host and drop-ipv6 are shared by all sandboxes; those of a sandbox's
 * chains are its own. With log_group 0 the rules are the plain `counter drop`s above (the
 * two base drop chains exist, empty). A sandbox chain made with another log_group (or
 * none, by an older celld) keeps it until the sandbox is removed; a table create
 * refreshes the base chains' group.
 *
 * Restart: cell_nft_table_create on an existing table reuses it: it flushes and refills
 * only its base chains' rules and the blocked set (the policy file may have changed) in one
 * batch, and keeps every sandbox's chain, set and elements, so running sandboxes keep their
 * network. cell_nft_sandbox_list names the sandboxes the table holds, for reconciliation;
 * cell_nft_sandbox_remove removes one whatever is left of it.
 *
 * Other writers: the host's ruleset is shared (a firewall, Docker, another celld commit to
 * their own tables at any time), and a dump that spans several netlink messages while one of
 * them commits comes back marked NLM_F_DUMP_INTR (libmnl: -EINTR). Every dump is read again
 * from the start when so (up to 64 times, with a growing pause: 0.1 s at most), and a
 * sandbox's remove asks for each of its objects by name (a GET that one message answers,
 * which no commit can tear) rather than from a dump of the whole table: a torn read would
 * leave a deleted sandbox's sets behind, in the way of the next add on its interface.
 *
 * Threads: a handle has its own netlink socket and a mutex; each call holds it for its
 * batch. Every call is O(objects of one sandbox), except table create (the blocked set). */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

#define CELL_NFT_NAME_MAX 64
/* Longest sandbox interface name (IFNAMSIZ - 1). */
#define CELL_NFT_IFNAME_MAX 15
/* Most elements of a sandbox's allowed set; more addresses fail with -ENFILE. */
#define CELL_NFT_ALLOWED_MAX 4096
/* Most entries of a policy's blocked list. */
#define CELL_NFT_RANGES_MAX 1024

struct cell_nft;

/* An IPv4 range, first and last address inclusive, in host byte order. */
struct cell_nft_range {
	uint32_t first, last;
};

struct cell_nft_table_opts {
	const char *name;      /* "cell" or cell_nft_table_name's */
	struct in_addr subnet; /* the sandboxes' subnet (kept for the log and callers) */
	unsigned prefix;       /* its prefix length, 1..32 */
	const struct cell_nft_range *blocked; /* any order, may overlap (merged here) */
	size_t n_blocked;
	uint16_t log_group; /* NFLOG group of the packet log (see above); 0: no log */
};

/* The packet log's limit per logging rule, and the bytes of each packet it copies (the
 * IPv4 header with options and the ports, or the IPv6 header and the ports). */
#define CELL_NFT_LOG_RATE    10
#define CELL_NFT_LOG_BURST   20
#define CELL_NFT_LOG_SNAPLEN 64

enum cell_nft_policy {
	CELL_NFT_NONE,	    /* nothing leaves (loopback inside only) */
	CELL_NFT_PUBLIC,    /* every address outside blocked4 */
	CELL_NFT_ALLOWLIST, /* only the addresses in the sandbox's allowed set */
};

struct cell_nft_sandbox {
	char ifname[CELL_NFT_IFNAME_MAX + 1]; /* host-side interface: [A-Za-z0-9_.-], 1..15 */
	struct in_addr addr;		      /* the sandbox's own address */
	struct in_addr host_addr;	      /* the host side's address (its DNS resolver) */
	enum cell_nft_policy policy;
	/* What the sandbox may send, in bytes a second (0: no limit): packets over the rate
	 * (with a burst of a quarter second, at least 64 KiB) are dropped, established
	 * connections included, so TCP slows down to it (a policer, not a shaper). */
	uint64_t egress_bytes_per_s;
	/* The most connections of the sandbox conntrack tracks at once on the host (0: no
	 * bound): past it, new ones are dropped (counted and logged as "conntrack"). */
	uint32_t max_conns;
	/* The policy's address rules (any order, may overlap; at most CELL_NFT_RANGES_MAX
	 * each): ranges allowed (an allowlist reaches them besides its pinned answers; in any
	 * policy they may receive DNS queries), and ranges no packet of the sandbox reaches in
	 * any policy (a denied range wins over an allowed one). */
	const struct cell_nft_range *allow_ranges, *deny_ranges;
	size_t n_allow_ranges, n_deny_ranges;
};

struct cell_nft_counter {
	uint64_t packets, bytes;
};

struct cell_nft_counters {
	struct cell_nft_counter spoofed, blocked, allowed, denied;
	struct cell_nft_counter egress_limited;	   /* dropped over egress_bytes_per_s */
	struct cell_nft_counter conntrack_limited; /* new connections over max_conns */
};

/* The table name for a state dir: "cell" for CELL_DEFAULT_STATE_DIR, else "cell-" and the
 * first 8 hex digits of the dir's SHA-256 (trailing slashes ignored). */
int cell_nft_table_name(const char *state_dir, char *buf, size_t size);

/* Read a network policy's blocked list (policies/network/public.json: {"blocked": [{"cidr":
 * "10.0.0.0/8", "name": …, "why": …}, …], "allowed": [same form]}). Each cidr is
 * a.b.c.d/len with no host bits set; at most CELL_NFT_RANGES_MAX entries each. The
 * optional "allowed" list is the operator's exceptions (an internal mirror): they are cut
 * out of the blocked ranges. *out (sorted, disjoint) is malloc'd; the caller frees it. */
int cell_nft_policy_load(const char *path, struct cell_nft_range **out, size_t *n,
			 struct cell_error *err);

/* Open a netlink socket for the table opts->name (copied) and create or reuse the table
 * (see above). *out is the handle; cell_nft_close frees it. */
int cell_nft_open(const struct cell_nft_table_opts *opts, struct cell_nft **out,
		  struct cell_error *err);
void cell_nft_close(struct cell_nft *nft);

/* Create the table, or reuse it: flush and refill its base chains and blocked set, keep the
 * sandboxes. cell_nft_open calls it; call it again to reload the blocked list. */
int cell_nft_table_create(struct cell_nft *nft, const struct cell_nft_range *blocked,
			  size_t n_blocked, struct cell_error *err);
/* Delete the whole table (everything of every sandbox). 0 when it is already gone. */
int cell_nft_table_delete(struct cell_nft *nft, struct cell_error *err);

/* What else the host's nftables holds, read once for celld's log (never changed): the
 * other tables ("ip filter, inet firewalld", at most as many as fit), and their base
 * chains for IPv4 that drop by default where a sandbox's packets pass: the forward hook
 * (all of a sandbox's egress: Docker sets its FORWARD chain so) or the input hook (a
 * sandbox's DNS to celld's resolver). A packet must pass every base chain of its hook, so
 * such a chain drops what celld's table accepts unless it accepts the sandboxes' interfaces
 * (cell*) itself. iptables-legacy rules are not nftables and not seen. */
struct cell_nft_survey {
	char tables[512];
	char drops[1024];
	size_t n_tables, forward_drops, input_drops;
};
int cell_nft_survey(struct cell_nft *nft, struct cell_nft_survey *out, struct cell_error *err);

/* Add a sandbox's sets, chains and map elements in one batch. -EEXIST when its chain exists
 * (remove it first). */
int cell_nft_sandbox_add(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			 struct cell_error *err);
/* Write a sandbox's chains again from sb, in one batch, creating what is missing of it (a
 * sandbox added by an older celld) and keeping its allowed set's elements; the chains'
 * counters start again from 0. */
int cell_nft_sandbox_rebuild(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			     struct cell_error *err);
/* Replace the address rules of the sandbox on sb->ifname with sb's ranges (the rest of sb
 * is not used), in one batch. -ENOENT when its range sets are not there (rebuild it). */
int cell_nft_ranges_set(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			struct cell_error *err);
/* Remove whatever the table holds of the sandbox on interface ifname (its jump, interface
 * and DNS elements, chain, drop chains and set) in one batch. 0 when nothing of it was
 * there. */
int cell_nft_sandbox_remove(struct cell_nft *nft, const char *ifname, struct cell_error *err);
/* The interfaces of the sandboxes the table holds (a chain sb-IF, or an element of
 * sandbox_ifs or sandbox_chains), sorted, no duplicates. *out is malloc'd (n entries). */
int cell_nft_sandbox_list(struct cell_nft *nft, char (**out)[CELL_NFT_IFNAME_MAX + 1], size_t *n,
			  struct cell_error *err);
int cell_nft_sandbox_counters(struct cell_nft *nft, const char *ifname,
			      struct cell_nft_counters *out, struct cell_error *err);

/* Add addresses to a sandbox's allowed set for timeout_s seconds (1..CELL_NFT_TIMEOUT_MAX),
 * replacing the timeout of any already there (a fresh DNS answer restarts its TTL). */
#define CELL_NFT_TIMEOUT_MAX (7u * 24 * 3600)
int cell_nft_allow_add(struct cell_nft *nft, const char *ifname, const struct in_addr *addrs,
		       size_t n, unsigned timeout_s, struct cell_error *err);
/* Remove addresses from it; an address not there is not an error. */
int cell_nft_allow_del(struct cell_nft *nft, const char *ifname, const struct in_addr *addrs,
		       size_t n, struct cell_error *err);
/* The addresses in it now (host byte order), with their remaining time in ms. */
struct cell_nft_allowed {
	uint32_t addr;
	uint64_t expires_ms;
};
int cell_nft_allow_list(struct cell_nft *nft, const char *ifname, struct cell_nft_allowed **out,
			size_t *n, struct cell_error *err);
