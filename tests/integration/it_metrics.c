/* The operator's celld: GET /metrics in Prometheus' text format and GET /health, on the
 * Unix socket only (no key; a 404 on TCP, key or not, as any unknown path); the counts
 * follow creates, deletes, a failed create and a pause, the proxy's bytes a request through
 * it (the resolver's and the packet log's counters are it_network's: they need its lab);
 * --log-format json writes one JSON object a line; a celld that turned net.ipv4.ip_forward
 * on turns it off again when it stops with no networked sandbox, and leaves it on while one
 * outlives the stop (run in a private network namespace, where ip_forward is the
 * namespace's own). */
#include <check.h>
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- the text format ---- */

/* A metric name: [a-zA-Z_:][a-zA-Z0-9_:]*; its length, 0 when s starts with none. */
static size_t name_len(const char *s)
{
	size_t n = 0;
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':')
		n++;
	return n;
}

/* "{k="v",k2="v2"}" at s: its length, 0 when malformed. */
static size_t labels_len(const char *s)
{
	const char *p = s + 1;
	while (*p != '}') {
		size_t k = name_len(p);
		if (!k || p[k] != '=' || p[k + 1] != '"')
			return 0;
		p += k + 2;
		while (*p && *p != '"')
			p += *p == '\\' && p[1] ? 2 : 1;
		if (*p != '"')
			return 0;
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return 0;
	}
	return (size_t)(p + 1 - s);
}

/* The family a sample's name belongs to: a histogram's _bucket, _sum, _count are its. */
static void family_of(const char *name, size_t len, const char *typed, char *out, size_t size)
{
	static const char *const parts[] = {"_bucket", "_sum", "_count"};
	snprintf(out, size, "%.*s", (int)len, name);
	for (size_t i = 0; i < 3; i++) {
		size_t pl = strlen(parts[i]);
		if (len > pl && !strcmp(out + len - pl, parts[i])) {
			char base[128];
			snprintf(base, sizeof(base), "%.*s", (int)(len - pl), name);
			char *want = h_fmt("\n# TYPE %s histogram\n", base);
			bool histogram = strstr(typed, want) != NULL;
			free(want);
			if (histogram)
				snprintf(out, size, "%s", base);
		}
	}
}

/* Every line of text is "# HELP name ...", "# TYPE name type" or "name{labels} value",
 * each family's HELP and TYPE before its first sample. Fails the test naming the line. */
static void assert_exposition(const char *text)
{
	char *copy = strdup(text);
	/* "\n# TYPE ..." lines seen so far, to look a family up in. */
	char *typed = calloc(1, strlen(text) + 2);
	char *helped = calloc(1, strlen(text) + 2);
	typed[0] = helped[0] = '\n';
	int samples = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			size_t n = name_len(line + 7);
			ck_assert_msg(n && line[7 + n] == ' ' && line[8 + n], "bad line '%s'",
				      line);
			if (line[2] == 'T') {
				const char *type = line + 8 + n;
				ck_assert_msg(!strcmp(type, "counter") || !strcmp(type, "gauge") ||
						  !strcmp(type, "histogram"),
					      "bad type in '%s'", line);
				strcat(strcat(typed, line), "\n");
			} else {
				strcat(strcat(helped, line), "\n");
			}
			continue;
		}
		size_t n = name_len(line);
		ck_assert_msg(n, "a sample line without a name: '%s'", line);
		size_t l = line[n] == '{' ? labels_len(line + n) : 0;
		ck_assert_msg(line[n] != '{' || l, "malformed labels in '%s'", line);
		const char *value = line + n + l;
		ck_assert_msg(value[0] == ' ' && value[1], "no value in '%s'", line);
		char *end;
		strtod(value + 1, &end);
		ck_assert_msg(*end == '\0', "the value of '%s' is no number", line);
		char fam[128];
		family_of(line, n, typed, fam, sizeof(fam));
		char *t = h_fmt("\n# TYPE %s ", fam), *h = h_fmt("\n# HELP %s ", fam);
		ck_assert_msg(strstr(typed, t) && strstr(helped, h),
			      "'%s' comes before its family's HELP and TYPE", line);
		free(t);
		free(h);
		samples++;
	}
	ck_assert_int_gt(samples, 10);
	free(copy);
	free(typed);
	free(helped);
}

static char *scrape(void)
{
	struct h_resp r;
	ck_assert_int_eq(h_request(&(struct h_req){.method = "GET", .path = "/metrics"}, &r), 200);
	ck_assert_msg(r.content_type && strstr(r.content_type, "text/plain") &&
			  strstr(r.content_type, "version=0.0.4"),
		      "Content-Type %s", r.content_type ? r.content_type : "(none)");
	char *body = strdup(r.body);
	h_resp_free(&r);
	return body;
}

START_TEST(metrics_text_and_counts)
{
	char *before = scrape();
	assert_exposition(before);
	double creates = h_metric(before, "cell_sandbox_creates_total");
	double deletes = h_metric(before, "cell_sandbox_deletes_total");
	double failures = h_metric(before, "cell_sandbox_create_failures_total");
	double running = h_metric(before, "cell_sandboxes{state=\"Running\"}");
	double paused = h_metric(before, "cell_sandboxes{state=\"Paused\"}");
	double lifecycle =
	    h_metric(before, "cell_http_request_duration_seconds_count{group=\"lifecycle\"}");
	ck_assert(creates >= 0 && deletes >= 0 && failures >= 0 && running >= 0 && paused >= 0 &&
		  lifecycle >= 0);
	ck_assert(h_metric(before, "cell_command_output_budget_bytes") > 0);

	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, "echo relayed");
	free(out);
	char *mid = scrape();
	ck_assert_double_eq(h_metric(mid, "cell_sandbox_creates_total"), creates + 1);
	ck_assert_double_eq(h_metric(mid, "cell_sandboxes{state=\"Running\"}"), running + 1);
	ck_assert(h_metric(mid, "cell_http_request_duration_seconds_count{group=\"lifecycle\"}") >=
		  lifecycle + 1);
	ck_assert(h_metric(mid, "cell_relay_bytes_total{direction=\"received\"}") > 0);

	/* The state gauge follows a pause. */
	char *path = h_fmt("/v1/sandboxes/%s/pause", id);
	long st = h_http("POST", path, NULL, NULL);
	ck_assert_msg(st == 202 || st == 204, "pause: HTTP %ld", st);
	ck_assert_str_eq(h_wait_state(id, "Paused", 30), "Paused");
	free(path);
	char *after_pause = scrape();
	ck_assert_double_eq(h_metric(after_pause, "cell_sandboxes{state=\"Running\"}"), running);
	ck_assert_double_eq(h_metric(after_pause, "cell_sandboxes{state=\"Paused\"}"), paused + 1);

	ck_assert_int_eq(h_delete(id), 204);
	/* A create that fails: an entrypoint the image lacks. */
	json_t *extra = json_pack("{s:[s]}", "entrypoint", "/no/such/entrypoint");
	struct h_resp fr;
	st = h_create_ex("busybox", extra, H_UNIX, &fr);
	json_decref(extra);
	ck_assert_msg(st >= 400, "the bad create answered %ld", st);
	h_resp_free(&fr);
	char *after = scrape();
	assert_exposition(after);
	ck_assert_double_eq(h_metric(after, "cell_sandbox_deletes_total"), deletes + 1);
	ck_assert_double_eq(h_metric(after, "cell_sandbox_create_failures_total"), failures + 1);
	ck_assert_double_eq(h_metric(after, "cell_sandbox_creates_total"), creates + 1);
	ck_assert_double_eq(h_metric(after, "cell_sandboxes{state=\"Paused\"}"), paused);
	/* No label names a sandbox. */
	ck_assert_msg(!strstr(after, id), "a sample names sandbox %s", id);
	free(before);
	free(mid);
	free(after_pause);
	free(after);
	free(id);
}
END_TEST

/* The port proxy's bytes: a request through /v1/sandboxes/{id}/proxy/8080/ to busybox's
 * httpd in the sandbox moves both directions, the answer's 10000 bytes at least. */
START_TEST(proxy_bytes_counted)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /www && head -c 10000 /dev/zero | tr '\\0' x > /www/f && "
		      "nohup httpd -f -p 127.0.0.1:8080 -h /www >/dev/null 2>&1 &"));
	char *path = h_fmt("/v1/sandboxes/%s/proxy/8080/f", id);
	double to_app = 0, from_app = 0;
	struct h_resp r = {0};
	for (int i = 0; i < 100 && r.status != 200; i++) {
		h_resp_free(&r);
		to_app = h_world_metric(&H, "cell_proxy_bytes_total{direction=\"to_app\"}");
		from_app = h_world_metric(&H, "cell_proxy_bytes_total{direction=\"from_app\"}");
		ck_assert(to_app >= 0 && from_app >= 0);
		h_http("GET", path, NULL, &r);
		ck_assert_msg(r.status == 200 || r.status == 502, "GET %s: %ld", path, r.status);
		if (r.status != 200)
			h_sleep_ms(50);
	}
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 10000);
	h_resp_free(&r);
	ck_assert(h_world_metric(&H, "cell_proxy_bytes_total{direction=\"to_app\"}") > to_app);
	ck_assert(h_world_metric(&H, "cell_proxy_bytes_total{direction=\"from_app\"}") >=
		  from_app + 10000);
	free(path);
	free(id);
}
END_TEST

/* On TCP, with the key or without, /metrics and /health are what any unknown path is. */
START_TEST(operator_routes_only_on_the_socket)
{
	static const char *const paths[] = {"/metrics", "/v1/metrics", "/health", "/v1/health"};
	struct h_resp unknown;
	long nokey = h_request(
	    &(struct h_req){.method = "GET", .path = "/no-such-route", .via = H_TCP_NOKEY},
	    &unknown);
	h_resp_free(&unknown);
	for (size_t i = 0; i < 4; i++) {
		struct h_resp r;
		ck_assert_int_eq(
		    h_request(&(struct h_req){.method = "GET", .path = paths[i], .via = H_TCP}, &r),
		    404);
		ck_assert_str_eq(h_err_code(&r), "NOT_FOUND");
		ck_assert_msg(!strstr(r.body, "cell_") && !strstr(r.body, "status\":\"ok"),
			      "%s on TCP leaks: %s", paths[i], r.body);
		h_resp_free(&r);
		ck_assert_int_eq(
		    h_request(
			&(struct h_req){.method = "GET", .path = paths[i], .via = H_TCP_NOKEY}, &r),
		    nokey);
		h_resp_free(&r);
	}
	struct h_resp h;
	ck_assert_int_eq(h_http("GET", "/health", NULL, &h), 200);
	ck_assert_str_eq(h_jstr(h.json, "status"), "ok");
	h_resp_free(&h);
}
END_TEST

START_TEST(log_format_json)
{
	const char *flags[] = {"--log-format", "json", NULL};
	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "json", .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_int_eq(h_world_delete(w, id), 204);
	char *log = h_read_file(w->log);
	ck_assert_ptr_nonnull(log);
	int lines = 0, celld_lines = 0;
	char *save = NULL;
	for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lines++;
		json_error_t e;
		json_t *j = json_loads(line, 0, &e);
		ck_assert_msg(j, "a log line is no JSON (%s): %s", e.text, line);
		ck_assert_msg(json_is_string(json_object_get(j, "time")) &&
				  json_is_string(json_object_get(j, "level")) &&
				  json_is_string(json_object_get(j, "message")) &&
				  json_is_integer(json_object_get(j, "pid")),
			      "a log line lacks a field: %s", line);
		celld_lines += !strcmp(h_jstr(j, "program"), "celld");
		json_decref(j);
	}
	ck_assert_int_gt(lines, 2);
	ck_assert_int_eq(celld_lines, lines);
	free(log);
	free(id);

	/* Anything else is refused, naming the flag. */
	char *celld = h_fmt("%s/celld", H.bin);
	char *argv[] = {celld, "--log-format", "xml", NULL};
	struct h_proc p;
	h_run(argv, NULL, 30, &p);
	ck_assert_int_eq(p.status, 2);
	ck_assert_msg(strstr(p.err, "--log-format xml"), "stderr: %s", p.err);
	h_proc_free(&p);
	free(celld);
}
END_TEST

/* ip_forward of the namespace celld runs in. */
static char ip_forward(const struct h_netns *ns)
{
	/* /proc/sys/net shows the reader's namespace: read it from inside ns. */
	char *cmd = h_fmt("nsenter --net=%s cat /proc/sys/net/ipv4/ip_forward", ns->path);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct h_proc p;
	ck_assert_int_eq(h_run(argv, NULL, 30, &p), 0);
	char c = p.out && p.out[0] ? p.out[0] : '?';
	h_proc_free(&p);
	free(cmd);
	return c;
}

static void set_ip_forward(const struct h_netns *ns, const char *v)
{
	char *cmd =
	    h_fmt("nsenter --net=%s sh -c 'echo %s > /proc/sys/net/ipv4/ip_forward'", ns->path, v);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct h_proc p;
	ck_assert_int_eq(h_run(argv, NULL, 30, &p), 0);
	h_proc_free(&p);
	free(cmd);
}

/* SIGTERM, and wait for the stop to end. */
static void stop_world(struct h_world *w)
{
	pid_t pid = h_world_pid(w);
	ck_assert_int_gt(pid, 0);
	kill(pid, SIGTERM);
	for (int i = 0; i < 300 && h_world_alive(w); i++)
		h_sleep_ms(100);
	ck_assert_msg(!h_world_alive(w), "celld did not stop in 30 s");
}

START_TEST(ip_forward_restored)
{
	struct h_netns ns;
	h_netns_hold(&ns);
	set_ip_forward(&ns, "0");
	const char *flags[] = {"--network-default", "public", "--dns-upstream", "127.0.0.1:53",
			       NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "fwd", .flags = flags, .netns_fd = ns.fd});
	ck_assert_int_eq(ip_forward(&ns), '0');

	/* A networked sandbox turns it on; a stop while it lives leaves it on, saying why. */
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_int_eq(ip_forward(&ns), '1');
	stop_world(w);
	ck_assert_int_eq(ip_forward(&ns), '1');
	ck_assert_msg(strstr(h_world_log_tail(w), "net.ipv4.ip_forward left on"), "log: %s",
		      h_world_log_tail(w));

	/* The next celld adopts it; with it deleted, its stop turns forwarding off. */
	h_world_start(w);
	ck_assert_int_eq(h_world_delete(w, id), 204);
	stop_world(w);
	ck_assert_int_eq(ip_forward(&ns), '0');
	ck_assert_msg(strstr(h_world_log_tail(w), "net.ipv4.ip_forward turned off again"),
		      "log: %s", h_world_log_tail(w));
	free(id);
	h_netns_release(&ns);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	tcase_add_test(h_tcase(s, "metrics_text_and_counts", 180), metrics_text_and_counts);
	tcase_add_test(h_tcase(s, "proxy_bytes_counted", 120), proxy_bytes_counted);
	tcase_add_test(h_tcase(s, "operator_routes_only_on_the_socket", 60),
		       operator_routes_only_on_the_socket);
	tcase_add_test(h_tcase(s, "log_format_json", 120), log_format_json);
	tcase_add_test(h_tcase(s, "ip_forward_restored", 240), ip_forward_restored);
	return s;
}

int main(void)
{
	return h_main(metrics_suite());
}
