/* The audit trail: a sandbox's events (GET /v1/sandboxes/{id}/events: transitions in order,
 * since= replay, a follower seeing live ones and the final "deleted"), the audit log
 * (GET /v1/audit: create, exec, file write, delete with who and the request id; Unix socket
 * only; rotation; a torn last line after a crash) and secrets (in every command's
 * environment, after a restart too, and nowhere else: not in GET, inspect, events, the
 * audit log, state.json or celld's log). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* ---- events ---- */

/* The events of a stream body ("id: N\nevent: T\ndata: {...}\n\n"...), as JSON objects. */
static json_t *parse_events(const char *body)
{
	json_t *out = json_array();
	for (const char *p = body; (p = strstr(p, "data: ")); p += 6) {
		json_t *o = json_loads(p + 6, JSON_DISABLE_EOF_CHECK, NULL);
		ck_assert_msg(json_is_object(o), "bad event near: %.80s", p);
		json_array_append_new(out, o);
	}
	return out;
}

static json_t *get_events(const char *id, const char *query)
{
	char *path = h_fmt("/v1/sandboxes/%s/events?follow=false%s", id, query);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(r.content_type && strstr(r.content_type, "text/event-stream"), "%s",
		      r.content_type ? r.content_type : "(none)");
	json_t *ev = parse_events(r.body);
	h_resp_free(&r);
	free(path);
	return ev;
}

/* The state events of evs as "op:from>to" joined by ' '. */
static char *transitions(json_t *evs)
{
	char *s = h_fmt("%s", "");
	size_t i;
	json_t *e;
	json_array_foreach(evs, i, e)
	{
		const char *type = h_jstr(e, "type");
		char *n;
		if (!strcmp(type, "state"))
			n = h_fmt("%s%s%s:%s>%s", s, *s ? " " : "", h_jstr(e, "op"),
				  h_jstr(e, "from"), h_jstr(e, "to"));
		else if (!strcmp(type, "deleted"))
			n = h_fmt("%s%sdeleted", s, *s ? " " : "");
		else
			continue;
		free(s);
		s = n;
	}
	return s;
}

struct follower {
	const char *id;
	pthread_mutex_t lock;
	json_t *events;
	int rc;
	bool ended;
};

static int on_event(void *ctx, const char *data, size_t len)
{
	struct follower *f = ctx;
	json_t *o = json_loadb(data, len, 0, NULL);
	pthread_mutex_lock(&f->lock);
	if (o)
		json_array_append_new(f->events, o);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void *follow_thread(void *arg)
{
	struct follower *f = arg;
	struct cell_client c;
	cell_client_init(&c, H.socket);
	c.timeout_s = 120;
	c.no_proxy = true;
	char *path = h_fmt("/v1/sandboxes/%s/events", f->id);
	struct cell_client_req req = {.method = "GET", .path = path};
	struct cell_error err = {0};
	long status = 0;
	int r = cell_client_stream(&c, &req, on_event, f, "events", &status, &err);
	cell_client_close(&c);
	free(path);
	pthread_mutex_lock(&f->lock);
	f->rc = r < 0 ? r : (int)status;
	f->ended = true;
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Wait (at most 20 s) until the follower has n events. */
static void wait_events(struct follower *f, size_t n)
{
	for (int i = 0; i < 400; i++) {
		pthread_mutex_lock(&f->lock);
		size_t have = json_array_size(f->events);
		pthread_mutex_unlock(&f->lock);
		if (have >= n)
			return;
		h_sleep_ms(50);
	}
	ck_abort_msg("the follower got fewer than %zu events", n);
}

START_TEST(events_in_order_replay_and_follow)
{
	char *id = h_create("busybox", NULL);
	struct follower f = {.id = id, .events = json_array()};
	pthread_mutex_init(&f.lock, NULL);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, follow_thread, &f), 0);
	/* The create, replayed to the follower; then live transitions. */
	wait_events(&f, 1);
	char *path = h_fmt("/v1/sandboxes/%s/pause", id);
	ck_assert_int_lt(h_http("POST", path, NULL, NULL), 300);
	free(path);
	wait_events(&f, 2);
	path = h_fmt("/v1/sandboxes/%s/resume", id);
	ck_assert_int_lt(h_http("POST", path, NULL, NULL), 300);
	free(path);
	wait_events(&f, 3);

	/* Kept events: in order, seq from 1; since= gives the later ones only. */
	json_t *all = get_events(id, "");
	char *t = transitions(all);
	ck_assert_str_eq(t, "create:Pending>Running pause:Running>Paused resume:Paused>Running");
	free(t);
	for (size_t i = 0; i < json_array_size(all); i++) {
		ck_assert_int_eq(h_jint(json_array_get(all, i), "seq"), (long long)i + 1);
		const char *tm = h_jstr(json_array_get(all, i), "time");
		ck_assert_msg(strlen(tm) == 24 && tm[23] == 'Z', "time %s", tm);
	}
	json_decref(all);
	all = get_events(id, "&since=1");
	t = transitions(all);
	ck_assert_str_eq(t, "pause:Running>Paused resume:Paused>Running");
	free(t);
	ck_assert_int_eq(h_jint(json_array_get(all, 0), "seq"), 2);
	json_decref(all);
	struct h_resp r;
	char *bad = h_fmt("/v1/sandboxes/%s/events?since=-1", id);
	ck_assert_int_eq(h_http("GET", bad, NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "since"), "%s", r.body);
	h_resp_free(&r);
	free(bad);

	/* cell events: one line each, the transitions in order. */
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "events", id, NULL), 0);
	const char *a = strstr(p.out, "#1  state"), *b = strstr(p.out, "#2  state"),
		   *c = strstr(p.out, "#3  state");
	ck_assert_msg(a && b && c && a < b && b < c && strstr(c, "\"to\":\"Running\""), "%s",
		      p.out);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "events", "--since", "2", "--json", id, NULL), 0);
	ck_assert_msg(!strstr(p.out, "\"seq\":2") && strstr(p.out, "\"seq\":3"), "%s", p.out);
	h_proc_free(&p);

	/* The delete ends the follower's stream with a last "deleted" event. */
	ck_assert_int_lt(h_delete(id), 300);
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&f.lock);
		bool ended = f.ended;
		pthread_mutex_unlock(&f.lock);
		if (ended)
			break;
		h_sleep_ms(50);
	}
	ck_assert_msg(f.ended, "the follower's stream did not end with the delete");
	pthread_join(th, NULL);
	ck_assert_int_eq(f.rc, 200);
	t = transitions(f.events);
	ck_assert_str_eq(t, "create:Pending>Running pause:Running>Paused resume:Paused>Running "
			    "deleted");
	free(t);
	json_decref(f.events);
	free(id);
}
END_TEST

/* An OOM kill is an event of its own. */
START_TEST(events_oom_kill)
{
	json_t *extra = json_pack("{s:{s:s}}", "resourceLimits", "memory", "64Mi");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	struct h_exec e;
	/* dd allocates and fills a 256 MiB buffer: four times the limit. */
	ck_assert_int_eq(h_exec(id, "dd if=/dev/zero of=/dev/null bs=256M count=1", NULL, &e), 0);
	ck_assert_int_eq(e.exit_code, 137);
	h_exec_free(&e);
	json_t *all = get_events(id, "");
	json_t *oom = NULL, *o;
	size_t i;
	json_array_foreach(all, i, o) if (!strcmp(h_jstr(o, "type"), "oom")) oom = o;
	ck_assert_msg(oom, "no oom event");
	ck_assert_int_ge(h_jint(oom, "killed"), 1);
	ck_assert_int_ge(h_jint(oom, "total"), h_jint(oom, "killed"));
	json_decref(all);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
}
END_TEST

/* A call the profile refused, in a sandbox created with cell.seccompLog, is an event. */
START_TEST(events_seccomp_denied)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.seccompLog", "true");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	h_upload_helper(id, "seccomp_probe");
	json_t *res = h_sh_pairs(id, "/root/seccomp_probe");
	ck_assert_str_eq(h_jstr(res, "keyctl"), "EPERM");
	json_decref(res);
	json_t *ev = NULL;
	for (int i = 0; i < 50 && !ev; i++) {
		json_t *all = get_events(id, "");
		json_t *o;
		size_t k;
		json_array_foreach(all, k, o) if (!strcmp(h_jstr(o, "type"), "seccomp.denied") &&
						  !strcmp(h_jstr(o, "syscall"), "keyctl")) ev =
		    json_incref(o);
		json_decref(all);
		if (!ev)
			h_sleep_ms(100);
	}
	ck_assert_msg(ev, "no seccomp.denied event for keyctl");
	ck_assert_str_eq(h_jstr(ev, "errno"), "EPERM");
	ck_assert_msg(*h_jstr(ev, "arch"), "no arch");
	json_decref(ev);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
}
END_TEST

/* ---- the audit log ---- */

static json_t *audit_records(const char *query)
{
	char *path = h_fmt("/v1/audit%s", query);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	json_t *recs = json_incref(json_object_get(r.json, "records"));
	ck_assert_msg(json_is_array(recs), "%s", r.body);
	h_resp_free(&r);
	free(path);
	return recs;
}

static json_t *find_record(json_t *recs, const char *action, const char *key, const char *value)
{
	size_t i;
	json_t *o;
	json_array_foreach(recs, i, o)
	{
		if (strcmp(h_jstr(o, "action"), action))
			continue;
		if (!key || !strcmp(h_jstr(o, key), value))
			return o;
	}
	return NULL;
}

static bool file_has(const char *path, const char *needle)
{
	char *s = h_read_file(path);
	bool has = s && strstr(s, needle);
	free(s);
	return has;
}

START_TEST(audit_records_create_exec_write_delete)
{
	struct h_resp cr;
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_UNIX, &cr), 202);
	char *id = strdup(h_jstr(cr.json, "id"));
	ck_assert_msg(cr.request_id && *cr.request_id, "no X-Request-ID on the create");
	char *create_rid = strdup(cr.request_id);
	h_resp_free(&cr);
	char *out = h_sh(id, "cd /tmp && echo audited-run");
	ck_assert_str_eq(h_trim(out), "audited-run");
	free(out);
	/* A long command is kept cut, at a character's start (é is two bytes: 4096 is not
	 * always one). */
	char *longcmd = malloc(3 + 3001 * 2 + 1);
	strcpy(longcmd, ":  "); /* byte 4096 is then the second of an é */
	for (int k = 0; k < 3001; k++)
		strcat(longcmd + 2 * k, "\xc3\xa9");
	free(h_sh(id, longcmd));
	free(longcmd);
	static const char content[] = "FILE-CONTENT-NEVER-AUDITED-31337";
	struct h_resp ur;
	ck_assert_int_eq(h_upload(id, "/tmp/up.txt", content, strlen(content), 0644, &ur), 200);
	h_resp_free(&ur);
	ck_assert_int_lt(h_delete(id), 300);

	char *q = h_fmt("?sandbox=%s", id);
	json_t *recs = audit_records(q);
	free(q);
	json_t *c = find_record(recs, "create", NULL, NULL);
	ck_assert_msg(c, "no create record");
	ck_assert_str_eq(h_jstr(c, "who"), "unix");
	ck_assert_str_eq(h_jstr(c, "sandbox"), id);
	ck_assert_str_eq(h_jstr(c, "requestId"), create_rid);
	ck_assert_str_eq(h_jstr(c, "to"), "Running");
	json_t *e = find_record(recs, "exec", "command", "cd /tmp && echo audited-run");
	ck_assert_msg(e, "no exec record");
	ck_assert_str_eq(h_jstr(e, "who"), "unix");
	ck_assert_int_eq(h_jint(e, "exitCode"), 0);
	ck_assert_int_ge(h_jint(e, "durationMs"), 0);
	ck_assert_msg(*h_jstr(e, "requestId"), "exec without a request id");
	ck_assert_msg(json_is_array(json_object_get(e, "envNames")), "exec without env names");
	json_t *lc = NULL;
	{
		size_t k;
		json_t *x;
		json_array_foreach(
		    recs, k, x) if (json_is_true(json_object_get(x, "commandTruncated"))) lc = x;
	}
	ck_assert_msg(lc, "no record of the long command, or not cut");
	ck_assert_uint_le(strlen(h_jstr(lc, "command")), 4096);
	ck_assert_uint_ge(strlen(h_jstr(lc, "command")), 4000);
	ck_assert_msg(!strncmp(h_jstr(lc, "command"), ":  \xc3\xa9", 5), "%.20s",
		      h_jstr(lc, "command"));
	json_t *w = find_record(recs, "file.write", "path", "/tmp/up.txt");
	ck_assert_msg(w, "no file.write record");
	ck_assert_int_eq(h_jint(w, "size"), (long long)strlen(content));
	json_t *d = find_record(recs, "delete", NULL, NULL);
	ck_assert_msg(d, "no delete record");
	ck_assert_str_eq(h_jstr(d, "to"), "Deleted");
	/* In order: create, exec, write, delete. */
	size_t i, ic = 0, ie = 0, iw = 0, id_ = 0;
	json_t *o;
	json_array_foreach(recs, i, o)
	{
		if (o == c)
			ic = i;
		if (o == e)
			ie = i;
		if (o == w)
			iw = i;
		if (o == d)
			id_ = i;
	}
	ck_assert_msg(ic < ie && ie < iw && iw < id_, "out of order: %zu %zu %zu %zu", ic, ie, iw,
		      id_);
	json_decref(recs);
	/* cell audit: the same records, one line each. */
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "audit", id, NULL), 0);
	ck_assert_msg(strstr(p.out, "  unix  ") && strstr(p.out, "  exec  ") &&
			  strstr(p.out, "audited-run") && strstr(p.out, create_rid),
		      "%s", p.out);
	h_proc_free(&p);

	/* Root-only, and never the file's contents. */
	char *dir = h_fmt("%s/audit", H.state), *file = h_fmt("%s/audit/audit.log", H.state);
	struct stat st;
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_msg(!file_has(file, content), "the audit log holds a file's contents");
	free(dir);
	free(file);
	free(create_rid);
	free(id);
}
END_TEST

/* Changes of the record: a renewal (its new expiry) and a metadata patch (the keys, never
 * the values). */
START_TEST(audit_records_renew_and_metadata)
{
	char *id = h_create("busybox", NULL);
	char when[64];
	time_t t = time(NULL) + 3600;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	char *body = h_fmt("{\"expiresAt\": \"%s\"}", when);
	char *path = h_fmt("/v1/sandboxes/%s/renew-expiration", id);
	ck_assert_int_eq(h_http("POST", path, body, NULL), 200);
	free(path);
	free(body);
	path = h_fmt("/v1/sandboxes/%s/metadata", id);
	ck_assert_int_eq(h_http("PATCH", path, "{\"owner\": \"value-not-logged\"}", NULL), 200);
	free(path);
	char *q = h_fmt("?sandbox=%s", id);
	json_t *recs = audit_records(q);
	json_t *renew = find_record(recs, "renew", NULL, NULL);
	ck_assert_msg(renew, "no renew record");
	ck_assert_str_eq(h_jstr(renew, "expiresAt"), when);
	json_t *md = find_record(recs, "metadata", NULL, NULL);
	ck_assert_msg(md, "no metadata record");
	const char *key = json_string_value(json_array_get(h_jget(md, "keys"), 0));
	ck_assert_str_eq(key ? key : "", "owner");
	char *text = json_dumps(recs, 0);
	ck_assert_msg(!strstr(text, "value-not-logged"), "a metadata value in the audit log");
	free(text);
	json_decref(recs);
	free(q);
	free(id);
}
END_TEST

START_TEST(audit_who_key_and_unix_only)
{
	struct h_resp cr;
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &cr), 202);
	char *id = strdup(h_jstr(cr.json, "id"));
	h_resp_free(&cr);
	char *q = h_fmt("?sandbox=%s&limit=5", id);
	json_t *recs = audit_records(q);
	free(q);
	json_t *c = find_record(recs, "create", NULL, NULL);
	ck_assert_msg(c, "no create record");
	const char *who = h_jstr(c, "who");
	ck_assert_msg(!strncmp(who, "key:", 4), "who %s", who);
	ck_assert_msg(!strstr(who, H.key), "the audit log names the key itself");
	json_decref(recs);
	char *file = h_fmt("%s/audit/audit.log", H.state);
	ck_assert_msg(!file_has(file, H.key), "the API key is in the audit log");
	free(file);
	file = h_fmt("%s/audit/security.log", H.state);
	ck_assert_msg(!file_has(file, H.key), "the API key is in security.log");
	free(file);
	/* Over TCP: refused. Bad arguments: named. */
	struct h_resp r;
	ck_assert_int_eq(
	    h_request(&(struct h_req){.method = "GET", .path = "/v1/audit", .via = H_TCP}, &r),
	    403);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/audit?limit=0", NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "limit"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/audit?since=yesterday", NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "since"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/audit?since=2000-01-01T00:00:00Z&limit=1", NULL, &r),
			 200);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "records")), 1);
	h_resp_free(&r);
	/* since: nothing is at or after tomorrow. */
	char *later = h_fmt("/v1/audit?since=%lld", (long long)time(NULL) + 86400);
	ck_assert_int_eq(h_http("GET", later, NULL, &r), 200);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "records")), 0);
	h_resp_free(&r);
	free(later);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
}
END_TEST

START_TEST(audit_rotates_and_survives_a_torn_line)
{
	static const char *const flags[] = {"--audit-max-bytes", "4Ki", NULL};
	h_celld_restart_with(flags);
	char *id = h_create("busybox", NULL);
	for (int i = 0; i < 30; i++) {
		char *cmd = h_fmt("echo rotation-%02d", i);
		free(h_sh(id, cmd));
		free(cmd);
	}
	char *one = h_fmt("%s/audit/audit.log.1", H.state);
	struct stat st;
	ck_assert_msg(stat(one, &st) == 0, "no rotation into audit.log.1");
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_le((unsigned long)st.st_size, 4096);
	free(one);
	/* Read back across the files, in order. */
	char *q = h_fmt("?sandbox=%s", id);
	json_t *recs = audit_records(q);
	int last = -1, seen = 0;
	size_t i;
	json_t *o;
	json_array_foreach(recs, i, o)
	{
		const char *cmd = h_jstr(o, "command");
		int n;
		if (strcmp(h_jstr(o, "action"), "exec") || sscanf(cmd, "echo rotation-%d", &n) != 1)
			continue;
		ck_assert_msg(n == last + 1 || last < 0, "rotation-%d after rotation-%d", n, last);
		last = n;
		seen++;
	}
	ck_assert_int_eq(last, 29);
	ck_assert_int_gt(seen, 5);
	json_decref(recs);

	/* A crash mid-write leaves a torn last line: skipped, and the next celld's records
	 * read back. */
	h_celld_kill();
	char *file = h_fmt("%s/audit/audit.log", H.state);
	int fd = open(file, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	static const char torn[] = "{\"time\":\"2026-11-24T15:00:00.000Z\",\"requestId\":\"to";
	ck_assert_int_eq(write(fd, torn, sizeof(torn) - 1), (ssize_t)sizeof(torn) - 1);
	close(fd);
	free(file);
	h_celld_restart_with(flags);
	free(h_sh(id, "echo after-the-crash"));
	recs = audit_records(q);
	ck_assert_msg(find_record(recs, "exec", "command", "echo after-the-crash"),
		      "the record after a torn line is lost");
	ck_assert_msg(find_record(recs, "exec", "command", "echo rotation-29"),
		      "the record before a torn line is lost");
	json_decref(recs);
	free(q);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
}
END_TEST

/* ---- bounds: a key's budget, security records apart, failed authentication ---- */

static long long jint0(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* One key floods exec over TCP: cut to its budget (policies/audit/budget.json: 1 record a
 * second, a burst of 10 here), the rest summed up in security.log; kept + dropped = sent.
 * The operator's create and delete, and the key's own lifecycle records, all pass. */
START_TEST(audit_key_flood_cut_to_budget)
{
	char *pol = h_fmt("%s/policies-budget", H.dir);
	char *cp = h_fmt("cp -r '%s/policies' '%s'", H.src, pol);
	ck_assert_int_eq(system(cp), 0);
	free(cp);
	char *budget = h_fmt("%s/audit/budget.json", pol);
	h_write_file(budget, "{\"recordsPerSecond\": 1, \"recordsBurst\": 10}\n", 0644);
	free(budget);
	const char *flags[] = {"--policies", pol, NULL};
	h_celld_restart_with(flags);
	struct h_resp cr;
	ck_assert_int_eq(h_create_ex("busybox", NULL, H_TCP, &cr), 202);
	char *id = strdup(h_jstr(cr.json, "id"));
	h_resp_free(&cr);
	const int total = 200;
	for (int i = 0; i < total; i++) {
		struct h_exec res;
		char *cmd = h_fmt("echo flood-%d", i);
		ck_assert_int_eq(h_exec(id, cmd, &(struct h_exec_opts){.via = H_TCP}, &res), 0);
		ck_assert_int_eq(res.status, 200);
		h_exec_free(&res);
		free(cmd);
	}
	ck_assert_int_lt(h_delete(id), 300);
	/* A read writes what is pending. */
	json_t *recs = audit_records("?limit=10000");
	const char *key = NULL;
	long long kept = 0, dropped = 0, summaries = 0;
	bool created = false, deleted = false;
	size_t i;
	json_t *o;
	json_array_foreach(recs, i, o)
	{
		const char *action = h_jstr(o, "action");
		const char *sid = json_string_value(json_object_get(o, "sandbox"));
		if (sid && !strcmp(sid, id) && !strcmp(action, "exec")) {
			kept++;
			key = h_jstr(o, "who");
		}
		created |= sid && !strcmp(sid, id) && !strcmp(action, "create");
		deleted |= sid && !strcmp(sid, id) && !strcmp(action, "delete");
	}
	ck_assert_msg(key && !strncmp(key, "key:", 4), "no exec record of the key");
	json_array_foreach(recs, i, o)
	{
		if (strcmp(h_jstr(o, "action"), "audit.dropped") ||
		    strcmp(h_jstr(o, "principal"), key))
			continue;
		summaries++;
		dropped += jint0(o, "count");
		ck_assert_str_eq(h_jstr(o, "who"), "celld");
		ck_assert_int_eq(jint0(json_object_get(o, "actions"), "exec"), jint0(o, "count"));
		ck_assert_int_gt(jint0(o, "bytes"), 0);
		ck_assert_msg(*h_jstr(o, "first") && *h_jstr(o, "last"), "no first/last");
	}
	ck_assert_msg(created && deleted, "a lifecycle record of the key was dropped");
	ck_assert_int_ge(summaries, 1);
	/* The burst, less what the key's create took (a security record passes and pays). */
	ck_assert_int_ge(kept, 9);
	ck_assert_int_lt(kept, total / 2);
	ck_assert_int_gt(dropped, 0);
	ck_assert_int_eq(kept + dropped, total);
	json_decref(recs);
	char *sec = h_fmt("%s/audit/security.log", H.state);
	ck_assert_msg(file_has(sec, "\"action\":\"audit.dropped\""), "no summary in security.log");
	free(sec);
	free(id);
	free(pol);
}
END_TEST

/* An exec flood rotates audit.log through all its files; an earlier sandbox's create and
 * delete, in security.log, are still there. */
START_TEST(audit_security_records_survive_an_exec_flood)
{
	static const char *const flags[] = {"--audit-max-bytes", "4Ki", NULL};
	h_celld_restart_with(flags);
	char *old = h_create("busybox", NULL);
	ck_assert_int_lt(h_delete(old), 300);
	char *id = h_create("busybox", NULL);
	for (int i = 0; i < 80; i++) {
		char *cmd = h_fmt("echo rotate-out-%02d", i);
		free(h_sh(id, cmd));
		free(cmd);
	}
	struct stat st;
	char *four = h_fmt("%s/audit/audit.log.4", H.state);
	ck_assert_msg(stat(four, &st) == 0, "the flood did not rotate audit.log through");
	free(four);
	char *q = h_fmt("?sandbox=%s", id);
	json_t *recs = audit_records(q);
	ck_assert_msg(!find_record(recs, "exec", "command", "echo rotate-out-00"),
		      "the first command is still there: nothing was rotated out");
	ck_assert_msg(find_record(recs, "exec", "command", "echo rotate-out-79"), "no last exec");
	json_decref(recs);
	free(q);
	q = h_fmt("?sandbox=%s", old);
	recs = audit_records(q);
	ck_assert_msg(find_record(recs, "create", NULL, NULL), "the create was rotated out");
	ck_assert_msg(find_record(recs, "delete", NULL, NULL), "the delete was rotated out");
	json_decref(recs);
	free(q);
	char *sec = h_fmt("%s/audit/security.log", H.state);
	ck_assert_int_eq(stat(sec, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	free(sec);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
	free(old);
}
END_TEST

/* A raw request to the TCP listener; the answer's status. */
static long raw_status(const char *req)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_port = htons((uint16_t)atoi(strrchr(H.listen, ':') + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char buf[8192];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(buf) - 1 && (k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	close(fd);
	/* The last answer's status: a pipelined request's comes after the first's. */
	long st = 0;
	for (char *p = buf; (p = strstr(p, "HTTP/1.1 ")); p += 9)
		st = strtol(p + 9, NULL, 10);
	return st;
}

static json_t *auth_failures(void)
{
	json_t *recs = audit_records("?limit=10000"), *out = json_array();
	size_t i;
	json_t *o;
	json_array_foreach(recs, i, o) if (!strcmp(h_jstr(o, "action"), "auth.failed"))
	    json_array_append(out, o);
	json_decref(recs);
	return out;
}

/* Refused 401 on TCP: by the gate (a wrong key, no key) and by the HTTP server (a keyless
 * request after a keyed one on the same connection): each an auth.failed record in
 * security.log; a flood of them bounded, what was left out counted in suppressedBefore. */
START_TEST(audit_auth_failures_recorded_and_bounded)
{
	h_celld_restart_with(NULL);
	ck_assert_int_eq(raw_status("GET /v1/sandboxes?secret-query HTTP/1.1\r\nHost: cell\r\n"
				    "OPEN-SANDBOX-API-KEY: wrong-key\r\nConnection: close\r\n\r\n"),
			 401);
	ck_assert_int_eq(raw_status("DELETE /v1/sandboxes/nokey HTTP/1.1\r\nHost: cell\r\n"
				    "Connection: close\r\n\r\n"),
			 401);
	char *two =
	    h_fmt("GET /v1/info HTTP/1.1\r\nHost: cell\r\nOPEN-SANDBOX-API-KEY: %s\r\n\r\n"
		  "GET /v1/keyless-second HTTP/1.1\r\nHost: cell\r\nConnection: close\r\n\r\n",
		  H.key);
	ck_assert_int_eq(raw_status(two), 401);
	free(two);
	json_t *fails = auth_failures();
	ck_assert_int_eq(json_array_size(fails), 3);
	static const char *const want[] = {"GET /v1/sandboxes", "DELETE /v1/sandboxes/nokey",
					   "GET /v1/keyless-second"};
	for (size_t i = 0; i < 3; i++) {
		json_t *o = json_array_get(fails, i);
		ck_assert_str_eq(h_jstr(o, "request"), want[i]);
		ck_assert_str_eq(h_jstr(o, "client"), "127.0.0.1");
		ck_assert_str_eq(h_jstr(o, "who"), "anonymous");
		ck_assert_str_eq(h_jstr(o, "listener"), "OpenSandbox");
		ck_assert_msg(*h_jstr(o, "requestId"), "no request id");
	}
	json_decref(fails);
	char *sec = h_fmt("%s/audit/security.log", H.state);
	ck_assert_msg(file_has(sec, "\"action\":\"auth.failed\""), "not in security.log");
	ck_assert_msg(!file_has(sec, "secret-query"), "the query is in the log");
	ck_assert_msg(!file_has(sec, "wrong-key"), "the wrong key is in the log");
	free(sec);
	/* A flood: at most 10 a second written, the rest counted into the next record. */
	const int flood = 200;
	for (int i = 0; i < flood; i++)
		ck_assert_int_eq(raw_status("GET /v1/flood HTTP/1.1\r\nHost: cell\r\n"
					    "Connection: close\r\n\r\n"),
				 401);
	h_sleep_ms(1100); /* the bound's second passes: the next one is written */
	ck_assert_int_eq(raw_status("GET /v1/after-the-flood HTTP/1.1\r\nHost: cell\r\n"
				    "Connection: close\r\n\r\n"),
			 401);
	fails = auth_failures();
	long long kept = 0, suppressed = 0;
	size_t i;
	json_t *o;
	json_array_foreach(fails, i, o)
	{
		const char *req = h_jstr(o, "request");
		if (strcmp(req, "GET /v1/flood") && strcmp(req, "GET /v1/after-the-flood"))
			continue;
		kept++;
		suppressed += jint0(o, "suppressedBefore");
	}
	json_t *last = json_array_get(fails, json_array_size(fails) - 1);
	ck_assert_str_eq(h_jstr(last, "request"), "GET /v1/after-the-flood");
	ck_assert_int_gt(jint0(last, "suppressedBefore"), 0);
	ck_assert_int_lt(kept, flood / 2);
	ck_assert_int_gt(suppressed, 0);
	ck_assert_int_eq(kept + suppressed, flood + 1);
	json_decref(fails);
}
END_TEST

/* ---- secrets ---- */

#define SECRET_A "s3cr3t-A-7f3e9a1c"
#define SECRET_B "s3cr3t-B-51d0c2aa"

/* Whether any regular file under dir (recursively, not below skip) holds needle. */
static bool tree_has(const char *dir, const char *needle, const char *skip)
{
	char *cmd = h_fmt("grep -rlF -- '%s' '%s' 2>/dev/null | grep -vxF -- '%s' | head -1",
			  needle, dir, skip ? skip : "");
	struct h_proc res;
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	ck_assert_int_eq(h_run(argv, NULL, 30, &res), 0);
	bool has = res.out && res.out[0];
	if (has && skip)
		fprintf(stderr, "found '%s' in %s", needle, res.out);
	h_proc_free(&res);
	free(cmd);
	return has;
}

START_TEST(secrets_reach_commands_and_nothing_else)
{
	json_t *extra =
	    json_pack("{s:{s:s}, s:{s:s}}", "secretEnv", "CELL_SECRET_A", SECRET_A, "extensions",
		      "cell.secrets", "{\"CELL_SECRET_B\":\"" SECRET_B "\"}");
	struct h_resp cr;
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &cr), 202);
	json_decref(extra);
	ck_assert_msg(!strstr(cr.body, SECRET_A) && !strstr(cr.body, SECRET_B),
		      "the create's answer holds a secret");
	char *id = strdup(h_jstr(cr.json, "id"));
	h_resp_free(&cr);
	char *out = h_sh(id, "echo $CELL_SECRET_A:$CELL_SECRET_B");
	ck_assert_str_eq(h_trim(out), SECRET_A ":" SECRET_B);
	free(out);
	/* A bash session has them too. */
	char *sid = h_session_open(id, NULL, "sh");
	out = h_session_ok(id, sid, "echo $CELL_SECRET_B");
	ck_assert_str_eq(h_trim(out), SECRET_B);
	free(out);
	free(sid);
	/* A client's envs of the same name: the command gets its value; the audit log gets
	 * the name only. */
	struct h_exec x;
	static const char *const envs[] = {"CELL_SECRET_A", SECRET_A "-x", NULL};
	h_exec(id, "echo $CELL_SECRET_A", &(struct h_exec_opts){.envs = envs}, &x);
	ck_assert_int_eq(x.exit_code, 0);
	h_exec_free(&x);

	/* Not in GET, inspect (the names only) or events. */
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(!strstr(r.body, SECRET_A) && !strstr(r.body, SECRET_B), "GET: %s", r.body);
	h_resp_free(&r);
	free(path);
	json_t *ins = h_inspect(id);
	char *text = json_dumps(ins, 0);
	ck_assert_msg(!strstr(text, SECRET_A) && !strstr(text, SECRET_B), "inspect holds one");
	free(text);
	json_t *names = json_object_get(ins, "secretNames");
	ck_assert_int_eq(json_array_size(names), 2);
	ck_assert_str_eq(json_string_value(json_array_get(names, 0)), "CELL_SECRET_A");
	ck_assert_str_eq(json_string_value(json_array_get(names, 1)), "CELL_SECRET_B");
	json_decref(ins);
	path = h_fmt("/v1/sandboxes/%s/events?follow=false", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(!strstr(r.body, SECRET_A), "events: %s", r.body);
	h_resp_free(&r);
	free(path);

	/* Kept root-only beside the record, not in it; and after a restart still given. */
	char *sfile = h_fmt("%s/sandboxes/%s/secrets.json", H.state, id);
	struct stat st;
	ck_assert_int_eq(stat(sfile, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	h_celld_kill();
	h_celld_start();
	out = h_sh(id, "echo $CELL_SECRET_A");
	ck_assert_str_eq(h_trim(out), SECRET_A);
	free(out);
	/* Nowhere in the state dir but its own file (audit log, events, state.json), nor
	 * celld's log. */
	ck_assert_msg(tree_has(H.state, SECRET_A, NULL), "the probe does not find secrets.json");
	ck_assert(!tree_has(H.state, SECRET_A, sfile));
	ck_assert(!tree_has(H.state, SECRET_B, sfile));
	ck_assert_msg(!file_has(H.log, SECRET_A), "celld's log holds a secret");
	char *audit = h_fmt("%s/audit/audit.log", H.state);
	ck_assert_msg(file_has(audit, "CELL_SECRET_A"), "the exec's env names are not audited");
	ck_assert_msg(file_has(audit, "\"action\":\"session.open\""), "no session.open record");
	free(audit);
	ck_assert_int_lt(h_delete(id), 300);
	ck_assert_int_eq(stat(sfile, &st), -1);
	free(sfile);
	free(id);
}
END_TEST

/* cell create --secret NAME takes the value from its environment, never its arguments. */
START_TEST(secrets_from_the_cli)
{
	setenv("CELL_SECRET_C", "s3cr3t-C-from-env", 1);
	struct h_proc p;
	ck_assert_int_eq(
	    h_cell(&p, "create", "--image", "busybox", "--secret", "CELL_SECRET_C", NULL), 0);
	char *id = strdup(h_trim(p.out));
	h_proc_free(&p);
	h_track_sandbox(id);
	char *out = h_sh(id, "echo $CELL_SECRET_C");
	ck_assert_str_eq(h_trim(out), "s3cr3t-C-from-env");
	free(out);
	ck_assert_int_eq(h_cell(&p, "create", "--image", "busybox", "--secret", "X=1", NULL), 2);
	ck_assert_msg(strstr(p.err, "visible in ps"), "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_lt(h_delete(id), 300);
	free(id);
}
END_TEST

START_TEST(secrets_refused_by_name)
{
	static const char *const bad[][2] = {
	    {"{\"secretEnv\": {\"1BAD\": \"v\"}}", "secretEnv"},
	    {"{\"secretEnv\": {\"OK\": 5}}", "secretEnv.OK"},
	    {"{\"secretEnv\": [\"x\"]}", "secretEnv"},
	    {"{\"extensions\": {\"cell.secrets\": \"{nope\"}}", "extensions.cell.secrets"},
	    {"{\"extensions\": {\"cell.secrets\": \"{\\\"A B\\\": \\\"v\\\"}\"}}",
	     "extensions.cell.secrets"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *extra = json_loads(bad[i][0], 0, NULL);
		ck_assert_ptr_nonnull(extra);
		struct h_resp r;
		ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 400);
		ck_assert_msg(strstr(r.body, bad[i][1]), "%s: %s", bad[i][0], r.body);
		h_resp_free(&r);
		json_decref(extra);
	}
}
END_TEST

static Suite *audit_suite(void)
{
	Suite *s = suite_create("audit");
	tcase_add_test(h_tcase(s, "events_in_order_replay_and_follow", 120),
		       events_in_order_replay_and_follow);
	tcase_add_test(h_tcase(s, "events_oom_kill", 120), events_oom_kill);
	tcase_add_test(h_tcase(s, "events_seccomp_denied", 120), events_seccomp_denied);
	tcase_add_test(h_tcase(s, "audit_records_create_exec_write_delete", 120),
		       audit_records_create_exec_write_delete);
	tcase_add_test(h_tcase(s, "audit_records_renew_and_metadata", 120),
		       audit_records_renew_and_metadata);
	tcase_add_test(h_tcase(s, "audit_who_key_and_unix_only", 120), audit_who_key_and_unix_only);
	tcase_add_test(h_tcase(s, "audit_rotates_and_survives_a_torn_line", 180),
		       audit_rotates_and_survives_a_torn_line);
	tcase_add_test(h_tcase(s, "audit_key_flood_cut_to_budget", 300),
		       audit_key_flood_cut_to_budget);
	tcase_add_test(h_tcase(s, "audit_security_records_survive_an_exec_flood", 180),
		       audit_security_records_survive_an_exec_flood);
	tcase_add_test(h_tcase(s, "audit_auth_failures_recorded_and_bounded", 120),
		       audit_auth_failures_recorded_and_bounded);
	tcase_add_test(h_tcase(s, "secrets_reach_commands_and_nothing_else", 180),
		       secrets_reach_commands_and_nothing_else);
	tcase_add_test(h_tcase(s, "secrets_from_the_cli", 60), secrets_from_the_cli);
	tcase_add_test(h_tcase(s, "secrets_refused_by_name", 60), secrets_refused_by_name);
	return s;
}

int main(void)
{
	return h_main(audit_suite());
}
