/* celld's log of the packets its nftables table drops (include/cell/nft.h, "The packet
 * log"): one thread reading the table's NFLOG group, one warning line per dropped packet,
 * naming the sandbox:
 *
 *   sandbox <id>: blocked tcp 198.19.0.3:41234 -> 10.1.2.3:80 (blocked range)
 *
 * so a security team sees what an agent tried (the resolver logs the names it refused).
 *
 * The kernel hands over at most CELL_NFT_LOG_RATE packets a second per logging rule (burst
 * CELL_NFT_LOG_BURST), the headers only (CELL_NFT_LOG_SNAPLEN bytes); celld writes at most
 * NETLOG_LINES_PER_S lines a second per interface, then, once that second has ended, one
 * "sandbox <id>: N more blocked packets not logged" line. The table's counters
 * (cell inspect) count every drop, logged or not.
 *
 * The socket binds the group in celld's own network namespace, the table's. Only one
 * socket of a namespace may bind a group: netlog_start fails (-EBUSY) while another
 * program, or another celld, holds it. Everything in a message is checked before use
 * (netlog_parse): every attribute's length, the prefix (only the table's reasons are
 * taken: a message of another rule logging to the group is ignored), the headers. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

#define NETLOG_LINES_PER_S 5 /* lines a second, per interface */

/* What a log message says about one dropped packet. */
struct netlog_packet {
	char reason[16];  /* the rule's prefix: spoofed, blocked, denied, host, ipv6 */
	uint32_t ifindex; /* the interface it came in on (0: none given) */
	int family;	  /* AF_INET or AF_INET6 of its headers; 0 when they are unreadable */
	uint8_t proto;	  /* IPPROTO_*, or IPv6's first next header */
	uint8_t src[16], dst[16]; /* addresses: 4 or 16 bytes, network order */
	bool has_ports;		  /* TCP or UDP, first fragment: sport, dport */
	uint16_t sport, dport;	  /* host order */
	bool has_icmp;		  /* ICMP or ICMPv6: icmp_type */
	uint8_t icmp_type;
};

/* Parse one netlink message of len bytes (it may be followed by others: only its own
 * nlmsg_len bytes are read, and they must fit in len). 0 and *out for an NFLOG packet
 * message of one of the table's reasons; -ENOENT for a packet message of another prefix
 * (another rule's); -EINVAL for anything else: another message type, a truncated header or
 * attribute, an attribute of the wrong size, a prefix without its NUL. A packet whose IP
 * headers are missing or unreadable still parses (family 0): it is logged without them. */
int netlog_parse(const void *msg, size_t len, struct netlog_packet *out);

/* "blocked tcp 198.19.0.3:41234 -> 10.1.2.3:80 (blocked range)" into buf (always
 * terminated). */
void netlog_describe(const struct netlog_packet *p, char *buf, size_t size);

/* A rate window: NETLOG_LINES_PER_S lines in each second that begins with a line. */
struct netlog_window {
	uint64_t start_ns;
	unsigned lines;
	uint64_t suppressed;
};
/* At now (CLOCK_MONOTONIC ns): true when one more line may be written (else it is counted
 * as suppressed). *ended is what a window that ended before now suppressed (0 when none):
 * the caller writes its "more" line first. */
bool netlog_window_take(struct netlog_window *w, uint64_t now, uint64_t *ended);
/* A window's suppressed count once its second has ended (then reset), else 0. */
uint64_t netlog_window_flush(struct netlog_window *w, uint64_t now);

/* The sandbox whose host-side interface is ifname: its id into id (size bytes), true; false
 * for no sandbox. Called by the log's thread with no lock held. */
typedef bool netlog_lookup_fn(const char *ifname, char *id, size_t size);

/* Called by the log's thread, no lock held, for each packet it writes a line for (so at
 * most NETLOG_LINES_PER_S a second per interface) whose sandbox is known. */
typedef void netlog_denied_fn(const char *id, const struct netlog_packet *p);
/* Set (before netlog_start) or clear (NULL) that hook. */
void netlog_on_denied(netlog_denied_fn *fn);

/* Bind NFLOG group (1..65535) and start the thread. 0 at once when it runs already. */
int netlog_start(uint16_t group, netlog_lookup_fn *lookup, struct cell_error *err);
/* End the thread and close the socket (the group is free again). */
void netlog_stop(void);

struct netlog_stats {
	uint64_t packets;    /* packet messages of the table's reasons */
	uint64_t lines;	     /* lines written for them */
	uint64_t suppressed; /* packets past NETLOG_LINES_PER_S */
	uint64_t ignored;    /* another rule's (another prefix) */
	uint64_t malformed;  /* refused by netlog_parse */
	uint64_t lost;	     /* overruns of the socket's buffer (ENOBUFS) */
};
void netlog_stats(struct netlog_stats *out);
