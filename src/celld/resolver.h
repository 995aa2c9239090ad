/* celld's per-sandbox DNS resolver: one thread answering every networked sandbox on its
 * host-side address, port 53/udp, and forwarding the names its policy allows upstream.
 *
 * One thread, one epoll set: every sandbox's socket and every query in flight upstream.
 * A query from a sandbox goes through, in order:
 *   - the sandbox's token bucket (RESOLVER_RATE queries/s, burst RESOLVER_BURST): past it
 *     the query is dropped, unanswered, and counted (rate_limited);
 *   - dns_parse_query (dns.h): malformed ones are dropped and counted (failed); a query
 *     whose name no rule can name (bad characters, empty), of a class other than IN, gets
 *     REFUSED;
 *   - the sandbox's rules: first matching rule wins, else default_allow. A refused name gets
 *     REFUSED and a log_warn line "sandbox <id>: DNS refused <name> (<type>)", at most
 *     RESOLVER_LOG_PER_S lines a second per sandbox, then one "N more suppressed" line;
 *   - AAAA: NODATA (NOERROR, no answer) at once: sandboxes have no IPv6;
 *   - anything else is forwarded: a fresh UDP socket connected to the upstream (so the
 *     kernel picks a random source port and takes only the upstream's packets), the query
 *     as sent with a random 16-bit id (RAND_bytes). A reply is accepted only when its id
 *     and its question match (dns_parse_response); anything else on that socket is ignored.
 *     The reply goes back to the sandbox as the upstream sent it, with the sandbox's id,
 *     from the sandbox's socket to the address that asked. No reply in RESOLVER_TIMEOUT_MS,
 *     or an ICMP error: SERVFAIL. In flight at most RESOLVER_PENDING_MAX queries in all, and
 *     per sandbox its fair share of them: RESOLVER_PENDING_MAX divided by the sandboxes
 *     served, at most RESOLVER_PENDING_PER_SB, at least 1; past that, SERVFAIL at once. So
 *     sandboxes flooding the pool with queries upstream never answers leave every other
 *     one its share (up to RESOLVER_PENDING_MAX sandboxes served; past that, one each).
 * With pin_answers (allowlist mode), the A records of an allowed answer are given to
 * on_answer BEFORE the answer is sent, so the caller can add them to the sandbox's nft
 * allowed set before the sandbox can connect to them.
 *
 * Only UDP is served. TCP DNS is not (a truncated answer stays truncated): the queries of a
 * sandbox's libc fit UDP, and a second protocol is a second attack surface. celld's table
 * answers TCP to port 53 of the gateway with a reset (include/cell/nft.h): accepting it
 * would hand any host service on *:53/tcp to every sandbox, whatever its policy.
 *
 * Only a sandbox reaches its own listen address (celld's nft input chain accepts port 53
 * on a sandbox's own host-side address from its own interface only), so whoever sends to
 * a sandbox's socket is that sandbox.
 *
 * Locking: one mutex around the sandbox table and the pending table. Every resolver_*
 * call takes it for O(1)/O(n rules) work only; the thread takes it to handle an event.
 * The thread does NOT hold it while it calls on_answer (which takes celld's nft mutex):
 * so on_answer may call resolver_add/_set_rules/_remove/_stats, and no lock order
 * between the two exists. on_answer must not call resolver_stop. A sandbox removed while
 * its answer is in on_answer gets no answer (its socket is gone).
 *
 * Counters (resolver_stats): queries (every datagram received), forwarded (sent upstream),
 * answered (an upstream reply or NODATA sent back), refused (REFUSED sent), rate_limited
 * (dropped by the bucket), failed (malformed and dropped, or answered SERVFAIL). */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

#define RESOLVER_RATE		50   /* queries a second, per sandbox */
#define RESOLVER_BURST		100  /* the bucket's size */
#define RESOLVER_TIMEOUT_MS	5000 /* upstream's time to answer */
#define RESOLVER_PENDING_PER_SB 64
#define RESOLVER_PENDING_MAX	1024
#define RESOLVER_LOG_PER_S	5 /* refusal lines a second, per sandbox */
#define RESOLVER_TTL_MIN	30
#define RESOLVER_TTL_MAX	3600
#define RESOLVER_RULES_MAX	4096

struct resolver_rule {
	bool allow;
	char pattern[256]; /* "example.com" or "*.example.com" (dns.h: which names match) */
};

struct resolver_rules {
	bool default_allow;
	const struct resolver_rule *rules;
	size_t n;
}; /* first matching rule wins, else default_allow; the resolver copies the rules */

/* Called on the resolver thread, no resolver lock held, for each allowed answer with A
 * records of a sandbox added with pin_answers, BEFORE the answer is sent to it. key is the
 * sandbox's key; ttl_s the answer's smallest TTL clamped to [RESOLVER_TTL_MIN,
 * RESOLVER_TTL_MAX]. */
typedef void resolver_answer_fn(void *ctx, const char *key, const struct in_addr *addrs, size_t n,
				unsigned ttl_s);

/* Start the thread, forwarding to upstream. Idempotent: when it runs already, 0 (and the
 * arguments are not used). */
int resolver_start(const struct sockaddr_in *upstream, resolver_answer_fn *on_answer, void *ctx,
		   struct cell_error *err);
/* Stop the thread (joins it), close every socket, forget every sandbox. No-op when not
 * running. */
void resolver_stop(void);

/* Serve a sandbox: key is its host-side interface name ("cell12", at most 15 characters),
 * sandbox_id its id (for log lines). Binds a UDP socket to listen_addr:53 (IP_FREEBIND: the
 * address may come up later). No SO_REUSEADDR: UDP has no TIME_WAIT, so a restarted celld
 * (or a re-added sandbox) binds again at once without it, while with it a second live
 * socket could bind the same address and take part of the sandbox's queries. -EEXIST for a
 * key already served, -EADDRINUSE for an address already served, -EINVAL for a bad key,
 * id or rule (the message names rules[i].pattern), -ESRCH when the resolver is not
 * running. */
int resolver_add(const char *key, const char *sandbox_id, struct in_addr listen_addr,
		 const struct resolver_rules *rules, bool pin_answers, struct cell_error *err);
/* Replace a sandbox's rules and pin_answers: the next query sees them, and so does the answer
 * to a query already upstream (a name refused meanwhile gets REFUSED, nothing pinned).
 * -ENOENT if absent; on -EINVAL (a bad rule) the old rules stay. */
int resolver_set_rules(const char *key, const struct resolver_rules *rules, bool pin_answers,
		       struct cell_error *err);
/* Close the sandbox's socket and drop its queries in flight. No-op when absent. */
void resolver_remove(const char *key);

struct resolver_stats {
	uint64_t queries, forwarded, answered, refused, rate_limited, failed;
};
/* The sandbox's counters (see above). -ENOENT if absent. */
int resolver_stats(const char *key, struct resolver_stats *out);

/* "ADDR[:PORT]": an IPv4 address, port 53 unless given (1..65535). -EINVAL naming it. */
int resolver_parse_upstream(const char *text, struct sockaddr_in *out, struct cell_error *err);
/* The first IPv4 "nameserver" of /etc/resolv.conf, port 53. -ENOENT saying so if none. */
int resolver_default_upstream(struct sockaddr_in *out, struct cell_error *err);
