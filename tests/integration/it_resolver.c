/* celld's DNS resolver (src/celld/resolver.c), driven through its API without a celld.
 * Root. Every test first moves itself into a fresh network namespace (unshare(CLONE_NEWNET)
 * in Check's forked child) and brings its loopback up: the resolver listens on 127.0.0.x:53
 * ("sandboxes" cell0, cell1, …), a fake upstream thread answers on 127.0.0.1:5300 from a
 * table (A records with chosen TTLs, a CNAME chain, NXDOMAIN, silence, spoofed replies, a
 * query held until the test answers it), and the test's own sockets play the sandboxes.
 * Tests assert orders and counts, never how long something took (the rate limit's bound,
 * read from the clock, only widens on a slower host). No packet can leave the namespace,
 * and everything goes with it when the test's process exits. The last test measures the
 * resolver's cost per query (printed, never asserted). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dns.h"
#include "harness.h"
#include "resolver.h"

#define UPSTREAM_PORT 5300
#define SB0	      "127.0.0.2"

/* ---- the namespace ---- */

static void fresh_netns(void)
{
	int r = h_netns_enter_private();
	ck_assert_msg(r == 0, "a fresh network namespace, lo up: %s", strerror(-r));
}

static struct in_addr ip(const char *text)
{
	struct in_addr a;
	ck_assert_int_eq(inet_pton(AF_INET, text, &a), 1);
	return a;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- message building (the test's own, not dns.c's) ---- */

struct msg {
	uint8_t b[1024];
	size_t n;
};

static void put8(struct msg *m, unsigned v)
{
	ck_assert_uint_lt(m->n, sizeof(m->b));
	m->b[m->n++] = (uint8_t)v;
}

static void put16(struct msg *m, unsigned v)
{
	put8(m, v >> 8);
	put8(m, v & 0xff);
}

static void put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void put_name(struct msg *m, const char *text)
{
	while (*text) {
		const char *dot = strchr(text, '.');
		size_t n = dot ? (size_t)(dot - text) : strlen(text);
		put8(m, (unsigned)n);
		for (size_t i = 0; i < n; i++)
			put8(m, (uint8_t)text[i]);
		text += n + (dot ? 1 : 0);
	}
	put8(m, 0);
}

static void build_query(struct msg *m, uint16_t id, const char *name, unsigned type)
{
	m->n = 0;
	put16(m, id);
	put16(m, 0x0100);
	put16(m, 1);
	put16(m, 0);
	put16(m, 0);
	put16(m, 0);
	put_name(m, name);
	put16(m, type);
	put16(m, 1);
}

/* ---- the fake upstream ---- */

enum fake_kind { F_A, F_CNAME, F_NXDOMAIN, F_SILENT, F_SPOOF, F_SPOOF_ONLY, F_SLOW, F_HELD };
struct fake {
	const char *name;
	enum fake_kind kind;
	const char *addrs[3];
	uint32_t ttl;
	const char *cname; /* F_CNAME: name CNAME cname (ttl 60), cname A addrs (ttl) */
};

static const struct fake fakes[] = {
    {"www.allowed.test", F_A, {"192.0.2.1", "192.0.2.2"}, 120, NULL},
    {"allowed.test", F_A, {"192.0.2.3"}, 10, NULL},
    {"a.b.allowed.test", F_A, {"192.0.2.4"}, 99999, NULL},
    {"alias.allowed.test", F_CNAME, {"198.51.100.7"}, 300, "edge.cdn.test"},
    {"nx.allowed.test", F_NXDOMAIN, {NULL}, 0, NULL},
    {"silent.allowed.test", F_SILENT, {NULL}, 0, NULL},
    {"spoof.allowed.test", F_SPOOF, {"192.0.2.9"}, 300, NULL},
    {"spoofonly.allowed.test", F_SPOOF_ONLY, {"192.0.2.9"}, 300, NULL},
    {"denied.test", F_A, {"203.0.113.5"}, 300, NULL},
    {"other.test", F_A, {"203.0.113.6"}, 300, NULL},
    {"slow.allowed.test", F_SLOW, {"192.0.2.20"}, 300, NULL}, /* answered after 500 ms */
    {"held.allowed.test", F_HELD, {"192.0.2.30"}, 300, NULL}, /* when the test says so */
};

static atomic_int upstream_queries;
static int upstream_fd = -1;

static void answer_a(struct msg *r, const char *owner, const char *addr, uint32_t ttl)
{
	put_name(r, owner);
	put16(r, 1);
	put16(r, 1);
	put32(r, ttl);
	put16(r, 4);
	struct in_addr a = ip(addr);
	memcpy(r->b + r->n, &a, 4);
	r->n += 4;
}

/* The reply header for query q (its id, its question copied). */
static void reply_start(struct msg *r, const uint8_t *q, size_t qend, unsigned rcode,
			unsigned ancount)
{
	memcpy(r->b, q, qend);
	r->n = qend;
	r->b[2] = 0x81;
	r->b[3] = (uint8_t)(0x80 | rcode);
	r->b[4] = 0;
	r->b[5] = 1;
	r->b[6] = 0;
	r->b[7] = (uint8_t)ancount;
	memset(r->b + 8, 0, 4);
}

/* The question of query q (n bytes): its name (uncompressed labels from byte 12), type and
 * end. False when q is too short to hold one. */
static bool question(const uint8_t *q, size_t n, char name[256], unsigned *type, size_t *qend)
{
	size_t p = 12, o = 0;
	while (p < n && q[p] != 0 && o + q[p] + 2 < 256) {
		if (o)
			name[o++] = '.';
		memcpy(name + o, q + p + 1, q[p]);
		o += q[p];
		p += 1 + q[p];
	}
	name[o] = '\0';
	*qend = p + 5;
	if (*qend > n)
		return false;
	*type = (unsigned)(q[p + 1] << 8 | q[p + 2]);
	return true;
}

static const struct fake *fake_named(const char *name)
{
	const struct fake *f = NULL;
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		if (strcasecmp(fakes[i].name, name) == 0)
			f = &fakes[i];
	return f;
}

/* The answer to q (its question ends at qend): f's addresses, the owner a pointer to the
 * question. */
static void reply_addrs(struct msg *r, const uint8_t *q, size_t qend, const struct fake *f)
{
	size_t na = 0;
	while (na < 3 && f->addrs[na])
		na++;
	reply_start(r, q, qend, 0, (unsigned)na);
	for (size_t i = 0; i < na; i++) {
		put16(r, 0xC00C);
		put16(r, 1);
		put16(r, 1);
		put32(r, f->ttl);
		put16(r, 4);
		struct in_addr a = ip(f->addrs[i]);
		memcpy(r->b + r->n, &a, 4);
		r->n += 4;
	}
}

/* A query of held.allowed.test, kept unanswered until held_release(). */
static struct {
	pthread_mutex_t lock;
	bool have;
	uint8_t q[1024];
	size_t qend;
	struct sockaddr_in from;
} held = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void held_keep(const uint8_t *q, size_t qend, const struct sockaddr_in *from)
{
	pthread_mutex_lock(&held.lock);
	memcpy(held.q, q, qend);
	held.qend = qend;
	held.from = *from;
	held.have = true;
	pthread_mutex_unlock(&held.lock);
}

/* Wait (a hang guard, 10 s) until the upstream holds the query, then answer it. */
static void held_release(void)
{
	bool have = false;
	for (int i = 0; i < 1000 && !have; i++) {
		pthread_mutex_lock(&held.lock);
		have = held.have;
		pthread_mutex_unlock(&held.lock);
		if (!have)
			usleep(10000);
	}
	ck_assert_msg(have, "the upstream never got the held query");
	struct msg r;
	pthread_mutex_lock(&held.lock);
	reply_addrs(&r, held.q, held.qend, fake_named("held.allowed.test"));
	ssize_t n =
	    sendto(upstream_fd, r.b, r.n, 0, (struct sockaddr *)&held.from, sizeof(held.from));
	pthread_mutex_unlock(&held.lock);
	ck_assert_int_eq(n, (ssize_t)r.n);
}

/* A reply with another id, then one for another question: both to be ignored. */
static void send_spoofs(const uint8_t *q, size_t qend, const char *name,
			const struct sockaddr_in *to)
{
	struct msg r;
	reply_start(&r, q, qend, 0, 1);
	r.b[0] ^= 0x5a;
	answer_a(&r, name, "6.6.6.6", 300);
	sendto(upstream_fd, r.b, r.n, 0, (const struct sockaddr *)to, sizeof(*to));
	reply_start(&r, q, qend, 0, 1);
	r.b[13] ^= 0x01; /* the first letter of the name */
	answer_a(&r, name, "6.6.6.7", 300);
	sendto(upstream_fd, r.b, r.n, 0, (const struct sockaddr *)to, sizeof(*to));
}

/* What the fake says to query q (n bytes) from: false when it says nothing. */
static bool fake_reply(struct msg *r, const uint8_t *q, size_t n, const struct sockaddr_in *from)
{
	char name[256];
	unsigned type;
	size_t qend;
	if (!question(q, n, name, &type, &qend))
		return false;
	const struct fake *f = fake_named(name);
	if (!f) {
		reply_start(r, q, qend, DNS_RCODE_NXDOMAIN, 0);
	} else if (f->kind == F_SILENT) {
		return false;
	} else if (f->kind == F_HELD) {
		held_keep(q, qend, from);
		return false;
	} else if (f->kind == F_NXDOMAIN || type != 1) {
		reply_start(r, q, qend, f->kind == F_NXDOMAIN ? 3 : 0, 0);
	} else if (f->kind == F_CNAME) {
		reply_start(r, q, qend, 0, 2);
		put_name(r, f->name);
		put16(r, DNS_TYPE_CNAME);
		put16(r, 1);
		put32(r, 60);
		put16(r, (unsigned)strlen(f->cname) + 2);
		put_name(r, f->cname);
		answer_a(r, f->cname, f->addrs[0], f->ttl);
	} else {
		if (f->kind == F_SPOOF || f->kind == F_SPOOF_ONLY)
			send_spoofs(q, qend, name, from);
		if (f->kind == F_SPOOF_ONLY)
			return false;
		if (f->kind == F_SLOW)
			usleep(500000);
		reply_addrs(r, q, qend, f);
	}
	return true;
}

static void *upstream_main(void *arg)
{
	(void)arg;
	uint8_t q[1024];
	for (;;) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(upstream_fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
		if (n < 0)
			return NULL;
		atomic_fetch_add(&upstream_queries, 1);
		struct msg r;
		if (fake_reply(&r, q, (size_t)n, &from))
			sendto(upstream_fd, r.b, r.n, 0, (struct sockaddr *)&from, flen);
	}
}

static struct sockaddr_in upstream_addr(unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	sa.sin_addr = ip("127.0.0.1");
	return sa;
}

static void start_upstream(void)
{
	upstream_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(upstream_fd, 0);
	struct sockaddr_in sa = upstream_addr(UPSTREAM_PORT);
	ck_assert_int_eq(bind(upstream_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, upstream_main, NULL), 0);
	pthread_detach(t);
}

/* ---- on_answer ---- */

struct pinned {
	pthread_mutex_t lock;
	int calls;
	char key[32];
	struct in_addr addrs[DNS_MAX_ADDRS];
	size_t n;
	unsigned ttl;
	int delay_ms; /* before recording: an answer sent before on_answer returns is seen */
};
static struct pinned pinned = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void on_answer(void *ctx, const char *key, const struct in_addr *addrs, size_t n,
		      unsigned ttl)
{
	struct pinned *p = ctx;
	if (p->delay_ms)
		usleep((useconds_t)p->delay_ms * 1000);
	pthread_mutex_lock(&p->lock);
	p->calls++;
	snprintf(p->key, sizeof(p->key), "%s", key);
	p->n = n < DNS_MAX_ADDRS ? n : DNS_MAX_ADDRS;
	memcpy(p->addrs, addrs, p->n * sizeof(*addrs));
	p->ttl = ttl;
	pthread_mutex_unlock(&p->lock);
}

static int pinned_calls(void)
{
	pthread_mutex_lock(&pinned.lock);
	int c = pinned.calls;
	pthread_mutex_unlock(&pinned.lock);
	return c;
}

/* ---- the resolver ---- */

static void start(unsigned upstream_port)
{
	struct sockaddr_in up = upstream_addr(upstream_port);
	struct cell_error err = {0};
	int rc = resolver_start(&up, on_answer, &pinned, &err);
	ck_assert_msg(rc == 0, "resolver_start: %d %s", rc, err.msg);
	ck_assert_int_eq(resolver_start(&up, on_answer, &pinned, &err), 0); /* idempotent */
}

static void setup(void)
{
	fresh_netns();
	start_upstream();
	start(UPSTREAM_PORT);
}

struct rules {
	struct resolver_rule r[8];
	struct resolver_rules rr;
};

/* "+name" allows, "-name" denies; NULL ends. */
static const struct resolver_rules *rules(struct rules *r, bool default_allow, ...)
{
	va_list ap;
	va_start(ap, default_allow);
	size_t n = 0;
	for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 8; n++) {
		r->r[n].allow = s[0] == '+';
		snprintf(r->r[n].pattern, sizeof(r->r[n].pattern), "%s", s + 1);
	}
	va_end(ap);
	r->rr = (struct resolver_rules){.default_allow = default_allow, .rules = r->r, .n = n};
	return &r->rr;
}

static void add(const char *key, const char *addr, const struct resolver_rules *rr, bool pin)
{
	struct cell_error err = {0};
	int rc = resolver_add(key, "sb-test", ip(addr), rr, pin, &err);
	ck_assert_msg(rc == 0, "resolver_add %s: %d %s", key, rc, err.msg);
}

static struct resolver_stats stats(const char *key)
{
	struct resolver_stats st;
	ck_assert_int_eq(resolver_stats(key, &st), 0);
	return st;
}

/* A client socket of a "sandbox". */
static int client(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void send_to(int fd, const char *addr, unsigned port, const void *buf, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	sa.sin_addr = ip(addr);
	ck_assert_int_eq(sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)), (ssize_t)len);
}

/* A datagram within timeout_ms: its length, or -1. */
static ssize_t recv_within(int fd, uint8_t *buf, size_t size, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	if (poll(&pfd, 1, timeout_ms) != 1)
		return -1;
	return recv(fd, buf, size, 0);
}

struct reply {
	int rcode; /* -1: no reply */
	unsigned ancount;
	struct dns_answer ans;
	int pinned_when_read; /* on_answer calls when the reply was read */
};

/* Ask addr:53 for name/type; the reply must carry the query's id and question. */
static struct reply ask_from(int fd, const char *addr, unsigned port, const char *name,
			     unsigned type, int timeout_ms)
{
	static uint16_t next_id = 100;
	struct msg q;
	build_query(&q, ++next_id, name, type);
	send_to(fd, addr, port, q.b, q.n);
	uint8_t buf[4096];
	struct reply r = {.rcode = -1};
	ssize_t n = recv_within(fd, buf, sizeof(buf), timeout_ms);
	r.pinned_when_read = pinned_calls();
	if (n < 0)
		return r;
	struct dns_query dq;
	int prc = dns_parse_query(q.b, q.n, &dq); /* -EINVAL: a name a rule cannot name */
	ck_assert_msg(prc == 0 || prc == -EINVAL, "the test's query for %s: %d", name, prc);
	ck_assert_msg(dns_parse_response(buf, (size_t)n, &dq, &r.ans) == 0,
		      "the reply to %s is not an answer to it", name);
	ck_assert_uint_eq(r.ans.id, next_id);
	r.rcode = (int)r.ans.rcode;
	r.ancount = (unsigned)(buf[6] << 8 | buf[7]);
	return r;
}

static struct reply ask(const char *name, unsigned type)
{
	int fd = client();
	struct reply r = ask_from(fd, SB0, 53, name, type, 3000);
	close(fd);
	return r;
}

static const char *addr_text(struct in_addr a)
{
	static char buf[4][INET_ADDRSTRLEN];
	static int i;
	i = (i + 1) % 4;
	inet_ntop(AF_INET, &a, buf[i], sizeof(buf[i]));
	return buf[i];
}

/* ---- tests ---- */

START_TEST(test_allowed_answered_and_pinned_first)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, false, "+www.allowed.test", "+alias.allowed.test", NULL), true);
	pinned.delay_ms = 300;
	struct reply a = ask("www.allowed.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, DNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.ans.n_addrs, 2);
	ck_assert_str_eq(addr_text(a.ans.addrs[0]), "192.0.2.1");
	ck_assert_str_eq(addr_text(a.ans.addrs[1]), "192.0.2.2");
	/* on_answer had returned (after its 300 ms) when the answer could be read */
	ck_assert_int_eq(a.pinned_when_read, 1);
	ck_assert_str_eq(pinned.key, "cell0");
	ck_assert_uint_eq(pinned.n, 2);
	ck_assert_str_eq(addr_text(pinned.addrs[0]), "192.0.2.1");
	ck_assert_str_eq(addr_text(pinned.addrs[1]), "192.0.2.2");
	ck_assert_uint_eq(pinned.ttl, 120);
	pinned.delay_ms = 0;

	/* a CNAME chain: the target's address, the chain's smallest TTL */
	a = ask("ALIAS.allowed.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, 0);
	ck_assert_int_eq(pinned_calls(), 2);
	ck_assert_uint_eq(pinned.n, 1);
	ck_assert_str_eq(addr_text(pinned.addrs[0]), "198.51.100.7");
	ck_assert_uint_eq(pinned.ttl, 60);

	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.queries, 2);
	ck_assert_uint_eq(st.forwarded, 2);
	ck_assert_uint_eq(st.answered, 2);
	ck_assert_uint_eq(st.refused + st.failed + st.rate_limited, 0);
	resolver_stop();
}
END_TEST

START_TEST(test_ttl_clamped_and_nxdomain)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), true);
	ck_assert_int_eq(ask("allowed.test", DNS_TYPE_A).rcode, 0); /* TTL 10 */
	ck_assert_int_eq(pinned_calls(), 1);
	ck_assert_uint_eq(pinned.ttl, RESOLVER_TTL_MIN);
	ck_assert_int_eq(ask("a.b.allowed.test", DNS_TYPE_A).rcode, 0); /* TTL 99999 */
	ck_assert_int_eq(pinned_calls(), 2);
	ck_assert_uint_eq(pinned.ttl, RESOLVER_TTL_MAX);
	/* NXDOMAIN comes through; no addresses, no on_answer */
	struct reply a = ask("nx.allowed.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, DNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(pinned_calls(), 2);
	/* without pin_answers (public mode) nobody is called */
	struct cell_error err = {0};
	ck_assert_int_eq(resolver_set_rules("cell0", rules(&r, true, NULL), false, &err), 0);
	a = ask("www.allowed.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, 0);
	ck_assert_uint_eq(a.ans.n_addrs, 2);
	ck_assert_int_eq(pinned_calls(), 2);
	resolver_stop();
}
END_TEST

START_TEST(test_refused_names)
{
	setup();
	struct rules r;
	add("cell0", SB0,
	    rules(&r, false, "-bad.allowed.test", "+*.allowed.test", "+other.test", "-other.test",
		  NULL),
	    true);
	int before = atomic_load(&upstream_queries);
	struct reply a = ask("denied.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, DNS_RCODE_REFUSED);
	ck_assert_uint_eq(a.ancount, 0);
	ck_assert_int_eq(ask("bad.allowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(ask("denied.test", 16).rcode, DNS_RCODE_REFUSED);
	/* an unnameable name: REFUSED too */
	ck_assert_int_eq(ask("a b.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(atomic_load(&upstream_queries), before); /* upstream never asked */
	ck_assert_int_eq(pinned_calls(), 0);
	/* first matching rule wins */
	ck_assert_int_eq(ask("other.test", DNS_TYPE_A).rcode, 0);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, 0);
	ck_assert_int_eq(pinned_calls(), 2);
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.queries, 6);
	ck_assert_uint_eq(st.refused, 4);
	ck_assert_uint_eq(st.forwarded, 2);
	ck_assert_uint_eq(st.answered, 2);
	resolver_stop();
}
END_TEST

/* Refusals are logged, at most RESOLVER_LOG_PER_S lines a second per sandbox, then one line
 * saying how many were suppressed (written when the second ends, with no further query). */
START_TEST(test_refusal_log_limited)
{
	setup();
	char path[] = "/tmp/it_resolver.log.XXXXXX";
	int logfd = mkstemp(path);
	ck_assert_int_ge(logfd, 0);
	unlink(path);
	int saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(logfd, STDERR_FILENO), 0);
	struct rules r;
	add("cell0", SB0, rules(&r, false, NULL), false);
	const int n = 20;
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(ask("denied.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	usleep(1500000);
	ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
	close(saved);
	char text[8192];
	ssize_t len = pread(logfd, text, sizeof(text) - 1, 0);
	close(logfd);
	ck_assert_int_gt(len, 0);
	text[len] = '\0';
	int lines = 0;
	for (const char *p = text; (p = strstr(p, "sandbox sb-test: DNS refused denied.test (A)"));
	     p++)
		lines++;
	ck_assert_int_eq(lines, RESOLVER_LOG_PER_S);
	char want[128];
	snprintf(want, sizeof(want), "sandbox sb-test: DNS refused %d more names (suppressed)",
		 n - RESOLVER_LOG_PER_S);
	ck_assert_msg(strstr(text, want) != NULL, "no '%s' in:\n%s", want, text);
	ck_assert_uint_eq(stats("cell0").refused, (uint64_t)n);
	resolver_stop();
}
END_TEST

/* At most RESOLVER_PENDING_PER_SB queries of a sandbox wait upstream; past that SERVFAIL at
 * once. */
START_TEST(test_pending_bounded)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), false);
	int fd = client();
	const int n = RESOLVER_PENDING_PER_SB + 6;
	struct msg q;
	for (int i = 0; i < n; i++) {
		build_query(&q, (uint16_t)i, "silent.allowed.test", DNS_TYPE_A);
		send_to(fd, SB0, 53, q.b, q.n);
	}
	uint8_t buf[512];
	int servfails = 0;
	ssize_t got;
	while ((got = recv_within(fd, buf, sizeof(buf), 1000)) > 0) {
		ck_assert_int_ge(got, 12);
		ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_SERVFAIL);
		servfails++;
	}
	ck_assert_int_eq(servfails, n - RESOLVER_PENDING_PER_SB);
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.forwarded, RESOLVER_PENDING_PER_SB);
	ck_assert_uint_eq(st.failed, (uint64_t)(n - RESOLVER_PENDING_PER_SB));
	/* another sandbox is not held up by this one's queue */
	add("cell1", "127.0.0.3", rules(&r, true, NULL), false);
	int fd1 = client();
	ck_assert_int_eq(ask_from(fd1, "127.0.0.3", 53, "www.allowed.test", DNS_TYPE_A, 3000).rcode,
			 0);
	close(fd1);
	close(fd);
	resolver_stop();
}
END_TEST

/* The pool of queries in flight is shared fairly: with 20 sandboxes served, 19 flooding it
 * with a name upstream never answers each hold their share (RESOLVER_PENDING_MAX / 20, the
 * rest SERVFAIL at once), and the 20th is still answered. Without shares, 16 flooders at
 * RESOLVER_PENDING_PER_SB each took the whole pool. */
START_TEST(test_pending_fair_share)
{
	setup();
	enum { N = 20, FLOOD = RESOLVER_PENDING_PER_SB + 6 };
	const uint64_t share = RESOLVER_PENDING_MAX / N;
	struct rules r;
	char keys[N][16], addrs[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "cell%d", i);
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.1.%d", i + 1);
		add(keys[i], addrs[i], rules(&r, true, NULL), false);
	}
	int fd = client();
	struct msg q;
	for (int i = 0; i < N - 1; i++)
		for (int k = 0; k < FLOOD; k++) {
			build_query(&q, (uint16_t)(i * FLOOD + k), "silent.allowed.test",
				    DNS_TYPE_A);
			send_to(fd, addrs[i], 53, q.b, q.n);
		}
	for (int i = 0; i < N - 1; i++) {
		struct resolver_stats st = stats(keys[i]);
		for (int t = 0; t < 500 && st.forwarded + st.failed < FLOOD; t++) {
			h_sleep_ms(10);
			st = stats(keys[i]);
		}
		ck_assert_msg(st.forwarded == share && st.failed == FLOOD - share,
			      "%s: %" PRIu64 " forwarded, %" PRIu64 " failed (share %" PRIu64 ")",
			      keys[i], st.forwarded, st.failed, share);
	}
	int fd1 = client();
	ck_assert_int_eq(
	    ask_from(fd1, addrs[N - 1], 53, "www.allowed.test", DNS_TYPE_A, 3000).rcode, 0);
	close(fd1);
	close(fd);
	resolver_stop();
}
END_TEST

START_TEST(test_wildcard_semantics)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, false, "+*.allowed.test", NULL), true);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, 0);
	ck_assert_int_eq(ask("a.b.allowed.test", DNS_TYPE_A).rcode, 0);
	ck_assert_int_eq(ask("WWW.Allowed.Test", DNS_TYPE_A).rcode, 0);
	/* not the apex, not a name that merely ends the same */
	ck_assert_int_eq(ask("allowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(ask("notallowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(ask("allowed.test.other.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	/* the apex has its own rule */
	struct cell_error err = {0};
	ck_assert_int_eq(
	    resolver_set_rules("cell0", rules(&r, false, "+*.allowed.test", "+allowed.test", NULL),
			       true, &err),
	    0);
	ck_assert_int_eq(ask("allowed.test", DNS_TYPE_A).rcode, 0);
	resolver_stop();
}
END_TEST

START_TEST(test_aaaa_nodata)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, false, "+www.allowed.test", NULL), true);
	int before = atomic_load(&upstream_queries);
	struct reply a = ask("www.allowed.test", DNS_TYPE_AAAA);
	ck_assert_int_eq(a.rcode, DNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.ancount, 0);
	ck_assert_int_eq(ask("denied.test", DNS_TYPE_AAAA).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(atomic_load(&upstream_queries), before);
	ck_assert_int_eq(pinned_calls(), 0);
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.answered, 1);
	ck_assert_uint_eq(st.forwarded, 0);
	resolver_stop();
}
END_TEST

/* Send queries for www.allowed.test AAAA (answered locally), ids 0, 1, …, from fd until the
 * bucket has dropped RESOLVER_BURST of them (at most 100 bursts: a hang guard). A pause every
 * 25 lets the resolver drain its socket, so that no datagram is dropped by the kernel. The
 * number sent. */
static int send_until_limited(int fd)
{
	int sent = 0;
	while (sent < 100 * RESOLVER_BURST) {
		struct msg q;
		build_query(&q, (uint16_t)sent, "www.allowed.test", DNS_TYPE_AAAA);
		send_to(fd, SB0, 53, q.b, q.n);
		if (++sent % 25)
			continue;
		usleep(1000);
		if (stats("cell0").rate_limited >= RESOLVER_BURST)
			break;
	}
	return sent;
}

/* Until the resolver has taken in every one of sent queries (a hang guard, 10 s). */
static void wait_queries(const char *key, uint64_t sent)
{
	for (int i = 0; i < 1000 && stats(key).queries < sent; i++)
		usleep(10000);
	ck_assert_uint_eq(stats(key).queries, sent);
}

/* The token bucket, by order and by its own arithmetic rather than by how fast this host
 * sends: a full bucket answers the first RESOLVER_BURST queries, whatever came later; past
 * it queries are dropped; and what it answered is at most the burst plus what
 * RESOLVER_RATE refilled while the queries came (a slower host only widens that bound).
 * How fast queries are dropped or answered is a number for `make bench`, not a test. */
START_TEST(test_rate_limit)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), false);
	int fd = client();
	int rcv = 1 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	uint64_t t0 = now_ns();
	const int sent = send_until_limited(fd);
	wait_queries("cell0", (uint64_t)sent);
	ck_assert_msg(stats("cell0").rate_limited >= RESOLVER_BURST,
		      "%d queries as fast as this host sends, none dropped", sent);
	double refilled = (double)(now_ns() - t0) * RESOLVER_RATE / 1e9;
	static bool answered[100 * RESOLVER_BURST];
	uint8_t buf[512];
	int got = 0;
	ssize_t n;
	while ((n = recv_within(fd, buf, sizeof(buf), 500)) > 0) {
		ck_assert_int_ge(n, 12);
		int id = buf[0] << 8 | buf[1];
		ck_assert_int_lt(id, sent);
		answered[id] = true;
		got++;
	}
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.queries, (uint64_t)sent);
	ck_assert_uint_eq(st.answered, (uint64_t)got);
	ck_assert_uint_eq(st.rate_limited + st.answered, (uint64_t)sent);
	ck_assert_int_ge(got, RESOLVER_BURST);
	ck_assert_uint_ge(st.rate_limited, (uint64_t)RESOLVER_BURST);
	for (int i = 0; i < RESOLVER_BURST; i++)
		ck_assert_msg(answered[i], "query %d of the first burst was dropped", i);
	ck_assert_msg(got <= RESOLVER_BURST + refilled + 1,
		      "%d answered: more than the burst of %d and the %.1f tokens refilled", got,
		      RESOLVER_BURST, refilled);
	/* the bucket refills: queries are answered again (a hang guard of 20 tries) */
	int rcode = -1;
	for (int i = 0; i < 20 && rcode != 0; i++)
		rcode = ask_from(fd, SB0, 53, "www.allowed.test", DNS_TYPE_AAAA, 500).rcode;
	ck_assert_int_eq(rcode, 0);
	close(fd);
	resolver_stop();
}
END_TEST

/* Whether a datagram waits on fd within timeout_ms (0: now). */
static bool readable_within(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	return poll(&pfd, 1, timeout_ms) == 1;
}

/* Silence and spoofs only: SERVFAIL when the resolver gives up on them, never at once. That
 * is shown by order, not by the clock: a query of another sandbox that the upstream holds
 * until both were forwarded is answered while neither has had an answer. How long the
 * resolver waits (RESOLVER_TIMEOUT_MS) is a number for `make bench`. */
START_TEST(test_upstream_failures)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), true);
	add("cell1", "127.0.0.3", rules(&r, true, NULL), false);
	int fd1 = client(), fd2 = client(), fd3 = client();
	struct msg q1, q2, q3;
	build_query(&q1, 1, "silent.allowed.test", DNS_TYPE_A);
	build_query(&q2, 2, "spoofonly.allowed.test", DNS_TYPE_A);
	build_query(&q3, 3, "held.allowed.test", DNS_TYPE_A);
	send_to(fd1, SB0, 53, q1.b, q1.n);
	send_to(fd2, SB0, 53, q2.b, q2.n);
	for (int i = 0; i < 1000 && atomic_load(&upstream_queries) < 2; i++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&upstream_queries), 2);
	send_to(fd3, "127.0.0.3", 53, q3.b, q3.n);
	held_release();
	uint8_t buf[512];
	ssize_t n3 = recv_within(fd3, buf, sizeof(buf), 3000);
	ck_assert_int_ge(n3, 12);
	ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_NOERROR);
	ck_assert_uint_eq(buf[0] << 8 | buf[1], 3);
	/* forwarded before the held query was even sent, and not answered yet */
	ck_assert_msg(!readable_within(fd1, 0), "silence was answered at once");
	ck_assert_msg(!readable_within(fd2, 0), "spoofs only were answered at once");
	/* a hang guard past the resolver's timeout */
	ssize_t n1 = recv_within(fd1, buf, sizeof(buf), RESOLVER_TIMEOUT_MS + 3000);
	ck_assert_int_ge(n1, 12);
	ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_SERVFAIL);
	ssize_t n2 = recv_within(fd2, buf, sizeof(buf), 3000);
	ck_assert_int_ge(n2, 12);
	ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(buf[0] << 8 | buf[1], 2); /* the sandbox's id */
	ck_assert_int_eq(pinned_calls(), 0);	    /* nothing pinned */
	close(fd1);
	close(fd2);
	close(fd3);
	/* spoofs, then the real reply: only the real one counts */
	struct reply a = ask("spoof.allowed.test", DNS_TYPE_A);
	ck_assert_int_eq(a.rcode, 0);
	ck_assert_uint_eq(a.ans.n_addrs, 1);
	ck_assert_str_eq(addr_text(a.ans.addrs[0]), "192.0.2.9");
	ck_assert_int_eq(pinned_calls(), 1);
	ck_assert_uint_eq(pinned.n, 1);
	ck_assert_str_eq(addr_text(pinned.addrs[0]), "192.0.2.9");
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.failed, 2);
	ck_assert_uint_eq(st.answered, 1);
	ck_assert_uint_eq(st.forwarded, 3);
	st = stats("cell1");
	ck_assert_uint_eq(st.answered, 1);
	ck_assert_uint_eq(st.failed, 0);
	resolver_stop();
}
END_TEST

/* A UDP socket of the test on 127.0.0.1:port: the upstream, played by hand. */
static int upstream_by_hand(unsigned port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = upstream_addr(port);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Nothing listens on the upstream port: the ICMP error is a SERVFAIL at once. "At once" is
 * shown by order: a query forwarded earlier, while the port was served, is still waiting
 * for its answer (its timeout has not come) when the refused one is answered, and the
 * answer it gets afterwards is the upstream's. */
START_TEST(test_upstream_refuses)
{
	fresh_netns();
	const unsigned port = UPSTREAM_PORT + 1;
	int up = upstream_by_hand(port);
	start(port);
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), true);
	int early = client();
	struct msg q;
	build_query(&q, 9, "www.allowed.test", DNS_TYPE_A);
	send_to(early, SB0, 53, q.b, q.n);
	uint8_t fwd[1024];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	ck_assert_msg(readable_within(up, 3000), "the query never came upstream");
	ssize_t n = recvfrom(up, fwd, sizeof(fwd), 0, (struct sockaddr *)&from, &flen);
	ck_assert_int_ge(n, 12);
	close(up); /* from here nothing listens on the upstream port */

	/* a hang guard past the resolver's timeout */
	int fd = client();
	struct reply refused =
	    ask_from(fd, SB0, 53, "other.test", DNS_TYPE_A, RESOLVER_TIMEOUT_MS + 3000);
	ck_assert_int_eq(refused.rcode, DNS_RCODE_SERVFAIL);
	close(fd);
	ck_assert_msg(!readable_within(early, 0), "the earlier query was answered meanwhile");
	ck_assert_uint_eq(stats("cell0").failed, 1);

	/* the port served again: the earlier query's answer still reaches its client */
	up = upstream_by_hand(port);
	char name[256];
	unsigned type;
	size_t qend;
	ck_assert(question(fwd, (size_t)n, name, &type, &qend));
	struct msg ans;
	reply_addrs(&ans, fwd, qend, fake_named(name));
	ck_assert_int_eq(sendto(up, ans.b, ans.n, 0, (struct sockaddr *)&from, flen),
			 (ssize_t)ans.n);
	uint8_t buf[512];
	ck_assert_int_ge(recv_within(early, buf, sizeof(buf), 3000), 12);
	ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_NOERROR);
	ck_assert_uint_eq(buf[0] << 8 | buf[1], 9);
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.answered, 1);
	ck_assert_uint_eq(st.forwarded, 2);
	close(early);
	close(up);
	resolver_stop();
}
END_TEST

START_TEST(test_malformed_queries)
{
	setup();
	struct rules r;
	add("cell0", SB0, rules(&r, true, NULL), true);
	int fd = client();
	struct msg m;
	int n_bad = 0;
	uint8_t zeros[DNS_QUERY_MAX + 100] = {0};
	send_to(fd, SB0, 53, zeros, 0), n_bad++;	     /* empty */
	send_to(fd, SB0, 53, zeros, 1), n_bad++;	     /* a byte */
	send_to(fd, SB0, 53, zeros, 12), n_bad++;	     /* QDCOUNT 0 */
	send_to(fd, SB0, 53, zeros, sizeof(zeros)), n_bad++; /* too big */
	build_query(&m, 1, "www.allowed.test", 1);
	send_to(fd, SB0, 53, m.b, m.n - 3), n_bad++; /* truncated */
	m.b[2] |= 0x80;
	send_to(fd, SB0, 53, m.b, m.n), n_bad++; /* a response */
	build_query(&m, 1, "www.allowed.test", 1);
	m.b[5] = 2;
	send_to(fd, SB0, 53, m.b, m.n), n_bad++; /* QDCOUNT 2 */
	build_query(&m, 1, "www.allowed.test", 1);
	m.b[7] = 1;
	send_to(fd, SB0, 53, m.b, m.n), n_bad++; /* an answer */
	m.n = 12;
	m.b[7] = 0;
	m.b[5] = 1;
	put16(&m, 0xC00C); /* a pointer to itself */
	put16(&m, 1);
	put16(&m, 1);
	send_to(fd, SB0, 53, m.b, m.n), n_bad++;
	m.n = 12;
	put8(&m, 64); /* a label of 64 */
	for (int i = 0; i < 64; i++)
		put8(&m, 'a');
	put8(&m, 0);
	put16(&m, 1);
	put16(&m, 1);
	send_to(fd, SB0, 53, m.b, m.n), n_bad++;
	build_query(&m, 1, "www.allowed.test", 1);
	put8(&m, 0);
	send_to(fd, SB0, 53, m.b, m.n), n_bad++; /* a byte after the question */
	srandom(42);
	for (int i = 0; i < 50; i++) { /* noise */
		uint8_t noise[64];
		for (size_t k = 0; k < sizeof(noise); k++)
			noise[k] = (uint8_t)random();
		noise[2] |= 0x80; /* a "response": never a query */
		send_to(fd, SB0, 53, noise, 1 + (size_t)random() % sizeof(noise));
		n_bad++;
	}
	uint8_t buf[512];
	ck_assert_msg(recv_within(fd, buf, sizeof(buf), 300) < 0, "a malformed query answered");
	/* the resolver still answers */
	struct reply a = ask_from(fd, SB0, 53, "www.allowed.test", DNS_TYPE_A, 3000);
	ck_assert_int_eq(a.rcode, 0);
	struct resolver_stats st = stats("cell0");
	ck_assert_uint_eq(st.queries, (uint64_t)n_bad + 1);
	ck_assert_uint_eq(st.failed, (uint64_t)n_bad);
	ck_assert_uint_eq(st.answered, 1);
	close(fd);
	resolver_stop();
}
END_TEST

static int bind_53(const char *addr)
{
	int fd = client();
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	sa.sin_addr = ip(addr);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	if (rc < 0) {
		close(fd);
		return -e;
	}
	return fd;
}

START_TEST(test_add_remove)
{
	setup();
	struct rules r;
	struct cell_error err = {0};
	add("cell0", SB0, rules(&r, true, NULL), false);
	ck_assert_int_eq(bind_53(SB0), -EADDRINUSE); /* the resolver holds it alone */
	ck_assert_int_eq(resolver_add("cell0", "sb-x", ip("127.0.0.3"), &r.rr, false, &err),
			 -EEXIST);
	ck_assert_int_eq(resolver_add("cell1", "sb-x", ip(SB0), &r.rr, false, &err), -EADDRINUSE);
	ck_assert_int_eq(resolver_add("cell1", "Bad/Id", ip("127.0.0.3"), &r.rr, false, &err),
			 -EINVAL);
	ck_assert_int_eq(resolver_add("a/b", "sb-x", ip("127.0.0.3"), &r.rr, false, &err), -EINVAL);
	ck_assert_int_eq(resolver_add("cell1", "sb-x", ip("127.0.0.3"),
				      rules(&r, false, "+ok.test", "+bad name", NULL), false, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, "rules[1].pattern") != NULL, "%s", err.msg);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, 0);

	resolver_remove("cell0");
	resolver_remove("cell0"); /* no-op */
	resolver_remove("never");
	struct resolver_stats st;
	ck_assert_int_eq(resolver_stats("cell0", &st), -ENOENT);
	ck_assert_int_eq(resolver_set_rules("cell0", rules(&r, true, NULL), false, &err), -ENOENT);
	/* the address is free again at once */
	int fd = bind_53(SB0);
	ck_assert_msg(fd >= 0, "rebinding %s:53: %s", SB0, strerror(-fd));
	close(fd);
	/* and the resolver can serve it again */
	add("cell0", SB0, rules(&r, true, NULL), false);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, 0);
	ck_assert_uint_eq(stats("cell0").queries, 1); /* new counters */

	/* remove with a query in flight: dropped, no answer, nothing pinned */
	resolver_remove("cell0");
	add("cell0", SB0, rules(&r, true, NULL), true);
	int c = client();
	struct msg q;
	build_query(&q, 5, "silent.allowed.test", DNS_TYPE_A);
	send_to(c, SB0, 53, q.b, q.n);
	usleep(200000);
	resolver_remove("cell0");
	uint8_t buf[512];
	ck_assert(recv_within(c, buf, sizeof(buf), RESOLVER_TIMEOUT_MS + 1000) < 0);
	close(c);
	resolver_stop();
	/* stopped: the address is free, adding is refused */
	fd = bind_53(SB0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(resolver_add("cell0", "sb-x", ip(SB0), &r.rr, false, &err), -ESRCH);
}
END_TEST

START_TEST(test_set_rules_live)
{
	setup();
	struct rules r;
	struct cell_error err = {0};
	add("cell0", SB0, rules(&r, false, NULL), true);
	add("cell1", "127.0.0.3", rules(&r, true, NULL), false);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(
	    resolver_set_rules("cell0", rules(&r, false, "+*.allowed.test", NULL), true, &err), 0);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, 0);
	ck_assert_int_eq(pinned_calls(), 1);
	ck_assert_int_eq(
	    resolver_set_rules("cell0", rules(&r, true, "-www.allowed.test", NULL), true, &err), 0);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	ck_assert_int_eq(ask("other.test", DNS_TYPE_A).rcode, 0);
	/* a name refused while its query is upstream: REFUSED when the answer comes, nothing
	 * pinned */
	ck_assert_int_eq(resolver_set_rules("cell0", rules(&r, true, NULL), true, &err), 0);
	int calls = pinned_calls();
	int c = client();
	struct msg q;
	build_query(&q, 77, "slow.allowed.test", DNS_TYPE_A);
	send_to(c, SB0, 53, q.b, q.n);
	usleep(100000);
	ck_assert_int_eq(
	    resolver_set_rules("cell0", rules(&r, true, "-slow.allowed.test", NULL), true, &err),
	    0);
	uint8_t buf[512];
	ck_assert_int_ge(recv_within(c, buf, sizeof(buf), 3000), 12);
	ck_assert_uint_eq(buf[3] & 0xf, DNS_RCODE_REFUSED);
	ck_assert_int_eq(pinned_calls(), calls);
	close(c);
	ck_assert_int_eq(
	    resolver_set_rules("cell0", rules(&r, true, "-www.allowed.test", NULL), true, &err), 0);
	/* a bad rule changes nothing */
	ck_assert_int_eq(resolver_set_rules("cell0", rules(&r, true, "+*", NULL), true, &err),
			 -EINVAL);
	ck_assert_int_eq(ask("www.allowed.test", DNS_TYPE_A).rcode, DNS_RCODE_REFUSED);
	/* the other sandbox has its own rules and counters */
	int fd = client();
	ck_assert_int_eq(ask_from(fd, "127.0.0.3", 53, "www.allowed.test", DNS_TYPE_A, 3000).rcode,
			 0);
	close(fd);
	ck_assert_uint_eq(stats("cell1").queries, 1);
	ck_assert_uint_eq(stats("cell0").queries, 6);
	resolver_stop();
}
END_TEST

START_TEST(test_upstream_text)
{
	struct sockaddr_in sa;
	struct cell_error err = {0};
	ck_assert_int_eq(resolver_parse_upstream("192.0.2.53", &sa, &err), 0);
	ck_assert_uint_eq(ntohs(sa.sin_port), 53);
	ck_assert_str_eq(addr_text(sa.sin_addr), "192.0.2.53");
	ck_assert_int_eq(resolver_parse_upstream("10.1.2.3:5353", &sa, &err), 0);
	ck_assert_uint_eq(ntohs(sa.sin_port), 5353);
	const char *bad[] = {"",
			     "x",
			     "1.2.3",
			     "1.2.3.4:",
			     "1.2.3.4:0",
			     "1.2.3.4:65536",
			     "1.2.3.4:53x",
			     "::1",
			     "1.2.3.4:-1",
			     "host.test:53",
			     "1.2.3.4:+53"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(resolver_parse_upstream(bad[i], &sa, &err) == -EINVAL,
			      "'%s' accepted", bad[i]);

	/* the host's resolv.conf, in a mount namespace of this test's own */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char path[] = "/tmp/it_resolver.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char *text = "# comment\nsearch x.test\nnameserver ::1\nnameserver   198.51.100.53  "
			   "# the first IPv4 one\nnameserver 192.0.2.1\n";
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(mount(path, "/etc/resolv.conf", NULL, MS_BIND, NULL), 0);
	ck_assert_int_eq(resolver_default_upstream(&sa, &err), 0);
	ck_assert_str_eq(addr_text(sa.sin_addr), "198.51.100.53");
	ck_assert_uint_eq(ntohs(sa.sin_port), 53);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	text = "nameserver ::1\nnameserver fe80::1%eth0\n";
	ck_assert_int_eq(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
	ck_assert_int_eq(resolver_default_upstream(&sa, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no IPv4 nameserver") != NULL, "%s", err.msg);
	close(fd);
	umount("/etc/resolv.conf");
	unlink(path);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Median query→answer time over 1000 queries, through the resolver (10 sandboxes of 100
 * queries each: within each bucket's burst) and straight to the fake upstream. */
START_TEST(test_overhead)
{
	setup();
	struct rules r;
	char key[16], addr[16];
	for (int s = 0; s < 10; s++) {
		snprintf(key, sizeof(key), "cell%d", s);
		snprintf(addr, sizeof(addr), "127.0.0.%d", 10 + s);
		add(key, addr, rules(&r, false, "+*.allowed.test", NULL), true);
	}
	static uint64_t via[1000], direct[1000];
	int fd = client();
	for (int i = 0; i < 1000; i++) {
		snprintf(addr, sizeof(addr), "127.0.0.%d", 10 + i / 100);
		uint64_t t0 = now_ns();
		struct reply a = ask_from(fd, addr, 53, "www.allowed.test", DNS_TYPE_A, 3000);
		via[i] = now_ns() - t0;
		ck_assert_int_eq(a.rcode, 0);
		t0 = now_ns();
		a = ask_from(fd, "127.0.0.1", UPSTREAM_PORT, "www.allowed.test", DNS_TYPE_A, 3000);
		direct[i] = now_ns() - t0;
		ck_assert_int_eq(a.rcode, 0);
	}
	close(fd);
	ck_assert_int_eq(pinned_calls(), 1000);
	qsort(via, 1000, sizeof(via[0]), cmp_u64);
	qsort(direct, 1000, sizeof(direct[0]), cmp_u64);
	printf("it_resolver: query->answer median %.1f us through the resolver (p90 %.1f), "
	       "%.1f us direct (p90 %.1f): overhead %.1f us per query\n",
	       via[500] / 1e3, via[900] / 1e3, direct[500] / 1e3, direct[900] / 1e3,
	       ((double)via[500] - (double)direct[500]) / 1e3);
	fflush(stdout);
	resolver_stop();
}
END_TEST

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "it_resolver: needs root (network namespaces)\n");
		return 1;
	}
	Suite *s = suite_create("resolver");
	TCase *tc = tcase_create("resolver");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_allowed_answered_and_pinned_first);
	tcase_add_test(tc, test_ttl_clamped_and_nxdomain);
	tcase_add_test(tc, test_refused_names);
	tcase_add_test(tc, test_refusal_log_limited);
	tcase_add_test(tc, test_pending_bounded);
	tcase_add_test(tc, test_pending_fair_share);
	tcase_add_test(tc, test_wildcard_semantics);
	tcase_add_test(tc, test_aaaa_nodata);
	tcase_add_test(tc, test_rate_limit);
	tcase_add_test(tc, test_upstream_failures);
	tcase_add_test(tc, test_upstream_refuses);
	tcase_add_test(tc, test_malformed_queries);
	tcase_add_test(tc, test_add_remove);
	tcase_add_test(tc, test_set_rules_live);
	tcase_add_test(tc, test_upstream_text);
	tcase_add_test(tc, test_overhead);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
