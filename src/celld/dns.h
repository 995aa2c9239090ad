/* The DNS wire format, as far as celld's resolver (resolver.c) needs it. Pure functions: no
 * I/O, no state, no allocation; unit suites link it alone (tests/unit/test_dns.c).
 *
 * Everything here reads hostile bytes: a query comes from inside a sandbox, a response from
 * an upstream server anyone on the path may spoof. No length, count or pointer of a message
 * is trusted: every read is checked against the message's end, a name is at most 255 bytes
 * on the wire, and a compression pointer must point before itself, inside the message, with
 * at most DNS_MAX_JUMPS jumps per name (so a loop ends as an error).
 *
 * Names are kept in two forms: the wire form (length-prefixed labels ending with a zero
 * byte, uncompressed, ASCII letters lowered), which is what messages compare, and, for a
 * query, the dotted text ("www.example.com", lowercase, no trailing dot) that rules match.
 *
 * Rule patterns follow OpenSandbox's egress sidecar (its domain index): "example.com"
 * matches exactly that name; "*.example.com" matches every name below example.com
 * ("a.example.com", "a.b.example.com") but NOT example.com itself (the apex needs its own
 * rule). Matching is on whole labels: "*.example.com" does not match "badexample.com". */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER_LEN 12
#define DNS_NAME_MAX   253 /* dotted text, without the trailing dot */
#define DNS_WIRE_MAX   255 /* a name on the wire, its final zero byte included */
#define DNS_LABEL_MAX  63
#define DNS_QUERY_MAX  512 /* the largest query accepted from a sandbox */
#define DNS_MAX_JUMPS  32  /* compression pointers followed in one name */
#define DNS_MAX_ADDRS  64  /* A records collected from one response; more are ignored */
#define DNS_MAX_RRS    256 /* answer records walked in one response; more: malformed */

#define DNS_TYPE_A     1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA  28
#define DNS_TYPE_OPT   41
#define DNS_CLASS_IN   1

#define DNS_RCODE_NOERROR  0
#define DNS_RCODE_FORMERR  1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED  5

/* A parsed query. The question is bytes [DNS_HEADER_LEN, question_end) of the message. */
struct dns_query {
	uint16_t id;
	uint16_t flags; /* the header's second 16 bits, as sent */
	uint16_t qtype, qclass;
	size_t question_end;
	uint8_t wire[DNS_WIRE_MAX]; /* the question's name, wire form, lowered */
	size_t wire_len;
	char name[DNS_NAME_MAX + 1]; /* dotted text; "" when dns_parse_query says -EINVAL */
};

/* Parse a query of len bytes. 0: a query this resolver handles, every field of q filled.
 * -EBADMSG: not a query to answer at all (shorter than a header or than it claims, a
 * response (QR set), opcode other than QUERY, QDCOUNT other than 1, any answer or
 * authority record, more than one additional record (an OPT), a compression pointer in
 * the question, a label of 64+ bytes, bytes after the last record, longer than
 * DNS_QUERY_MAX): the caller drops it. -EINVAL: a well-formed query whose name is not one
 * a rule can name (empty, a label outside [a-z0-9_-] after lowering, longer than
 * DNS_NAME_MAX): q is filled except name, and the caller may answer it (REFUSED). */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/* Build a reply to the query msg (parsed into q) with rcode and no records: header (id,
 * RD as asked, QR and RA set) and the question. Returns its length, or -ENOSPC when out
 * is smaller than it. dns_build_refused/_nodata/_servfail are its three uses. */
int dns_build_reply(const uint8_t *msg, const struct dns_query *q, unsigned rcode, uint8_t *out,
		    size_t size);
int dns_build_refused(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size);
int dns_build_nodata(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size);
int dns_build_servfail(const uint8_t *msg, const struct dns_query *q, uint8_t *out, size_t size);

/* What an upstream response says, for the resolver. */
struct dns_answer {
	uint16_t id;
	unsigned rcode;
	struct in_addr addrs[DNS_MAX_ADDRS]; /* A records (class IN, rdlength 4) of the name
						or of its CNAME chain, in message order */
	size_t n_addrs;
	uint32_t min_ttl; /* the smallest TTL of those A records and of the CNAMEs leading to
			     them; 0 when n_addrs is 0 */
};

/* Parse an upstream response to q: QR set, opcode QUERY, QDCOUNT 1, a question equal to q's
 * (name case-insensitively, type, class). The answer section is walked (compressed names
 * followed, every record inside the message); the A records collected are those owned by
 * the question's name or by a name the CNAME chain from it reaches (other records are not
 * the answer). 0, or -EBADMSG for anything malformed or not answering q (the caller
 * ignores it: a spoof or garbage). The id is returned, not checked: the caller knows which
 * one it sent. */
int dns_parse_response(const uint8_t *msg, size_t len, const struct dns_query *q,
		       struct dns_answer *out);

/* Set a message's id (its first two bytes); len must be at least 2. */
void dns_set_id(uint8_t *msg, size_t len, uint16_t id);

/* Check a rule pattern ("name" or "*.name": labels of [a-z0-9_-], either case, at most
 * DNS_NAME_MAX, one trailing dot allowed) and write it normalised (lowercase, no trailing
 * dot) into out[DNS_NAME_MAX + 3]. 0 or -EINVAL. */
int dns_pattern_normalize(const char *pattern, char *out, size_t size);

/* Whether the dotted name (lowercase, as dns_parse_query gives it) matches the normalised
 * pattern: see the top of this file. */
bool dns_pattern_match(const char *pattern, const char *name);

/* A query type's name for a log line: "A", "AAAA", … or "TYPE<n>" into buf. */
const char *dns_type_name(uint16_t type, char *buf, size_t size);
