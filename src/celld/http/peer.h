/* A client as the TCP listeners count it: an IPv4 address, or an IPv6 /64 (one host usually
 * holds a whole /64, so a finer key would let it pass for millions of clients). The gate
 * holds its pending connections by it; E2B's table of recently used sandboxes
 * (e2b_recent.c) keeps a client's by it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

struct peer_key {
	uint8_t len; /* 4 or 8; 0: none */
	uint8_t b[8];
};

/* The key of sa's address (an IPv4-mapped IPv6 address is its IPv4 one): false when sa is
 * neither IPv4 nor IPv6 (NULL, a Unix socket). */
bool peer_key_of(const struct sockaddr *sa, struct peer_key *k);
bool peer_key_equal(const struct peer_key *a, const struct peer_key *b);
/* "192.0.2.1" or "2001:db8::/64", for the log; "?" when k is none. */
void peer_key_text(const struct peer_key *k, char *buf, size_t size);
/* k hashed with seed (a random one, so that a client cannot choose addresses that share a
 * chain or a slot). */
uint64_t peer_key_hash(const struct peer_key *k, uint64_t seed);
