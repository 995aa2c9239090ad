/* netlab: the network test lab (netlab.h). Links, addresses and routes through the runtime's
 * rtnetlink module (include/cell/netlink.h), the same code celld uses, so the lab needs no
 * `ip` on the host; servers on one thread of the test process. */
#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/netlink.h"
#include "netlab.h"

const char *const netlab_forbidden[] = {"10.1.2.3",   "100.64.1.1",  "169.254.169.254",
					"172.16.5.5", "192.168.7.7", NULL};

#define SERVERS_MAX  24
#define HITS_MAX     32
#define DNS_NAMES    32
#define DNS_NAME_MAX 255

enum srv_kind { SRV_HTTP, SRV_SINK, SRV_DNS, SRV_ROGUE };

struct hit {
	struct in_addr from;
	unsigned n;
};

struct srv {
	int fd;
	enum srv_kind kind;
	struct in_addr addr;
	uint16_t port;
	struct hit hits[HITS_MAX];
	int n_hits;
	unsigned other; /* hits from sources beyond HITS_MAX */
};

struct dns_entry {
	char name[DNS_NAME_MAX + 1]; /* lower case, no trailing dot; "" when free */
	struct in_addr addr;
};

struct netlab {
	struct h_netns host, inet;
	pthread_t thread;
	bool running;
	int stop[2];
	pthread_mutex_t lock; /* srv[].hits, dns[] */
	struct srv srv[SERVERS_MAX];
	int n_srv;
	struct dns_entry dns[DNS_NAMES];
	/* handed from netlab_new to the thread */
	pthread_mutex_t ready_lock;
	pthread_cond_t ready_cond;
	int ready; /* 0 waiting, 1 up, -errno failed */
	char ready_why[256];
};

static struct in_addr ip4(const char *s)
{
	struct in_addr a;
	ck_assert_msg(inet_pton(AF_INET, s, &a) == 1, "not an IPv4 address: %s", s);
	return a;
}

/* ---- running code in a namespace ---- */

struct in_ns {
	int ns;
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void *in_ns_thread(void *p)
{
	struct in_ns *j = p;
	if (setns(j->ns, CLONE_NEWNET) < 0)
		j->ret = -errno;
	else
		j->ret = j->fn(j->arg);
	return NULL;
}

/* fn(arg) on a thread that entered ns (the caller's thread never changes namespace). */
static int run_in_ns(int ns, int (*fn)(void *arg), void *arg)
{
	struct in_ns j = {.ns = ns, .fn = fn, .arg = arg, .ret = -EINVAL};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, in_ns_thread, &j), 0);
	pthread_join(th, NULL);
	return j.ret;
}

int netlab_in_host(struct netlab *lab, int (*fn)(void *arg), void *arg)
{
	return run_in_ns(lab->host.fd, fn, arg);
}

int netlab_host_fd(const struct netlab *lab)
{
	return lab->host.fd;
}

int netlab_internet_fd(const struct netlab *lab)
{
	return lab->inet.fd;
}

const char *netlab_host_path(const struct netlab *lab)
{
	return lab->host.path;
}

int netlab_host_run(struct netlab *lab, char *const argv[], int timeout_s, struct h_proc *res)
{
	const char *nsenter =
	    access("/usr/bin/nsenter", X_OK) == 0 ? "/usr/bin/nsenter" : "/bin/nsenter";
	char *net = h_fmt("--net=%s", lab->host.path);
	char *full[40];
	size_t n = 0;
	full[n++] = (char *)nsenter;
	full[n++] = net;
	full[n++] = "--";
	for (size_t i = 0; argv[i]; i++) {
		ck_assert_uint_lt(n, CELL_ARRAY_SIZE(full) - 1);
		full[n++] = argv[i];
	}
	full[n] = NULL;
	int r = h_run(full, NULL, timeout_s, res);
	free(net);
	return r;
}

/* ---- links, addresses, routes ---- */

static void nl_ok(int r, const struct cell_error *err, const char *what)
{
	ck_assert_msg(r >= 0, "netlab: %s: %s", what, err->msg);
}

static void build_links(struct netlab *lab)
{
	struct cell_error err = {0};
	struct cell_nl host = {0}, inet = {0};
	nl_ok(cell_nl_open(&host, lab->host.fd, &err), &err, "netlink in host");
	nl_ok(cell_nl_open(&inet, lab->inet.fd, &err), &err, "netlink in internet");
	nl_ok(cell_nl_veth_create(&host, "uplink", "downlink", lab->inet.fd, &err), &err,
	      "veth uplink/downlink");
	nl_ok(cell_nl_link_set_up(&host, "lo", true, &err), &err, "host lo up");
	nl_ok(cell_nl_link_set_up(&host, "uplink", true, &err), &err, "uplink up");
	nl_ok(cell_nl_addr_add4(&host, "uplink", ip4(NETLAB_HOST_ADDR), 24, NULL, &err), &err,
	      "uplink address");
	nl_ok(cell_nl_route_add4_default_onlink(&host, "uplink", ip4(NETLAB_GATEWAY), &err), &err,
	      "host default route");

	nl_ok(cell_nl_link_set_up(&inet, "lo", true, &err), &err, "internet lo up");
	nl_ok(cell_nl_link_set_up(&inet, "downlink", true, &err), &err, "downlink up");
	nl_ok(cell_nl_addr_add4(&inet, "downlink", ip4(NETLAB_GATEWAY), 24, NULL, &err), &err,
	      "downlink address");
	const char *on_lo[] = {NETLAB_WEB1, NETLAB_WEB2, NETLAB_DNS, NETLAB_ROGUE_DNS};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(on_lo); i++)
		nl_ok(cell_nl_addr_add4(&inet, "lo", ip4(on_lo[i]), 32, NULL, &err), &err,
		      on_lo[i]);
	for (size_t i = 0; netlab_forbidden[i]; i++)
		nl_ok(cell_nl_addr_add4(&inet, "lo", ip4(netlab_forbidden[i]), 32, NULL, &err),
		      &err, netlab_forbidden[i]);
	cell_nl_close(&host);
	cell_nl_close(&inet);
	/* What an operator does for routed sandboxes: the host forwards. */
	nl_ok(cell_net_sysctl(lab->host.fd, "net/ipv4/ip_forward", "1", &err), &err,
	      "host ip_forward");
}

/* ---- the DNS table ---- */

static void lower_name(const char *in, char *out, size_t size)
{
	size_t n = strlen(in);
	while (n && in[n - 1] == '.')
		n--;
	ck_assert_msg(n > 0 && n < size, "a DNS name of 1..%zu bytes: %s", size - 1, in);
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	out[n] = '\0';
}

void netlab_dns_set(struct netlab *lab, const char *name, const char *addr)
{
	char key[DNS_NAME_MAX + 1];
	lower_name(name, key, sizeof(key));
	struct in_addr a = {0};
	if (addr)
		a = ip4(addr);
	pthread_mutex_lock(&lab->lock);
	struct dns_entry *slot = NULL;
	for (int i = 0; i < DNS_NAMES; i++) {
		if (!strcmp(lab->dns[i].name, key)) {
			slot = &lab->dns[i];
			break;
		}
		if (!slot && !lab->dns[i].name[0])
			slot = &lab->dns[i];
	}
	bool full = !slot;
	if (slot && addr) {
		snprintf(slot->name, sizeof(slot->name), "%s", key);
		slot->addr = a;
	} else if (slot && !strcmp(slot->name, key)) {
		slot->name[0] = '\0';
	}
	pthread_mutex_unlock(&lab->lock);
	ck_assert_msg(!full || !addr, "netlab: DNS table full (%d names)", DNS_NAMES);
}

static bool dns_lookup(struct netlab *lab, const char *name, struct in_addr *out)
{
	bool found = false;
	pthread_mutex_lock(&lab->lock);
	for (int i = 0; i < DNS_NAMES && !found; i++)
		if (lab->dns[i].name[0] && !strcmp(lab->dns[i].name, name)) {
			*out = lab->dns[i].addr;
			found = true;
		}
	pthread_mutex_unlock(&lab->lock);
	return found;
}

/* ---- counters ---- */

static void count(struct netlab *lab, struct srv *s, struct in_addr from)
{
	pthread_mutex_lock(&lab->lock);
	int i = 0;
	while (i < s->n_hits && s->hits[i].from.s_addr != from.s_addr)
		i++;
	if (i < s->n_hits) {
		s->hits[i].n++;
	} else if (s->n_hits < HITS_MAX) {
		s->hits[s->n_hits].from = from;
		s->hits[s->n_hits++].n = 1;
	} else {
		s->other++;
	}
	pthread_mutex_unlock(&lab->lock);
}

unsigned netlab_hits(struct netlab *lab, enum netlab_proto proto, const char *addr, uint16_t port,
		     const char *from)
{
	struct in_addr a = ip4(addr), f = {0};
	if (from)
		f = ip4(from);
	int type = proto == NETLAB_TCP ? SRV_HTTP : -1;
	unsigned n = 0;
	bool found = false;
	pthread_mutex_lock(&lab->lock);
	for (int i = 0; i < lab->n_srv; i++) {
		struct srv *s = &lab->srv[i];
		bool tcp = s->kind == SRV_HTTP;
		if (s->addr.s_addr != a.s_addr || s->port != port || tcp != (type == SRV_HTTP))
			continue;
		found = true;
		for (int k = 0; k < s->n_hits; k++)
			if (!from || s->hits[k].from.s_addr == f.s_addr)
				n += s->hits[k].n;
		if (!from)
			n += s->other;
	}
	pthread_mutex_unlock(&lab->lock);
	ck_assert_msg(found, "netlab has no %s server at %s:%u",
		      proto == NETLAB_TCP ? "TCP" : "UDP", addr, port);
	return n;
}

unsigned netlab_hits_total(struct netlab *lab)
{
	unsigned n = 0;
	pthread_mutex_lock(&lab->lock);
	for (int i = 0; i < lab->n_srv; i++) {
		for (int k = 0; k < lab->srv[i].n_hits; k++)
			n += lab->srv[i].hits[k].n;
		n += lab->srv[i].other;
	}
	pthread_mutex_unlock(&lab->lock);
	return n;
}

/* ---- servers ---- */

static void serve_http(struct netlab *lab, struct srv *s)
{
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	int c = accept4(s->fd, (struct sockaddr *)&from, &flen, SOCK_CLOEXEC);
	if (c < 0)
		return;
	count(lab, s, from.sin_addr);
	/* The request: read up to its blank line, a bounded time and size (a client that sends
	 * nothing holds this thread 2 s at most). */
	char req[4096];
	size_t len = 0;
	struct pollfd p = {.fd = c, .events = POLLIN};
	while (len < sizeof(req) - 1 && poll(&p, 1, 2000) == 1) {
		ssize_t n = read(c, req + len, sizeof(req) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	char a[INET_ADDRSTRLEN], body[64], resp[256];
	inet_ntop(AF_INET, &s->addr, a, sizeof(a));
	int blen = snprintf(body, sizeof(body), "hello from %s\n", a);
	int rlen = snprintf(resp, sizeof(resp),
			    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
			    "Connection: close\r\n\r\n%s",
			    blen, body);
	ssize_t w = send(c, resp, (size_t)rlen, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)w; /* a client that went away gets nothing: the hit is counted already */
	close(c);
}

static void put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static unsigned get16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* The question of a query: its name (lower case, dotted), type, and where it ends. Returns
 * false for anything malformed (compression pointers in a question included). */
static bool dns_question(const unsigned char *q, size_t len, char *name, size_t size,
			 unsigned *qtype, size_t *end)
{
	if (len < 12 || (q[2] & 0x80) || get16(q + 4) != 1)
		return false;
	size_t off = 12, out = 0;
	for (;;) {
		if (off >= len)
			return false;
		unsigned l = q[off++];
		if (l == 0)
			break;
		if (l > 63 || off + l > len || out + l + 1 >= size)
			return false;
		if (out)
			name[out++] = '.';
		for (unsigned i = 0; i < l; i++)
			name[out++] = (char)tolower(q[off + i]);
		off += l;
	}
	name[out] = '\0';
	if (off + 4 > len)
		return false;
	*qtype = get16(q + off);
	*end = off + 4;
	return true;
}

static void serve_dns(struct netlab *lab, struct srv *s)
{
	unsigned char q[512], r[600];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	ssize_t n = recvfrom(s->fd, q, sizeof(q), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
	if (n < 0)
		return;
	count(lab, s, from.sin_addr);
	if (s->kind == SRV_SINK)
		return;
	char name[DNS_NAME_MAX + 1];
	unsigned qtype = 0;
	size_t qend = 0;
	if (!dns_question(q, (size_t)n, name, sizeof(name), &qtype, &qend))
		return;
	struct in_addr a;
	bool known =
	    s->kind == SRV_ROGUE ? (a = ip4(NETLAB_ROGUE_ANSWER), true) : dns_lookup(lab, name, &a);
	bool answer = known && qtype == 1;
	memcpy(r, q, qend);
	r[2] = (unsigned char)(0x80 | (q[2] & 0x79) | 0x04); /* QR, opcode and RD kept, AA */
	r[3] = (unsigned char)(0x80 | (known ? 0 : 3));	     /* RA; NXDOMAIN when unknown */
	put16(r + 6, answer ? 1 : 0);
	put16(r + 8, 0);
	put16(r + 10, 0);
	size_t len = qend;
	if (answer) {
		unsigned char *p = r + len;
		put16(p, 0xc00c); /* the question's name */
		put16(p + 2, 1);  /* A */
		put16(p + 4, 1);  /* IN */
		p[6] = 0, p[7] = 0;
		put16(p + 8, NETLAB_DNS_TTL);
		put16(p + 10, 4);
		memcpy(p + 12, &a, 4);
		len += 16;
	}
	ssize_t w = sendto(s->fd, r, len, MSG_DONTWAIT, (struct sockaddr *)&from, flen);
	(void)w; /* a lost answer is the client's timeout */
}

static int srv_open(struct netlab *lab, enum srv_kind kind, const char *addr, uint16_t port)
{
	if (lab->n_srv >= SERVERS_MAX)
		return -ENOSPC;
	struct srv *s = &lab->srv[lab->n_srv];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->port = port;
	if (inet_pton(AF_INET, addr, &s->addr) != 1)
		return -EINVAL;
	int type = kind == SRV_HTTP ? SOCK_STREAM : SOCK_DGRAM;
	s->fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0)
		return -errno;
	int one = 1;
	setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = s->addr};
	if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (type == SOCK_STREAM && listen(s->fd, 64) < 0)) {
		int e = -errno;
		close(s->fd);
		return e;
	}
	lab->n_srv++;
	return 0;
}

static int open_servers(struct netlab *lab)
{
	const char *web[] = {NETLAB_WEB1, NETLAB_WEB2};
	int r = 0;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(web) && r == 0; i++) {
		r = srv_open(lab, SRV_HTTP, web[i], NETLAB_HTTP_PORT);
		if (r == 0)
			r = srv_open(lab, SRV_SINK, web[i], NETLAB_SINK_PORT);
	}
	for (size_t i = 0; netlab_forbidden[i] && r == 0; i++) {
		r = srv_open(lab, SRV_HTTP, netlab_forbidden[i], NETLAB_HTTP_PORT);
		if (r == 0)
			r = srv_open(lab, SRV_SINK, netlab_forbidden[i], NETLAB_SINK_PORT);
	}
	if (r == 0)
		r = srv_open(lab, SRV_DNS, NETLAB_DNS, NETLAB_DNS_PORT);
	if (r == 0)
		r = srv_open(lab, SRV_ROGUE, NETLAB_ROGUE_DNS, NETLAB_DNS_PORT);
	return r;
}

static void set_ready(struct netlab *lab, int r, const char *why)
{
	pthread_mutex_lock(&lab->ready_lock);
	lab->ready = r < 0 ? r : 1;
	snprintf(lab->ready_why, sizeof(lab->ready_why), "%s", why);
	pthread_cond_broadcast(&lab->ready_cond);
	pthread_mutex_unlock(&lab->ready_lock);
}

static void *server_thread(void *p)
{
	struct netlab *lab = p;
	/* This thread lives in "internet": every socket it opens is made there. */
	if (setns(lab->inet.fd, CLONE_NEWNET) < 0) {
		set_ready(lab, -errno, "entering the internet namespace");
		return NULL;
	}
	int r = open_servers(lab);
	if (r < 0) {
		set_ready(lab, r, "opening the servers' sockets");
		return NULL;
	}
	set_ready(lab, 0, "");
	struct pollfd pfd[SERVERS_MAX + 1];
	for (;;) {
		int n = 0;
		pfd[n++] = (struct pollfd){.fd = lab->stop[0], .events = POLLIN};
		for (int i = 0; i < lab->n_srv; i++)
			pfd[n++] = (struct pollfd){.fd = lab->srv[i].fd, .events = POLLIN};
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		for (int i = 0; i < lab->n_srv; i++) {
			if (!(pfd[i + 1].revents & POLLIN))
				continue;
			if (lab->srv[i].kind == SRV_HTTP)
				serve_http(lab, &lab->srv[i]);
			else
				serve_dns(lab, &lab->srv[i]);
		}
	}
	return NULL;
}

/* ---- the lab ---- */

static const struct {
	const char *name, *addr;
} initial_names[] = {
    {"web1.test", NETLAB_WEB1},	       {"allowed.test", NETLAB_WEB1},
    {"web2.test", NETLAB_WEB2},	       {"intranet.test", "10.1.2.3"},
    {"cgnat.test", "100.64.1.1"},      {"metadata.test", "169.254.169.254"},
    {"private172.test", "172.16.5.5"}, {"private192.test", "192.168.7.7"},
};

struct netlab *netlab_new(void)
{
	struct netlab *lab = calloc(1, sizeof(*lab));
	ck_assert_ptr_nonnull(lab);
	lab->host.fd = lab->inet.fd = -1;
	lab->stop[0] = lab->stop[1] = -1;
	pthread_mutex_init(&lab->lock, NULL);
	pthread_mutex_init(&lab->ready_lock, NULL);
	pthread_cond_init(&lab->ready_cond, NULL);
	h_netns_hold(&lab->host);
	h_netns_hold(&lab->inet);
	build_links(lab);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(initial_names); i++)
		netlab_dns_set(lab, initial_names[i].name, initial_names[i].addr);
	ck_assert_int_eq(pipe2(lab->stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&lab->thread, NULL, server_thread, lab), 0);
	lab->running = true;
	pthread_mutex_lock(&lab->ready_lock);
	while (!lab->ready)
		pthread_cond_wait(&lab->ready_cond, &lab->ready_lock);
	pthread_mutex_unlock(&lab->ready_lock);
	ck_assert_msg(lab->ready > 0, "netlab: %s: %s", lab->ready_why, strerror(-lab->ready));
	return lab;
}

void netlab_free(struct netlab *lab)
{
	if (!lab)
		return;
	if (lab->running) {
		ssize_t w = write(lab->stop[1], "x", 1);
		(void)w; /* the pipe is empty: it cannot fail */
		pthread_join(lab->thread, NULL);
	}
	for (int i = 0; i < lab->n_srv; i++)
		close(lab->srv[i].fd);
	if (lab->stop[0] >= 0) {
		close(lab->stop[0]);
		close(lab->stop[1]);
	}
	h_netns_release(&lab->inet);
	h_netns_release(&lab->host);
	pthread_mutex_destroy(&lab->lock);
	pthread_mutex_destroy(&lab->ready_lock);
	pthread_cond_destroy(&lab->ready_cond);
	free(lab);
}

/* ---- clients ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline: 0, or -ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

struct http_job {
	const char *addr;
	uint16_t port;
	int timeout_ms;
	char *body;
	size_t size;
};

static int http_get_fn(void *p)
{
	struct http_job *j = p;
	int64_t deadline = mono_ms() + j->timeout_ms;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(j->port)};
	if (inet_pton(AF_INET, j->addr, &sa.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int r = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			r = -errno;
		else if ((r = wait_fd(fd, POLLOUT, deadline)) == 0) {
			int e = 0;
			socklen_t el = sizeof(e);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
			r = -e;
		}
	}
	char buf[4096];
	size_t len = 0;
	if (r == 0) {
		char req[128];
		int n = snprintf(req, sizeof(req), "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", j->addr);
		if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
			r = -EIO;
	}
	while (r == 0 && len < sizeof(buf) - 1) {
		if ((r = wait_fd(fd, POLLIN, deadline)) < 0)
			break;
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (r < 0)
		return r;
	buf[len] = '\0';
	const char *b = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) || !b)
		return -EPROTO;
	snprintf(j->body, j->size, "%s", b + 4);
	return 0;
}

int netlab_http_get(int ns_fd, const char *addr, uint16_t port, int timeout_ms, char *body,
		    size_t size)
{
	struct http_job j = {addr, port, timeout_ms, body, size};
	if (size)
		body[0] = '\0';
	return run_in_ns(ns_fd, http_get_fn, &j);
}

struct dns_job {
	const char *server, *name;
	int timeout_ms;
	char *addr;
};

static int dns_query_fn(void *p)
{
	struct dns_job *j = p;
	int64_t deadline = mono_ms() + j->timeout_ms;
	unsigned char q[300], r[600];
	size_t len = 12;
	memset(q, 0, sizeof(q));
	unsigned id = (unsigned)(mono_ms() & 0xffff);
	put16(q, id);
	q[2] = 0x01; /* RD */
	put16(q + 4, 1);
	for (const char *s = j->name; *s;) {
		size_t l = strcspn(s, ".");
		if (l == 0 || l > 63 || len + l + 6 > sizeof(q))
			return -EINVAL;
		q[len++] = (unsigned char)l;
		memcpy(q + len, s, l);
		len += l;
		s += l;
		if (*s == '.')
			s++;
	}
	q[len++] = 0;
	put16(q + len, 1); /* A */
	put16(q + len + 2, 1);
	len += 4;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(NETLAB_DNS_PORT)};
	if (inet_pton(AF_INET, j->server, &sa.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int ret = -EIO;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(fd, q, len, 0) < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		if ((ret = wait_fd(fd, POLLIN, deadline)) < 0)
			goto out;
		ssize_t n = recv(fd, r, sizeof(r), 0);
		if (n < 0) {
			ret = errno == EAGAIN ? 0 : -errno;
			if (ret < 0)
				goto out;
			continue;
		}
		if (n < 12 || get16(r) != id)
			continue;
		ret = 0;
		if ((r[3] & 0x0f) || get16(r + 6) == 0)
			goto out;
		/* The answer follows the question we sent (len bytes from the header). */
		size_t off = len;
		if (off + 16 > (size_t)n || get16(r + off + 2) != 1 || get16(r + off + 10) != 4)
			goto out;
		inet_ntop(AF_INET, r + off + 12, j->addr, INET_ADDRSTRLEN);
		goto out;
	}
out:
	close(fd);
	return ret;
}

int netlab_dns_query(int ns_fd, const char *server, const char *name, int timeout_ms, char addr[16])
{
	struct dns_job j = {server, name, timeout_ms, addr};
	addr[0] = '\0';
	return run_in_ns(ns_fd, dns_query_fn, &j);
}
