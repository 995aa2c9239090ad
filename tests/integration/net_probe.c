/* net_probe: it_network's helper inside a sandbox (static: runs on any image). Sends one UDP
 * datagram to ADDR:PORT, in one of three ways, and prints what the kernel said:
 *
 *   net_probe udp ADDR PORT            from the sandbox's own address (the control)
 *   net_probe freebind SRC ADDR PORT   a UDP socket bound to SRC with IP_FREEBIND
 *   net_probe raw SRC ADDR PORT        a raw socket (IP_HDRINCL) with a forged source SRC
 *
 * Output: "sent" or "refused <step>: <error>". Exit 0 either way (the test decides from
 * the output and from what the lab's servers counted), 2 on a usage error. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char payload[] = "net_probe";

static int refused(const char *step)
{
	printf("refused %s: %s\n", step, strerror(errno));
	return 0;
}

static int addr_of(const char *s, struct in_addr *a)
{
	if (inet_pton(AF_INET, s, a) != 1) {
		fprintf(stderr, "net_probe: not an IPv4 address: %s\n", s);
		return -1;
	}
	return 0;
}

static uint16_t csum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

static int send_raw(struct in_addr src, struct sockaddr_in dst)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0)
		return refused("socket(SOCK_RAW)");
	struct {
		struct iphdr ip;
		struct udphdr udp;
		char data[sizeof(payload) - 1];
	} __attribute__((packed)) pkt;
	memset(&pkt, 0, sizeof(pkt));
	pkt.ip.version = 4;
	pkt.ip.ihl = 5;
	pkt.ip.ttl = 64;
	pkt.ip.protocol = IPPROTO_UDP;
	pkt.ip.tot_len = htons(sizeof(pkt));
	pkt.ip.saddr = src.s_addr;
	pkt.ip.daddr = dst.sin_addr.s_addr;
	pkt.ip.check = csum(&pkt.ip, sizeof(pkt.ip));
	pkt.udp.source = htons(40000);
	pkt.udp.dest = dst.sin_port;
	pkt.udp.len = htons(sizeof(pkt.udp) + sizeof(pkt.data));
	memcpy(pkt.data, payload, sizeof(pkt.data)); /* UDP checksum 0: none (IPv4) */
	if (sendto(fd, &pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)) < 0)
		return refused("sendto");
	printf("sent\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int need = !strcmp(mode, "udp") ? 4 : 5;
	if ((strcmp(mode, "udp") && strcmp(mode, "freebind") && strcmp(mode, "raw")) ||
	    argc != need) {
		fprintf(stderr, "usage: net_probe udp|freebind|raw [SRC] ADDR PORT\n");
		return 2;
	}
	struct in_addr src = {0};
	struct sockaddr_in dst = {.sin_family = AF_INET};
	if ((need == 5 && addr_of(argv[2], &src) < 0) || addr_of(argv[need - 2], &dst.sin_addr) < 0)
		return 2;
	dst.sin_port = htons((uint16_t)atoi(argv[need - 1]));
	if (!strcmp(mode, "raw"))
		return send_raw(src, dst);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return refused("socket");
	if (!strcmp(mode, "freebind")) {
		int one = 1;
		if (setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0)
			return refused("IP_FREEBIND");
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = src};
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return refused("bind");
	}
	if (sendto(fd, payload, sizeof(payload) - 1, 0, (struct sockaddr *)&dst, sizeof(dst)) < 0)
		return refused("sendto");
	printf("sent\n");
	return 0;
}
