/* The port proxy: ANY /v1/sandboxes/{id}/proxy/{port}/<rest> reaches 127.0.0.1:<port> in
 * the sandbox's own network namespace. A busybox httpd inside the sandbox serves files and
 * a CGI script that echoes the method, the query, the headers it got and its body. GET,
 * HEAD and POST through the proxy, the query and the path kept, the API key never reaching
 * the app, the X-Forwarded-* headers, a port with nothing listening (502), unknown
 * sandboxes and auth, a paused sandbox resumed first, the execd and egress ports unchanged,
 * 100 clients at once, a 100 MB download compared by SHA-256 inside and out (its
 * throughput printed), and the per-sandbox limit of open proxied requests (429).
 *
 * The whole program runs in a network namespace of its own (main), so a sandbox with a
 * network ("public") can be proxied too without touching the host's network; every other
 * sandbox has network none (the harness's default): the proxy never needs one. */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "cell/codec.h"
#include "harness.h"

#define PORT	  8080
#define N_CLIENTS 100
#define BIG_MB	  100

/* The CGI scripts: echo (method, query, the HTTP_* variables, the body), sink (the
 * body's SHA-256), hold (marks itself, then waits for /tmp/go). */
static const char cgi_echo[] = "#!/bin/sh\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
			       "echo \"method=$REQUEST_METHOD\"\n"
			       "echo \"query=$QUERY_STRING\"\n"
			       "env | grep '^HTTP_' | sort\n"
			       "echo \"body=$(cat)\"\n";
static const char cgi_sink[] = "#!/bin/sh\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
			       "cat > /tmp/up\n"
			       "sha256sum /tmp/up\n";
static const char cgi_hold[] = "#!/bin/sh\n"
			       "touch /tmp/held/$$\n"
			       "while [ ! -e /tmp/go ]; do usleep 20000; done\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\ndone\\n'\n";

static void put_file(struct h_world *w, const char *id, const char *path, const char *text,
		     int mode)
{
	struct h_resp r;
	long st = h_world_upload(w, id, path, text, strlen(text), mode, &r);
	ck_assert_msg(st == 200, "upload %s: %ld %s", path, st, r.body);
	h_resp_free(&r);
}

static char *proxy_path(const char *id, unsigned port, const char *rest)
{
	return h_fmt("/v1/sandboxes/%s/proxy/%u%s", id, port, rest);
}

static long get(struct h_world *w, const char *id, const char *rest, enum h_via via,
		struct h_resp *resp)
{
	char *path = proxy_path(id, PORT, rest);
	struct h_req req = {.method = "GET", .path = path, .via = via};
	long st = h_world_request(w, &req, resp);
	free(path);
	return st;
}

/* httpd started in the sandbox of world w, answering through the proxy (bounded wait:
 * it may take a moment to bind). */
static void start_httpd(struct h_world *w, const char *id)
{
	free(h_world_sh(w, id, "mkdir -p /www/cgi-bin /tmp/held"));
	put_file(w, id, "/www/index.html", "hello-from-the-app\n", 0644);
	put_file(w, id, "/www/cgi-bin/echo", cgi_echo, 0755);
	put_file(w, id, "/www/cgi-bin/sink", cgi_sink, 0755);
	put_file(w, id, "/www/cgi-bin/hold", cgi_hold, 0755);
	free(h_world_sh(w, id, "nohup httpd -f -p 127.0.0.1:8080 -h /www >/dev/null 2>&1 &"));
	for (int i = 0; i < 100; i++) {
		struct h_resp r;
		long st = get(w, id, "/index.html", H_TCP, &r);
		h_resp_free(&r);
		if (st == 200)
			return;
		ck_assert_msg(st == 502, "GET index.html while httpd starts: %ld", st);
		h_sleep_ms(50);
	}
	ck_abort_msg("httpd never answered through the proxy");
}

static char *running_with_httpd(json_t *extra)
{
	char *id = h_create("busybox", extra);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	start_httpd(&H, id);
	return id;
}

/* ---- a raw HTTP/1.1 exchange over TCP (HEAD, headers the client library hides) ---- */

struct raw {
	int status;
	char head[8192];
	size_t body_len;
};

static void raw_exchange(const char *request, struct raw *out)
{
	const char *colon = strrchr(H.listen, ':');
	ck_assert_ptr_nonnull(colon);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, request, strlen(request), MSG_NOSIGNAL),
			 (ssize_t)strlen(request));
	char *all = NULL;
	size_t len = 0;
	char buf[4096];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		all = realloc(all, len + (size_t)n + 1);
		memcpy(all + len, buf, (size_t)n);
		len += (size_t)n;
		all[len] = '\0';
	}
	close(fd);
	ck_assert_msg(all, "no answer to %s", request);
	char *end = strstr(all, "\r\n\r\n");
	ck_assert_msg(end, "no end of head in %.300s", all);
	size_t hl = (size_t)(end - all) + 4;
	ck_assert_uint_lt(hl, sizeof(out->head));
	memcpy(out->head, all, hl);
	out->head[hl] = '\0';
	out->body_len = len - hl;
	ck_assert_int_eq(sscanf(all, "HTTP/1.%*u %d", &out->status), 1);
	free(all);
}

/* ---- the tests ---- */

START_TEST(get_post_query_and_path)
{
	char *id = running_with_httpd(NULL);
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/index.html", H_TCP, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	/* The app's own 404 comes back as it is. */
	ck_assert_int_eq(get(&H, id, "/no/such/file", H_TCP, &r), 404);
	h_resp_free(&r);
	/* Without /v1, and over the Unix socket. */
	char *path = h_fmt("/sandboxes/%s/proxy/%u/index.html", id, PORT);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	free(path);

	ck_assert_int_eq(get(&H, id, "/cgi-bin/echo?a=1&b=x%20y", H_TCP, &r), 200);
	ck_assert_msg(strstr(r.body, "method=GET\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "query=a=1&b=x%20y\n"), "%s", r.body);
	h_resp_free(&r);

	path = proxy_path(id, PORT, "/cgi-bin/echo?post=1");
	static const char body[] = "a body the app reads on its stdin";
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = body,
			    .content_type = "text/plain",
			    .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(strstr(r.body, "method=POST\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "query=post=1\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_CONTENT_TYPE=text/plain") ||
			  strstr(r.body, "body=a body the app reads on its stdin\n"),
		      "%s", r.body);
	ck_assert_msg(strstr(r.body, "body=a body the app reads on its stdin\n"), "%s", r.body);
	h_resp_free(&r);
	free(path);

	/* A bigger body (3 MiB), streamed to the app: what it read hashes the same. */
	size_t big = 3u << 20;
	unsigned char *data = malloc(big);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	char want[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(data, big, want);
	path = proxy_path(id, PORT, "/cgi-bin/sink");
	req = (struct h_req){.method = "POST",
			     .path = path,
			     .body = data,
			     .body_len = big,
			     .content_type = "application/octet-stream",
			     .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(!strncmp(r.body, want, CELL_SHA256_HEX_LEN), "app got %.80s, sent %s", r.body,
		      want);
	h_resp_free(&r);
	free(path);
	free(data);
	free(id);
}
END_TEST

/* What reaches the app, byte for byte: nc in the sandbox records the request and answers a
 * fixed 200. A chunked body goes on chunked, the path and query as sent, no API key, one
 * connection per request. */
START_TEST(request_on_the_wire)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	free(h_sh(id, "printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nX-App: yes\\r\\n"
		      "Connection: close, X-Drop\\r\\nX-Drop: 1\\r\\n\\r\\nok' | "
		      "nohup nc -l -p 8081 > /tmp/raw 2>/dev/null & "
		      "i=0; while ! netstat -ltn | grep -q ':8081 ' && [ $i -lt 100 ]; do "
		      "usleep 50000; i=$((i+1)); done; netstat -ltn | grep -q ':8081 '"));
	static const char body[] = "a chunked body for the app";
	char *path = proxy_path(id, 8081, "/raw/path/?x=1&y=%2F");
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = body,
			    .content_type = "text/plain",
			    .chunked = true,
			    .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_str_eq(r.body, "ok");
	h_resp_free(&r);
	free(path);
	char *raw = h_sh(id, "i=0; while pidof nc >/dev/null && [ $i -lt 100 ]; do usleep 50000; "
			     "i=$((i+1)); done; cat /tmp/raw");
	static const char line[] = "POST /raw/path/?x=1&y=%2F HTTP/1.1\r\n";
	ck_assert_msg(!strncmp(raw, line, strlen(line)), "%s", raw);
	ck_assert_msg(strstr(raw, "\r\nTransfer-Encoding: chunked\r\n"), "%s", raw);
	ck_assert_msg(strstr(raw, "\r\nConnection: close\r\n"), "%s", raw);
	ck_assert_msg(!strcasestr(raw, "Content-Length"), "%s", raw);
	ck_assert_msg(!strstr(raw, H.key), "the key reached the app: %s", raw);
	/* The body, unchunked, is what was sent. */
	char *p = strstr(raw, "\r\n\r\n");
	ck_assert_ptr_nonnull(p);
	p += 4;
	char got[256] = "";
	size_t got_len = 0;
	for (;;) {
		char *end;
		unsigned long n = strtoul(p, &end, 16);
		ck_assert_msg(end != p && !strncmp(end, "\r\n", 2), "bad chunk at %s", p);
		p = end + 2;
		if (!n)
			break;
		ck_assert_uint_lt(got_len + n, sizeof(got));
		memcpy(got + got_len, p, n);
		got_len += n;
		p += n;
		ck_assert_msg(!strncmp(p, "\r\n", 2), "no CRLF after a chunk: %s", p);
		p += 2;
	}
	ck_assert_str_eq(p, "\r\n");
	got[got_len] = '\0';
	ck_assert_str_eq(got, body);
	free(raw);
	free(id);
}
END_TEST

START_TEST(head_request)
{
	char *id = running_with_httpd(NULL);
	char *req = h_fmt("HEAD /v1/sandboxes/%s/proxy/%u/index.html HTTP/1.1\r\nHost: x\r\n"
			  "OPEN-SANDBOX-API-KEY: %s\r\nConnection: close\r\n\r\n",
			  id, PORT, H.key);
	struct raw a;
	raw_exchange(req, &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_msg(strcasestr(a.head, "\r\nContent-Length: 19\r\n"), "%s", a.head);
	ck_assert_uint_eq(a.body_len, 0);
	free(req);
	free(id);
}
END_TEST

START_TEST(key_never_reaches_the_app)
{
	char *id = running_with_httpd(NULL);
	static const char *const hdrs[] = {"X-Forwarded-Prefix: /forged",
					   "X-Forwarded-For: 192.0.2.7",
					   "Connection: keep-alive, X-Hop",
					   "X-Hop: must-not-pass",
					   "Keep-Alive: timeout=5",
					   "X-Custom: passes",
					   NULL};
	char *path = proxy_path(id, PORT, "/cgi-bin/echo");
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP, .headers = hdrs};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(!strstr(r.body, H.key), "the API key reached the app: %s", r.body);
	ck_assert_msg(!strcasestr(r.body, "API_KEY"), "%s", r.body);
	char *prefix = h_fmt("HTTP_X_FORWARDED_PREFIX=/v1/sandboxes/%s/proxy/%u\n", id, PORT);
	ck_assert_msg(strstr(r.body, prefix), "want %s in %s", prefix, r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_PROTO=http\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_FOR=192.0.2.7, 127.0.0.1\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_HOST="), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_CUSTOM=passes\n"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "forged"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "must-not-pass"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "HTTP_KEEP_ALIVE"), "%s", r.body);
	h_resp_free(&r);
	free(prefix);
	free(path);
	free(id);
}
END_TEST

START_TEST(errors_and_unchanged_ports)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	struct h_resp r;
	/* Nothing listens on 9: 502 naming the port. */
	char *path = proxy_path(id, 9, "/x");
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 502);
	ck_assert_str_eq(h_err_code(&r), "PROXY_CONNECT_FAILED");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "port 9"), "%s", r.body);
	h_resp_free(&r);
	/* No key, a wrong key: 401, as every route. */
	req.via = H_TCP_NOKEY;
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	req.via = H_TCP_BADKEY;
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	free(path);
	/* An unknown sandbox: 404. */
	path = proxy_path("no-such-sandbox", PORT, "/");
	req = (struct h_req){.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	free(path);
	/* Ports out of range. */
	for (int i = 0; i < 3; i++) {
		static const char *const bad[] = {"0", "65536", "http"};
		path = h_fmt("/v1/sandboxes/%s/proxy/%s/", id, bad[i]);
		req = (struct h_req){.method = "GET", .path = path, .via = H_TCP};
		ck_assert_int_eq(h_request(&req, &r), 400);
		ck_assert_msg(strstr(h_jstr(r.json, "message"), "port"), "%s", r.body);
		h_resp_free(&r);
		free(path);
	}
	/* execd's and egress's ports answer as before: their routes, 404 for a path they do
	 * not have, 405 for a method a path of theirs does not take. */
	path = proxy_path(id, 44772, "/ping");
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	ck_assert_int_eq(h_http("PUT", path, NULL, &r), 405);
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 44772, "/no-such-route");
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "NOT_FOUND");
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 18080, "/policy");
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	ck_assert_int_eq(h_http("POST", path, NULL, &r), 405);
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 18080, "/other");
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	h_resp_free(&r);
	free(path);
	/* Endpoints: every valid port names its proxy route. */
	unsigned ports[] = {8080, 44772, 18080, 1, 65535};
	for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
		path = h_fmt("/v1/sandboxes/%s/endpoints/%u", id, ports[i]);
		ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
		char *tail = h_fmt("/v1/sandboxes/%s/proxy/%u", id, ports[i]);
		const char *ep = h_jstr(r.json, "endpoint");
		ck_assert_msg(strlen(ep) > strlen(tail) &&
				  !strcmp(ep + strlen(ep) - strlen(tail), tail),
			      "endpoint %s", ep);
		h_resp_free(&r);
		free(tail);
		free(path);
	}
	free(id);
}
END_TEST

START_TEST(paused_sandbox_is_resumed)
{
	char *id = running_with_httpd(NULL);
	char *path = h_fmt("/v1/sandboxes/%s/pause", id);
	ck_assert_int_eq(h_http("POST", path, NULL, NULL), 202);
	free(path);
	ck_assert_str_eq(h_wait_state(id, "Paused", 30), "Paused");
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/index.html", H_TCP, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

START_TEST(public_network_sandbox)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.network", "public");
	char *id = running_with_httpd(extra);
	json_decref(extra);
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/cgi-bin/echo?n=public", H_TCP, &r), 200);
	ck_assert_msg(strstr(r.body, "query=n=public\n"), "%s", r.body);
	h_resp_free(&r);
	free(id);
}
END_TEST

struct client {
	struct h_world *w;
	const char *id;
	int n;
	long status;
	bool body_ok;
};

static void *client_run(void *arg)
{
	struct client *c = arg;
	char *rest = h_fmt("/cgi-bin/echo?client=%d", c->n);
	char *want = h_fmt("query=client=%d\n", c->n);
	struct h_resp r;
	c->status = get(c->w, c->id, rest, H_TCP, &r);
	c->body_ok = r.body && strstr(r.body, want) && strstr(r.body, "method=GET\n");
	h_resp_free(&r);
	free(rest);
	free(want);
	return NULL;
}

/* A celld of its own: the TCP gate closes a client's oldest connection past 64 that have
 * not yet sent their head (--tcp-pending-per-ip), and 100 connecting at once from one
 * address may be that many. */
START_TEST(hundred_clients)
{
	static const char *const flags[] = {"--tcp-pending-per-ip", "256", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "c", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_httpd(w, id);
	struct client cs[N_CLIENTS];
	pthread_t th[N_CLIENTS];
	for (int i = 0; i < N_CLIENTS; i++) {
		cs[i] = (struct client){.w = w, .id = id, .n = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, client_run, &cs[i]), 0);
	}
	for (int i = 0; i < N_CLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N_CLIENTS; i++) {
		ck_assert_msg(cs[i].status == 200, "client %d: HTTP %ld", i, cs[i].status);
		ck_assert_msg(cs[i].body_ok, "client %d: wrong body", i);
	}
	free(id);
}
END_TEST

struct sink {
	unsigned char *data;
	size_t len, cap;
};

static size_t sink_write(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;
	if (s->len + len > s->cap)
		return 0;
	memcpy(s->data + s->len, p, len);
	s->len += len;
	return len;
}

START_TEST(big_download)
{
	char *id = running_with_httpd(NULL);
	char *out = h_sh(id, "dd if=/dev/urandom of=/www/big bs=1048576 count="
			     "100"
			     " 2>/dev/null && sha256sum /www/big");
	char inside[CELL_SHA256_HEX_LEN + 1];
	ck_assert_msg(strlen(out) > CELL_SHA256_HEX_LEN, "%s", out);
	memcpy(inside, out, CELL_SHA256_HEX_LEN);
	inside[CELL_SHA256_HEX_LEN] = '\0';
	free(out);

	struct sink s = {.cap = ((size_t)BIG_MB << 20) + 1};
	s.data = malloc(s.cap);
	ck_assert_ptr_nonnull(s.data);
	char *url = h_fmt("%s/v1/sandboxes/%s/proxy/%u/big", H.url, id, PORT);
	char *key = h_fmt("OPEN-SANDBOX-API-KEY: %s", H.key);
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	struct curl_slist *hl = curl_slist_append(NULL, key);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CURLcode cc = curl_easy_perform(c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	ck_assert_msg(cc == CURLE_OK, "download: %s", curl_easy_strerror(cc));
	ck_assert_int_eq(status, 200);
	ck_assert_uint_eq(s.len, (size_t)BIG_MB << 20);
	char got[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(s.data, s.len, got);
	ck_assert_str_eq(got, inside);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "it_proxy: %d MB through the proxy in %.2f s: %.0f MB/s\n", BIG_MB, secs,
		secs > 0 ? BIG_MB / secs : 0.0);
	/* Gone before the sandbox is: its pages are dropped, not written back while the
	 * sandbox's disk is unmounted. */
	free(h_sh(id, "rm /www/big"));
	free(s.data);
	free(url);
	free(key);
	free(id);
}
END_TEST

struct holder {
	struct h_world *w;
	const char *id;
	long status;
	char body[64];
};

static void *hold_run(void *arg)
{
	struct holder *h = arg;
	struct h_resp r;
	h->status = get(h->w, h->id, "/cgi-bin/hold", H_TCP, &r);
	snprintf(h->body, sizeof(h->body), "%s", r.body ? r.body : "");
	h_resp_free(&r);
	return NULL;
}

#define LIMIT 4

START_TEST(limit_per_sandbox)
{
	static const char *const flags[] = {"--proxy-max-connections", "4", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "b", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_httpd(w, id);
	struct holder hs[LIMIT];
	pthread_t th[LIMIT];
	for (int i = 0; i < LIMIT; i++) {
		hs[i] = (struct holder){.w = w, .id = id};
		ck_assert_int_eq(pthread_create(&th[i], NULL, hold_run, &hs[i]), 0);
	}
	/* All four are in the app (each marked itself) before the fifth is sent. */
	char *n = NULL;
	for (int i = 0; i < 200; i++) {
		free(n);
		n = h_world_sh(w, id, "ls /tmp/held | wc -l");
		if (atoi(n) == LIMIT)
			break;
		h_sleep_ms(50);
	}
	ck_assert_int_eq(atoi(n), LIMIT);
	free(n);
	struct h_resp r;
	ck_assert_int_eq(get(w, id, "/index.html", H_TCP, &r), 429);
	ck_assert_str_eq(h_err_code(&r), "TOO_MANY_CONNECTIONS");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "4 proxied requests open"), "%s", r.body);
	h_resp_free(&r);
	free(h_world_sh(w, id, "touch /tmp/go"));
	for (int i = 0; i < LIMIT; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(hs[i].status, 200);
		ck_assert_str_eq(hs[i].body, "done\n");
	}
	/* The slots came back. */
	ck_assert_int_eq(get(w, id, "/index.html", H_TCP, &r), 200);
	h_resp_free(&r);
	free(id);
}
END_TEST

static Suite *proxy_suite(void)
{
	Suite *s = suite_create("proxy");
	TCase *tc = h_tcase(s, "proxy", 300);
	tcase_add_test(tc, get_post_query_and_path);
	tcase_add_test(tc, request_on_the_wire);
	tcase_add_test(tc, head_request);
	tcase_add_test(tc, key_never_reaches_the_app);
	tcase_add_test(tc, errors_and_unchanged_ports);
	tcase_add_test(tc, paused_sandbox_is_resumed);
	tcase_add_test(tc, public_network_sandbox);
	tcase_add_test(tc, hundred_clients);
	tcase_add_test(tc, big_download);
	tcase_add_test(tc, limit_per_sandbox);
	return s;
}

int main(void)
{
	/* This program, its celld and everything they start live in a network namespace of
	 * their own, with only a loopback. */
	int r = h_netns_enter_private();
	if (r < 0) {
		fprintf(stderr, "%s: a private network namespace: %s\n", "it_proxy", strerror(-r));
		return 1;
	}
	return h_main(proxy_suite());
}
