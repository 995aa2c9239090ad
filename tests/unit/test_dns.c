/* The DNS wire format of celld's resolver (src/celld/dns.c): queries from a sandbox and
 * responses from upstream are hostile bytes. Valid messages parse; every kind of malformed
 * one (truncated anywhere, counts that lie, compression pointers in a query, pointer loops,
 * pointers forward or out of the message, labels of 64+ bytes, names past 255 bytes, rdata
 * past the end) is refused without reading outside the buffer; replies are built right;
 * rule patterns match as OpenSandbox's egress sidecar does ("*.x" not the apex x). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "../../src/celld/dns.h"
#include "unit.h"

/* A message under construction. */
struct mb {
	uint8_t b[8192];
	size_t n;
};

static void u8(struct mb *m, unsigned v)
{
	ck_assert_uint_lt(m->n, sizeof(m->b));
	m->b[m->n++] = (uint8_t)v;
}

static void u16(struct mb *m, unsigned v)
{
	u8(m, v >> 8);
	u8(m, v & 0xff);
}

static void u32(struct mb *m, uint32_t v)
{
	u16(m, v >> 16);
	u16(m, v & 0xffff);
}

/* Dotted text as labels and the final zero ("" is the root). */
static void name(struct mb *m, const char *text)
{
	while (*text) {
		const char *dot = strchr(text, '.');
		size_t n = dot ? (size_t)(dot - text) : strlen(text);
		u8(m, (unsigned)n);
		for (size_t i = 0; i < n; i++)
			u8(m, (uint8_t)text[i]);
		text += n + (dot ? 1 : 0);
	}
	u8(m, 0);
}

static void ptr(struct mb *m, unsigned off)
{
	u16(m, 0xC000 | off);
}

static void header(struct mb *m, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns,
		   unsigned ar)
{
	m->n = 0;
	u16(m, id);
	u16(m, flags);
	u16(m, qd);
	u16(m, an);
	u16(m, ns);
	u16(m, ar);
}

static void opt(struct mb *m)
{
	u8(m, 0);
	u16(m, DNS_TYPE_OPT);
	u16(m, 1232);
	u32(m, 0);
	u16(m, 0);
}

/* A query for text/type, RD set, with an OPT record when edns. */
static void query(struct mb *m, unsigned id, const char *text, unsigned type, bool edns)
{
	header(m, id, 0x0100, 1, 0, 0, edns ? 1 : 0);
	name(m, text);
	u16(m, type);
	u16(m, DNS_CLASS_IN);
	if (edns)
		opt(m);
}

static int parse_q(const struct mb *m, struct dns_query *q)
{
	return dns_parse_query(m->b, m->n, q);
}

/* A record: owner as a pointer to off (or text when off is 0). */
static void rr_a(struct mb *m, unsigned off, const char *owner, uint32_t ttl, const char *addr)
{
	if (off)
		ptr(m, off);
	else
		name(m, owner);
	u16(m, DNS_TYPE_A);
	u16(m, DNS_CLASS_IN);
	u32(m, ttl);
	u16(m, 4);
	struct in_addr a;
	ck_assert_int_eq(inet_pton(AF_INET, addr, &a), 1);
	memcpy(m->b + m->n, &a, 4);
	m->n += 4;
}

static void rr_cname(struct mb *m, const char *owner, uint32_t ttl, const char *target)
{
	name(m, owner);
	u16(m, DNS_TYPE_CNAME);
	u16(m, DNS_CLASS_IN);
	u32(m, ttl);
	size_t at = m->n;
	u16(m, 0);
	name(m, target);
	m->b[at] = (uint8_t)((m->n - at - 2) >> 8);
	m->b[at + 1] = (uint8_t)(m->n - at - 2);
}

/* The response's header and question for q's name (QR, RD, RA; rcode). */
static void response(struct mb *m, unsigned id, const char *text, unsigned type, unsigned an,
		     unsigned rcode)
{
	header(m, id, 0x8180 | rcode, 1, an, 0, 0);
	name(m, text);
	u16(m, type);
	u16(m, DNS_CLASS_IN);
}

static void parsed_query(const char *text, unsigned type, struct dns_query *q)
{
	struct mb m;
	query(&m, 0x1234, text, type, false);
	ck_assert_int_eq(parse_q(&m, q), 0);
}

static char *addr_text(struct in_addr a)
{
	static char buf[4][INET_ADDRSTRLEN];
	static int i;
	i = (i + 1) % 4;
	inet_ntop(AF_INET, &a, buf[i], sizeof(buf[i]));
	return buf[i];
}

START_TEST(query_parses)
{
	struct mb m;
	struct dns_query q;
	query(&m, 0xbeef, "WWW.Example.COM", DNS_TYPE_A, false);
	ck_assert_int_eq(parse_q(&m, &q), 0);
	ck_assert_uint_eq(q.id, 0xbeef);
	ck_assert_uint_eq(q.flags, 0x0100);
	ck_assert_uint_eq(q.qtype, DNS_TYPE_A);
	ck_assert_uint_eq(q.qclass, DNS_CLASS_IN);
	ck_assert_str_eq(q.name, "www.example.com");
	ck_assert_uint_eq(q.question_end, m.n);
	ck_assert_uint_eq(q.wire_len, 17);
	ck_assert_mem_eq(q.wire, "\3www\7example\3com", 17);

	query(&m, 1, "a_b-c.d9", DNS_TYPE_AAAA, true); /* with EDNS */
	ck_assert_int_eq(parse_q(&m, &q), 0);
	ck_assert_str_eq(q.name, "a_b-c.d9");
	ck_assert_uint_eq(q.qtype, DNS_TYPE_AAAA);
	ck_assert_uint_eq(q.question_end, m.n - 11);
}
END_TEST

START_TEST(query_truncated_anywhere)
{
	struct mb m;
	struct dns_query q;
	for (int edns = 0; edns < 2; edns++) {
		query(&m, 7, "www.example.com", DNS_TYPE_A, edns);
		for (size_t len = 0; len < m.n; len++)
			ck_assert_msg(dns_parse_query(m.b, len, &q) == -EBADMSG,
				      "%zu of %zu bytes accepted", len, m.n);
		/* and a byte too many */
		m.b[m.n++] = 0;
		ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	}
}
END_TEST

START_TEST(query_header_refused)
{
	struct mb m;
	struct dns_query q;
	static const struct {
		unsigned flags, qd, an, ns, ar;
		const char *what;
	} bad[] = {
	    {0x8100, 1, 0, 0, 0, "a response (QR)"},	{0x0900, 1, 0, 0, 0, "opcode 1"},
	    {0x2900, 1, 0, 0, 0, "opcode UPDATE"},	{0x0100, 0, 0, 0, 0, "QDCOUNT 0"},
	    {0x0100, 2, 0, 0, 0, "QDCOUNT 2"},		{0x0100, 1, 1, 0, 0, "an answer"},
	    {0x0100, 1, 0, 1, 0, "an authority"},	{0x0100, 1, 0, 0, 2, "two additionals"},
	    {0x0100, 0xffff, 0, 0, 0, "QDCOUNT 65535"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		header(&m, 1, bad[i].flags, bad[i].qd, bad[i].an, bad[i].ns, bad[i].ar);
		name(&m, "example.com");
		u16(&m, 1);
		u16(&m, 1);
		ck_assert_msg(parse_q(&m, &q) == -EBADMSG, "%s accepted", bad[i].what);
	}
	/* QDCOUNT 2 with both questions present */
	header(&m, 1, 0x0100, 2, 0, 0, 0);
	for (int k = 0; k < 2; k++) {
		name(&m, "example.com");
		u16(&m, 1);
		u16(&m, 1);
	}
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	/* an additional record that is not an OPT (a TSIG, an A) */
	query(&m, 1, "example.com", 1, false);
	m.b[11] = 1;
	rr_a(&m, 0, "x", 60, "192.0.2.1");
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	/* an OPT with rdata past the end */
	query(&m, 1, "example.com", 1, true);
	m.b[m.n - 1] = 4;
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	/* bigger than DNS_QUERY_MAX */
	query(&m, 1, "example.com", 1, true);
	m.b[m.n - 1] = (uint8_t)(DNS_QUERY_MAX - m.n + 1);
	m.n += DNS_QUERY_MAX - m.n + 1;
	ck_assert_uint_gt(m.n, DNS_QUERY_MAX);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
}
END_TEST

START_TEST(query_pointer_refused)
{
	struct mb m;
	struct dns_query q;
	header(&m, 1, 0x0100, 1, 0, 0, 0);
	u8(&m, 3);
	u8(&m, 'w');
	u8(&m, 'w');
	u8(&m, 'w');
	ptr(&m, 12);
	u16(&m, 1);
	u16(&m, 1);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	header(&m, 1, 0x0100, 1, 0, 0, 0);
	ptr(&m, 12); /* a pointer to itself */
	u16(&m, 1);
	u16(&m, 1);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
}
END_TEST

static void label_query(struct mb *m, size_t label, int count)
{
	header(m, 1, 0x0100, 1, 0, 0, 0);
	for (int k = 0; k < count; k++) {
		u8(m, (unsigned)label);
		for (size_t i = 0; i < label; i++)
			u8(m, 'a');
	}
	u8(m, 0);
	u16(m, 1);
	u16(m, 1);
}

START_TEST(query_label_and_name_lengths)
{
	struct mb m;
	struct dns_query q;
	label_query(&m, 63, 1);
	ck_assert_int_eq(parse_q(&m, &q), 0);
	ck_assert_uint_eq(strlen(q.name), 63);
	label_query(&m, 64, 1); /* 0x40: an extended label type */
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	label_query(&m, 0x80, 1);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	/* 63.63.63.61 = 253 characters, 255 bytes on the wire: the longest name */
	header(&m, 1, 0x0100, 1, 0, 0, 0);
	size_t lens[] = {63, 63, 63, 61};
	for (int k = 0; k < 4; k++) {
		u8(&m, (unsigned)lens[k]);
		for (size_t i = 0; i < lens[k]; i++)
			u8(&m, 'b');
	}
	u8(&m, 0);
	u16(&m, 1);
	u16(&m, 1);
	ck_assert_int_eq(parse_q(&m, &q), 0);
	ck_assert_uint_eq(strlen(q.name), DNS_NAME_MAX);
	ck_assert_uint_eq(q.wire_len, DNS_WIRE_MAX);
	/* one more byte: 256 on the wire */
	header(&m, 1, 0x0100, 1, 0, 0, 0);
	lens[3] = 62;
	for (int k = 0; k < 4; k++) {
		u8(&m, (unsigned)lens[k]);
		for (size_t i = 0; i < lens[k]; i++)
			u8(&m, 'b');
	}
	u8(&m, 0);
	u16(&m, 1);
	u16(&m, 1);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
	/* 200 labels of one byte: 400 bytes */
	label_query(&m, 1, 200);
	ck_assert_int_eq(parse_q(&m, &q), -EBADMSG);
}
END_TEST

START_TEST(query_name_characters)
{
	struct mb m;
	struct dns_query q;
	const char *bad[] = {"a b.com", "*.com", "a/b", "caf\xc3\xa9.fr", "a;b", "a\\b", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		query(&m, 9, bad[i], 1, false);
		ck_assert_msg(parse_q(&m, &q) == -EINVAL, "'%s' not -EINVAL", bad[i]);
		/* the question is still known, for a REFUSED */
		ck_assert_uint_eq(q.question_end, m.n);
		ck_assert_uint_eq(q.id, 9);
		ck_assert_str_eq(q.name, "");
	}
	/* a NUL inside a label */
	header(&m, 1, 0x0100, 1, 0, 0, 0);
	u8(&m, 3);
	u8(&m, 'a');
	u8(&m, 0);
	u8(&m, 'b');
	u8(&m, 0);
	u16(&m, 1);
	u16(&m, 1);
	ck_assert_int_eq(parse_q(&m, &q), -EINVAL);
}
END_TEST

START_TEST(replies_built)
{
	struct mb m;
	struct dns_query q;
	query(&m, 0xabcd, "Host.Test", DNS_TYPE_AAAA, true);
	ck_assert_int_eq(parse_q(&m, &q), 0);
	uint8_t out[512];
	struct {
		int (*fn)(const uint8_t *, const struct dns_query *, uint8_t *, size_t);
		unsigned rcode;
	} kinds[] = {{dns_build_refused, 5}, {dns_build_nodata, 0}, {dns_build_servfail, 2}};
	for (size_t k = 0; k < 3; k++) {
		memset(out, 0xee, sizeof(out));
		int n = kinds[k].fn(m.b, &q, out, sizeof(out));
		ck_assert_int_eq(n, (int)q.question_end);
		ck_assert_uint_eq(out[0] << 8 | out[1], 0xabcd);
		ck_assert_uint_eq(out[2] << 8 | out[3], 0x8180 | kinds[k].rcode);
		ck_assert_mem_eq(out + 4, "\0\1\0\0\0\0\0\0", 8);
		ck_assert_mem_eq(out + 12, m.b + 12, q.question_end - 12); /* the question */
		/* and it parses as a response to the query */
		struct dns_answer a;
		ck_assert_int_eq(dns_parse_response(out, (size_t)n, &q, &a), 0);
		ck_assert_uint_eq(a.rcode, kinds[k].rcode);
		ck_assert_uint_eq(a.n_addrs, 0);
		ck_assert_int_eq(kinds[k].fn(m.b, &q, out, q.question_end - 1), -ENOSPC);
	}
	/* RD is echoed only when asked */
	m.b[2] = 0;
	ck_assert_int_eq(parse_q(&m, &q), 0);
	ck_assert_int_gt(dns_build_refused(m.b, &q, out, sizeof(out)), 0);
	ck_assert_uint_eq(out[2] << 8 | out[3], 0x8085);
}
END_TEST

START_TEST(response_addresses_and_ttl)
{
	struct dns_query q;
	parsed_query("www.example.com", DNS_TYPE_A, &q);
	struct mb m;
	response(&m, 0x4242, "WWW.EXAMPLE.com", DNS_TYPE_A, 3, 0);
	rr_a(&m, 12, NULL, 300, "192.0.2.10");
	rr_a(&m, 0, "www.example.COM", 120, "192.0.2.11");
	rr_a(&m, 0, "other.example.com", 5, "192.0.2.66"); /* not the answer */
	struct dns_answer a;
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.id, 0x4242);
	ck_assert_uint_eq(a.rcode, 0);
	ck_assert_uint_eq(a.n_addrs, 2);
	ck_assert_str_eq(addr_text(a.addrs[0]), "192.0.2.10");
	ck_assert_str_eq(addr_text(a.addrs[1]), "192.0.2.11");
	ck_assert_uint_eq(a.min_ttl, 120);
	for (size_t len = 0; len < m.n; len++)
		ck_assert_msg(dns_parse_response(m.b, len, &q, &a) == -EBADMSG,
			      "%zu of %zu bytes accepted", len, m.n);

	/* records that are not IN A of rdlength 4 are not addresses; a TTL with its top bit
	 * set counts as 0 */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 3, 0);
	size_t at = m.n;
	rr_a(&m, 12, NULL, 60, "192.0.2.1");
	m.b[at + 4] = 3; /* class CH */
	name(&m, "www.example.com");
	u16(&m, DNS_TYPE_A);
	u16(&m, DNS_CLASS_IN);
	u32(&m, 60);
	u16(&m, 5);
	for (int i = 0; i < 5; i++)
		u8(&m, 1);
	rr_a(&m, 12, NULL, 0x80000001u, "192.0.2.2");
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.n_addrs, 1);
	ck_assert_str_eq(addr_text(a.addrs[0]), "192.0.2.2");
	ck_assert_uint_eq(a.min_ttl, 0);

	/* NXDOMAIN: no records, the rcode */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 0, DNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(a.n_addrs, 0);
	ck_assert_uint_eq(a.min_ttl, 0);
}
END_TEST

START_TEST(response_cname_chain)
{
	struct dns_query q;
	parsed_query("www.example.com", DNS_TYPE_A, &q);
	struct mb m;
	/* out of order: the A, then the second CNAME, then the first */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 4, 0);
	rr_a(&m, 0, "edge.cdn.test", 600, "198.51.100.7");
	rr_cname(&m, "alias.example.net", 90, "edge.cdn.test");
	rr_cname(&m, "www.example.com", 3000, "alias.example.net");
	rr_a(&m, 0, "unrelated.test", 1, "198.51.100.99");
	struct dns_answer a;
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.n_addrs, 1);
	ck_assert_str_eq(addr_text(a.addrs[0]), "198.51.100.7");
	ck_assert_uint_eq(a.min_ttl, 90); /* the CNAME on the way counts */

	/* a CNAME loop ends the chain; nothing is collected and nothing hangs */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 3, 0);
	rr_cname(&m, "www.example.com", 60, "b.test");
	rr_cname(&m, "b.test", 60, "www.example.com");
	rr_a(&m, 0, "c.test", 60, "198.51.100.1");
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.n_addrs, 0);

	/* a CNAME whose target runs past its rdata */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	size_t before = m.n;
	rr_cname(&m, "www.example.com", 60, "b.test");
	m.b[before + 17 + 8 + 1] -= 1; /* rdlength 7 for a target of 8 bytes */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
}
END_TEST

START_TEST(response_pointer_abuse)
{
	struct dns_query q;
	parsed_query("www.example.com", DNS_TYPE_A, &q);
	struct dns_answer a;
	struct mb m;
	size_t answers;
	/* a pointer to itself */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	answers = m.n;
	ptr(&m, (unsigned)answers);
	u16(&m, 1);
	u16(&m, 1);
	u32(&m, 1);
	u16(&m, 4);
	u32(&m, 0x01020304);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* two pointers at each other: the second points back to the first (legal direction),
	 * the first forward to the second */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 2, 0);
	answers = m.n;
	ptr(&m, (unsigned)answers + 14);
	u16(&m, 1);
	u16(&m, 1);
	u32(&m, 1);
	u16(&m, 0);
	ptr(&m, (unsigned)answers);
	u16(&m, 1);
	u16(&m, 1);
	u32(&m, 1);
	u16(&m, 0);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* a label whose pointer leads back to the label: a loop going backwards */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	answers = m.n;
	u8(&m, 1);
	u8(&m, 'x');
	ptr(&m, (unsigned)answers);
	u16(&m, 1);
	u16(&m, 1);
	u32(&m, 1);
	u16(&m, 0);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* a pointer past the end, into the header, half a pointer at the end */
	unsigned targets[] = {0x3fff, 2, 0};
	for (size_t i = 0; i < 3; i++) {
		response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
		if (i == 2) {
			u8(&m, 0xC0);
		} else {
			ptr(&m, targets[i]);
			u16(&m, 1);
			u16(&m, 1);
			u32(&m, 1);
			u16(&m, 0);
		}
		ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	}
	/* a chain of 40 pointers, each to the one before: past DNS_MAX_JUMPS */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	size_t prev = 12;
	for (int i = 0; i < 40; i++) {
		size_t here = m.n;
		ptr(&m, (unsigned)prev);
		prev = here;
	}
	/* the answer record's owner: the last pointer */
	ptr(&m, (unsigned)prev);
	u16(&m, 1);
	u16(&m, 1);
	u32(&m, 1);
	u16(&m, 0);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* the 0x40/0x80 label types */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	u8(&m, 0x41);
	u8(&m, 0);
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
}
END_TEST

START_TEST(response_not_answering_query)
{
	struct dns_query q;
	parsed_query("www.example.com", DNS_TYPE_A, &q);
	struct dns_answer a;
	struct mb m;
	response(&m, 1, "www.example.org", DNS_TYPE_A, 0, 0); /* another name */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	response(&m, 1, "www.example.com", DNS_TYPE_AAAA, 0, 0); /* another type */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	response(&m, 1, "www.example.com", DNS_TYPE_A, 0, 0);
	m.b[m.n - 1] = 3; /* another class */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	response(&m, 1, "www.example.com", DNS_TYPE_A, 0, 0);
	m.b[2] &= 0x7f; /* not a response */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	response(&m, 1, "www.example.com", DNS_TYPE_A, 0, 0);
	m.b[5] = 2; /* QDCOUNT 2 */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	response(&m, 1, "www.example.com", DNS_TYPE_A, 0, 0);
	m.b[2] |= 0x10; /* opcode 2 */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* an answer count the message does not hold */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 2, 0);
	rr_a(&m, 12, NULL, 60, "192.0.2.1");
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* more than DNS_MAX_RRS answers */
	response(&m, 1, "www.example.com", DNS_TYPE_A, DNS_MAX_RRS + 1, 0);
	for (int i = 0; i < DNS_MAX_RRS + 1; i++)
		rr_a(&m, 12, NULL, 60, "192.0.2.1");
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
	/* rdata running past the end */
	response(&m, 1, "www.example.com", DNS_TYPE_A, 1, 0);
	rr_a(&m, 12, NULL, 60, "192.0.2.1");
	m.b[m.n - 5] = 5;
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), -EBADMSG);
}
END_TEST

START_TEST(response_address_cap)
{
	struct dns_query q;
	parsed_query("many.test", DNS_TYPE_A, &q);
	struct mb m;
	response(&m, 1, "many.test", DNS_TYPE_A, 100, 0);
	for (int i = 0; i < 100; i++) {
		char addr[32];
		snprintf(addr, sizeof(addr), "10.0.0.%d", i);
		rr_a(&m, 12, NULL, 1000u - (unsigned)i, addr);
	}
	struct dns_answer a;
	ck_assert_int_eq(dns_parse_response(m.b, m.n, &q, &a), 0);
	ck_assert_uint_eq(a.n_addrs, DNS_MAX_ADDRS);
	ck_assert_str_eq(addr_text(a.addrs[DNS_MAX_ADDRS - 1]), "10.0.0.63");
	ck_assert_uint_eq(a.min_ttl, 1000 - 63);
}
END_TEST

START_TEST(set_id)
{
	uint8_t b[4] = {1, 2, 3, 4};
	dns_set_id(b, sizeof(b), 0xfeed);
	ck_assert_uint_eq(b[0], 0xfe);
	ck_assert_uint_eq(b[1], 0xed);
	ck_assert_uint_eq(b[2], 3);
	dns_set_id(b, 1, 0); /* too short: untouched */
	ck_assert_uint_eq(b[0], 0xfe);
}
END_TEST

static bool norm_ok(const char *in, const char *want)
{
	char out[DNS_NAME_MAX + 3];
	if (dns_pattern_normalize(in, out, sizeof(out)) != 0)
		return false;
	return strcmp(out, want) == 0;
}

static bool norm_refused(const char *in)
{
	char out[DNS_NAME_MAX + 3];
	return dns_pattern_normalize(in, out, sizeof(out)) == -EINVAL;
}

START_TEST(patterns)
{
	ck_assert(norm_ok("Example.COM", "example.com"));
	ck_assert(norm_ok("example.com.", "example.com"));
	ck_assert(norm_ok("*.Example.com", "*.example.com"));
	ck_assert(norm_ok("_srv.x-y.z9", "_srv.x-y.z9"));
	const char *bad[] = {"",	".",	   "*",	      "*.",	    "*.*.com",
			     "a..b",	".a",	   "a b",     "a/b",	    "*a.com",
			     "a.*.com", "a.com..", "ex*.com", "1.2.3.4/8x", "\xc3\xa9.fr"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(norm_refused(bad[i]), "'%s' accepted", bad[i]);
	char label[80], big[300];
	memset(label, 'a', 64);
	label[64] = '\0';
	ck_assert(norm_refused(label));
	label[63] = '\0';
	ck_assert(norm_ok(label, label));
	big[0] = '\0';
	for (int i = 0; i < 4; i++) { /* 63.63.63.63: 255 characters */
		strcat(big, label);
		if (i < 3)
			strcat(big, ".");
	}
	ck_assert(norm_refused(big));
	big[253] = '\0'; /* 63.63.63.61 */
	ck_assert(norm_ok(big, big));
	char small[8];
	ck_assert_int_eq(dns_pattern_normalize("example.com", small, sizeof(small)), -EINVAL);

	ck_assert(dns_pattern_match("example.com", "example.com"));
	ck_assert(!dns_pattern_match("example.com", "www.example.com"));
	ck_assert(!dns_pattern_match("example.com", "example.co"));
	ck_assert(dns_pattern_match("*.example.com", "www.example.com"));
	ck_assert(dns_pattern_match("*.example.com", "a.b.example.com"));
	ck_assert(!dns_pattern_match("*.example.com", "example.com")); /* not the apex */
	ck_assert(!dns_pattern_match("*.example.com", "badexample.com"));
	ck_assert(!dns_pattern_match("*.example.com", "example.com.evil.test"));
	ck_assert(!dns_pattern_match("*.example.com", "com"));
}
END_TEST

START_TEST(type_names)
{
	char buf[16];
	ck_assert_str_eq(dns_type_name(1, buf, sizeof(buf)), "A");
	ck_assert_str_eq(dns_type_name(28, buf, sizeof(buf)), "AAAA");
	ck_assert_str_eq(dns_type_name(65, buf, sizeof(buf)), "HTTPS");
	ck_assert_str_eq(dns_type_name(4242, buf, sizeof(buf)), "TYPE4242");
}
END_TEST

/* Random bytes and random mutations of valid messages: the parsers return, never crash,
 * and a query they accept is one the rules can name. (Under `make asan` any read outside
 * the buffer is an error.) */
START_TEST(random_input)
{
	srandom(20261124);
	struct dns_query q, good;
	parsed_query("www.example.com", DNS_TYPE_A, &good);
	struct mb base;
	response(&base, 1, "www.example.com", DNS_TYPE_A, 3, 0);
	rr_cname(&base, "www.example.com", 60, "e.test");
	rr_a(&base, 0, "e.test", 60, "192.0.2.1");
	rr_a(&base, 12, NULL, 60, "192.0.2.2");
	struct mb qbase;
	query(&qbase, 1, "www.example.com", 1, true);
	int accepted = 0;
	for (int round = 0; round < 200000; round++) {
		const struct mb *src = round & 1 ? &base : &qbase;
		size_t len = src->n;
		uint8_t *buf = malloc(len + 1);
		ck_assert_ptr_nonnull(buf);
		memcpy(buf, src->b, len);
		int flips = 1 + (int)(random() % 4);
		for (int f = 0; f < flips; f++)
			buf[random() % len] = (uint8_t)random();
		if (random() % 4 == 0)
			len = (size_t)random() % (len + 1);
		struct dns_answer a;
		if (round & 1) {
			if (dns_parse_response(buf, len, &good, &a) == 0) {
				ck_assert_uint_le(a.n_addrs, DNS_MAX_ADDRS);
				accepted++;
			}
		} else if (dns_parse_query(buf, len, &q) == 0) {
			ck_assert_uint_le(strlen(q.name), DNS_NAME_MAX);
			ck_assert_uint_le(q.question_end, len);
		}
		free(buf);
	}
	ck_assert_int_gt(accepted, 0); /* the mutations do not only make garbage */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dns");
	TCase *tc = tcase_create("dns");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, query_parses);
	tcase_add_test(tc, query_truncated_anywhere);
	tcase_add_test(tc, query_header_refused);
	tcase_add_test(tc, query_pointer_refused);
	tcase_add_test(tc, query_label_and_name_lengths);
	tcase_add_test(tc, query_name_characters);
	tcase_add_test(tc, replies_built);
	tcase_add_test(tc, response_addresses_and_ttl);
	tcase_add_test(tc, response_cname_chain);
	tcase_add_test(tc, response_pointer_abuse);
	tcase_add_test(tc, response_not_answering_query);
	tcase_add_test(tc, response_address_cap);
	tcase_add_test(tc, set_id);
	tcase_add_test(tc, patterns);
	tcase_add_test(tc, type_names);
	tcase_add_test(tc, random_input);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
