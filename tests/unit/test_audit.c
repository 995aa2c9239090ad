/* The audit log's writer and reader (audit.c): records in order, a torn last line skipped
 * and ended by the next open, rotation by size in order; a request's context in its records;
 * security records in a file of their own, both merged by time and seq; a key's budget and
 * its summary; failed authentication bounded.
 * A sandbox's events (events.c): their bound and rotation, seq across a restart, the cursor
 * of a reader (since, rotation). Secrets (secrets.c): their checks, their file. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "audit_budget.h"
#include "events.h"
#include "secrets.h"
#include "unit.h"

static char tmp[256];

static void make_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/cell-test-audit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void rm_tmp(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

static char *path_of(const char *name)
{
	static char p[512];
	snprintf(p, sizeof(p), "%s/audit/%s", tmp, name);
	return p;
}

static void open_log(uint64_t max)
{
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/audit", tmp);
	struct cell_error err = {0};
	ck_assert_msg(audit_open(dir, max, 0, &err) == 0, "%s", err.msg);
}

static json_t *read_all(const char *sandbox, size_t limit)
{
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/audit", tmp);
	json_t *out = NULL;
	struct cell_error err = {0};
	ck_assert_msg(audit_read(dir, sandbox, 0, limit, &out, &err) == 0, "%s", err.msg);
	ck_assert(json_is_array(out));
	return out;
}

static long long rec_n(json_t *arr, size_t i)
{
	return json_integer_value(json_object_get(json_array_get(arr, i), "n"));
}

START_TEST(records_in_order_with_context)
{
	make_tmp();
	open_log(0);
	audit_log("sb-a", "create", json_pack("{s:i}", "n", 1));
	audit_context_set("rid-42", "key:abcd");
	audit_log("sb-b", "exec", json_pack("{s:i, s:s}", "n", 2, "action", "forged"));
	audit_context_set(NULL, NULL);
	audit_log_as("rid-7", "unix", "sb-a", "delete", json_pack("{s:i}", "n", 3));
	json_t *all = read_all(NULL, 0);
	ck_assert_int_eq(json_array_size(all), 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_int_eq(rec_n(all, i), (long long)i + 1);
	json_t *r0 = json_array_get(all, 0), *r1 = json_array_get(all, 1);
	/* No request: celld itself, no request id. */
	ck_assert_str_eq(json_string_value(json_object_get(r0, "who")), "celld");
	ck_assert_str_eq(json_string_value(json_object_get(r0, "requestId")), "");
	ck_assert_str_eq(json_string_value(json_object_get(r1, "who")), "key:abcd");
	ck_assert_str_eq(json_string_value(json_object_get(r1, "requestId")), "rid-42");
	/* Details never replace the record's own keys. */
	ck_assert_str_eq(json_string_value(json_object_get(r1, "action")), "exec");
	const char *t = json_string_value(json_object_get(r0, "time"));
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(strlen(t), 24); /* 2026-11-24T15:00:00.123Z */
	json_decref(all);
	/* One sandbox's, the last of them. */
	all = read_all("sb-a", 0);
	ck_assert_int_eq(json_array_size(all), 2);
	json_decref(all);
	all = read_all(NULL, 2);
	ck_assert_int_eq(json_array_size(all), 2);
	ck_assert_int_eq(rec_n(all, 0), 2);
	json_decref(all);
	/* Root-only. */
	struct stat st;
	ck_assert_int_eq(stat(path_of(AUDIT_FILE), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(stat(path_of(""), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	audit_close();
	rm_tmp();
}
END_TEST

START_TEST(torn_last_line_skipped)
{
	make_tmp();
	open_log(0);
	audit_log("sb", "create", json_pack("{s:i}", "n", 1));
	audit_log("sb", "exec", json_pack("{s:i}", "n", 2));
	audit_close();
	/* A crash mid-write: the start of a line, no end. */
	int fd = open(path_of(AUDIT_FILE), O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	static const char torn[] = "{\"time\":\"2026-11-24T15:00:00.000Z\",\"requestId\":\"x";
	ck_assert_int_eq(write(fd, torn, sizeof(torn) - 1), (ssize_t)sizeof(torn) - 1);
	close(fd);
	json_t *all = read_all(NULL, 0);
	ck_assert_int_eq(json_array_size(all), 2);
	json_decref(all);
	/* The next celld ends the torn line first: what it writes reads back. */
	open_log(0);
	audit_log("sb", "delete", json_pack("{s:i}", "n", 3));
	all = read_all(NULL, 0);
	ck_assert_int_eq(json_array_size(all), 3);
	ck_assert_int_eq(rec_n(all, 2), 3);
	json_decref(all);
	audit_close();
	rm_tmp();
}
END_TEST

START_TEST(rotation_in_order)
{
	make_tmp();
	open_log(AUDIT_MAX_MIN);
	const int total = 400; /* ~100 bytes each: several rotations past .AUDIT_KEEP */
	for (int i = 1; i <= total; i++)
		audit_log("sb", "exec", json_pack("{s:i}", "n", i));
	struct stat st;
	for (int i = 1; i <= AUDIT_KEEP; i++) {
		char name[32];
		snprintf(name, sizeof(name), AUDIT_FILE ".%d", i);
		ck_assert_msg(stat(path_of(name), &st) == 0, "%s missing", name);
		ck_assert_uint_le((uint64_t)st.st_size, AUDIT_MAX_MIN);
		ck_assert_int_eq(st.st_mode & 07777, 0600);
	}
	ck_assert_int_eq(stat(path_of(AUDIT_FILE ".5"), &st), -1);
	ck_assert_int_eq(stat(path_of(AUDIT_FILE), &st), 0);
	ck_assert_uint_le((uint64_t)st.st_size, AUDIT_MAX_MIN);
	/* Read across the files, oldest first: consecutive, ending with the last one. */
	json_t *all = read_all(NULL, 0);
	size_t n = json_array_size(all);
	ck_assert_uint_gt(n, 100);
	ck_assert_uint_lt(n, (size_t)total);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(rec_n(all, i), total - (long long)n + 1 + (long long)i);
	json_decref(all);
	audit_close();
	rm_tmp();
}
END_TEST

START_TEST(line_bounded)
{
	make_tmp();
	open_log(0);
	char *big = malloc(AUDIT_LINE_MAX + 10);
	memset(big, 'a', AUDIT_LINE_MAX + 9);
	big[AUDIT_LINE_MAX + 9] = '\0';
	audit_log("sb", "exec", json_pack("{s:s}", "command", big));
	free(big);
	json_t *all = read_all(NULL, 0);
	ck_assert_int_eq(json_array_size(all), 1);
	json_t *r = json_array_get(all, 0);
	ck_assert(json_is_true(json_object_get(r, "truncated")));
	ck_assert_ptr_null(json_object_get(r, "command"));
	json_decref(all);
	audit_close();
	rm_tmp();
}
END_TEST

/* ---- events ---- */

static int sandboxes_fd(const char *id)
{
	int fd = open(tmp, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(mkdirat(fd, id, 0700), 0);
	return fd;
}

/* Every event a cursor from since reads: their seqs into seqs (at most max). */
static size_t cursor_seqs(struct events_cursor *c, uint64_t *seqs, size_t max)
{
	char *out = NULL;
	size_t len = 0, n = 0;
	ck_assert_int_ge(events_cursor_read(c, &out, &len), 0);
	for (char *p = out; p && (p = strstr(p, "\ndata: ")) && n < max; p++) {
		json_t *o = json_loads(p + 7, JSON_DISABLE_EOF_CHECK, NULL);
		ck_assert_msg(json_is_object(o), "bad event near %.40s", p);
		seqs[n++] = (uint64_t)json_integer_value(json_object_get(o, "seq"));
		json_decref(o);
	}
	free(out);
	return n;
}

START_TEST(events_bounded_and_rotated)
{
	make_tmp();
	int sfd = sandboxes_fd("sb1");
	const uint64_t max = 4096;
	uint64_t last = 0;
	for (int i = 0; i < 300; i++) {
		uint64_t s = events_emit_at(
		    sfd, "sb1", "state",
		    json_pack("{s:s, s:i, s:I}", "op", "pause", "i", i, "seq", (json_int_t)999),
		    max);
		ck_assert_uint_eq(s, last + 1); /* the data's own "seq" is ignored */
		last = s;
	}
	struct stat st;
	char p[512];
	snprintf(p, sizeof(p), "%s/sb1/" EVENTS_FILE, tmp);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_le((uint64_t)st.st_size, max);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	snprintf(p, sizeof(p), "%s/sb1/" EVENTS_FILE ".1", tmp);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_le((uint64_t)st.st_size, max);
	snprintf(p, sizeof(p), "%s/sb1/" EVENTS_FILE ".2", tmp);
	ck_assert_int_eq(stat(p, &st), -1);
	/* A reader from the start gets what is kept: consecutive, up to the last. */
	uint64_t seqs[400];
	struct events_cursor c;
	events_cursor_init(&c, sfd, "sb1", 0);
	size_t n = cursor_seqs(&c, seqs, 400);
	ck_assert_uint_gt(n, 20);
	ck_assert_uint_lt(n, 300);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(seqs[i], last - n + 1 + i);
	/* Nothing new: nothing. Then new ones, across a rotation, in order. */
	ck_assert_uint_eq(cursor_seqs(&c, seqs, 400), 0);
	for (int i = 0; i < 30; i++)
		last = events_emit_at(sfd, "sb1", "network.denied",
				      json_pack("{s:s, s:i}", "dst", "10.0.0.1", "port", 80), max);
	n = cursor_seqs(&c, seqs, 400);
	ck_assert_uint_eq(n, 30);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(seqs[i], last - 29 + i);
	events_cursor_close(&c);
	/* since: only later ones. */
	events_cursor_init(&c, sfd, "sb1", last - 3);
	n = cursor_seqs(&c, seqs, 400);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(seqs[0], last - 2);
	events_cursor_close(&c);
	/* A restarted celld (nothing in memory) goes on from the file's last seq. */
	events_forget("sb1");
	ck_assert_uint_eq(events_emit_at(sfd, "sb1", "state", NULL, max), last + 1);
	/* No dir, no event; a path in an id is refused. */
	ck_assert_uint_eq(events_emit_at(sfd, "gone", "state", NULL, max), 0);
	ck_assert_uint_eq(events_emit_at(sfd, "../sb1", "state", NULL, max), 0);
	close(sfd);
	rm_tmp();
}
END_TEST

/* A line being written (its end not there yet) is left for the next read. */
START_TEST(events_partial_line_waits)
{
	make_tmp();
	int sfd = sandboxes_fd("sb2");
	ck_assert_uint_eq(events_emit_at(sfd, "sb2", "state", NULL, EVENTS_MAX_BYTES), 1);
	char p[512];
	snprintf(p, sizeof(p), "%s/sb2/" EVENTS_FILE, tmp);
	int fd = open(p, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	static const char head[] = "{\"seq\":2,\"time\":\"t\",\"ty";
	static const char tail[] = "pe\":\"oom\"}\n";
	ck_assert_int_eq(write(fd, head, sizeof(head) - 1), (ssize_t)sizeof(head) - 1);
	struct events_cursor c;
	uint64_t seqs[4];
	events_cursor_init(&c, sfd, "sb2", 0);
	ck_assert_uint_eq(cursor_seqs(&c, seqs, 4), 1);
	ck_assert_uint_eq(seqs[0], 1);
	ck_assert_int_eq(write(fd, tail, sizeof(tail) - 1), (ssize_t)sizeof(tail) - 1);
	close(fd);
	ck_assert_uint_eq(cursor_seqs(&c, seqs, 4), 1);
	ck_assert_uint_eq(seqs[0], 2);
	events_cursor_close(&c);
	close(sfd);
	rm_tmp();
}
END_TEST

START_TEST(events_sse_format)
{
	static const char line[] = "{\"seq\":7,\"time\":\"t\",\"type\":\"oom\",\"killed\":1}";
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(events_sse_append(line, strlen(line), &out, &len), 0);
	ck_assert_str_eq(out, "id: 7\nevent: oom\ndata: {\"seq\":7,\"time\":\"t\",\"type\":"
			      "\"oom\",\"killed\":1}\n\n");
	ck_assert_uint_eq(len, strlen(out));
	free(out);
}
END_TEST

/* ---- secrets ---- */

START_TEST(secrets_checked)
{
	json_t *out = NULL;
	struct cell_error err = {0};
	json_t *se = json_pack("{s:s}", "API_TOKEN", "s3cr3t");
	ck_assert_int_eq(
	    secrets_parse(se, "{\"DB_PASS\":\"pw\",\"API_TOKEN\":\"old\"}", &out, &err), 0);
	ck_assert_int_eq(json_object_size(out), 2);
	/* secretEnv wins over the extension. */
	ck_assert_str_eq(json_string_value(json_object_get(out, "API_TOKEN")), "s3cr3t");
	json_decref(out);
	json_decref(se);
	ck_assert_int_eq(secrets_parse(NULL, NULL, &out, &err), 0);
	ck_assert_ptr_null(out);
	const char *bad[] = {"{\"1X\":\"v\"}", "{\"A-B\":\"v\"}", "{\"A\":1}",	    "[1]",
			     "{\"\":\"v\"}",   "not json",	  "{\"A=B\":\"v\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_msg(secrets_parse(NULL, bad[i], &out, &err) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_null(out);
		ck_assert_msg(strstr(err.msg, "extensions.cell.secrets"), "%s", err.msg);
		/* The message never repeats a value. */
		ck_assert_ptr_null(strstr(err.msg, "\"v\""));
	}
	se = json_pack("{s:i}", "X", 1);
	ck_assert_int_eq(secrets_parse(se, NULL, &out, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "secretEnv.X"), "%s", err.msg);
	json_decref(se);
	/* Bounded. */
	se = json_object();
	for (int i = 0; i <= SECRETS_MAX_ITEMS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "K%d", i);
		json_object_set_new(se, k, json_string("v"));
	}
	ck_assert_int_eq(secrets_parse(se, NULL, &out, &err), -EINVAL);
	json_decref(se);
	char *big = malloc(SECRETS_VALUE_MAX + 2);
	memset(big, 'x', SECRETS_VALUE_MAX + 1);
	big[SECRETS_VALUE_MAX + 1] = '\0';
	se = json_pack("{s:s}", "BIG", big);
	free(big);
	ck_assert_int_eq(secrets_parse(se, NULL, &out, &err), -EINVAL);
	json_decref(se);
}
END_TEST

START_TEST(secrets_file)
{
	make_tmp();
	int dfd = open(tmp, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	json_t *names = secrets_names(dfd);
	ck_assert_int_eq(json_array_size(names), 0);
	json_decref(names);
	ck_assert_ptr_null(secrets_load(dfd));
	json_t *s = json_pack("{s:s, s:s}", "ZED", "1", "ALPHA", "2");
	struct cell_error err = {0};
	ck_assert_int_eq(secrets_save(dfd, s, &err), 0);
	struct stat st;
	ck_assert_int_eq(fstatat(dfd, SECRETS_FILE, &st, 0), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	json_t *back = secrets_load(dfd);
	ck_assert(json_equal(back, s));
	json_decref(back);
	names = secrets_names(dfd);
	ck_assert_int_eq(json_array_size(names), 2);
	ck_assert_str_eq(json_string_value(json_array_get(names, 0)), "ALPHA");
	ck_assert_str_eq(json_string_value(json_array_get(names, 1)), "ZED");
	json_decref(names);
	json_decref(s);
	close(dfd);
	rm_tmp();
}
END_TEST

static json_t *rec(const char *time_text, long long seq)
{
	return json_pack("{s:I, s:s}", "seq", (json_int_t)seq, "time", time_text);
}

/* Two logs' records, each in order, merged by time, then seq; the last `limit` kept. */
START_TEST(merge_by_time_then_seq)
{
	json_t *a =
	    json_pack("[o, o, o]", rec("2026-01-01T00:00:00.000Z", 1),
		      rec("2026-01-01T00:00:00.001Z", 4), rec("2026-01-01T00:00:02.000Z", 6));
	json_t *b =
	    json_pack("[o, o, o]", rec("2026-01-01T00:00:00.000Z", 2),
		      rec("2026-01-01T00:00:00.001Z", 3), rec("2026-01-01T00:00:01.000Z", 5));
	json_t *m = audit_merge(a, b, 100);
	ck_assert_int_eq(json_array_size(m), 6);
	for (size_t i = 0; i < 6; i++)
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(m, i), "seq")),
				 (long long)i + 1);
	json_decref(m);
	m = audit_merge(a, b, 2);
	ck_assert_int_eq(json_array_size(m), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(m, 0), "seq")), 5);
	json_decref(m);
	/* One side empty; records of before seq (none: 0) first at the same time. */
	json_t *e = json_array();
	m = audit_merge(e, b, 10);
	ck_assert_int_eq(json_array_size(m), 3);
	json_decref(m);
	json_t *old = json_pack("{s:s}", "time", "2026-01-01T00:00:00.000Z");
	ck_assert_int_lt(audit_record_cmp(old, json_array_get(a, 0)), 0);
	json_decref(old);
	json_decref(e);
	json_decref(a);
	json_decref(b);
}
END_TEST

static size_t count_action(json_t *all, const char *action)
{
	size_t i, n = 0;
	json_t *o;
	json_array_foreach(all, i, o) n +=
	    !strcmp(json_string_value(json_object_get(o, "action")), action);
	return n;
}

/* A flood of commands rotates audit.log, never security.log: the create survives; one seq
 * counts both, in order when read back. */
START_TEST(security_records_kept_apart)
{
	make_tmp();
	open_log(AUDIT_MAX_MIN);
	audit_log("sb-old", "create", json_pack("{s:i}", "n", 0));
	audit_log("sb-old", "delete", json_pack("{s:i}", "n", 0));
	for (int i = 1; i <= 400; i++)
		audit_log("sb", "exec", json_pack("{s:i}", "n", i));
	struct stat st;
	ck_assert_int_eq(stat(path_of(AUDIT_FILE ".4"), &st), 0);
	ck_assert_int_eq(stat(path_of(AUDIT_SECURITY_FILE), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(stat(path_of(AUDIT_SECURITY_FILE ".1"), &st), -1);
	json_t *all = read_all("sb-old", 0);
	ck_assert_int_eq(json_array_size(all), 2);
	json_decref(all);
	all = read_all(NULL, 0);
	long long last = 0;
	size_t i;
	json_t *o;
	json_array_foreach(all, i, o)
	{
		long long seq = json_integer_value(json_object_get(o, "seq"));
		ck_assert_int_gt(seq, last);
		last = seq;
	}
	ck_assert_int_eq(last, 402);
	json_decref(all);
	/* The next celld goes on counting. */
	audit_close();
	open_log(AUDIT_MAX_MIN);
	audit_log("sb-old", "adopt", NULL);
	all = read_all("sb-old", 0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(all, 2), "seq")), 403);
	json_decref(all);
	audit_close();
	rm_tmp();
}
END_TEST

/* A key over its budget: the rest dropped and summed up at the next read; security
 * records pass; the operator is not limited. */
START_TEST(budget_drops_a_key_flood)
{
	make_tmp();
	audit_budget_set(&(struct audit_budget_policy){.records_per_second = 1,
						       .records_burst = 5,
						       .bytes_per_second = 1 << 20,
						       .bytes_burst = 1 << 20});
	open_log(0);
	audit_context_set("rid", "key:0123456789abcdef");
	for (int i = 0; i < 50; i++)
		audit_log("sb", "exec", json_pack("{s:i}", "n", i));
	audit_log("sb", "delete", NULL);
	audit_context_set("rid", "unix");
	for (int i = 0; i < 50; i++)
		audit_log("sb-op", "exec", json_pack("{s:i}", "n", i));
	audit_context_set(NULL, NULL);
	json_t *all = read_all(NULL, 0);
	json_t *sum = NULL;
	size_t i, kept = 0, op = 0;
	json_t *o;
	json_array_foreach(all, i, o)
	{
		const char *action = json_string_value(json_object_get(o, "action"));
		const char *sid = json_string_value(json_object_get(o, "sandbox"));
		if (!strcmp(action, "audit.dropped"))
			sum = o;
		else if (!strcmp(action, "exec") && !strcmp(sid, "sb"))
			kept++;
		else if (!strcmp(action, "exec"))
			op++;
	}
	ck_assert_int_eq(count_action(all, "delete"), 1);
	ck_assert_int_eq(op, 50);
	ck_assert_msg(sum, "no audit.dropped record");
	ck_assert_uint_ge(kept, 5);
	ck_assert_str_eq(json_string_value(json_object_get(sum, "principal")),
			 "key:0123456789abcdef");
	ck_assert_str_eq(json_string_value(json_object_get(sum, "who")), "celld");
	long long dropped = json_integer_value(json_object_get(sum, "count"));
	ck_assert_int_eq((long long)kept + dropped, 50);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(sum, "actions"), "exec")), dropped);
	ck_assert_int_gt(json_integer_value(json_object_get(sum, "bytes")), 0);
	ck_assert_ptr_nonnull(json_object_get(sum, "first"));
	json_decref(all);
	/* It went to security.log. */
	char *text = NULL;
	FILE *f = fopen(path_of(AUDIT_SECURITY_FILE), "re");
	ck_assert_ptr_nonnull(f);
	size_t cap = 0;
	bool found = false;
	while (getline(&text, &cap, f) > 0)
		found = found || strstr(text, "\"audit.dropped\"");
	free(text);
	fclose(f);
	ck_assert(found);
	audit_close();
	rm_tmp();
}
END_TEST

/* auth.failed: at most 10 a second, the rest counted into the next record. */
START_TEST(auth_failures_bounded)
{
	make_tmp();
	open_log(0);
	static const char head[] = "GET /v1/sandboxes?token=secret HTTP/1.1\r\nHost: x\r\n\r\n";
	for (int i = 0; i < 30; i++)
		audit_auth_failed("OpenSandbox", "127.0.0.1", "rid", head, sizeof(head) - 1);
	usleep(250 * 1000); /* two more records' worth */
	audit_auth_failed("E2B", "127.0.0.1", "rid", head, sizeof(head) - 1);
	json_t *all = read_all(NULL, 0);
	size_t n = json_array_size(all), i;
	ck_assert_uint_ge(n, 10);
	ck_assert_uint_lt(n, 30);
	long long suppressed = 0;
	json_t *o;
	json_array_foreach(all, i, o)
	{
		ck_assert_str_eq(json_string_value(json_object_get(o, "action")), "auth.failed");
		ck_assert_str_eq(json_string_value(json_object_get(o, "who")), "anonymous");
		ck_assert_str_eq(json_string_value(json_object_get(o, "request")),
				 "GET /v1/sandboxes");
		suppressed += json_integer_value(json_object_get(o, "suppressedBefore"));
	}
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(all, n - 1), "listener")),
			 "E2B");
	ck_assert_int_eq((long long)n + suppressed, 31);
	json_decref(all);
	audit_close();
	rm_tmp();
}
END_TEST

START_TEST(request_and_client_text)
{
	char out[257];
	audit_request_text("POST /a/b?x=1 HTTP/1.1\r\n", 24, out, sizeof(out));
	ck_assert_str_eq(out, "POST /a/b");
	audit_request_text("GET /\x01\xff HTTP/1.1", 16, out, sizeof(out));
	ck_assert_str_eq(out, "GET /??");
	char longreq[1000];
	memset(longreq, 'a', sizeof(longreq));
	memcpy(longreq, "GET /", 5);
	ck_assert_uint_eq(audit_request_text(longreq, sizeof(longreq), out, sizeof(out)), 256);
	char buf[64];
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, "2001:db8:1:2:3:4:5:6", &s6.sin6_addr);
	audit_client_text((struct sockaddr *)&s6, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2001:db8:1:2::/64");
	inet_pton(AF_INET6, "::ffff:10.1.2.3", &s6.sin6_addr);
	audit_client_text((struct sockaddr *)&s6, buf, sizeof(buf));
	ck_assert_str_eq(buf, "10.1.2.3");
	struct sockaddr_in s4 = {.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	audit_client_text((struct sockaddr *)&s4, buf, sizeof(buf));
	ck_assert_str_eq(buf, "127.0.0.1");
}
END_TEST

static Suite *audit_suite(void)
{
	Suite *s = suite_create("audit");
	TCase *tc = tcase_create("audit");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, records_in_order_with_context);
	tcase_add_test(tc, torn_last_line_skipped);
	tcase_add_test(tc, rotation_in_order);
	tcase_add_test(tc, line_bounded);
	tcase_add_test(tc, merge_by_time_then_seq);
	tcase_add_test(tc, security_records_kept_apart);
	tcase_add_test(tc, budget_drops_a_key_flood);
	tcase_add_test(tc, auth_failures_bounded);
	tcase_add_test(tc, request_and_client_text);
	tcase_add_test(tc, events_bounded_and_rotated);
	tcase_add_test(tc, events_partial_line_waits);
	tcase_add_test(tc, events_sse_format);
	tcase_add_test(tc, secrets_checked);
	tcase_add_test(tc, secrets_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(audit_suite());
}
