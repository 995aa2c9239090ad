/* cell's own routes of the audit trail: a sandbox's events (GET /v1/sandboxes/{id}/events,
 * server-sent events: those kept, then live ones), the image store's (GET /v1/images/events,
 * the same way) and the audit log (GET /v1/audit); the last two on the Unix socket only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "cell/id.h"
#include "api.h"
#include "audit.h"
#include "config.h"
#include "events.h"
#include "fields.h"
#include "http/http.h"
#include "image_store.h"
#include "registry.h"
#include "sandbox.h"
#include "timefmt.h"

#define EVENTS_PING_MS	    15000 /* a comment line this often keeps proxies from timing out */
#define EVENTS_WAKE_MS	    1000  /* a follower looks at its sandbox (gone?) this often */
#define AUDIT_LIMIT_DEFAULT 1000

/* ---- GET /v1/sandboxes/{id}/events[?since=N][&follow=false] ---- */

struct ev_stream {
	struct sandbox *sb; /* NULL: the image store's events, which have no end */
	struct events_cursor cur;
	bool follow, done;
	char *out;
	size_t len, off;
	int64_t next_ping;
};

/* The last event of a followed stream: its sandbox was deleted. */
static void say_deleted(struct ev_stream *s)
{
	char t[32], *line = NULL;
	audit_time_now(t);
	if (asprintf(&line, "{\"seq\":%llu,\"time\":\"%s\",\"type\":\"deleted\"}",
		     (unsigned long long)s->cur.last + 1, t) >= 0)
		events_sse_append(line, strlen(line), &s->out, &s->len);
	free(line);
	s->done = true;
}

/* The next piece for the client into s->out: kept or new events, the end, or a ping. */
static void ev_step(struct ev_stream *s)
{
	uint64_t gen = events_generation();
	if (events_cursor_read(&s->cur, &s->out, &s->len) < 0) {
		s->done = true;
		return;
	}
	if (s->len)
		return;
	if (!s->follow) {
		s->done = true;
		return;
	}
	bool here = true;
	if (s->sb) {
		registry_lock();
		here = s->sb->in_table;
		registry_unlock();
	}
	if (!here) {
		/* What was written before the delete is read first. */
		if (events_cursor_read(&s->cur, &s->out, &s->len) >= 0)
			say_deleted(s);
		else
			s->done = true;
		return;
	}
	if (http_stopping()) {
		s->done = true;
		return;
	}
	int64_t now = celld_now_ms();
	if (now >= s->next_ping) {
		s->next_ping = now + EVENTS_PING_MS;
		static const char ping[] = ": ping\n\n";
		char *p = realloc(s->out, sizeof(ping));
		if (p) {
			memcpy(p, ping, sizeof(ping));
			s->out = p;
			s->len = sizeof(ping) - 1;
		}
		return;
	}
	/* OOM kills are noticed while someone follows (and at every transition). */
	if (s->sb)
		events_check_oom(s->sb->id, s->sb->cgroup_rel);
	events_wait(gen, EVENTS_WAKE_MS);
}

static ssize_t ev_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct ev_stream *s = cls;
	for (;;) {
		if (s->off < s->len) {
			size_t n = s->len - s->off;
			if (n > max)
				n = max;
			memcpy(buf, s->out + s->off, n);
			s->off += n;
			return (ssize_t)n;
		}
		free(s->out);
		s->out = NULL;
		s->len = s->off = 0;
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		ev_step(s);
	}
}

static void ev_free(void *cls)
{
	struct ev_stream *s = cls;
	events_cursor_close(&s->cur);
	free(s->out);
	if (s->sb)
		sandbox_unref(s->sb);
	free(s);
}

/* since and follow of an events request into *from and *follow: 0, or an answer sent. */
static int events_query(struct http_req *r, uint64_t *from, bool *follow_out)
{
	const char *since = http_query(r, "since"), *follow = http_query(r, "follow");
	int64_t n = 0;
	if (since && since[0] && parse_int64(since, 0, INT64_MAX, &n) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "since must be an event's seq (an integer >= 0): the events "
				  "after it are sent"),
		       -1;
	if (follow && strcmp(follow, "true") && strcmp(follow, "false"))
		return http_error(r, 400, "INVALID_ARGUMENT", "follow must be true or false"), -1;
	*from = (uint64_t)n;
	*follow_out = !follow || !strcmp(follow, "true");
	return 0;
}

/* The stream of the events under dir_fd/id (sb: their sandbox, a reference taken). */
static int events_respond(struct http_req *r, struct sandbox *sb, int dir_fd, const char *id,
			  uint64_t from, bool follow)
{
	struct ev_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		if (sb)
			sandbox_unref(sb);
		return http_no_memory(r);
	}
	s->sb = sb;
	s->follow = follow;
	s->next_ping = celld_now_ms() + EVENTS_PING_MS;
	events_cursor_init(&s->cur, dir_fd, id, from);
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, ev_read, s, ev_free);
	if (!resp) {
		ev_free(s);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}

int api_sandbox_events(struct http_req *r)
{
	uint64_t from;
	bool follow;
	if (events_query(r, &from, &follow) < 0)
		return 0;
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	return events_respond(r, sb, celld.sandboxes_fd, sb->id, from, follow);
}

/* ---- GET /v1/images/events[?since=N][&follow=false] ---- */

int api_image_events(struct http_req *r)
{
	/* Every tenant's pulls are in it: the operator's, like the store's prune. A client
	 * follows its own pull on POST /v1/images/pull. */
	if (http_is_tcp(r))
		return http_error(r, 403, "FORBIDDEN",
				  "the image store's events are read on celld's Unix socket only");
	uint64_t from;
	bool follow;
	if (events_query(r, &from, &follow) < 0)
		return 0;
	if (store_fd() < 0)
		return http_error(r, 503, "UNAVAILABLE", "the image store is not open");
	return events_respond(r, NULL, store_fd(), STORE_EVENTS_ID, from, follow);
}

/* ---- GET /v1/audit[?sandbox=ID][&since=TIME][&limit=N] ---- */

int api_audit(struct http_req *r)
{
	/* The trail of every client's actions is the operator's: read on the Unix socket. */
	if (http_is_tcp(r))
		return http_error(r, 403, "FORBIDDEN",
				  "the audit log is read on celld's Unix socket only");
	const char *sid = http_query(r, "sandbox"), *since = http_query(r, "since"),
		   *limit = http_query(r, "limit");
	if (sid && !sid[0])
		sid = NULL;
	if (sid && !cell_id_valid(sid))
		return http_error(r, 400, "INVALID_ID",
				  "sandbox must be a sandbox id (1-64 characters of [a-z0-9-])");
	time_t t = 0;
	int64_t secs;
	if (since && since[0]) {
		if (parse_int64(since, 0, INT64_MAX / 2, &secs) == 0)
			t = (time_t)secs;
		else if (celld_parse_time(since, &t) < 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "since must be an RFC 3339 time "
					  "(2026-11-24T15:00:00Z) or Unix seconds");
	}
	int64_t n = AUDIT_LIMIT_DEFAULT;
	if (limit && limit[0] && parse_int64(limit, 1, AUDIT_READ_LIMIT_MAX, &n) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "limit must be an integer from 1 to %d", AUDIT_READ_LIMIT_MAX);
	if (!audit_dir())
		return http_error(r, 503, "UNAVAILABLE", "the audit log is not open");
	json_t *records = NULL;
	struct cell_error err = {0};
	if (audit_read(audit_dir(), sid, t, (size_t)n, &records, &err) < 0)
		return http_internal(r, &err);
	return http_json(r, 200, json_pack("{s:o}", "records", records));
}
