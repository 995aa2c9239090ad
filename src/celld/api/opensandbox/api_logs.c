/* cell's own route of a sandbox's logs: GET /v1/sandboxes/{id}/logs, the kept output of
 * one command (by default the sandbox's main one: its entrypoint's latest run, else its
 * latest background command; ?command=ID any other), byte-exact as the command wrote it
 * (stdout and stderr together, as docker logs without a terminal), ?since= and ?tail=
 * choosing where it starts, ?follow=true going on until the command ends. How the command
 * is doing travels in headers, so the body stays the command's bytes alone: a client reads
 * its end status by asking again with tail=0 once the stream is over. GET
 * /v1/sandboxes/{id}/commands lists the commands whose logs it keeps. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "cell/id.h"
#include "api.h"
#include "commands.h"
#include "config.h"
#include "fields.h"
#include "http/http.h"
#include "registry.h"
#include "sandbox.h"
#include "timefmt.h"

#define LOGS_WAKE_MS   1000 /* a follower looks at its client and its sandbox this often */
#define LOGS_BLOCK     (64u << 10)
#define SINCE_SECS_MAX (INT64_MAX / 2000)

struct logs_query {
	const char *command; /* NULL: the sandbox's main command */
	bool follow, has_since;
	int64_t since_ms;
	uint64_t tail; /* UINT64_MAX: all */
};

/* since: Unix seconds with an optional fraction ("1732890000.25"), or an RFC 3339 time. */
static int parse_since(const char *text, int64_t *ms)
{
	const char *dot = strchr(text, '.');
	char whole[24];
	size_t n = dot ? (size_t)(dot - text) : strlen(text);
	int64_t secs;
	if (n && n < sizeof(whole)) {
		memcpy(whole, text, n);
		whole[n] = '\0';
		if (parse_int64(whole, 0, SINCE_SECS_MAX, &secs) == 0) {
			int64_t frac = 0, scale = 100;
			for (const char *p = dot ? dot + 1 : ""; *p; p++, scale /= 10) {
				if (*p < '0' || *p > '9' || p - dot > 9)
					return -EINVAL;
				frac += scale * (*p - '0');
			}
			if (dot && !dot[1])
				return -EINVAL;
			*ms = secs * 1000 + frac;
			return 0;
		}
	}
	time_t t;
	if (celld_parse_time(text, &t) < 0 || t < 0 || t > SINCE_SECS_MAX)
		return -EINVAL;
	*ms = (int64_t)t * 1000;
	return 0;
}

/* The query into q: 0, or -1 with a 400 naming the parameter sent. */
static int logs_query(struct http_req *r, struct logs_query *q)
{
	const char *follow = http_query(r, "follow"), *since = http_query(r, "since"),
		   *tail = http_query(r, "tail"), *cmd = http_query(r, "command");
	*q = (struct logs_query){.tail = UINT64_MAX};
	if (follow && strcmp(follow, "true") && strcmp(follow, "false"))
		return http_error(r, 400, "INVALID_ARGUMENT", "follow must be true or false"), -1;
	q->follow = follow && !strcmp(follow, "true");
	if (since && since[0]) {
		if (parse_since(since, &q->since_ms) < 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "since must be Unix seconds (1732890000 or "
					  "1732890000.250) or an RFC 3339 time "
					  "(2026-11-29T15:00:00Z)"),
			       -1;
		q->has_since = true;
	}
	int64_t lines;
	if (tail && tail[0] && strcmp(tail, "all")) {
		if (parse_int64(tail, 0, CMD_LOG_MAX, &lines) < 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "tail must be a number of lines from 0 to %u, or all",
					  CMD_LOG_MAX),
			       -1;
		q->tail = (uint64_t)lines;
	}
	if (cmd && !cell_id_valid(cmd))
		return http_error(r, 400, "INVALID_ID",
				  "command must be a command id (1-64 characters of [a-z0-9-])"),
		       -1;
	q->command = cmd;
	return 0;
}

/* The command a request names, referenced; NULL with a 404 answered. */
static struct command *logs_command(struct http_req *r, struct sandbox *sb, const char *id)
{
	struct command *c = id ? cmd_table_get(sb->cmds, id) : cmd_table_main(sb->cmds);
	if (c)
		return c;
	if (id)
		http_error(r, 404, "COMMAND_NOT_FOUND", "sandbox %s has no command %s", sb->id, id);
	else
		http_error(r, 404, "COMMAND_NOT_FOUND",
			   "sandbox %s has no entrypoint or background command whose output "
			   "celld keeps (output is kept in celld's memory: a restart of celld "
			   "forgets it)",
			   sb->id);
	return NULL;
}

struct logs_stream {
	struct sandbox *sb;
	struct command *c;
	uint64_t pos, end; /* end: where a stream that does not follow stops */
	bool follow;
	int client_fd;
};

static bool client_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static bool sandbox_here(struct sandbox *sb)
{
	registry_lock();
	bool here = sb->in_table;
	registry_unlock();
	return here;
}

static ssize_t logs_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct logs_stream *s = cls;
	if (!s->follow) {
		size_t n = command_logs_read(s->c, &s->pos, s->end, buf, max);
		return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
	}
	for (;;) {
		/* Its state before the read: what it wrote before it ended is read first. */
		struct command_state st;
		command_state(s->c, &st);
		size_t n = command_logs_read(s->c, &s->pos, UINT64_MAX, buf, max);
		if (n)
			return (ssize_t)n;
		if (!st.running || !sandbox_here(s->sb) || client_gone(s->client_fd) ||
		    http_stopping())
			return MHD_CONTENT_READER_END_OF_STREAM;
		command_logs_wait(s->c, s->pos, LOGS_WAKE_MS);
	}
}

static void logs_free(void *cls)
{
	struct logs_stream *s = cls;
	command_unref(s->c);
	sandbox_unref(s->sb);
	free(s);
}

/* A header's value from text that may come from inside the sandbox: printable ASCII. */
static void header_text(char *out, size_t size, const char *text)
{
	size_t i = 0;
	for (; text[i] && i + 1 < size; i++)
		out[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
	out[i] = '\0';
}

/* Which command the body is, and how it is doing when the answer starts. */
static void add_state_headers(struct MHD_Response *resp, struct command *c)
{
	struct command_state st;
	command_state(c, &st);
	char v[300];
	MHD_add_response_header(resp, "X-Cell-Command-Id", command_id(c));
	MHD_add_response_header(resp, "X-Cell-Command-Kind", command_kind(c));
	MHD_add_response_header(resp, "X-Cell-Command-Running", st.running ? "true" : "false");
	if (st.has_exit) {
		snprintf(v, sizeof(v), "%d", st.exit_code);
		MHD_add_response_header(resp, "X-Cell-Command-Exit-Code", v);
	}
	if (st.error[0]) {
		header_text(v, sizeof(v), st.error);
		MHD_add_response_header(resp, "X-Cell-Command-Error", v);
	}
	if (st.log_dropped)
		MHD_add_response_header(resp, "X-Cell-Log-Dropped", "true");
}

/* Where the body starts: the oldest kept byte, or later for since and tail. */
static uint64_t logs_start(struct command *c, const struct logs_query *q)
{
	uint64_t pos = 0; /* moved up to the oldest kept byte by the first read */
	if (q->has_since)
		pos = command_logs_since(c, q->since_ms);
	if (q->tail != UINT64_MAX) {
		uint64_t t = command_logs_tail(c, q->tail);
		pos = t > pos ? t : pos;
	}
	return pos;
}

int api_sandbox_logs(struct http_req *r)
{
	struct logs_query q;
	if (logs_query(r, &q) < 0)
		return 0;
	/* Reading a sandbox's logs is no use of it: a paused or stopped one is not woken, and
	 * what its commands wrote before is read all the same. */
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = logs_command(r, sb, q.command);
	struct logs_stream *s = c ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		command_unref(c);
		sandbox_unref(sb);
		return c ? http_no_memory(r) : 0;
	}
	uint64_t start = logs_start(c, &q);
	*s = (struct logs_stream){.sb = sb,
				  .c = c,
				  .pos = start,
				  .end = command_logs_end(c),
				  .follow = q.follow,
				  .client_fd = http_socket(r)};
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, LOGS_BLOCK,
								      logs_read, s, logs_free);
	if (!resp) {
		logs_free(s);
		return http_no_memory(r);
	}
	add_state_headers(resp, c);
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}

int api_sandbox_commands(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	json_t *items = cmd_table_list_json(sb->cmds);
	sandbox_unref(sb);
	if (!items)
		return http_no_memory(r);
	return http_json(r, 200, json_pack("{s:o}", "items", items));
}
