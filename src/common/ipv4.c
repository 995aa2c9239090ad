/* IPv4 text forms (include/cell/ipv4.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "cell/ipv4.h"

int cell_ipv4_cidr_parse(const char *s, uint32_t *first, unsigned *prefix)
{
	char a[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	if (!slash || (size_t)(slash - s) >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, (size_t)(slash - s));
	a[slash - s] = '\0';
	struct in_addr in;
	if (inet_pton(AF_INET, a, &in) != 1)
		return -EINVAL;
	const char *p = slash + 1;
	unsigned len = 0;
	if (!*p || strlen(p) > 2 || (p[0] == '0' && p[1]))
		return -EINVAL; /* no leading zeros: "08" */
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		len = len * 10 + (unsigned)(*p - '0');
	}
	if (len > 32)
		return -EINVAL;
	uint32_t addr = ntohl(in.s_addr);
	uint32_t host = len == 32 ? 0 : 0xffffffffu >> len;
	if (addr & host)
		return -ERANGE;
	*first = addr;
	*prefix = len;
	return 0;
}
