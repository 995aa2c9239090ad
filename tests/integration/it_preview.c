/* Preview URLs: who may open a sandbox's port through the port proxy without the API key.
 * The endpoint answer's token opens the port it was made for, through the header, through
 * the query (a redirect without it that sets a cookie scoped to that port, after which the
 * cookie alone works, as a browser's later requests do), and never reaches the app; no
 * credential, another sandbox's token or another port's is 401. Host-name routing
 * (--preview-domain): "<port>-<id>.<domain>" at the app's "/", bad names 404. The secret
 * is kept across a restart (same token) and rotating it revokes the tokens. The TCP tunnel
 * (cell forward's) takes the API key only, wants the upgrade (426), and after its 101
 * carries raw bytes to the app and back. The signed endpoint (?expires=) gives a token that
 * dies at its second.
 *
 * The whole program runs in a network namespace of its own with only a loopback. */
#include <arpa/inet.h>
#include <check.h>
#include <poll.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define PORT   8080
#define DOMAIN "preview.test"

static const char cgi_echo[] = "#!/bin/sh\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
			       "echo \"method=$REQUEST_METHOD\"\n"
			       "echo \"query=$QUERY_STRING\"\n"
			       "env | grep '^HTTP_' | sort\n";

static void put_file(struct h_world *w, const char *id, const char *path, const char *text,
		     int mode)
{
	struct h_resp r;
	long st = h_world_upload(w, id, path, text, strlen(text), mode, &r);
	ck_assert_msg(st == 200, "upload %s: %ld %s", path, st, r.body);
	h_resp_free(&r);
}

/* A sandbox of world w with httpd on PORT serving /index.html and /cgi-bin/echo. */
static char *sandbox_with_httpd(struct h_world *w)
{
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	free(h_world_sh(w, id, "mkdir -p /www/cgi-bin"));
	put_file(w, id, "/www/index.html", "hello-from-the-app\n", 0644);
	put_file(w, id, "/www/cgi-bin/echo", cgi_echo, 0755);
	free(h_world_sh(w, id, "nohup httpd -f -p 127.0.0.1:8080 -h /www >/dev/null 2>&1 &"));
	char *path = h_fmt("/v1/sandboxes/%s/proxy/%u/index.html", id, PORT);
	for (int i = 0; i < 100; i++) {
		struct h_resp r;
		struct h_req req = {.method = "GET", .path = path, .via = H_UNIX};
		long st = h_world_request(w, &req, &r);
		h_resp_free(&r);
		if (st == 200) {
			free(path);
			return id;
		}
		h_sleep_ms(50);
	}
	ck_abort_msg("httpd never answered through the proxy");
	return NULL;
}

/* The endpoint answer for port (over TCP with the key): a new reference. */
static json_t *endpoint(struct h_world *w, const char *id, unsigned port)
{
	char *path = h_fmt("/v1/sandboxes/%s/endpoints/%u", id, port);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_world_request(w, &req, &r), 200);
	json_t *j = json_incref(r.json);
	h_resp_free(&r);
	free(path);
	return j;
}

static const char *token_of(json_t *ep)
{
	const char *t = json_string_value(
	    json_object_get(json_object_get(ep, "headers"), "X-Cell-Preview-Token"));
	ck_assert_msg(t && strlen(t) == 43, "no token in the endpoint answer");
	return t;
}

/* A GET through the proxy without the key, with extra header lines. */
static long get_nokey(struct h_world *w, const char *id, unsigned port, const char *rest,
		      const char *const *headers, struct h_resp *r)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/%u%s", id, port, rest);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP_NOKEY, .headers = headers};
	long st = h_world_request(w, &req, r);
	free(path);
	return st;
}

/* ---- raw HTTP over TCP: the heads the client library hides ---- */

static void raw_exchange(const char *listen, const char *request, char *head, size_t size,
			 int *status)
{
	const char *colon = strrchr(listen, ':');
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
	size_t len = 0;
	ssize_t n;
	while (len + 1 < size && (n = recv(fd, head + len, size - 1 - len, 0)) > 0)
		len += (size_t)n;
	head[len] = '\0';
	close(fd);
	char *end = strstr(head, "\r\n\r\n");
	ck_assert_msg(end, "no answer head to %s: %s", request, head);
	ck_assert_int_eq(sscanf(head, "HTTP/1.%*u %d", status), 1);
}

/* ---- a browser: curl with its cookie engine, following redirects ---- */

struct got {
	char body[8192];
	size_t len;
};

static size_t collect(char *p, size_t sz, size_t nm, void *cls)
{
	struct got *g = cls;
	size_t n = sz * nm, room = sizeof(g->body) - 1 - g->len;
	memcpy(g->body + g->len, p, n < room ? n : room);
	g->len += n < room ? n : room;
	g->body[g->len] = '\0';
	return n;
}

/* GET url as a browser would (cookies kept, redirects followed), then url2 with the same
 * cookies (NULL: none). resolve: a CURLOPT_RESOLVE entry or NULL. The last status. */
static long browse(const char *url, const char *url2, const char *resolve, struct got *g,
		   long *redirects)
{
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	struct curl_slist *res = resolve ? curl_slist_append(NULL, resolve) : NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_COOKIEFILE, "");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
	if (res)
		curl_easy_setopt(c, CURLOPT_RESOLVE, res);
	g->len = 0;
	g->body[0] = '\0';
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	long st = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_easy_getinfo(c, CURLINFO_REDIRECT_COUNT, redirects);
	if (url2 && st == 200) {
		curl_easy_setopt(c, CURLOPT_URL, url2);
		g->len = 0;
		g->body[0] = '\0';
		ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	}
	curl_easy_cleanup(c);
	curl_slist_free_all(res);
	return st;
}

/* ---- the tests ---- */

START_TEST(token_in_header_and_cookie_never_reaches_the_app)
{
	char *id = sandbox_with_httpd(&H);
	char *other = h_create("busybox", NULL);
	json_t *ep = endpoint(&H, id, PORT);
	json_t *ep_other = endpoint(&H, other, PORT);
	json_t *ep_8081 = endpoint(&H, id, 8081);
	const char *tok = token_of(ep);
	char *want_ep = h_fmt("%s/v1/sandboxes/%s/proxy/%u", H.listen, id, PORT);
	ck_assert_str_eq(h_jstr(ep, "endpoint"), want_ep);
	char *want_url = h_fmt("http://%s/?cell_token=%s", want_ep, tok);
	ck_assert_str_eq(h_jstr(ep, "url"), want_url);
	/* execd's and egress's endpoints carry no token. */
	json_t *ep_execd = endpoint(&H, id, 44772);
	ck_assert_ptr_null(json_object_get(ep_execd, "headers"));
	ck_assert_ptr_null(json_object_get(ep_execd, "url"));

	struct h_resp r;
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", NULL, &r), 401);
	h_resp_free(&r);
	char *hdr = h_fmt("X-Cell-Preview-Token: %s", tok);
	char *cookie = h_fmt("Cookie: app=1; cell_preview=%s; other=2", tok);
	const char *with_hdr[] = {hdr, NULL};
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", with_hdr, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	/* The app sees neither the header nor the cookie, and keeps its own cookies. */
	const char *both[] = {hdr, cookie, NULL};
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/cgi-bin/echo", both, &r), 200);
	ck_assert_msg(!strstr(r.body, tok), "the token reached the app: %s", r.body);
	ck_assert_msg(!strstr(r.body, "PREVIEW"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_COOKIE=app=1; other=2\n"), "%s", r.body);
	h_resp_free(&r);
	const char *cookie_only[] = {cookie, NULL};
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", cookie_only, &r), 200);
	h_resp_free(&r);

	/* Another sandbox's token, another port's, a cut one: 401. */
	char *bad[] = {h_fmt("X-Cell-Preview-Token: %s", token_of(ep_other)),
		       h_fmt("X-Cell-Preview-Token: %s", token_of(ep_8081)),
		       h_fmt("X-Cell-Preview-Token: %.42s", tok)};
	for (size_t i = 0; i < 3; i++) {
		const char *h1[] = {bad[i], NULL};
		ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", h1, &r), 401);
		ck_assert_str_eq(h_err_code(&r), "UNAUTHORIZED");
		h_resp_free(&r);
		free(bad[i]);
	}
	/* The token opens that port of the proxy only: not execd, not the API. */
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/ping", id);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP_NOKEY, .headers = with_hdr};
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	free(path);
	path = h_fmt("/v1/sandboxes/%s", id);
	req.path = path;
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	free(path);
	json_decref(ep);
	json_decref(ep_other);
	json_decref(ep_8081);
	json_decref(ep_execd);
	free(hdr);
	free(cookie);
	free(want_ep);
	free(want_url);
	free(other);
	free(id);
}
END_TEST

START_TEST(token_in_query_redirects_and_sets_cookie)
{
	char *id = sandbox_with_httpd(&H);
	json_t *ep = endpoint(&H, id, PORT);
	const char *tok = token_of(ep);
	char head[8192];
	int status;
	char *rq = h_fmt("GET /v1/sandboxes/%s/proxy/%u/cgi-bin/echo?a=1&cell_token=%s&b=2 "
			 "HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			 id, PORT, tok);
	raw_exchange(H.listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 302);
	char *loc =
	    h_fmt("\r\nLocation: /v1/sandboxes/%s/proxy/%u/cgi-bin/echo?a=1&b=2\r\n", id, PORT);
	ck_assert_msg(strstr(head, loc), "%s", head);
	char *set = h_fmt("\r\nSet-Cookie: cell_preview=%s; Path=/v1/sandboxes/%s/proxy/%u; "
			  "HttpOnly; SameSite=Lax\r\n",
			  tok, id, PORT);
	ck_assert_msg(strstr(head, set), "%s", head);
	free(rq);
	/* A wrong token in the query: 401 at the door. */
	/* (its last character changed: to one it is not) */
	rq = h_fmt("GET /v1/sandboxes/%s/proxy/%u/?cell_token=%.42s%c HTTP/1.1\r\nHost: x\r\n"
		   "Connection: close\r\n\r\n",
		   id, PORT, tok, tok[42] == 'A' ? 'B' : 'A');
	raw_exchange(H.listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 401);
	free(rq);
	/* Only a GET may carry it in the query. */
	char *path = h_fmt("/v1/sandboxes/%s/proxy/%u/cgi-bin/echo?cell_token=%s", id, PORT, tok);
	struct h_req req = {.method = "POST", .path = path, .body = "x", .via = H_TCP_NOKEY};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 400);
	h_resp_free(&r);
	free(path);

	/* A browser: the URL of the endpoint answer, then a page of the app with the cookie
	 * only. */
	struct got g;
	long redirects = 0;
	char *page =
	    h_fmt("http://%s/v1/sandboxes/%s/proxy/%u/cgi-bin/echo?x=1", H.listen, id, PORT);
	ck_assert_int_eq(browse(h_jstr(ep, "url"), page, NULL, &g, &redirects), 200);
	ck_assert_int_eq(redirects, 1);
	ck_assert_msg(strstr(g.body, "query=x=1\n"), "%s", g.body);
	ck_assert_msg(!strstr(g.body, tok) && !strstr(g.body, "HTTP_COOKIE"), "%s", g.body);
	/* Without the cookie engine's cookie: 401. */
	ck_assert_int_eq(browse(page, NULL, NULL, &g, &redirects), 401);
	free(page);
	free(loc);
	free(set);
	json_decref(ep);
	free(id);
}
END_TEST

START_TEST(host_name_routing)
{
	const char *flags[] = {"--preview-domain", DOMAIN, NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "b", .tcp = true, .flags = flags});
	char *id = sandbox_with_httpd(w);
	json_t *ep = endpoint(w, id, PORT);
	const char *tok = token_of(ep);
	const char *lport = strrchr(w->listen, ':') + 1;
	char *host = h_fmt("%u-%s." DOMAIN ":%s", PORT, id, lport);
	ck_assert_str_eq(h_jstr(ep, "endpoint"), host);
	char *url = h_fmt("http://%s/?cell_token=%s", host, tok);
	ck_assert_str_eq(h_jstr(ep, "url"), url);

	/* A browser on the preview host: the app at "/", no prefix. */
	char *resolve = h_fmt("%u-%s." DOMAIN ":%s:127.0.0.1", PORT, id, lport);
	char *page = h_fmt("http://%s/cgi-bin/echo?y=2", host);
	struct got g;
	long redirects = 0;
	ck_assert_int_eq(browse(url, page, resolve, &g, &redirects), 200);
	ck_assert_int_eq(redirects, 1);
	ck_assert_msg(strstr(g.body, "query=y=2\n"), "%s", g.body);
	ck_assert_msg(!strstr(g.body, "HTTP_X_FORWARDED_PREFIX"), "%s", g.body);
	ck_assert_msg(strstr(g.body, "HTTP_X_FORWARDED_HOST=") && !strstr(g.body, tok), "%s",
		      g.body);
	ck_assert_int_eq(browse(url, NULL, resolve, &g, &redirects), 200);
	ck_assert_str_eq(g.body, "hello-from-the-app\n"); /* "/" is the app's index */
	/* No credential: 401; with the key, the API's path is the app's path. */
	char head[8192];
	int status;
	char *rq = h_fmt("GET /index.html HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host);
	raw_exchange(w->listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 401);
	free(rq);
	rq = h_fmt("GET /v1/sandboxes HTTP/1.1\r\nHost: %s\r\nOPEN-SANDBOX-API-KEY: %s\r\n"
		   "Connection: close\r\n\r\n",
		   host, w->key);
	raw_exchange(w->listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 404); /* httpd's: no such file in /www */
	free(rq);
	/* Names under the domain that name no sandbox port: 404 (with the key, past the
	 * door). */
	char *bad[] = {h_fmt("0-%s." DOMAIN, id), h_fmt("44772-%s." DOMAIN, id),
		       h_fmt("8080-%s.x." DOMAIN, id), h_fmt("8080-%s_." DOMAIN, id),
		       h_fmt(DOMAIN)};
	for (size_t i = 0; i < 5; i++) {
		rq = h_fmt("GET / HTTP/1.1\r\nHost: %s\r\nOPEN-SANDBOX-API-KEY: %s\r\n"
			   "Connection: close\r\n\r\n",
			   bad[i], w->key);
		raw_exchange(w->listen, rq, head, sizeof(head), &status);
		ck_assert_msg(status == 404, "%s: %d", bad[i], status);
		free(rq);
		free(bad[i]);
	}
	/* Another sandbox's name with this one's token: 401. */
	rq = h_fmt("GET / HTTP/1.1\r\nHost: %u-%s." DOMAIN "\r\nX-Cell-Preview-Token: %s\r\n"
		   "Connection: close\r\n\r\n",
		   PORT + 1, id, tok);
	raw_exchange(w->listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 401);
	free(rq);
	json_decref(ep);
	free(host);
	free(url);
	free(resolve);
	free(page);
	free(id);
}
END_TEST

START_TEST(secret_kept_across_restart_and_rotated)
{
	char *id = sandbox_with_httpd(&H);
	json_t *ep = endpoint(&H, id, PORT);
	char *tok = strdup(token_of(ep));
	json_decref(ep);
	char *file = h_fmt("%s/preview-secret", H.state);
	struct stat st;
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_uint_eq(st.st_uid, 0);
	ck_assert_int_eq(st.st_size, 32);
	h_celld_restart_with(NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	ep = endpoint(&H, id, PORT);
	ck_assert_str_eq(token_of(ep), tok);
	json_decref(ep);
	char *hdr = h_fmt("X-Cell-Preview-Token: %s", tok);
	const char *h1[] = {hdr, NULL};
	struct h_resp r;
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", h1, &r), 200);
	h_resp_free(&r);
	/* Rotation: a new secret, every old token refused. */
	ck_assert_int_eq(unlink(file), 0);
	h_celld_restart_with(NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	ep = endpoint(&H, id, PORT);
	ck_assert_str_ne(token_of(ep), tok);
	json_decref(ep);
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", h1, &r), 401);
	h_resp_free(&r);
	free(hdr);
	free(file);
	free(tok);
	free(id);
}
END_TEST

START_TEST(tunnel_needs_the_key_and_the_upgrade)
{
	char *id = sandbox_with_httpd(&H);
	json_t *ep = endpoint(&H, id, PORT);
	char head[8192];
	int status;
	/* No key, or a preview token instead of it: 401. */
	char *rq = h_fmt("POST /v1/sandboxes/%s/ports/%u/tunnel HTTP/1.1\r\nHost: x\r\n"
			 "Connection: Upgrade\r\nUpgrade: cell-tcp\r\nContent-Length: 0\r\n\r\n",
			 id, PORT);
	raw_exchange(H.listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 401);
	free(rq);
	rq = h_fmt("POST /v1/sandboxes/%s/ports/%u/tunnel HTTP/1.1\r\nHost: x\r\n"
		   "X-Cell-Preview-Token: %s\r\nConnection: Upgrade\r\nUpgrade: cell-tcp\r\n"
		   "Content-Length: 0\r\n\r\n",
		   id, PORT, token_of(ep));
	raw_exchange(H.listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 401);
	free(rq);
	/* The key without the upgrade: 426. */
	rq = h_fmt("POST /v1/sandboxes/%s/ports/%u/tunnel HTTP/1.1\r\nHost: x\r\n"
		   "OPEN-SANDBOX-API-KEY: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		   id, PORT, H.key);
	raw_exchange(H.listen, rq, head, sizeof(head), &status);
	ck_assert_int_eq(status, 426);
	free(rq);
	/* The key and the upgrade: 101, then HTTP to httpd through raw bytes. */
	rq = h_fmt("POST /v1/sandboxes/%s/ports/%u/tunnel HTTP/1.1\r\nHost: x\r\n"
		   "OPEN-SANDBOX-API-KEY: %s\r\nConnection: Upgrade\r\nUpgrade: cell-tcp\r\n"
		   "Content-Length: 0\r\n\r\n"
		   "GET /index.html HTTP/1.0\r\n\r\n",
		   id, PORT, H.key);
	char all[8192];
	raw_exchange(H.listen, rq, all, sizeof(all), &status);
	ck_assert_int_eq(status, 101);
	ck_assert_msg(strstr(all, "\r\nUpgrade: cell-tcp\r\n"), "%s", all);
	char *app = strstr(all, "\r\n\r\n") + 4;
	ck_assert_msg(!strncmp(app, "HTTP/1.", 7) && strstr(app, " 200 ") &&
			  strstr(app, "\r\n\r\nhello-from-the-app\n"),
		      "after the 101: %s", app);
	free(rq);
	json_decref(ep);
	free(id);
}
END_TEST

/* The endpoint answer at (path's query): its status, its JSON in *out (a new reference). */
static long endpoint_q(struct h_world *w, const char *id, unsigned port, const char *query,
		       json_t **out)
{
	char *path = h_fmt("/v1/sandboxes/%s/endpoints/%u%s", id, port, query);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	struct h_resp r;
	long st = h_world_request(w, &req, &r);
	*out = json_incref(r.json);
	h_resp_free(&r);
	free(path);
	return st;
}

/* OpenSandbox's signed endpoint (?expires=<Unix seconds>): a token that opens the port until
 * then and not after; a bad expires, one with use_server_proxy=true, one for execd's port
 * are 400; the redirect's cookie lives no longer than the token. */
START_TEST(expiring_token_from_signed_endpoint)
{
	char *id = sandbox_with_httpd(&H);
	json_t *ep;
	long long now = (long long)time(NULL);
	char *q = h_fmt("?expires=%lld", now + 120);
	ck_assert_int_eq(endpoint_q(&H, id, PORT, q, &ep), 200);
	const char *tok = json_string_value(
	    json_object_get(json_object_get(ep, "headers"), "X-Cell-Preview-Token"));
	ck_assert_msg(tok && strchr(tok, '.') && strlen(tok) > 44, "token %s", tok ? tok : "-");
	char *hdr = h_fmt("X-Cell-Preview-Token: %s", tok);
	const char *with_hdr[] = {hdr, NULL};
	struct h_resp r;
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", with_hdr, &r), 200);
	h_resp_free(&r);
	/* the redirect's cookie dies with the token (Max-Age about 120 s) */
	char *req = h_fmt("GET /v1/sandboxes/%s/proxy/%u/?cell_token=%s HTTP/1.1\r\nHost: x\r\n"
			  "Connection: close\r\n\r\n",
			  id, PORT, tok);
	char head[4096];
	int status = 0;
	raw_exchange(H.listen, req, head, sizeof(head), &status);
	ck_assert_int_eq(status, 302);
	char *ma = strstr(head, "Max-Age=");
	ck_assert_msg(ma && atol(ma + 8) > 100 && atol(ma + 8) <= 120, "%s", head);
	free(req);
	json_decref(ep);
	free(hdr);
	free(q);

	/* one whose second has passed is minted, and refused */
	q = h_fmt("?expires=%lld", now - 5);
	ck_assert_int_eq(endpoint_q(&H, id, PORT, q, &ep), 200);
	tok = json_string_value(
	    json_object_get(json_object_get(ep, "headers"), "X-Cell-Preview-Token"));
	hdr = h_fmt("X-Cell-Preview-Token: %s", tok);
	const char *old[] = {hdr, NULL};
	ck_assert_int_eq(get_nokey(&H, id, PORT, "/index.html", old, &r), 401);
	h_resp_free(&r);
	json_decref(ep);
	free(hdr);
	free(q);

	static const char *const bad[] = {"?expires=",
					  "?expires=abc",
					  "?expires=-1",
					  "?expires=0",
					  "?expires=012",
					  "?expires=1e9",
					  "?expires=99999999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(endpoint_q(&H, id, PORT, bad[i], &ep) == 400, "%s", bad[i]);
		json_decref(ep);
	}
	q = h_fmt("?expires=%lld&use_server_proxy=true", now + 60);
	ck_assert_int_eq(endpoint_q(&H, id, PORT, q, &ep), 400);
	json_decref(ep);
	free(q);
	q = h_fmt("?expires=%lld", now + 60);
	ck_assert_int_eq(endpoint_q(&H, id, 44772, q, &ep), 400);
	json_decref(ep);
	free(q);
	free(id);
}
END_TEST

/* Connections of a credential anyone may be handed are held within a budget of their own
 * (--tcp-keyless-per-ip here 4 from one client, a quarter of the server's connections in
 * all): a fifth held open with a preview token is answered 503 and closed, and key holders
 * are never locked out by such connections. Each keyless connection sends a head promising
 * a body it never sends, so the server holds it open. */
START_TEST(keyless_connections_held_apart)
{
	static const char *const flags[] = {"--tcp-keyless-per-ip", "4", NULL};
	h_celld_restart_with(flags);
	char *id = sandbox_with_httpd(&H);
	json_t *ep = endpoint(&H, id, 8080);
	char *req = h_fmt("POST /v1/sandboxes/%s/proxy/8080/ HTTP/1.1\r\nHost: cell\r\n"
			  "X-Cell-Preview-Token: %s\r\nContent-Length: 100\r\n\r\n",
			  id, token_of(ep));
	const char *colon = strrchr(H.listen, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fds[6];
	for (int i = 0; i < 6; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		ck_assert_int_eq(send(fds[i], req, strlen(req), MSG_NOSIGNAL),
				 (ssize_t)strlen(req));
		h_sleep_ms(200); /* handed over in order */
	}
	/* The first four wait for their body; the others are answered 503 at once. */
	for (int i = 0; i < 6; i++) {
		struct pollfd p = {.fd = fds[i], .events = POLLIN};
		char buf[4096] = "";
		ssize_t n = poll(&p, 1, i < 4 ? 500 : 5000) == 1
				? recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT)
				: -1;
		if (i < 4)
			ck_assert_msg(n < 0, "connection %d answered: %s", i, buf);
		else
			ck_assert_msg(n > 0 && strstr(buf, " 503 ") &&
					  strcasestr(buf, "Connection: close"),
				      "connection %d: %zd '%s'", i, n, buf);
	}
	/* A key holder gets through meanwhile. */
	struct h_req kr = {.method = "GET", .path = "/v1/sandboxes", .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_request(&kr, &r), 200);
	h_resp_free(&r);
	/* Closing one gives its place back. */
	close(fds[0]);
	h_sleep_ms(300);
	int again = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(again, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(again, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	struct pollfd p = {.fd = again, .events = POLLIN};
	ck_assert_msg(poll(&p, 1, 700) == 0, "a freed place was not given back");
	close(again);
	for (int i = 1; i < 6; i++)
		close(fds[i]);
	json_decref(ep);
	free(req);
	free(id);
}
END_TEST

static Suite *preview_suite(void)
{
	Suite *s = suite_create("preview");
	TCase *tc = h_tcase(s, "preview", 300);
	tcase_add_test(tc, token_in_header_and_cookie_never_reaches_the_app);
	tcase_add_test(tc, token_in_query_redirects_and_sets_cookie);
	tcase_add_test(tc, host_name_routing);
	tcase_add_test(tc, secret_kept_across_restart_and_rotated);
	tcase_add_test(tc, tunnel_needs_the_key_and_the_upgrade);
	tcase_add_test(tc, expiring_token_from_signed_endpoint);
	tcase_add_test(tc, keyless_connections_held_apart);
	return s;
}

int main(void)
{
	int r = h_netns_enter_private();
	if (r < 0) {
		fprintf(stderr, "it_preview: a private network namespace: %s\n", strerror(-r));
		return 1;
	}
	return h_main(preview_suite());
}
