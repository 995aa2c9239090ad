/* The TCP listener's gate: every TCP connection waits here, unauthenticated, until the head
 * of its first request has arrived whole and carries the API key; only then is it handed to
 * the HTTP server (a thread and a memory pool of its own, as on the Unix socket).
 *
 * Anyone who reaches the port can open connections, so nothing here grows with what a peer
 * sends or how long it waits: one thread, one epoll set, a fixed table of pending
 * connections allocated at start (gate_limits.pending_max, at most .pending_per_ip of them
 * from one client address), one shared peek buffer. The head is read with MSG_PEEK,
 * so the HTTP server later reads the request from the first byte; its bytes wait in the
 * kernel's receive buffer meanwhile. Each connection has gate_limits.head_timeout_s for its
 * whole head (a slowloris trickling a byte at a time gains nothing: the deadline is never
 * pushed back) and GATE_HEAD_MAX bytes for it (431 beyond). A full table makes room by
 * closing the oldest pending connection, of the same client when it is at its own cap, so a
 * flood from many addresses never stops a new connection from being looked at: a key holder
 * whose head arrives at once gets through. The key check is the one every request gets again
 * inside the HTTP server; here it only decides who may cost celld more than a table slot.
 *
 * Refusals are logged once per GATE_LOG_INTERVAL_MS and kind, with a count, so a flood does
 * not flood the log. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/id.h"
#include "timefmt.h"
#include "audit.h"
#include "gate.h"
#include "head.h"
#include "http.h"
#include "peer.h"

#define GATE_LINGER_MS	     2000  /* for the client to read a refusal before the close */
#define GATE_LOG_INTERVAL_MS 10000 /* one log line per kind of refusal per interval */
#define GATE_ACCEPT_BATCH    16	   /* accepts between two looks at pending connections */
#define GATE_ACCEPT_PAUSE_MS 100   /* after accept failed for want of fds or memory */

/* epoll data of the two fds that are not connections; a connection's is gen << 32 | slot. */
#define EV_LISTEN UINT64_MAX
#define EV_STOP	  (UINT64_MAX - 1)

struct conn;
TAILQ_HEAD(conn_list, conn);

struct peer {
	struct peer_key key;
	unsigned n;		/* its pending connections */
	struct conn_list conns; /* oldest first */
	struct peer *next;	/* hash chain, or the free list */
};

struct conn {
	int fd;		  /* -1: slot free */
	uint32_t gen;	  /* bumped when the slot is freed: events for an older fd are dropped */
	bool lingering;	  /* answered; reading and dropping until the client closes */
	int64_t deadline; /* monotonic ms */
	struct peer *peer;
	TAILQ_ENTRY(conn) age;	/* g->reading, g->lingering or g->free; oldest first */
	TAILQ_ENTRY(conn) same; /* peer->conns */
};

enum refusal {
	REF_PER_IP,
	REF_FULL,
	REF_TIMEOUT,
	REF_TOO_LARGE,
	REF_KEY,
	REF_ACCEPT,
	REF_HANDOFF,
	REF_COUNT
};

struct refusal_log {
	int64_t last;		/* when a line was last written, 0: never */
	unsigned suppressed;	/* refusals since, not written */
	struct peer_key client; /* of the latest one */
};

struct gate {
	int listen_fd, epfd, stop_fd;
	struct MHD_Daemon *daemon;
	const struct http_api *api;
	unsigned max, per_ip, timeout_ms;
	struct conn *conns;
	struct conn_list reading, lingering, free;
	unsigned n;
	struct peer *peers, *free_peers, **buckets;
	unsigned nbuckets;
	uint64_t seed;
	int64_t accept_resume; /* 0: accepting */
	struct refusal_log log[REF_COUNT];
	pthread_t thread;
	bool running;
	/* The head of the first request: its bytes, peeked, never consumed. One buffer serves
	 * every connection of the gate (only its thread touches it). */
	char peekbuf[GATE_HEAD_MAX + 1];
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- clients ---- */

/* Keyed with a random seed, so that a client cannot choose addresses that share a chain. */
static struct peer **peer_bucket(struct gate *g, const struct peer_key *k)
{
	return &g->buckets[peer_key_hash(k, g->seed) & (g->nbuckets - 1)];
}

static struct peer *peer_find(struct gate *g, const struct peer_key *k)
{
	for (struct peer *p = *peer_bucket(g, k); p; p = p->next)
		if (peer_key_equal(&p->key, k))
			return p;
	return NULL;
}

/* There is always a free entry: no more clients than connections are pending. */
static struct peer *peer_add(struct gate *g, const struct peer_key *k)
{
	struct peer *p = g->free_peers;
	g->free_peers = p->next;
	p->key = *k;
	p->n = 0;
	TAILQ_INIT(&p->conns);
	struct peer **b = peer_bucket(g, k);
	p->next = *b;
	*b = p;
	return p;
}

static void peer_drop(struct gate *g, struct peer *p)
{
	struct peer **pp = peer_bucket(g, &p->key);
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	p->next = g->free_peers;
	g->free_peers = p;
}

/* ---- the log ---- */

static void refusal_text(struct gate *g, enum refusal r, char *buf, size_t size)
{
	switch (r) {
	case REF_PER_IP:
		snprintf(buf, size,
			 "a client opened more than %u unauthenticated connections: "
			 "its oldest closed",
			 g->per_ip);
		break;
	case REF_FULL:
		snprintf(buf, size, "%u unauthenticated connections pending: the oldest closed",
			 g->max);
		break;
	case REF_TIMEOUT:
		snprintf(buf, size, "request head not complete within %u s: closed",
			 g->timeout_ms / 1000);
		break;
	case REF_TOO_LARGE:
		snprintf(buf, size, "request head over %u bytes: 431", GATE_HEAD_MAX);
		break;
	case REF_KEY:
		snprintf(buf, size, "missing or wrong %s: 401", g->api->key_header);
		break;
	case REF_ACCEPT:
		snprintf(buf, size, "accept failed: paused for %d ms", GATE_ACCEPT_PAUSE_MS);
		break;
	case REF_HANDOFF:
		snprintf(buf, size, "the HTTP server took no more connections: closed");
		break;
	case REF_COUNT:
		buf[0] = '\0';
		break;
	}
}

/* The first refusal of a kind is written at once; later ones within the interval are only
 * counted, and the count is written when the interval is over. */
static void refuse(struct gate *g, enum refusal r, const struct peer_key *client,
		   const char *detail)
{
	struct refusal_log *l = &g->log[r];
	int64_t now = mono_ms();
	if (client)
		l->client = *client;
	else
		memset(&l->client, 0, sizeof(l->client));
	if (l->last && now - l->last < GATE_LOG_INTERVAL_MS) {
		l->suppressed++;
		return;
	}
	char what[160], who[64] = "";
	refusal_text(g, r, what, sizeof(what));
	if (client)
		peer_key_text(client, who, sizeof(who));
	log_warn("tcp%s%s: %s%s%s", who[0] ? " " : "", who, what, detail ? "; " : "",
		 detail ? detail : "");
	l->last = now;
	l->suppressed = 0;
}

/* Write the counts of the kinds whose interval is over (of every kind with force). */
static void flush_log(struct gate *g, int64_t now, bool force)
{
	for (int r = 0; r < REF_COUNT; r++) {
		struct refusal_log *l = &g->log[r];
		if (!l->suppressed || (!force && now - l->last < GATE_LOG_INTERVAL_MS))
			continue;
		char what[160], who[80] = "";
		refusal_text(g, r, what, sizeof(what));
		if (l->client.len) {
			memcpy(who, ", the latest from ", 18);
			peer_key_text(&l->client, who + 18, sizeof(who) - 18);
		}
		log_warn("tcp: %s: %u more in the last %lld s%s", what, l->suppressed,
			 (long long)(now - l->last + 999) / 1000, who);
		l->last = now;
		l->suppressed = 0;
	}
}

static int64_t log_due(struct gate *g)
{
	int64_t due = 0;
	for (int r = 0; r < REF_COUNT; r++) {
		int64_t t = g->log[r].last + GATE_LOG_INTERVAL_MS;
		if (g->log[r].suppressed && (!due || t < due))
			due = t;
	}
	return due;
}

/* ---- pending connections ---- */

static uint64_t conn_event_id(struct gate *g, const struct conn *c)
{
	return (uint64_t)c->gen << 32 | (uint64_t)(c - g->conns);
}

/* Out of every list and back to the free ones; the fd is the caller's. */
static void conn_forget(struct gate *g, struct conn *c)
{
	struct peer *p = c->peer;
	TAILQ_REMOVE(c->lingering ? &g->lingering : &g->reading, c, age);
	TAILQ_REMOVE(&p->conns, c, same);
	if (--p->n == 0)
		peer_drop(g, p);
	c->fd = -1;
	c->gen++;
	c->peer = NULL;
	c->lingering = false;
	TAILQ_INSERT_TAIL(&g->free, c, age);
	g->n--;
}

static void conn_close(struct gate *g, struct conn *c)
{
	int fd = c->fd;
	conn_forget(g, c);
	close(fd);
}

/* The oldest pending connection of the client, or of everyone; lingering ones go first
 * (they have had their answer). */
static struct conn *oldest(struct gate *g, struct peer *p)
{
	if (p)
		return TAILQ_FIRST(&p->conns);
	struct conn *c = TAILQ_FIRST(&g->lingering);
	return c ? c : TAILQ_FIRST(&g->reading);
}

/* Read and drop what the client sends until it closes; the answer is already on its way. */
static void linger(struct gate *g, struct conn *c)
{
	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(c->fd, g->peekbuf, sizeof(g->peekbuf), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		break;
	}
	conn_close(g, c);
}

/* Answer a refusal and close with a lingering close: closing with the request still unread
 * would send a reset, and the client could lose the answer with it. */
/* The answer status with body eb (borrowed; NULL: none, the connection is closed). */
static void conn_answer_body(struct gate *g, struct conn *c, enum refusal why, unsigned status,
			     const char *reason, const json_t *eb, bool head_only,
			     const char *request_id)
{
	char rid[CELL_ID_RANDOM_LEN + 1], body[256], resp[768], detail[32];
	if (request_id)
		snprintf(rid, sizeof(rid), "%s", request_id);
	else if (cell_id_random(rid) < 0)
		snprintf(rid, sizeof(rid), "%016llx", (unsigned long long)celld_now_ms());
	snprintf(detail, sizeof(detail), "rid=%s", rid);
	refuse(g, why, &c->peer->key, detail);
	int blen = eb ? (int)json_dumpb(eb, body, sizeof(body), JSON_COMPACT) : 0;
	if (blen <= 0 || blen >= (int)sizeof(body)) {
		conn_close(g, c);
		return;
	}
	body[blen] = '\0';
	/* HEAD gets the head alone, with the length the body would have. */
	int len = snprintf(resp, sizeof(resp),
			   "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
			   "Content-Length: %d\r\nX-Request-ID: %s\r\nConnection: close\r\n\r\n%s",
			   status, reason, blen, rid, head_only ? "" : body);
	/* A new connection's send buffer is empty: the answer goes out whole or not at all. */
	if (send(c->fd, resp, len, MSG_DONTWAIT | MSG_NOSIGNAL) != len ||
	    shutdown(c->fd, SHUT_WR) < 0) {
		conn_close(g, c);
		return;
	}
	TAILQ_REMOVE(&g->reading, c, age);
	c->lingering = true;
	c->deadline = mono_ms() + GATE_LINGER_MS;
	TAILQ_INSERT_TAIL(&g->lingering, c, age);
	linger(g, c);
}

static void conn_answer(struct gate *g, struct conn *c, enum refusal why, unsigned status,
			const char *reason, const char *code, const char *message, bool head_only,
			const char *request_id)
{
	/* In the body of the listener's API, as the HTTP server would answer. */
	json_t *eb = g->api->error_body(status, code, message);
	conn_answer_body(g, c, why, status, reason, eb, head_only, request_id);
	json_decref(eb);
}

/* The connection has shown the key: the HTTP server owns it from here. */
static void conn_handoff(struct gate *g, struct conn *c)
{
	int fd = c->fd;
	struct peer_key k = c->peer->key;
	epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
	conn_forget(g, c);
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	if (getpeername(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return;
	}
	/* It closes the socket itself when it cannot take it. */
	if (MHD_add_connection(g->daemon, fd, (struct sockaddr *)&sa, len) != MHD_YES)
		refuse(g, REF_HANDOFF, &k, strerror(errno));
}

static void conn_read(struct gate *g, struct conn *c, uint32_t events)
{
	ssize_t n = recv(c->fd, g->peekbuf, sizeof(g->peekbuf), MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR) || (events & EPOLLHUP))
			conn_close(g, c);
		return;
	}
	size_t start, len = head_len(g->peekbuf, n, &start);
	if (!len || len > GATE_HEAD_MAX) {
		if ((size_t)n > GATE_HEAD_MAX)
			conn_answer(g, c, REF_TOO_LARGE, 431, "Request Header Fields Too Large",
				    "REQUEST_HEADER_FIELDS_TOO_LARGE",
				    "the request line and headers exceed " GATE_HEAD_MAX_TEXT,
				    false, NULL);
		else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_close(g, c); /* closed its side before the head was whole */
		return;
	}
	if (g->api->head_authorized(g->peekbuf + start, len - start, &c->peer->key)) {
		conn_handoff(g, c);
		return;
	}
	char rid[CELL_ID_RANDOM_LEN + 1], client[64];
	if (cell_id_random(rid) < 0)
		snprintf(rid, sizeof(rid), "%016llx", (unsigned long long)celld_now_ms());
	peer_key_text(&c->peer->key, client, sizeof(client));
	/* In the audit log's security.log, bounded there for all listeners together. */
	audit_auth_failed(g->api->name, client, rid, g->peekbuf + start, len - start);
	bool head_only = !strncmp(g->peekbuf + start, "HEAD ", 5);
	unsigned status = 0;
	json_t *body = g->api->head_refusal
			   ? g->api->head_refusal(g->peekbuf + start, len - start, &status)
			   : NULL;
	if (body && (status == 403 || status == 502))
		conn_answer_body(g, c, REF_KEY, status, status == 403 ? "Forbidden" : "Bad Gateway",
				 body, head_only, rid);
	else
		conn_answer(g, c, REF_KEY, 401, "Unauthorized", "UNAUTHORIZED",
			    g->api->unauthorized_message, head_only, rid);
	json_decref(body);
}

static void admit(struct gate *g, int fd, const struct sockaddr_storage *sa)
{
	struct peer_key k;
	if (!peer_key_of((const struct sockaddr *)sa, &k)) {
		close(fd);
		return;
	}
	/* Room is made by closing the oldest: it is named in the log, not the newcomer. */
	struct peer *p = peer_find(g, &k);
	struct conn *old = NULL;
	if (p && p->n >= g->per_ip) {
		old = oldest(g, p);
		refuse(g, REF_PER_IP, &k, NULL);
	} else if (g->n == g->max) {
		old = oldest(g, NULL);
		refuse(g, REF_FULL, &old->peer->key, NULL);
	}
	if (old) {
		conn_close(g, old);
		p = peer_find(g, &k);
	}
	if (!p)
		p = peer_add(g, &k);
	struct conn *c = TAILQ_FIRST(&g->free);
	TAILQ_REMOVE(&g->free, c, age);
	c->fd = fd;
	c->peer = p;
	c->lingering = false;
	c->deadline = mono_ms() + g->timeout_ms;
	TAILQ_INSERT_TAIL(&g->reading, c, age);
	TAILQ_INSERT_TAIL(&p->conns, c, same);
	p->n++;
	g->n++;
	/* Edge-triggered: the peeked bytes stay unread, so a level-triggered fd would stay
	 * readable; every new segment is a new edge. */
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
				 .data.u64 = conn_event_id(g, c)};
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		conn_close(g, c);
		return;
	}
	conn_read(g, c, 0); /* the head has often arrived with the connection */
}

static void set_accepting(struct gate *g, bool on)
{
	struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.u64 = EV_LISTEN};
	epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->listen_fd, &ev);
}

static void accept_some(struct gate *g)
{
	for (int i = 0; i < GATE_ACCEPT_BATCH; i++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int fd = accept4(g->listen_fd, (struct sockaddr *)&sa, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			admit(g, fd, &sa);
			continue;
		}
		switch (errno) {
		case EAGAIN:
			return;
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			/* The connection stays queued and the listener readable: wait a moment
			 * instead of spinning. */
			refuse(g, REF_ACCEPT, NULL, strerror(errno));
			set_accepting(g, false);
			g->accept_resume = mono_ms() + GATE_ACCEPT_PAUSE_MS;
			return;
		default:
			continue; /* that connection failed (ECONNABORTED, network errors) */
		}
	}
}

static void expire(struct gate *g, int64_t now)
{
	struct conn *c;
	while ((c = TAILQ_FIRST(&g->reading)) && c->deadline <= now) {
		refuse(g, REF_TIMEOUT, &c->peer->key, NULL);
		conn_close(g, c);
	}
	while ((c = TAILQ_FIRST(&g->lingering)) && c->deadline <= now)
		conn_close(g, c);
	if (g->accept_resume && now >= g->accept_resume) {
		g->accept_resume = 0;
		set_accepting(g, true);
	}
}

static int wait_ms(struct gate *g, int64_t now)
{
	int64_t due = 0;
	const struct conn *r = TAILQ_FIRST(&g->reading), *l = TAILQ_FIRST(&g->lingering);
	int64_t cand[] = {r ? r->deadline : 0, l ? l->deadline : 0, g->accept_resume, log_due(g)};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(cand); i++)
		if (cand[i] && (!due || cand[i] < due))
			due = cand[i];
	if (!due)
		return -1;
	return due <= now ? 0 : (int)(due - now);
}

static void *gate_main(void *arg)
{
	struct gate *g = arg;
	struct epoll_event evs[64];
	for (;;) {
		int n = epoll_wait(g->epfd, evs, (int)CELL_ARRAY_SIZE(evs), wait_ms(g, mono_ms()));
		if (n < 0 && errno != EINTR) {
			log_error("tcp gate: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			uint64_t id = evs[i].data.u64;
			if (id == EV_STOP) {
				flush_log(g, mono_ms(), true);
				return NULL;
			}
			if (id == EV_LISTEN) {
				accept_some(g);
				continue;
			}
			struct conn *c = &g->conns[(uint32_t)id];
			if (c->fd < 0 || c->gen != (uint32_t)(id >> 32))
				continue; /* closed earlier in this batch */
			if (c->lingering)
				linger(g, c);
			else
				conn_read(g, c, evs[i].events);
		}
		int64_t now = mono_ms();
		expire(g, now);
		flush_log(g, now, false);
	}
	return NULL;
}

/* ---- start and stop ---- */

/* Everything but the struct itself. */
static void gate_release(struct gate *g)
{
	for (unsigned i = 0; g->conns && i < g->max; i++)
		if (g->conns[i].fd >= 0)
			close(g->conns[i].fd);
	free(g->conns);
	free(g->peers);
	free(g->buckets);
	g->conns = NULL;
	g->peers = NULL;
	g->buckets = NULL;
	if (g->epfd >= 0)
		close(g->epfd);
	if (g->stop_fd >= 0)
		close(g->stop_fd);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	g->epfd = g->stop_fd = g->listen_fd = -1;
}

static void gate_fail(struct gate *g)
{
	gate_release(g);
	free(g);
}

int gate_start(int listen_fd, struct MHD_Daemon *daemon, const struct http_api *api,
	       const struct gate_limits *lim, struct gate **out, struct cell_error *err)
{
	*out = NULL;
	struct gate *g = calloc(1, sizeof(*g));
	if (!g) {
		close(listen_fd);
		return cell_err(err, ENOMEM, "the TCP gate");
	}
	g->epfd = g->stop_fd = -1;
	g->listen_fd = listen_fd;
	g->daemon = daemon;
	g->api = api;
	g->max = lim->pending_max;
	g->per_ip = lim->pending_per_ip;
	g->timeout_ms = lim->head_timeout_s * 1000;
	for (g->nbuckets = 1; g->nbuckets < g->max; g->nbuckets <<= 1)
		;
	g->conns = calloc(g->max, sizeof(*g->conns));
	g->peers = calloc(g->max, sizeof(*g->peers));
	g->buckets = calloc(g->nbuckets, sizeof(*g->buckets));
	if (!g->conns || !g->peers || !g->buckets) {
		gate_fail(g);
		return cell_err(err, ENOMEM, "the TCP gate's table");
	}
	TAILQ_INIT(&g->reading);
	TAILQ_INIT(&g->lingering);
	TAILQ_INIT(&g->free);
	for (unsigned i = 0; i < g->max; i++) {
		g->conns[i].fd = -1;
		TAILQ_INSERT_TAIL(&g->free, &g->conns[i], age);
		g->peers[i].next = i + 1 < g->max ? &g->peers[i + 1] : NULL;
	}
	g->free_peers = g->peers;
	if (getrandom(&g->seed, sizeof(g->seed), 0) != sizeof(g->seed))
		g->seed = (uint64_t)mono_ms() * 0x9e3779b97f4a7c15ull;
	struct epoll_event lev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
	struct epoll_event sev = {.events = EPOLLIN, .data.u64 = EV_STOP};
	/* Accepting runs until EAGAIN: a blocking listener would stall the gate. */
	int fl = fcntl(g->listen_fd, F_GETFL);
	if (fl < 0 || fcntl(g->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    (g->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (g->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &lev) < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stop_fd, &sev) < 0) {
		int e = errno;
		gate_fail(g);
		return cell_err(err, e, "setting up the TCP gate");
	}
	int r = pthread_create(&g->thread, NULL, gate_main, g);
	if (r) {
		gate_fail(g);
		return cell_err(err, r, "starting the TCP gate");
	}
	g->running = true;
	*out = g;
	return 0;
}

void gate_stop(struct gate *g)
{
	if (!g || !g->running)
		return;
	uint64_t one = 1;
	if (write(g->stop_fd, &one, sizeof(one)) != sizeof(one)) {
		/* Its thread may still use it: leave it be rather than free it under it. */
		log_error("stopping the TCP gate: %s", strerror(errno));
		return;
	}
	pthread_join(g->thread, NULL);
	g->running = false;
	gate_fail(g);
}
