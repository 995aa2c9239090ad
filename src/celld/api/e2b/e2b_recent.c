/* The sandboxes a client used lately through the E2B listener.
 *
 * A signed /files URL (e2b_signature.c) names no sandbox when the SDK was given
 * E2B_SANDBOX_URL: the URL is the listener's own, and the envd token is inside the hash, so
 * nothing in it can be indexed. Trying every sandbox's token costs one hash per sandbox, and
 * anyone who reaches the port can send a made-up signature: on the gate's thread that would
 * let one client stall every other connection's check. So the signer is looked for where it
 * is cheap: the sandbox the request names (one check), else the last E2B_RECENT_PER_CLIENT
 * sandboxes the same client (an IPv4 address, an IPv6 /64) used, which is where a URL its
 * own SDK made comes from. Only what these miss (a URL handed to a browser elsewhere) goes
 * to a scan of every sandbox, on the HTTP server's thread, one at a time host-wide and at
 * most E2B_SCANS_PER_SECOND a second (e2b_recent_scan_begin).
 *
 * The table is fixed: E2B_RECENT_CLIENTS slots, a client's placed by a hash keyed with a
 * random seed (a client cannot choose addresses that take another's slot), a newcomer taking
 * the slot over. Losing a slot costs only the scan. Nothing is hashed under the lock: the
 * slot is chosen before, and the signature checks run on a copy after. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "e2b_recent.h"

struct slot {
	struct peer_key client; /* len 0: free */
	unsigned n;
	char ids[E2B_RECENT_PER_CLIENT][CELL_ID_MAX + 1]; /* the latest first */
};

static struct slot table[E2B_RECENT_CLIENTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed_init(void)
{
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) *
		       0x9e3779b97f4a7c15ull;
	}
}

static struct slot *slot_of(const struct peer_key *client)
{
	pthread_once(&seed_once, seed_init);
	return &table[peer_key_hash(client, seed) % E2B_RECENT_CLIENTS];
}

void e2b_recent_note(const struct peer_key *client, const char *id)
{
	if (!client || !client->len || !cell_id_valid(id))
		return;
	struct slot *s = slot_of(client);
	pthread_mutex_lock(&lock);
	if (!peer_key_equal(&s->client, client)) {
		s->client = *client;
		s->n = 0;
	}
	unsigned at = 0;
	while (at < s->n && strcmp(s->ids[at], id))
		at++;
	if (at == s->n && s->n < E2B_RECENT_PER_CLIENT)
		s->n++;
	if (at == E2B_RECENT_PER_CLIENT)
		at--; /* the oldest goes */
	memmove(s->ids[1], s->ids[0], at * sizeof(s->ids[0]));
	snprintf(s->ids[0], sizeof(s->ids[0]), "%s", id);
	pthread_mutex_unlock(&lock);
}

unsigned e2b_recent_of(const struct peer_key *client,
		       char ids[E2B_RECENT_PER_CLIENT][CELL_ID_MAX + 1])
{
	if (!client || !client->len)
		return 0;
	struct slot *s = slot_of(client);
	unsigned n = 0;
	pthread_mutex_lock(&lock);
	if (peer_key_equal(&s->client, client)) {
		n = s->n;
		memcpy(ids, s->ids, n * sizeof(s->ids[0]));
	}
	pthread_mutex_unlock(&lock);
	return n;
}

int e2b_recent_find(const char *named, const struct peer_key *client, e2b_signer_fn *signed_by,
		    const void *cls, char id[CELL_ID_MAX + 1])
{
	if (named) {
		if (!cell_id_valid(named) || !signed_by(named, cls))
			return -EACCES;
		snprintf(id, CELL_ID_MAX + 1, "%s", named);
		return 0;
	}
	char ids[E2B_RECENT_PER_CLIENT][CELL_ID_MAX + 1];
	unsigned n = e2b_recent_of(client, ids);
	for (unsigned i = 0; i < n; i++)
		if (signed_by(ids[i], cls)) {
			memcpy(id, ids[i], CELL_ID_MAX + 1);
			return 0;
		}
	return -ENOENT;
}

/* ---- the scan's bound ---- */

#define SCAN_INTERVAL_MS (1000 / E2B_SCANS_PER_SECOND)

static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
/* The token bucket as the time it is next empty at (a scan moves it one interval on; it
 * may be at most a burst ahead of now). Touched only by scan_lock's holder. */
static int64_t scan_due;

int e2b_recent_scan_begin(int64_t now_ms)
{
	if (pthread_mutex_trylock(&scan_lock))
		return -EBUSY;
	int64_t due = scan_due > now_ms ? scan_due : now_ms;
	if (due - now_ms > (int64_t)(E2B_SCANS_PER_SECOND - 1) * SCAN_INTERVAL_MS) {
		pthread_mutex_unlock(&scan_lock);
		return -EAGAIN;
	}
	scan_due = due + SCAN_INTERVAL_MS;
	return 0;
}

void e2b_recent_scan_end(void)
{
	pthread_mutex_unlock(&scan_lock);
}
