/* celld's per-sandbox DNS resolver (resolver.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "cell/id.h"
#include "cell/log.h"
#include "dns.h"
#include "resolver.h"

/* An epoll event names its object by kind, slot and generation: an object freed while its
 * event waited in a batch (or its slot reused since) is recognised by the generation. */
enum { TOK_WAKE, TOK_SB, TOK_UP };
#define GEN_MASK 0x3FFFFFFFu

static uint64_t token(unsigned kind, uint32_t slot, uint32_t gen)
{
	return (uint64_t)kind << 62 | (uint64_t)(gen & GEN_MASK) << 32 | slot;
}

struct sb {
	bool used;
	uint32_t gen;
	char key[IFNAMSIZ];
	char id[CELL_ID_MAX + 1];
	int fd;
	struct in_addr addr;
	struct resolver_rule *rules; /* normalised patterns */
	size_t n_rules;
	bool default_allow, pin;
	struct resolver_stats st;
	double tokens;
	uint64_t refill_ns;
	unsigned pending;
	uint64_t log_window_ns;
	unsigned log_lines;
	uint64_t log_suppressed;
};

/* A query in flight upstream: the sandbox's query as it came (its own id), where from. */
struct pending {
	bool used;
	uint32_t gen;
	int fd;
	uint32_t sb_slot, sb_gen;
	uint16_t up_id;
	struct sockaddr_in client;
	uint64_t deadline_ns;
	struct dns_query q;
	uint8_t msg[DNS_QUERY_MAX];
	size_t len;
};

/* Everything below is under lock, except what only the thread or start/stop touch. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sb *sbs;
static size_t sbs_cap;
static size_t n_sbs;	     /* of sbs, used */
static struct pending *pend; /* RESOLVER_PENDING_MAX slots */
static size_t n_pending;
static bool running, stopping;
static int epfd = -1, wakefd = -1;
static pthread_t thread;
/* Set by resolver_start before the thread starts; read-only while it runs. */
static struct sockaddr_in upstream;
static resolver_answer_fn *answer_fn;
static void *answer_ctx;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct sb *sb_by_key(const char *key)
{
	for (size_t i = 0; i < sbs_cap; i++)
		if (sbs[i].used && strcmp(sbs[i].key, key) == 0)
			return &sbs[i];
	return NULL;
}

static struct sb *sb_by_slot(uint32_t slot, uint32_t gen)
{
	if (slot >= sbs_cap || !sbs[slot].used || (sbs[slot].gen & GEN_MASK) != (gen & GEN_MASK))
		return NULL;
	return &sbs[slot];
}

static void pending_free(struct pending *p)
{
	struct sb *s = sb_by_slot(p->sb_slot, p->sb_gen);
	if (s && s->pending > 0)
		s->pending--;
	if (epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL) < 0)
		log_debug("resolver: removing an upstream socket from epoll: %s", strerror(errno));
	close(p->fd);
	p->fd = -1;
	p->used = false;
	p->gen++;
	n_pending--;
}

static void send_to_client(struct sb *s, const uint8_t *msg, size_t len,
			   const struct sockaddr_in *to)
{
	if (sendto(s->fd, msg, len, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to)) < 0)
		log_debug("sandbox %s: DNS reply not sent: %s", s->id, strerror(errno));
}

/* Answer q with rcode and no records (REFUSED, NODATA, SERVFAIL). */
static void reply_rcode(struct sb *s, const uint8_t *msg, const struct dns_query *q, unsigned rcode,
			const struct sockaddr_in *to)
{
	uint8_t out[DNS_QUERY_MAX];
	int n = dns_build_reply(msg, q, rcode, out, sizeof(out));
	if (n > 0)
		send_to_client(s, out, (size_t)n, to);
}

static void servfail(struct pending *p)
{
	struct sb *s = sb_by_slot(p->sb_slot, p->sb_gen);
	if (s) {
		reply_rcode(s, p->msg, &p->q, DNS_RCODE_SERVFAIL, &p->client);
		s->st.failed++;
	}
	pending_free(p);
}

static bool rate_ok(struct sb *s, uint64_t now)
{
	s->tokens += (double)(now - s->refill_ns) * RESOLVER_RATE / 1e9;
	if (s->tokens > RESOLVER_BURST)
		s->tokens = RESOLVER_BURST;
	s->refill_ns = now;
	if (s->tokens < 1)
		return false;
	s->tokens -= 1;
	return true;
}

/* End the log window of refusals once a second has passed since it began, with one line
 * for what it suppressed. */
static void log_flush(struct sb *s, uint64_t now)
{
	if (now - s->log_window_ns < 1000000000u)
		return;
	if (s->log_suppressed > 0)
		log_warn("sandbox %s: DNS refused %llu more names (suppressed)", s->id,
			 (unsigned long long)s->log_suppressed);
	s->log_window_ns = now;
	s->log_lines = 0;
	s->log_suppressed = 0;
}

static void log_refused(struct sb *s, const char *name, uint16_t type, uint64_t now)
{
	log_flush(s, now);
	if (s->log_lines >= RESOLVER_LOG_PER_S) {
		s->log_suppressed++;
		return;
	}
	s->log_lines++;
	char buf[16];
	log_warn("sandbox %s: DNS refused %s (%s)", s->id, name,
		 dns_type_name(type, buf, sizeof(buf)));
}

static bool allowed(const struct sb *s, const char *name)
{
	for (size_t i = 0; i < s->n_rules; i++)
		if (dns_pattern_match(s->rules[i].pattern, name))
			return s->rules[i].allow;
	return s->default_allow;
}

/* Send q upstream from a fresh socket; false when that failed (the caller answers). */
/* A sandbox's share of the queries in flight: the pool split among the sandboxes served,
 * at most RESOLVER_PENDING_PER_SB, at least 1. Up to RESOLVER_PENDING_MAX sandboxes the
 * shares together fit the pool, so sandboxes that flood it leave every other one its share. */
static unsigned fair_share(void)
{
	size_t share = RESOLVER_PENDING_MAX / (n_sbs ? n_sbs : 1);
	if (share > RESOLVER_PENDING_PER_SB)
		return RESOLVER_PENDING_PER_SB;
	return share ? (unsigned)share : 1;
}

static bool forward(struct sb *s, uint32_t slot, const uint8_t *msg, size_t len,
		    const struct dns_query *q, const struct sockaddr_in *from, uint64_t now)
{
	if (s->pending >= fair_share() || n_pending >= RESOLVER_PENDING_MAX) {
		log_debug("sandbox %s: too many DNS queries in flight", s->id);
		return false;
	}
	size_t i = 0;
	while (pend[i].used)
		i++; /* n_pending < RESOLVER_PENDING_MAX: a free slot exists */
	struct pending *p = &pend[i];
	uint8_t id[2];
	if (RAND_bytes(id, sizeof(id)) != 1) {
		log_error("resolver: RAND_bytes failed: no DNS id");
		return false;
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("resolver: upstream socket: %s", strerror(errno));
		return false;
	}
	uint8_t out[DNS_QUERY_MAX];
	memcpy(out, msg, len);
	uint16_t up_id = (uint16_t)(id[0] << 8 | id[1]);
	dns_set_id(out, len, up_id);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token(TOK_UP, (uint32_t)i, p->gen)};
	if (connect(fd, (const struct sockaddr *)&upstream, sizeof(upstream)) < 0 ||
	    send(fd, out, len, 0) < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_debug("sandbox %s: forwarding a DNS query: %s", s->id, strerror(errno));
		close(fd);
		return false;
	}
	p->used = true;
	p->fd = fd;
	p->sb_slot = slot;
	p->sb_gen = s->gen;
	p->up_id = up_id;
	p->client = *from;
	p->deadline_ns = now + (uint64_t)RESOLVER_TIMEOUT_MS * 1000000u;
	p->q = *q;
	memcpy(p->msg, msg, len);
	p->len = len;
	n_pending++;
	s->pending++;
	return true;
}

static void handle_query(struct sb *s, uint32_t slot, const uint8_t *msg, size_t len,
			 const struct sockaddr_in *from)
{
	uint64_t now = now_ns();
	s->st.queries++;
	if (!rate_ok(s, now)) {
		s->st.rate_limited++;
		return;
	}
	struct dns_query q;
	int rc = len > DNS_QUERY_MAX ? -EBADMSG : dns_parse_query(msg, len, &q);
	if (rc == -EBADMSG) {
		s->st.failed++;
		return;
	}
	if (rc < 0 || q.qclass != DNS_CLASS_IN || !allowed(s, q.name)) {
		s->st.refused++;
		metrics_add(METRIC_DNS_REFUSALS, 1);
		log_refused(s, rc < 0 ? "(a name outside [a-z0-9_-.])" : q.name, q.qtype, now);
		reply_rcode(s, msg, &q, DNS_RCODE_REFUSED, from);
		return;
	}
	if (q.qtype == DNS_TYPE_AAAA) {
		s->st.answered++;
		metrics_add(METRIC_DNS_ANSWERS, 1);
		reply_rcode(s, msg, &q, DNS_RCODE_NOERROR, from);
		return;
	}
	if (!forward(s, slot, msg, len, &q, from, now)) {
		s->st.failed++;
		reply_rcode(s, msg, &q, DNS_RCODE_SERVFAIL, from);
		return;
	}
	s->st.forwarded++;
}

/* Datagrams on a sandbox's socket: a bounded number per event, so that one sandbox cannot
 * starve the others (the rest wait for the next round; epoll is level-triggered). */
static void on_sandbox(uint32_t slot, uint32_t gen)
{
	uint8_t buf[DNS_QUERY_MAX + 1];
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 32; i++) {
		struct sb *s = sb_by_slot(slot, gen);
		if (!s)
			break;
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(s->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_debug("sandbox %s: DNS socket: %s", s->id, strerror(errno));
			break;
		}
		if (flen != sizeof(from) || from.sin_family != AF_INET || from.sin_port == 0) {
			s->st.queries++;
			s->st.failed++;
			continue;
		}
		handle_query(s, slot, buf, (size_t)n, &from);
	}
	pthread_mutex_unlock(&lock);
}

/* A datagram (or an error) on an upstream socket. */
static void on_upstream(uint32_t slot, uint32_t gen)
{
	static uint8_t buf[65536]; /* the thread's alone */
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 8; i++) {
		if (slot >= RESOLVER_PENDING_MAX || !pend[slot].used ||
		    (pend[slot].gen & GEN_MASK) != (gen & GEN_MASK))
			break;
		struct pending *p = &pend[slot];
		ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			/* ECONNREFUSED and the like: the upstream said no at once. */
			servfail(p);
			break;
		}
		struct dns_answer ans;
		if (dns_parse_response(buf, (size_t)n, &p->q, &ans) < 0 || ans.id != p->up_id) {
			log_debug("resolver: ignoring a reply that does not answer query %u",
				  (unsigned)p->up_id);
			continue;
		}
		/* The answer: the query leaves the table before the lock is let go. */
		uint32_t sb_slot = p->sb_slot, sb_gen = p->sb_gen;
		struct sockaddr_in client = p->client;
		uint16_t client_id = p->q.id;
		struct sb *s = sb_by_slot(sb_slot, sb_gen);
		if (s && !allowed(s, p->q.name)) {
			/* resolver_set_rules refused the name while it was upstream */
			s->st.refused++;
			metrics_add(METRIC_DNS_REFUSALS, 1);
			reply_rcode(s, p->msg, &p->q, DNS_RCODE_REFUSED, &p->client);
			s = NULL;
		}
		pending_free(p);
		if (!s)
			break;
		if (s->pin && ans.n_addrs > 0 && answer_fn) {
			char key[IFNAMSIZ];
			memcpy(key, s->key, sizeof(key));
			unsigned ttl = ans.min_ttl < RESOLVER_TTL_MIN	? RESOLVER_TTL_MIN
				       : ans.min_ttl > RESOLVER_TTL_MAX ? RESOLVER_TTL_MAX
									: ans.min_ttl;
			pthread_mutex_unlock(&lock);
			answer_fn(answer_ctx, key, ans.addrs, ans.n_addrs, ttl);
			pthread_mutex_lock(&lock);
			s = sb_by_slot(sb_slot, sb_gen);
			if (!s)
				break;
		}
		dns_set_id(buf, (size_t)n, client_id);
		send_to_client(s, buf, (size_t)n, &client);
		s->st.answered++;
		metrics_add(METRIC_DNS_ANSWERS, 1);
		break;
	}
	pthread_mutex_unlock(&lock);
}

/* SERVFAIL for every query past its deadline, the suppressed-lines line of every log window
 * that has ended; the ms until the next of either (-1: none). */
static int expire(void)
{
	uint64_t now = now_ns(), next = UINT64_MAX;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; n_pending > 0 && i < RESOLVER_PENDING_MAX; i++) {
		if (!pend[i].used)
			continue;
		if (pend[i].deadline_ns <= now)
			servfail(&pend[i]);
		else if (pend[i].deadline_ns < next)
			next = pend[i].deadline_ns;
	}
	/* and the suppressed-lines line of every window that has ended */
	for (size_t i = 0; i < sbs_cap; i++) {
		struct sb *s = &sbs[i];
		if (!s->used || s->log_suppressed == 0)
			continue;
		log_flush(s, now);
		if (s->log_suppressed > 0 && s->log_window_ns + 1000000000u < next)
			next = s->log_window_ns + 1000000000u;
	}
	pthread_mutex_unlock(&lock);
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now + 999999) / 1000000);
}

static void *resolver_thread(void *arg)
{
	(void)arg;
	struct epoll_event evs[64];
	int timeout = -1;
	for (;;) {
		int n = epoll_wait(epfd, evs, 64, timeout);
		if (n < 0 && errno != EINTR) {
			log_error("resolver: epoll_wait: %s", strerror(errno));
			n = 0;
		}
		for (int i = 0; i < n; i++) {
			uint64_t t = evs[i].data.u64;
			unsigned kind = (unsigned)(t >> 62);
			uint32_t gen = (uint32_t)(t >> 32) & GEN_MASK, slot = (uint32_t)t;
			if (kind == TOK_WAKE) {
				uint64_t v;
				if (read(wakefd, &v, sizeof(v)) < 0)
					log_debug("resolver: wake: %s", strerror(errno));
			} else if (kind == TOK_SB) {
				on_sandbox(slot, gen);
			} else {
				on_upstream(slot, gen);
			}
		}
		pthread_mutex_lock(&lock);
		bool stop = stopping;
		pthread_mutex_unlock(&lock);
		if (stop)
			break;
		timeout = expire();
	}
	return NULL;
}

int resolver_start(const struct sockaddr_in *up, resolver_answer_fn *on_answer, void *ctx,
		   struct cell_error *err)
{
	if (!up || up->sin_family != AF_INET || up->sin_port == 0)
		return cell_err_msg(err, EINVAL,
				    "resolver: upstream: not an IPv4 address and port");
	pthread_mutex_lock(&lock);
	if (running) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	int rc;
	pend = calloc(RESOLVER_PENDING_MAX, sizeof(*pend));
	if (!pend) {
		rc = cell_err(err, ENOMEM, "resolver: its table of queries");
		goto fail;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (epfd < 0 || wakefd < 0) {
		rc = cell_err(err, errno, "resolver: epoll");
		goto fail;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token(TOK_WAKE, 0, 0)};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev) < 0) {
		rc = cell_err(err, errno, "resolver: epoll");
		goto fail;
	}
	upstream = *up;
	answer_fn = on_answer;
	answer_ctx = ctx;
	stopping = false;
	int e = pthread_create(&thread, NULL, resolver_thread, NULL);
	if (e != 0) {
		rc = cell_err(err, e, "resolver: starting its thread");
		goto fail;
	}
	running = true;
	pthread_mutex_unlock(&lock);
	return 0;
fail:
	if (epfd >= 0)
		close(epfd);
	if (wakefd >= 0)
		close(wakefd);
	epfd = wakefd = -1;
	free(pend);
	pend = NULL;
	pthread_mutex_unlock(&lock);
	return rc;
}

static void sb_free(struct sb *s)
{
	for (size_t i = 0; i < RESOLVER_PENDING_MAX; i++)
		if (pend[i].used && pend[i].sb_slot == (uint32_t)(s - sbs) &&
		    (pend[i].sb_gen & GEN_MASK) == (s->gen & GEN_MASK))
			pending_free(&pend[i]);
	if (epoll_ctl(epfd, EPOLL_CTL_DEL, s->fd, NULL) < 0)
		log_debug("sandbox %s: removing its DNS socket from epoll: %s", s->id,
			  strerror(errno));
	close(s->fd);
	free(s->rules);
	uint32_t gen = s->gen + 1;
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->gen = gen;
	n_sbs--;
}

void resolver_stop(void)
{
	pthread_mutex_lock(&lock);
	if (!running || stopping) {
		pthread_mutex_unlock(&lock);
		return;
	}
	stopping = true;
	uint64_t one = 1;
	if (write(wakefd, &one, sizeof(one)) < 0)
		log_debug("resolver: wake: %s", strerror(errno));
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sbs_cap; i++)
		if (sbs[i].used)
			sb_free(&sbs[i]);
	for (size_t i = 0; i < RESOLVER_PENDING_MAX; i++)
		if (pend[i].used)
			pending_free(&pend[i]);
	free(sbs);
	sbs = NULL;
	sbs_cap = 0;
	free(pend);
	pend = NULL;
	close(epfd);
	close(wakefd);
	epfd = wakefd = -1;
	running = stopping = false;
	pthread_mutex_unlock(&lock);
}

/* The rules, normalised, in a new array. */
static int rules_copy(const struct resolver_rules *in, struct resolver_rule **out,
		      struct cell_error *err)
{
	*out = NULL;
	if (!in)
		return cell_err_msg(err, EINVAL, "rules: none given");
	if (in->n > RESOLVER_RULES_MAX)
		return cell_err_msg(err, EINVAL, "rules: %zu of them, at most %d", in->n,
				    RESOLVER_RULES_MAX);
	if (in->n == 0)
		return 0;
	if (!in->rules)
		return cell_err_msg(err, EINVAL, "rules: none given for %zu", in->n);
	struct resolver_rule *r = calloc(in->n, sizeof(*r));
	if (!r)
		return cell_err(err, ENOMEM, "rules");
	for (size_t i = 0; i < in->n; i++) {
		r[i].allow = in->rules[i].allow;
		if (memchr(in->rules[i].pattern, '\0', sizeof(in->rules[i].pattern)) == NULL ||
		    dns_pattern_normalize(in->rules[i].pattern, r[i].pattern,
					  sizeof(r[i].pattern)) < 0) {
			free(r);
			return cell_err_msg(err, EINVAL,
					    "rules[%zu].pattern: not a domain name or *.name", i);
		}
	}
	*out = r;
	return 0;
}

static bool key_valid(const char *key)
{
	size_t n = strnlen(key, IFNAMSIZ);
	if (n == 0 || n >= IFNAMSIZ)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)key[i]) && key[i] != '-' && key[i] != '_' &&
		    key[i] != '.')
			return false;
	return true;
}

int resolver_add(const char *key, const char *sandbox_id, struct in_addr listen_addr,
		 const struct resolver_rules *rules, bool pin_answers, struct cell_error *err)
{
	if (!key || !key_valid(key))
		return cell_err_msg(err, EINVAL, "resolver: key: not an interface name");
	if (!sandbox_id || !cell_id_valid(sandbox_id))
		return cell_err_msg(err, EINVAL, "resolver: sandbox id: not an id");
	struct resolver_rule *copy;
	int rc = rules_copy(rules, &copy, err);
	if (rc < 0)
		return cell_err_wrap(err, "resolver: sandbox %s: ", sandbox_id);
	char addr_text[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &listen_addr, addr_text, sizeof(addr_text));
	int fd = -1;
	pthread_mutex_lock(&lock);
	if (!running) {
		rc = cell_err_msg(err, ESRCH, "resolver: not running");
		goto fail;
	}
	if (sb_by_key(key)) {
		rc = cell_err_msg(err, EEXIST, "resolver: %s is served already", key);
		goto fail;
	}
	for (size_t i = 0; i < sbs_cap; i++)
		if (sbs[i].used && sbs[i].addr.s_addr == listen_addr.s_addr) {
			rc = cell_err_msg(err, EADDRINUSE, "resolver: %s:53 is served already (%s)",
					  addr_text, sbs[i].key);
			goto fail;
		}
	size_t slot = 0;
	while (slot < sbs_cap && sbs[slot].used)
		slot++;
	if (slot == sbs_cap) {
		size_t cap = sbs_cap ? sbs_cap * 2 : 16;
		struct sb *grown = realloc(sbs, cap * sizeof(*grown));
		if (!grown) {
			rc = cell_err(err, ENOMEM, "resolver: its table");
			goto fail;
		}
		memset(grown + sbs_cap, 0, (cap - sbs_cap) * sizeof(*grown));
		sbs = grown;
		sbs_cap = cap;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(53), .sin_addr = listen_addr};
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = cell_err(err, errno, "resolver: binding %s:53 for %s", addr_text, key);
		goto fail;
	}
	struct sb *s = &sbs[slot];
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = token(TOK_SB, (uint32_t)slot, s->gen)};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		rc = cell_err(err, errno, "resolver: epoll");
		goto fail;
	}
	uint32_t gen = s->gen;
	memset(s, 0, sizeof(*s));
	s->used = true;
	s->gen = gen;
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->id, sizeof(s->id), "%s", sandbox_id);
	s->fd = fd;
	s->addr = listen_addr;
	s->rules = copy;
	s->n_rules = rules->n;
	s->default_allow = rules->default_allow;
	s->pin = pin_answers;
	s->tokens = RESOLVER_BURST;
	s->refill_ns = now_ns();
	n_sbs++;
	pthread_mutex_unlock(&lock);
	return 0;
fail:
	pthread_mutex_unlock(&lock);
	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

int resolver_set_rules(const char *key, const struct resolver_rules *rules, bool pin_answers,
		       struct cell_error *err)
{
	struct resolver_rule *copy;
	int rc = rules_copy(rules, &copy, err);
	if (rc < 0)
		return cell_err_wrap(err, "resolver: %s: ", key);
	pthread_mutex_lock(&lock);
	struct sb *s = running ? sb_by_key(key) : NULL;
	if (!s) {
		pthread_mutex_unlock(&lock);
		free(copy);
		return cell_err_msg(err, ENOENT, "resolver: %s is not served", key);
	}
	struct resolver_rule *old = s->rules;
	s->rules = copy;
	s->n_rules = rules->n;
	s->default_allow = rules->default_allow;
	s->pin = pin_answers;
	pthread_mutex_unlock(&lock);
	free(old);
	return 0;
}

void resolver_remove(const char *key)
{
	pthread_mutex_lock(&lock);
	struct sb *s = running ? sb_by_key(key) : NULL;
	if (s)
		sb_free(s);
	pthread_mutex_unlock(&lock);
}

int resolver_stats(const char *key, struct resolver_stats *out)
{
	pthread_mutex_lock(&lock);
	struct sb *s = running ? sb_by_key(key) : NULL;
	if (s)
		*out = s->st;
	pthread_mutex_unlock(&lock);
	return s ? 0 : -ENOENT;
}

int resolver_parse_upstream(const char *text, struct sockaddr_in *out, struct cell_error *err)
{
	char buf[32];
	size_t len = strnlen(text, sizeof(buf));
	if (len == 0 || len >= sizeof(buf))
		return cell_err_msg(err, EINVAL, "DNS upstream: '%.40s' is not ADDR[:PORT]", text);
	memcpy(buf, text, len + 1);
	unsigned long port = 53;
	char *colon = strchr(buf, ':');
	if (colon) {
		*colon = '\0';
		char *end;
		const char *p = colon + 1;
		errno = 0;
		port = *p >= '0' && *p <= '9' ? strtoul(p, &end, 10) : 0;
		if (port == 0 || port > 65535 || errno || *end)
			return cell_err_msg(
			    err, EINVAL, "DNS upstream: '%s': port: not a number 1..65535", text);
	}
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, buf, &out->sin_addr) != 1)
		return cell_err_msg(err, EINVAL, "DNS upstream: '%s': not an IPv4 address", text);
	return 0;
}

int resolver_default_upstream(struct sockaddr_in *out, struct cell_error *err)
{
	const char *path = "/etc/resolv.conf";
	FILE *f = fopen(path, "re");
	if (!f)
		return cell_err(err, errno == ENOENT ? ENOENT : errno,
				"DNS upstream: reading %s (give celld --dns-upstream ADDR[:PORT])",
				path);
	char line[512];
	int rc = -ENOENT;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "nameserver", 10) != 0 || (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 10;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t n = strcspn(p, " \t\r\n#;");
		p[n] = '\0';
		memset(out, 0, sizeof(*out));
		out->sin_family = AF_INET;
		out->sin_port = htons(53);
		if (inet_pton(AF_INET, p, &out->sin_addr) == 1)
			rc = 0;
	}
	fclose(f);
	if (rc < 0)
		return cell_err_msg(err, ENOENT,
				    "DNS upstream: %s names no IPv4 nameserver (give celld "
				    "--dns-upstream ADDR[:PORT])",
				    path);
	return 0;
}
