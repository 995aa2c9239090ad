/* The packet log's parser, description and rate window (src/celld/netlog.c) on crafted
 * NFLOG messages: the ones the kernel sends for the table's drops, and hostile ones
 * (truncated, oversized, mislabelled attributes; headers that lie about their length). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "netlog.h"

static char msg[1024];

/* An NFLOG packet message with prefix (NULL: none), in-device ifindex (0: none) and
 * payload. */
static struct nlmsghdr *packet(const char *prefix, uint32_t ifindex, const void *ip, size_t len)
{
	memset(msg, 0, sizeof(msg));
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(msg);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->res_id = htons(4242);
	struct nfulnl_msg_packet_hdr ph = {.hw_protocol = htons(0x0800), .hook = 2};
	mnl_attr_put(nlh, NFULA_PACKET_HDR, sizeof(ph), &ph);
	if (ifindex)
		mnl_attr_put_u32(nlh, NFULA_IFINDEX_INDEV, htonl(ifindex));
	if (prefix)
		mnl_attr_put_strz(nlh, NFULA_PREFIX, prefix);
	if (ip)
		mnl_attr_put(nlh, NFULA_PAYLOAD, len, ip);
	return nlh;
}

/* IPv4 header (20 bytes) + 4 bytes of transport. */
static size_t ipv4(uint8_t *b, uint8_t proto, const char *src, const char *dst, uint16_t sport,
		   uint16_t dport)
{
	memset(b, 0, 24);
	b[0] = 0x45;
	b[9] = proto;
	inet_pton(AF_INET, src, b + 12);
	inet_pton(AF_INET, dst, b + 16);
	b[20] = (uint8_t)(sport >> 8);
	b[21] = (uint8_t)sport;
	b[22] = (uint8_t)(dport >> 8);
	b[23] = (uint8_t)dport;
	return 24;
}

static void describe(const struct nlmsghdr *nlh, char *buf, size_t size)
{
	struct netlog_packet p;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	netlog_describe(&p, buf, size);
}

START_TEST(test_tcp_blocked)
{
	uint8_t ip[24];
	size_t n = ipv4(ip, IPPROTO_TCP, "198.19.0.3", "10.1.2.3", 41234, 80);
	struct nlmsghdr *nlh = packet("blocked", 7, ip, n);
	struct netlog_packet p;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	ck_assert_str_eq(p.reason, "blocked");
	ck_assert_uint_eq(p.ifindex, 7);
	ck_assert_int_eq(p.family, AF_INET);
	ck_assert(p.has_ports);
	ck_assert_uint_eq(p.sport, 41234);
	ck_assert_uint_eq(p.dport, 80);
	char d[256];
	netlog_describe(&p, d, sizeof(d));
	ck_assert_str_eq(d, "blocked tcp 198.19.0.3:41234 -> 10.1.2.3:80 (blocked range)");
}
END_TEST

START_TEST(test_reasons_and_protocols)
{
	uint8_t ip[24];
	char d[256];
	size_t n = ipv4(ip, IPPROTO_UDP, "198.19.0.3", "203.0.113.9", 5353, 53);
	describe(packet("denied", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(
	    d, "blocked udp 198.19.0.3:5353 -> 203.0.113.9:53 (not allowed by its policy)");
	n = ipv4(ip, IPPROTO_ICMP, "198.19.0.3", "198.19.0.2", 0x0800, 0);
	describe(packet("host", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(d, "blocked icmp 198.19.0.3 -> 198.19.0.2 type 8 (the host: only its DNS "
			    "resolver is open)");
	n = ipv4(ip, 47, "198.19.0.9", "203.0.113.9", 0, 0);
	describe(packet("spoofed", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(d, "blocked proto 47 198.19.0.9 -> 203.0.113.9 (spoofed source address)");

	uint8_t v6[44] = {0x60};
	v6[6] = IPPROTO_TCP;
	inet_pton(AF_INET6, "2001:db8:1::2", v6 + 8);
	inet_pton(AF_INET6, "2001:db8:2::10", v6 + 24);
	v6[40] = 0x9c;
	v6[41] = 0x40;
	v6[43] = 80;
	describe(packet("ipv6", 7, v6, sizeof(v6)), d, sizeof(d));
	ck_assert_str_eq(d, "blocked tcp [2001:db8:1::2]:40000 -> [2001:db8:2::10]:80 (IPv6: "
			    "sandboxes have none)");
}
END_TEST

/* Headers that do not hold up: logged without what cannot be read, never read past. */
START_TEST(test_short_headers)
{
	uint8_t ip[64];
	char d[256];
	struct netlog_packet p;
	size_t n = ipv4(ip, IPPROTO_TCP, "198.19.0.3", "10.1.2.3", 1, 2);
	/* no transport bytes: addresses, no ports */
	describe(packet("blocked", 7, ip, 20), d, sizeof(d));
	ck_assert_str_eq(d, "blocked tcp 198.19.0.3 -> 10.1.2.3 (blocked range)");
	/* IHL says 60 bytes, 24 are there: no headers */
	ip[0] = 0x4f;
	describe(packet("blocked", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(d, "blocked a packet (blocked range)");
	/* IHL below 5 */
	ip[0] = 0x43;
	describe(packet("blocked", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(d, "blocked a packet (blocked range)");
	/* a later fragment: its first bytes are not ports */
	ip[0] = 0x45;
	ip[6] = 0x00;
	ip[7] = 0x10;
	describe(packet("blocked", 7, ip, n), d, sizeof(d));
	ck_assert_str_eq(d, "blocked tcp 198.19.0.3 -> 10.1.2.3 (blocked range)");
	/* shorter than an IPv4 header, an IPv6 header cut short, no payload, version 5 */
	ip[0] = 0x45;
	struct nlmsghdr *nlh = packet("blocked", 7, ip, 19);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	ck_assert_int_eq(p.family, 0);
	ip[0] = 0x60;
	nlh = packet("ipv6", 7, ip, 39);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	ck_assert_int_eq(p.family, 0);
	nlh = packet("blocked", 0, NULL, 0);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	ck_assert_int_eq(p.family, 0);
	ck_assert_uint_eq(p.ifindex, 0);
	ip[0] = 0x55;
	nlh = packet("blocked", 7, ip, n);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	ck_assert_int_eq(p.family, 0);
}
END_TEST

/* Not ours: no prefix, another rule's prefix, a prefix that only starts like ours. */
START_TEST(test_other_prefixes)
{
	uint8_t ip[24];
	size_t n = ipv4(ip, IPPROTO_TCP, "198.19.0.3", "10.1.2.3", 1, 2);
	struct netlog_packet p;
	const char *others[] = {"", "blocked ", "blockedx", "DROP: ", "Blocked"};
	for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++) {
		struct nlmsghdr *nlh = packet(others[i], 7, ip, n);
		ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -ENOENT);
	}
	struct nlmsghdr *nlh = packet(NULL, 7, ip, n);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -ENOENT);
}
END_TEST

/* Malformed: refused whole, nothing read past the message or an attribute. */
START_TEST(test_malformed)
{
	uint8_t ip[24];
	size_t n = ipv4(ip, IPPROTO_TCP, "198.19.0.3", "10.1.2.3", 1, 2);
	struct netlog_packet p;
	struct nlmsghdr *nlh = packet("blocked", 7, ip, n);
	uint32_t full = nlh->nlmsg_len;
	/* the message is longer than what was received */
	ck_assert_int_eq(netlog_parse(nlh, full - 1, &p), -EINVAL);
	ck_assert_int_eq(netlog_parse(nlh, 8, &p), -EINVAL);
	ck_assert_int_eq(netlog_parse(NULL, 100, &p), -EINVAL);
	/* shorter than its own headers */
	nlh->nlmsg_len = MNL_NLMSG_HDRLEN + 2;
	ck_assert_int_eq(netlog_parse(nlh, full, &p), -EINVAL);
	/* another message type */
	nlh = packet("blocked", 7, ip, n);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	nlh->nlmsg_type = NLMSG_ERROR;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	/* an attribute claiming more than the message holds */
	nlh = packet("blocked", 7, ip, n);
	struct nlattr *last =
	    (struct nlattr *)((char *)nlh + nlh->nlmsg_len - MNL_ALIGN(sizeof(struct nlattr) + n));
	ck_assert_uint_eq(mnl_attr_get_type(last), NFULA_PAYLOAD);
	last->nla_len = (uint16_t)(sizeof(struct nlattr) + n + 64);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	/* an attribute shorter than its own header */
	last->nla_len = 2;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	/* a prefix without its NUL */
	memset(msg, 0, sizeof(msg));
	nlh = mnl_nlmsg_put_header(msg);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	mnl_nlmsg_put_extra_header(nlh, sizeof(struct nfgenmsg));
	mnl_attr_put(nlh, NFULA_PREFIX, 7, "blocked");
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	/* an interface index of 2 or 8 bytes */
	for (int len = 2; len <= 8; len += 6) {
		memset(msg, 0, sizeof(msg));
		nlh = mnl_nlmsg_put_header(msg);
		nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
		mnl_nlmsg_put_extra_header(nlh, sizeof(struct nfgenmsg));
		mnl_attr_put_strz(nlh, NFULA_PREFIX, "blocked");
		uint8_t idx[8] = {0, 0, 0, 7};
		mnl_attr_put(nlh, NFULA_IFINDEX_INDEV, (size_t)len, idx);
		ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), -EINVAL);
	}
	/* attribute types past NFULA_MAX are ignored, not indexed */
	nlh = packet("blocked", 7, ip, n);
	mnl_attr_put_u32(nlh, 0x3fff, 1);
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
}
END_TEST

/* A description never overflows its buffer. */
START_TEST(test_describe_bounded)
{
	uint8_t v6[44] = {0x60};
	v6[6] = IPPROTO_UDP;
	memset(v6 + 8, 0xab, 32);
	struct nlmsghdr *nlh = packet("ipv6", 7, v6, sizeof(v6));
	struct netlog_packet p;
	ck_assert_int_eq(netlog_parse(nlh, nlh->nlmsg_len, &p), 0);
	char d[24];
	memset(d, 'x', sizeof(d));
	netlog_describe(&p, d, sizeof(d));
	ck_assert_uint_eq(strlen(d), sizeof(d) - 1);
}
END_TEST

START_TEST(test_window)
{
	struct netlog_window w = {0};
	uint64_t s = 1000000000ull, t = 5 * s, ended = 99;
	for (int i = 0; i < NETLOG_LINES_PER_S; i++) {
		ck_assert(netlog_window_take(&w, t + (uint64_t)i, &ended));
		ck_assert_uint_eq(ended, 0);
	}
	for (int i = 0; i < 100; i++)
		ck_assert(!netlog_window_take(&w, t + s / 2, &ended));
	ck_assert_uint_eq(netlog_window_flush(&w, t + s - 1), 0); /* not over yet */
	/* the next second: first the old window's count, then lines again */
	ck_assert(netlog_window_take(&w, t + s, &ended));
	ck_assert_uint_eq(ended, 100);
	ck_assert(netlog_window_take(&w, t + s, &ended));
	ck_assert_uint_eq(ended, 0);
	ck_assert_uint_eq(w.lines, 2);
	/* a window ended with nothing suppressed says nothing */
	struct netlog_window q = {0};
	ck_assert(netlog_window_take(&q, t, &ended));
	ck_assert_uint_eq(netlog_window_flush(&q, t + 2 * s), 0);
	ck_assert_uint_eq(q.lines, 0);
	/* the sweep's flush of a full window once its second ended */
	for (int i = 0; i < NETLOG_LINES_PER_S + 3; i++)
		netlog_window_take(&q, t + 3 * s, &ended);
	ck_assert_uint_eq(netlog_window_flush(&q, t + 4 * s), 3);
	ck_assert_uint_eq(q.suppressed, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("netlog");
	TCase *tc = tcase_create("netlog");
	tcase_add_test(tc, test_tcp_blocked);
	tcase_add_test(tc, test_reasons_and_protocols);
	tcase_add_test(tc, test_short_headers);
	tcase_add_test(tc, test_other_prefixes);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_describe_bounded);
	tcase_add_test(tc, test_window);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
