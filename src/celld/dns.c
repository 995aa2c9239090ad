/* The DNS wire format for celld's resolver (dns.h). Every read is bounds-checked. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dns.h"

#define FLAG_QR	      0x8000
#define FLAG_RD	      0x0100
#define FLAG_RA	      0x0080
#define OPCODE(flags) (((flags) >> 11) & 0xF)
#define MAX_CHAIN     9 /* the question's name and up to 8 CNAMEs after it */

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c;
}

/* Read the name at off into out (wire form, lowered, uncompressed, <= DNS_WIRE_MAX bytes).
 * *next is where the name ends in the message (after its first pointer, if any). With
 * !allow_ptr a compression pointer is malformed. A pointer must point into the message
 * after the header and before itself, and at most DNS_MAX_JUMPS are followed: a loop ends
 * as an error, however it is built. */
static int read_name(const uint8_t *msg, size_t len, size_t off, bool allow_ptr, uint8_t *out,
		     size_t *out_len, size_t *next)
{
	size_t o = 0, pos = off;
	int jumps = 0;
	bool jumped = false;
	for (;;) {
		if (pos >= len)
			return -EBADMSG;
		uint8_t c = msg[pos];
		if ((c & 0xC0) == 0xC0) {
			if (!allow_ptr || pos + 1 >= len)
				return -EBADMSG;
			size_t target = (size_t)(c & 0x3F) << 8 | msg[pos + 1];
			if (target < DNS_HEADER_LEN || target >= pos || ++jumps > DNS_MAX_JUMPS)
				return -EBADMSG;
			if (!jumped)
				*next = pos + 2;
			jumped = true;
			pos = target;
			continue;
		}
		if (c & 0xC0) /* 0x40, 0x80: extended label types, never in use */
			return -EBADMSG;
		if (c == 0) {
			out[o++] = 0;
			*out_len = o;
			if (!jumped)
				*next = pos + 1;
			return 0;
		}
		/* The label and, after it, room for at least the final zero byte. */
		if (len - pos - 1 < c || o + 1 + c + 1 > DNS_WIRE_MAX)
			return -EBADMSG;
		out[o++] = c;
		for (size_t i = 0; i < c; i++)
			out[o++] = lower(msg[pos + 1 + i]);
		pos += 1 + (size_t)c;
	}
}

/* The dotted text of a wire name, when every label is of [a-z0-9_-] (the wire form is
 * already lowered) and the text fits DNS_NAME_MAX. */
static int wire_to_text(const uint8_t *wire, size_t wire_len, char *out)
{
	size_t o = 0, pos = 0;
	while (pos < wire_len && wire[pos] != 0) {
		uint8_t n = wire[pos++];
		if (o > 0)
			out[o++] = '.';
		for (uint8_t i = 0; i < n; i++) {
			uint8_t c = wire[pos++];
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			      c == '_')) {
				out[0] = '\0';
				return -EINVAL;
			}
			out[o++] = (char)c;
		}
	}
	if (o == 0 || o > DNS_NAME_MAX) {
		out[0] = '\0';
		return -EINVAL;
	}
	out[o] = '\0';
	return 0;
}

/* One resource record at *pos: its owner name into owner, its fixed fields, its rdata's
 * place; *pos moves past it. Every byte of it lies inside the message. */
struct rr {
	uint8_t owner[DNS_WIRE_MAX];
	size_t owner_len;
	uint16_t type, class;
	uint32_t ttl;
	size_t rdata, rdlen;
};

static int read_rr(const uint8_t *msg, size_t len, size_t *pos, bool allow_ptr, struct rr *rr)
{
	size_t p;
	int rc = read_name(msg, len, *pos, allow_ptr, rr->owner, &rr->owner_len, &p);
	if (rc < 0)
		return rc;
	if (len - p < 10)
		return -EBADMSG;
	rr->type = get16(msg + p);
	rr->class = get16(msg + p + 2);
	rr->ttl = get32(msg + p + 4);
	rr->rdlen = get16(msg + p + 8);
	rr->rdata = p + 10;
	if (len - rr->rdata < rr->rdlen)
		return -EBADMSG;
	*pos = rr->rdata + rr->rdlen;
	return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q)
{
	memset(q, 0, sizeof(*q));
	if (len < DNS_HEADER_LEN || len > DNS_QUERY_MAX)
		return -EBADMSG;
	q->id = get16(msg);
	q->flags = get16(msg + 2);
	if ((q->flags & FLAG_QR) || OPCODE(q->flags) != 0)
		return -EBADMSG;
	if (get16(msg + 4) != 1 || get16(msg + 6) != 0 || get16(msg + 8) != 0 ||
	    get16(msg + 10) > 1)
		return -EBADMSG;
	size_t p;
	int rc = read_name(msg, len, DNS_HEADER_LEN, false, q->wire, &q->wire_len, &p);
	if (rc < 0)
		return rc;
	if (len - p < 4)
		return -EBADMSG;
	q->qtype = get16(msg + p);
	q->qclass = get16(msg + p + 2);
	q->question_end = p + 4;
	size_t end = q->question_end;
	if (get16(msg + 10) == 1) {
		struct rr opt;
		rc = read_rr(msg, len, &end, false, &opt);
		if (rc < 0)
			return rc;
		if (opt.type != DNS_TYPE_OPT || opt.owner_len != 1)
			return -EBADMSG;
	}
	if (end != len)
		return -EBADMSG;
	return wire_to_text(q->wire, q->wire_len, q->name);
}

int dns_build_reply(const uint8_t *msg, const struct dns_query *q, unsigned rcode, uint8_t *out,
		    size_t size)
{
	if (q->question_end < DNS_HEADER_LEN || q->question_end > DNS_QUERY_MAX ||
	    size < q->question_end)
		return -ENOSPC;
	memcpy(out, msg, q->question_end);
	put16(out, q->id);
	put16(out + 2, (uint16_t)(FLAG_QR | (q->flags & FLAG_RD) | FLAG_RA | (rcode & 0xF)));
	put16(out + 4, 1);
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return (int)q->question_end;
}

int dns_build_refused(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size)
{
	return dns_build_reply(msg, q, DNS_RCODE_REFUSED, out, size);
}

int dns_build_nodata(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size)
{
	return dns_build_reply(msg, q, DNS_RCODE_NOERROR, out, size);
}

int dns_build_servfail(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size)
{
	return dns_build_reply(msg, q, DNS_RCODE_SERVFAIL, out, size);
}

static bool wire_eq(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
	return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The CNAME chain from the question's name: chain[0] is that name, each next one the
 * target of a CNAME owned by the one before (class IN). A name already in the chain ends
 * it (a CNAME loop), as does MAX_CHAIN. *ttl is the smallest TTL of the CNAMEs used. */
struct chain {
	uint8_t names[MAX_CHAIN][DNS_WIRE_MAX];
	size_t lens[MAX_CHAIN];
	size_t n;
};

static bool in_chain(const struct chain *c, const uint8_t *w, size_t w_len)
{
	for (size_t i = 0; i < c->n; i++)
		if (wire_eq(c->names[i], c->lens[i], w, w_len))
			return true;
	return false;
}

int dns_parse_response(const uint8_t *msg, size_t len, const struct dns_query *q,
		       struct dns_answer *out)
{
	memset(out, 0, sizeof(*out));
	if (len < DNS_HEADER_LEN)
		return -EBADMSG;
	uint16_t flags = get16(msg + 2);
	if (!(flags & FLAG_QR) || OPCODE(flags) != 0 || get16(msg + 4) != 1)
		return -EBADMSG;
	out->id = get16(msg);
	out->rcode = flags & 0xF;
	size_t ancount = get16(msg + 6);
	if (ancount > DNS_MAX_RRS)
		return -EBADMSG;

	uint8_t qname[DNS_WIRE_MAX];
	size_t qname_len, p;
	int rc = read_name(msg, len, DNS_HEADER_LEN, true, qname, &qname_len, &p);
	if (rc < 0)
		return rc;
	if (len - p < 4)
		return -EBADMSG;
	if (!wire_eq(qname, qname_len, q->wire, q->wire_len) || get16(msg + p) != q->qtype ||
	    get16(msg + p + 2) != q->qclass)
		return -EBADMSG;
	size_t answers = p + 4;

	/* Pass 1: every answer record lies inside the message. */
	struct rr rr;
	size_t pos = answers;
	for (size_t i = 0; i < ancount; i++) {
		rc = read_rr(msg, len, &pos, true, &rr);
		if (rc < 0)
			return rc;
	}

	/* Pass 2: the CNAME chain, one step per walk (a chain may come in any order). */
	struct chain chain;
	chain.n = 1;
	memcpy(chain.names[0], q->wire, q->wire_len);
	chain.lens[0] = q->wire_len;
	uint32_t min_ttl = UINT32_MAX;
	bool grew = true;
	while (grew && chain.n < MAX_CHAIN) {
		grew = false;
		pos = answers;
		for (size_t i = 0; i < ancount && !grew; i++) {
			if (read_rr(msg, len, &pos, true, &rr) < 0)
				return -EBADMSG;
			if (rr.type != DNS_TYPE_CNAME || rr.class != DNS_CLASS_IN ||
			    !wire_eq(rr.owner, rr.owner_len, chain.names[chain.n - 1],
				     chain.lens[chain.n - 1]))
				continue;
			uint8_t target[DNS_WIRE_MAX];
			size_t target_len, end;
			if (read_name(msg, len, rr.rdata, true, target, &target_len, &end) < 0 ||
			    end != rr.rdata + rr.rdlen)
				return -EBADMSG;
			if (in_chain(&chain, target, target_len))
				break; /* a loop: the chain ends here */
			memcpy(chain.names[chain.n], target, target_len);
			chain.lens[chain.n++] = target_len;
			if (rr.ttl < min_ttl)
				min_ttl = rr.ttl;
			grew = true;
		}
	}

	/* Pass 3: the A records of names in the chain. */
	pos = answers;
	for (size_t i = 0; i < ancount; i++) {
		if (read_rr(msg, len, &pos, true, &rr) < 0)
			return -EBADMSG;
		if (rr.type != DNS_TYPE_A || rr.class != DNS_CLASS_IN || rr.rdlen != 4 ||
		    !in_chain(&chain, rr.owner, rr.owner_len) || out->n_addrs == DNS_MAX_ADDRS)
			continue;
		memcpy(&out->addrs[out->n_addrs++].s_addr, msg + rr.rdata, 4);
		if (rr.ttl < min_ttl)
			min_ttl = rr.ttl;
	}
	/* RFC 2181: a TTL with its top bit set is 0. */
	out->min_ttl = out->n_addrs == 0 ? 0 : min_ttl > 0x7FFFFFFF ? 0 : min_ttl;
	return 0;
}

void dns_set_id(uint8_t *msg, size_t len, uint16_t id)
{
	if (len >= 2)
		put16(msg, id);
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int dns_pattern_normalize(const char *pattern, char *out, size_t size)
{
	size_t len = strnlen(pattern, DNS_NAME_MAX + 4);
	if (len > 0 && pattern[len - 1] == '.')
		len--;
	bool wild = len >= 2 && pattern[0] == '*' && pattern[1] == '.';
	size_t start = wild ? 2 : 0;
	if (len <= start || len - start > DNS_NAME_MAX || len + 1 > size)
		return -EINVAL;
	size_t label = 0;
	for (size_t i = start; i < len; i++) {
		char c = (char)lower((uint8_t)pattern[i]);
		if (c == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
		} else if (!label_char(c) || ++label > DNS_LABEL_MAX) {
			return -EINVAL;
		}
		out[i] = c;
	}
	if (label == 0)
		return -EINVAL;
	if (wild) {
		out[0] = '*';
		out[1] = '.';
	}
	out[len] = '\0';
	return 0;
}

bool dns_pattern_match(const char *pattern, const char *name)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		const char *suffix = pattern + 1; /* ".example.com" */
		size_t s = strlen(suffix), n = strlen(name);
		return n > s && strcmp(name + n - s, suffix) == 0;
	}
	return strcmp(pattern, name) == 0;
}

const char *dns_type_name(uint16_t type, char *buf, size_t size)
{
	static const struct {
		uint16_t type;
		const char *name;
	} names[] = {{1, "A"},	  {2, "NS"},	{5, "CNAME"},  {6, "SOA"},
		     {12, "PTR"}, {15, "MX"},	{16, "TXT"},   {28, "AAAA"},
		     {33, "SRV"}, {64, "SVCB"}, {65, "HTTPS"}, {255, "ANY"}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].type == type)
			return names[i].name;
	snprintf(buf, size, "TYPE%u", (unsigned)type);
	return buf;
}
