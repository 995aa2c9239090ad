/* keyless.c: how many connections of a TCP listener's HTTP server are held for clients
 * whose credential anyone may be handed (a preview or traffic token, a signed URL, a public
 * port): at most a share of the server's connections in all and a number from one client,
 * so that however many of them keep their connections open, key holders still get in. A
 * connection is counted from its first request (what its credential is) until it closes. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "peer.h"

struct keyless_budget {
	pthread_mutex_t lock;
	unsigned max, per_client;
	unsigned held;
	unsigned n;			/* clients in the table */
	struct keyless_client *clients; /* max entries: no more clients than connections */
};

/* A budget of max connections in all, per_client from one client (IPv6: one /64): 0, or
 * -ENOMEM. */
int keyless_init(struct keyless_budget *b, unsigned max, unsigned per_client);
void keyless_free(struct keyless_budget *b);
/* One more connection of client k: true, or false (none taken) when the budget or the
 * client's share is spent; *whole says which (true: the budget). */
bool keyless_take(struct keyless_budget *b, const struct peer_key *k, bool *whole);
/* A connection of client k taken before has closed. */
void keyless_put(struct keyless_budget *b, const struct peer_key *k);
