/* The keyless connections' budget (keyless.h). The table of clients is a plain array
 * scanned whole: it holds at most max entries (a quarter of a listener's connections, a
 * thousand), each look is a few microseconds, and it is taken once per connection. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keyless.h"

struct keyless_client {
	struct peer_key key;
	unsigned held;
};

int keyless_init(struct keyless_budget *b, unsigned max, unsigned per_client)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	b->max = max ? max : 1;
	b->per_client = per_client ? per_client : 1;
	b->clients = calloc(b->max, sizeof(*b->clients));
	return b->clients ? 0 : -ENOMEM;
}

void keyless_free(struct keyless_budget *b)
{
	free(b->clients);
	b->clients = NULL;
	pthread_mutex_destroy(&b->lock);
}

static struct keyless_client *find(struct keyless_budget *b, const struct peer_key *k)
{
	for (unsigned i = 0; i < b->n; i++)
		if (peer_key_equal(&b->clients[i].key, k))
			return &b->clients[i];
	return NULL;
}

bool keyless_take(struct keyless_budget *b, const struct peer_key *k, bool *whole)
{
	pthread_mutex_lock(&b->lock);
	struct keyless_client *c = find(b, k);
	bool ok = b->held < b->max && (!c || c->held < b->per_client);
	*whole = b->held >= b->max;
	if (ok) {
		if (!c) {
			c = &b->clients[b->n++]; /* held < max: a free entry remains */
			c->key = *k;
			c->held = 0;
		}
		c->held++;
		b->held++;
	}
	pthread_mutex_unlock(&b->lock);
	return ok;
}

void keyless_put(struct keyless_budget *b, const struct peer_key *k)
{
	pthread_mutex_lock(&b->lock);
	struct keyless_client *c = find(b, k);
	if (c && c->held) {
		b->held--;
		if (--c->held == 0)
			*c = b->clients[--b->n];
	}
	pthread_mutex_unlock(&b->lock);
}
