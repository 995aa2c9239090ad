/* A client's key (peer.h): its IPv4 address or its IPv6 /64. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "peer.h"

bool peer_key_of(const struct sockaddr *sa, struct peer_key *k)
{
	memset(k, 0, sizeof(*k));
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		k->len = 4;
		memcpy(k->b, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family != AF_INET6)
		return false;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		k->len = 4;
		memcpy(k->b, a->s6_addr + 12, 4);
	} else {
		k->len = 8;
		memcpy(k->b, a->s6_addr, 8);
	}
	return true;
}

bool peer_key_equal(const struct peer_key *a, const struct peer_key *b)
{
	return a->len == b->len && !memcmp(a->b, b->b, a->len);
}

void peer_key_text(const struct peer_key *k, char *buf, size_t size)
{
	uint8_t a[16] = {0};
	if (k->len != 4 && k->len != 8) {
		snprintf(buf, size, "?");
		return;
	}
	memcpy(a, k->b, k->len);
	if (!inet_ntop(k->len == 4 ? AF_INET : AF_INET6, a, buf, size))
		snprintf(buf, size, "?");
	else if (k->len == 8)
		strncat(buf, "/64", size - strlen(buf) - 1);
}

uint64_t peer_key_hash(const struct peer_key *k, uint64_t seed)
{
	uint64_t h = seed ^ k->len;
	for (unsigned i = 0; i < k->len && i < sizeof(k->b); i++)
		h = (h ^ k->b[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	return h;
}
