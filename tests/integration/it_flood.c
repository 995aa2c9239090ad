/* Peers without the API key against the TCP listener: whatever they do (many connections,
 * slow heads, huge heads, wrong keys), key holders and the Unix socket keep being served,
 * celld's memory stays put, and each refusal is answered as the API says. Every connection
 * comes from a loopback address of its own test (127.1-9.x.y), so that the per-client cap
 * of one test never meets another's. Waits here are hang guards, never measurements. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* celld's defaults for connections that have not shown the key yet (celld(8)). */
#define PER_IP	 64
#define HEAD_MAX 16384

/* More than the 4096 connections the HTTP server itself takes. */
#define FLOOD_CONNS 4200
/* Hundreds of connections, each sending a head far over HEAD_MAX. */
#define BIG_CONNS 400
#define BIG_HEAD  (256 << 10)

#define SLOW_START "GET /v1/info HTTP/1.1\r\nHost: cell\r\n"

static void raise_nofile(void)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ck_assert_msg(rl.rlim_cur >= FLOOD_CONNS + 256, "RLIMIT_NOFILE hard limit %llu is too low",
		      (unsigned long long)rl.rlim_max);
}

/* A connection to world w's TCP port from src (an address of 127.0.0.0/8); -1 when
 * refused. Blocking, with a hang guard on every call. */
static int connect_to(const struct h_world *w, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {20, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in s = {.sin_family = AF_INET}, d = {.sin_family = AF_INET};
	ck_assert_int_eq(inet_pton(AF_INET, src, &s.sin_addr), 1);
	inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
	d.sin_port = htons((uint16_t)atoi(strrchr(w->listen, ':') + 1));
	ck_assert_msg(bind(fd, (struct sockaddr *)&s, sizeof(s)) == 0, "bind %s: %s", src,
		      strerror(errno));
	if (connect(fd, (struct sockaddr *)&d, sizeof(d)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int connect_from(const char *src)
{
	return connect_to(&H, src);
}

static bool send_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n <= 0)
			return false;
		data += n;
		len -= n;
	}
	return true;
}

/* A slow client of world w: a request line and one header, and never the end of the head. */
static int slow_client_to(const struct h_world *w, const char *src)
{
	int fd = connect_to(w, src);
	if (fd >= 0 && !send_all(fd, SLOW_START, strlen(SLOW_START))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int slow_client(const char *src)
{
	return slow_client_to(&H, src);
}

/* celld closed fd (an end of file or a reset is waiting), seen within timeout_ms (0: look
 * only). A response waiting is not a close. */
static bool closed_by_celld(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	if (poll(&p, 1, timeout_ms) <= 0)
		return false;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN);
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* ---- one HTTP exchange on a raw socket ---- */

struct raw_resp {
	long status; /* 0: no answer */
	char head[8192];
	char body[8192];
	size_t body_len;
};

/* Read one response (no body for HEAD), framed by its Content-Length. */
static long raw_read(int fd, bool head_method, struct raw_resp *r)
{
	memset(r, 0, sizeof(*r));
	char buf[16384];
	size_t len = 0;
	char *end = NULL;
	while (!end) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			return 0;
		len += n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (!end && len == sizeof(buf) - 1)
			return 0;
	}
	size_t hlen = end + 4 - buf;
	snprintf(r->head, sizeof(r->head), "%.*s", (int)hlen, buf);
	if (sscanf(r->head, "HTTP/1.%*d %ld", &r->status) != 1)
		return r->status = 0;
	const char *cl = strcasestr(r->head, "\r\nContent-Length:");
	size_t want = cl && !head_method ? strtoul(cl + 17, NULL, 10) : 0;
	ck_assert_uint_lt(want, sizeof(r->body));
	size_t have = len - hlen;
	memcpy(r->body, buf + hlen, have < want ? have : want);
	while (have < want) {
		ssize_t n = recv(fd, r->body + have, want - have, 0);
		if (n <= 0)
			return r->status = 0;
		have += n;
	}
	r->body_len = want;
	return r->status;
}

/* A header's value in the response head ("" when absent), in a static buffer. */
static const char *raw_header(const struct raw_resp *r, const char *name)
{
	static char v[256];
	char *pat = h_fmt("\r\n%s:", name);
	const char *p = strcasestr(r->head, pat);
	v[0] = '\0';
	if (p) {
		p += strlen(pat);
		p += strspn(p, " ");
		snprintf(v, sizeof(v), "%.*s", (int)strcspn(p, "\r\n"), p);
	}
	free(pat);
	return v;
}

static long raw_exchange(int fd, const char *req, struct raw_resp *r)
{
	if (!send_all(fd, req, strlen(req)))
		return 0;
	return raw_read(fd, !strncmp(req, "HEAD ", 5), r);
}

/* GET /v1/info with world w's key from src, on a connection of its own. */
static long keyed_get_to(const struct h_world *w, const char *src)
{
	int fd = connect_to(w, src);
	if (fd < 0)
		return 0;
	char *req = h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: %s\r\n"
			  "Connection: close\r\n\r\n",
			  w->key);
	struct raw_resp r;
	long st = raw_exchange(fd, req, &r);
	free(req);
	close(fd);
	return st;
}

static long keyed_get_from(const char *src)
{
	return keyed_get_to(&H, src);
}

/* The answer is the API's 401: a JSON error body, a request id, and the connection ends. */
static void expect_raw_401(const char *what, int fd, const struct raw_resp *r, bool body)
{
	ck_assert_msg(r->status == 401, "%s: HTTP %ld (want 401): %.300s", what, r->status,
		      r->head);
	ck_assert_msg(*raw_header(r, "X-Request-ID"), "%s: no X-Request-ID", what);
	ck_assert_msg(!strcasecmp(raw_header(r, "Connection"), "close"), "%s: no Connection: close",
		      what);
	if (body) {
		json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
		ck_assert_msg(j, "%s: the body is not JSON: %.*s", what, (int)r->body_len, r->body);
		ck_assert_str_eq(h_jstr(j, "code"), "UNAUTHORIZED");
		ck_assert_msg(*h_jstr(j, "message"), "%s: no message", what);
		json_decref(j);
	} else {
		ck_assert_uint_eq(r->body_len, 0);
	}
	ck_assert_msg(closed_by_celld(fd, 20000), "%s: the connection stayed open", what);
}

/* ---- the tests ---- */

/* More slow unauthenticated connections than the HTTP server has slots, from many
 * addresses: a key holder on 127.0.0.1 and the Unix socket are still served. */
START_TEST(flood_leaves_key_holders_a_way_in)
{
	raise_nofile();
	int *fds = malloc(FLOOD_CONNS * sizeof(*fds));
	int made = 0;
	for (int i = 0; i < FLOOD_CONNS; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.1.%d.%d", i / 40, i % 40 + 1);
		fds[i] = slow_client(src);
		made += fds[i] >= 0;
	}
	struct h_req req = {.method = "GET", .path = "/v1/sandboxes", .via = H_TCP};
	struct h_resp r;
	long st = h_request(&req, &r);
	ck_assert_msg(st == 200,
		      "a key holder on 127.0.0.1 after %d slow unauthenticated connections: "
		      "HTTP %ld (curl error %d)",
		      made, st, r.curl_code);
	h_resp_free(&r);
	st = h_http("GET", "/v1/info", NULL, NULL);
	ck_assert_msg(st == 200, "the Unix socket during the flood: HTTP %ld", st);
	/* and a key holder behind one of the flooding addresses */
	ck_assert_int_eq(keyed_get_from("127.1.0.1"), 200);
	close_all(fds, FLOOD_CONNS);
	free(fds);
	ck_assert(h_celld_alive());
}
END_TEST

/* A head trickled a line at a time never finishes: the connection is closed at the head's
 * deadline, however often it sends (an idle timeout would never fire). */
START_TEST(head_deadline_closes_slowloris)
{
	int fd = slow_client("127.2.0.1");
	ck_assert_int_ge(fd, 0);
	bool closed = false;
	int lines = 0;
	/* A line every 200 ms at most; the hang guard is 300 lines (60 s). */
	for (; lines < 300 && !closed; lines++)
		closed = closed_by_celld(fd, 200) || !send_all(fd, "X-Slow: 1\r\n", 11);
	ck_assert_msg(closed, "a connection trickling its head was still open after %d lines",
		      lines);
	close(fd);
	ck_assert_int_eq(keyed_get_from("127.2.0.1"), 200);
}
END_TEST

/* Past the per-client cap, that client's oldest pending connection is closed at once; other
 * clients, and a key holder on the capped address, get in. */
START_TEST(per_ip_cap_closes_the_oldest)
{
	/* Older than all below and of another client: while it stays open, what closes below
	 * was neither the head deadline (it would come first) nor the global cap (likewise). */
	int witness = slow_client("127.3.0.9");
	ck_assert_int_ge(witness, 0);
	int fds[PER_IP + 8];
	for (int i = 0; i < PER_IP + 8; i++) {
		fds[i] = slow_client("127.3.0.1");
		ck_assert_msg(fds[i] >= 0, "connection %d from 127.3.0.1 was refused", i);
	}
	for (int i = 0; i < 8; i++)
		ck_assert_msg(closed_by_celld(fds[i], 8000),
			      "connection %d of %d from one address is still open (cap %d)", i,
			      PER_IP + 8, PER_IP);
	ck_assert_msg(!closed_by_celld(witness, 0),
		      "the older connection of another address was closed");
	for (int i = 8; i < PER_IP + 8; i++)
		ck_assert_msg(!closed_by_celld(fds[i], 0),
			      "connection %d, one of the newest %d, was closed", i, PER_IP);
	ck_assert_int_eq(keyed_get_from("127.3.0.2"), 200);
	ck_assert_int_eq(keyed_get_from("127.3.0.1"), 200);
	close_all(fds, PER_IP + 8);
	close(witness);
}
END_TEST

/* A celld of the test's own with TCP and these flags (NULL-terminated). */
static struct h_world *tcp_world(const char *name, const char *const *flags)
{
	return h_world_add(&(struct h_world_opts){.name = name, .tcp = true, .flags = flags});
}

/* --tcp-head-timeout is the head's deadline: a half head held on a celld with 1 s is closed
 * without an answer. Proved by order, not by a clock: a half head opened seconds earlier on
 * a celld with 300 s is still open then, which it would not be were both deadlines the same
 * (the flag ignored, say): the older one would reach it seconds first. */
START_TEST(head_timeout_flag_sets_the_deadline)
{
	static const char *const short_f[] = {"--tcp-head-timeout", "1", NULL};
	static const char *const long_f[] = {"--tcp-head-timeout", "300", NULL};
	struct h_world *lng = tcp_world("long", long_f);
	struct h_world *shrt = tcp_world("short", short_f);
	int witness = slow_client_to(lng, "127.8.0.1");
	ck_assert_int_ge(witness, 0);
	/* Not a measurement: the witness's head, were the deadlines equal, would be due
	 * this much before the other's, far more than two gates' wake-ups differ by. */
	h_sleep_ms(3000);
	int fd = slow_client_to(shrt, "127.8.0.1");
	ck_assert_int_ge(fd, 0);
	/* The hang guard only: a minute for a deadline of a second. */
	ck_assert_msg(closed_by_celld(fd, 60000),
		      "a half head was still open a minute past --tcp-head-timeout 1");
	ck_assert_msg(!closed_by_celld(witness, 0),
		      "an older half head on a celld with --tcp-head-timeout 300 was closed too");
	close(fd);
	close(witness);
	ck_assert_int_eq(keyed_get_to(shrt, "127.8.0.1"), 200);
}
END_TEST

/* --tcp-pending-max bounds the connections waiting for their head, whoever they come from:
 * with 4, a fifth (each from an address of its own, so the per-client cap is not what acts)
 * closes the oldest and keeps the rest; a key holder's connection then gets through,
 * closing the next oldest. The heads' deadline is far off, so it closes nothing here. */
START_TEST(pending_max_closes_the_oldest)
{
	static const char *const flags[] = {"--tcp-pending-max", "4", "--tcp-head-timeout", "300",
					    NULL};
	struct h_world *w = tcp_world("small", flags);
	int fds[5];
	for (int i = 0; i < 5; i++) {
		char *src = h_fmt("127.9.0.%d", i + 1);
		fds[i] = slow_client_to(w, src);
		ck_assert_msg(fds[i] >= 0, "connection %d from %s was refused", i, src);
		free(src);
	}
	ck_assert_msg(closed_by_celld(fds[0], 20000),
		      "the oldest of 5 pending connections is still open (--tcp-pending-max 4)");
	for (int i = 1; i < 5; i++)
		ck_assert_msg(!closed_by_celld(fds[i], 0), "pending connection %d was closed", i);
	ck_assert_int_eq(keyed_get_to(w, "127.9.0.9"), 200);
	ck_assert_msg(closed_by_celld(fds[1], 20000),
		      "a key holder's connection closed no pending one of a full table");
	for (int i = 2; i < 5; i++)
		ck_assert_msg(!closed_by_celld(fds[i], 0), "pending connection %d was closed", i);
	close_all(fds, 5);
}
END_TEST

static long status_kb(pid_t pid, const char *field)
{
	char *path = h_fmt("/proc/%d/status", (int)pid);
	char *text = h_read_file(path);
	free(path);
	const char *p = text ? strstr(text, field) : NULL;
	long kb = p ? strtol(p + strlen(field), NULL, 10) : -1;
	free(text);
	return kb;
}

/* Hundreds of connections each sending a head of 256 KiB: celld reads none of it into its
 * memory (each gets 431 or is closed), so its resident size barely moves. */
START_TEST(big_heads_cost_no_memory)
{
	raise_nofile();
	pid_t pid = h_celld_pid();
	ck_assert(pid > 0 && h_celld_alive());
	/* Reset the peak (VmHWM) to the current size, so the peak below is this test's. */
	char *cr = h_fmt("/proc/%d/clear_refs", (int)pid);
	int crfd = open(cr, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(crfd >= 0 && write(crfd, "5", 1) == 1, "resetting %s: %s", cr,
		      strerror(errno));
	close(crfd);
	free(cr);
	long before = status_kb(pid, "VmRSS:");

	int fds[BIG_CONNS];
	size_t sent[BIG_CONNS] = {0};
	bool done[BIG_CONNS] = {0};
	for (int i = 0; i < BIG_CONNS; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.4.%d.%d", i / 16, i % 16 + 1);
		fds[i] = slow_client(src);
		done[i] = fds[i] < 0;
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFL, O_NONBLOCK);
	}
	char line[1024];
	memset(line, 'a', sizeof(line));
	memcpy(line, "X-Pad: ", 7);
	memcpy(line + sizeof(line) - 2, "\r\n", 2);
	/* Hang guard: 120 rounds of waiting a second for any connection to take more. */
	for (int idle = 0; idle < 120;) {
		bool progress = false, left = false;
		struct pollfd p[BIG_CONNS];
		int np = 0;
		for (int i = 0; i < BIG_CONNS; i++) {
			if (done[i])
				continue;
			ssize_t n = send(fds[i], line, sizeof(line), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0) {
				progress = true;
				sent[i] += n;
				done[i] = sent[i] >= BIG_HEAD;
			} else if (errno != EAGAIN) {
				done[i] = true; /* closed by celld */
			}
			if (!done[i]) {
				left = true;
				p[np++] = (struct pollfd){.fd = fds[i], .events = POLLOUT};
			}
		}
		if (!left)
			break;
		if (!progress) {
			poll(p, np, 1000);
			idle++;
		}
	}
	long peak = status_kb(pid, "VmHWM:"), after = status_kb(pid, "VmRSS:");
	fprintf(stderr,
		"it_flood: celld VmRSS %ld kB before %d connections sending %d KiB heads, peak "
		"%ld kB, %ld kB after\n",
		before, BIG_CONNS, BIG_HEAD >> 10, peak, after);
	ck_assert_msg(before > 0 && peak > 0, "no VmRSS/VmHWM in /proc/%d/status", (int)pid);
	ck_assert_msg(peak - before < 16384,
		      "celld grew from %ld kB to a peak of %ld kB under %d big unauthenticated "
		      "heads",
		      before, peak, BIG_CONNS);

	/* Each got 431 or was closed; the hang guard is 30 s for all of them. */
	int answered = 0, closed = 0;
	time_t end = time(NULL) + 30;
	for (int i = 0; i < BIG_CONNS; i++) {
		if (fds[i] < 0) {
			closed++;
			continue;
		}
		struct pollfd p = {.fd = fds[i], .events = POLLIN | POLLRDHUP};
		long left = (long)(end - time(NULL));
		ck_assert_msg(poll(&p, 1, left > 0 ? (int)left * 1000 : 0) == 1,
			      "connection %d (%zu bytes of head sent) got neither 431 nor a close",
			      i, sent[i]);
		char buf[64];
		ssize_t n = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (n <= 0) {
			closed++;
			continue;
		}
		buf[n] = '\0';
		ck_assert_msg(!strncmp(buf, "HTTP/1.1 431 ", 13), "connection %d got '%s'", i, buf);
		answered++;
	}
	fprintf(stderr, "it_flood: %d answered 431, %d closed\n", answered, closed);
	close_all(fds, BIG_CONNS);
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, NULL), 200);
}
END_TEST

/* A head just over the limit, complete: 431 with a JSON error; just under: served. */
START_TEST(head_limit_answers_431)
{
	int fd = connect_from("127.5.0.1");
	ck_assert_int_ge(fd, 0);
	char *pad = malloc(HEAD_MAX + 1);
	memset(pad, 'p', HEAD_MAX);
	pad[HEAD_MAX] = '\0';
	char *req = h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nX-Pad: %s\r\n\r\n", pad);
	struct raw_resp r;
	ck_assert_int_eq(raw_exchange(fd, req, &r), 431);
	json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
	ck_assert_msg(j, "431 without a JSON body: %.*s", (int)r.body_len, r.body);
	ck_assert_str_eq(h_jstr(j, "code"), "REQUEST_HEADER_FIELDS_TOO_LARGE");
	json_decref(j);
	ck_assert(*raw_header(&r, "X-Request-ID"));
	close(fd);
	free(req);

	fd = connect_from("127.5.0.1");
	ck_assert_int_ge(fd, 0);
	pad[HEAD_MAX - 1024] = '\0';
	req = h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: %s\r\n"
		    "X-Pad: %s\r\n\r\n",
		    H.key, pad);
	ck_assert_int_eq(raw_exchange(fd, req, &r), 200);
	close(fd);
	free(req);
	free(pad);
}
END_TEST

/* A missing or wrong key: the API's 401 (JSON error, X-Request-ID), also when the client
 * sends its body without waiting, and through the SDK's own HTTP stack (libcurl here). */
START_TEST(unauthorized_answers)
{
	struct h_resp hr;
	struct h_req req = {.method = "GET", .path = "/v1/sandboxes", .via = H_TCP_NOKEY};
	ck_assert_int_eq(h_request(&req, &hr), 401);
	ck_assert_str_eq(h_err_code(&hr), "UNAUTHORIZED");
	ck_assert(hr.request_id && *hr.request_id);
	h_resp_free(&hr);
	req.via = H_TCP_BADKEY;
	ck_assert_int_eq(h_request(&req, &hr), 401);
	ck_assert_str_eq(h_err_code(&hr), "UNAUTHORIZED");
	h_resp_free(&hr);

	struct raw_resp r;
	int fd = connect_from("127.6.0.1");
	raw_exchange(fd, "GET /v1/sandboxes HTTP/1.1\r\nHost: cell\r\n\r\n", &r);
	expect_raw_401("no key", fd, &r, true);
	close(fd);

	fd = connect_from("127.6.0.1");
	raw_exchange(fd, "HEAD /v1/info HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: x\r\n\r\n",
		     &r);
	expect_raw_401("HEAD with a wrong key", fd, &r, false);
	close(fd);

	/* 256 KiB of body sent at once, no Expect: the answer must not be lost to a reset. */
	size_t blen = 256 << 10;
	char *body = malloc(blen + 1);
	memset(body, 'b', blen);
	body[blen] = '\0';
	char *post =
	    h_fmt("POST /v1/sandboxes HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: "
		  "wrong\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		  blen, body);
	fd = connect_from("127.6.0.1");
	send_all(fd, post, strlen(post));
	raw_read(fd, false, &r);
	expect_raw_401("POST with a body and a wrong key", fd, &r, true);
	close(fd);
	free(post);
	free(body);

	/* the header name in any case is the key header */
	fd = connect_from("127.6.0.1");
	char *get =
	    h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nopen-sandbox-api-key: %s\r\n\r\n", H.key);
	ck_assert_int_eq(raw_exchange(fd, get, &r), 200);
	close(fd);
	free(get);
}
END_TEST

/* Connections that showed the key behave as before: keep-alive (every request still needs
 * the key), a head in pieces, 413 after 100-continue. */
START_TEST(authenticated_connections_unchanged)
{
	int fd = connect_from("127.7.0.1");
	ck_assert_int_ge(fd, 0);
	char *get =
	    h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: %s\r\n\r\n", H.key);
	struct raw_resp r;
	ck_assert_int_eq(raw_exchange(fd, get, &r), 200);
	ck_assert_int_eq(raw_exchange(fd, get, &r), 200);
	ck_assert_int_eq(raw_exchange(fd, "GET /v1/info HTTP/1.1\r\nHost: cell\r\n\r\n", &r), 401);
	close(fd);

	/* the head in three pieces */
	fd = connect_from("127.7.0.1");
	size_t third = strlen(get) / 3;
	ck_assert(send_all(fd, get, third));
	h_sleep_ms(100);
	ck_assert(send_all(fd, get + third, third));
	h_sleep_ms(100);
	ck_assert_int_eq(raw_exchange(fd, get + 2 * third, &r), 200);
	close(fd);
	free(get);

	/* over TCP, libcurl sends Expect: 100-continue for a large body */
	size_t size = 2u << 20;
	char *big = malloc(size + 1);
	memset(big, ' ', size);
	big[size] = '\0';
	big[0] = '{';
	big[size - 1] = '}';
	struct h_req req = {.method = "POST", .path = "/v1/sandboxes", .body = big, .via = H_TCP};
	struct h_resp hr;
	ck_assert_int_eq(h_request(&req, &hr), 413);
	ck_assert_str_eq(h_err_code(&hr), "REQUEST_TOO_LARGE");
	h_resp_free(&hr);
	free(big);

	/* Streamed command output over TCP: it_badinput unauthenticated_tcp and the SDK suite. */
}
END_TEST

static int count_lines(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A flood of refusals writes a line per kind and interval, not one per connection. */
START_TEST(refusals_do_not_flood_the_log)
{
	char *log0 = h_read_file(H.log);
	size_t off = log0 ? strlen(log0) : 0;
	free(log0);
	for (int i = 0; i < 300; i++) {
		int fd = connect_from("127.6.1.1");
		ck_assert_int_ge(fd, 0);
		struct raw_resp r;
		raw_exchange(fd, "GET /v1/sandboxes HTTP/1.1\r\nHost: cell\r\n\r\n", &r);
		ck_assert_int_eq(r.status, 401);
		close(fd);
	}
	char *log = h_read_file(H.log);
	ck_assert(log && strlen(log) >= off);
	int lines = count_lines(log + off, " 401");
	ck_assert_msg(lines < 20, "300 refused requests wrote %d log lines:\n%.2000s", lines,
		      log + off);
	free(log);
}
END_TEST

static Suite *flood_suite(void)
{
	Suite *s = suite_create("flood");
	tcase_add_test(h_tcase(s, "flood_leaves_key_holders_a_way_in", 300),
		       flood_leaves_key_holders_a_way_in);
	tcase_add_test(h_tcase(s, "head_deadline_closes_slowloris", 120),
		       head_deadline_closes_slowloris);
	tcase_add_test(h_tcase(s, "per_ip_cap_closes_the_oldest", 120),
		       per_ip_cap_closes_the_oldest);
	tcase_add_test(h_tcase(s, "head_timeout_flag_sets_the_deadline", 120),
		       head_timeout_flag_sets_the_deadline);
	tcase_add_test(h_tcase(s, "pending_max_closes_the_oldest", 120),
		       pending_max_closes_the_oldest);
	tcase_add_test(h_tcase(s, "big_heads_cost_no_memory", 300), big_heads_cost_no_memory);
	tcase_add_test(h_tcase(s, "head_limit_answers_431", 120), head_limit_answers_431);
	tcase_add_test(h_tcase(s, "unauthorized_answers", 120), unauthorized_answers);
	tcase_add_test(h_tcase(s, "authenticated_connections_unchanged", 180),
		       authenticated_connections_unchanged);
	tcase_add_test(h_tcase(s, "refusals_do_not_flood_the_log", 120),
		       refusals_do_not_flood_the_log);
	return s;
}

int main(void)
{
	return h_main(flood_suite());
}
