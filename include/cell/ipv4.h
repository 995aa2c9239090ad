/* IPv4 text forms, parsed one way for celld's flags and the network policy file. */
#pragma once

#include <stdint.h>

/* "a.b.c.d/len": the address as inet_pton reads it (four decimals, no leading zeros), len 0
 * to 32 in decimal without leading zeros, no host bits set. *first gets the address (host
 * byte order), *prefix the length. 0, -EINVAL when malformed, -ERANGE when host bits are
 * set. */
int cell_ipv4_cidr_parse(const char *s, uint32_t *first, unsigned *prefix);
