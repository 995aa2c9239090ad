/* celld's client of the code-interpreter service in a sandbox (interpreter.h): HTTP/1.1
 * over a connection portconn makes inside the sandbox's network namespace, one request
 * per connection ("Connection: close"). The answer's head is read whole (bounded), its
 * body by Content-Length, chunked, or until the close; a run's body is cut into NDJSON
 * lines as it comes. The service is inside the sandbox: every size is bounded, every
 * line judged, no wait unbounded. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "interpreter.h"
#include "portconn.h"
#include "registry.h"
#include "sandbox.h"

#define HEAD_MAX       (16u << 10)
#define SEND_MS	       10000  /* the request out */
#define HEAD_MS	       120000 /* its answer's head: a context's kernel may start first */
#define UNARY_BODY_MS  30000
#define CHUNK_LINE_MAX 64 /* "<hex size>[;ext]" */
#define RECV_PIECE     (64u << 10)

/* ---- bytes ---- */

struct bytes {
	char *data;
	size_t len, cap;
};

static int bytes_add(struct bytes *b, const char *p, size_t n, size_t max)
{
	if (b->len + n > max)
		return -EMSGSIZE;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static void bytes_drop(struct bytes *b, size_t n)
{
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	if (b->data)
		b->data[b->len] = '\0';
}

/* ---- the connection ---- */

/* poll fd for events up to ms: 1 ready, 0 timed out, -errno. */
static int wait_for(int fd, short events, int ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	for (;;) {
		int r = poll(&p, 1, ms);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const char *p, size_t n, struct cell_error *err)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int r = wait_for(fd, POLLOUT, SEND_MS);
			if (r <= 0)
				return cell_err(err, r ? -r : ETIMEDOUT,
						"code interpreter: sending");
			continue;
		}
		if (w < 0)
			return cell_err(err, errno, "code interpreter: sending");
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Up to RECV_PIECE bytes appended to b: how many (0 at the service's close), -EAGAIN, or
 * -errno. */
static ssize_t recv_into(int fd, struct bytes *b, size_t max)
{
	char piece[RECV_PIECE];
	for (;;) {
		ssize_t n = recv(fd, piece, sizeof(piece), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n > 0) {
			int r = bytes_add(b, piece, (size_t)n, max);
			if (r < 0)
				return r;
		}
		return n;
	}
}

/* sb entered its state (Running: started, resumed) less than INTERP_START_S ago. */
static bool just_started(struct sandbox *sb)
{
	registry_lock();
	time_t at = sb->transition_at;
	bool running = sb->state == SBX_RUNNING;
	registry_unlock();
	return running && time(NULL) - at < INTERP_START_S;
}

int interp_connect(struct sandbox *sb, struct cell_error *err)
{
	int64_t waited = 0, step = 20;
	for (;;) {
		struct cell_error cerr = {0};
		int fd = portconn_open(sb, INTERP_PORT, &cerr);
		if (fd != -ECONNREFUSED || waited >= INTERP_READY_MS || !just_started(sb)) {
			if (fd < 0)
				*err = cerr;
			return fd;
		}
		struct timespec ts = {.tv_sec = step / 1000, .tv_nsec = (step % 1000) * 1000000};
		nanosleep(&ts, NULL);
		waited += step;
		step = step * 2 > 500 ? 500 : step * 2;
	}
}

/* Connected to sb's service with the request sent. */
static int open_request(struct sandbox *sb, const char *method, const char *path, json_t *body,
			struct cell_error *err)
{
	_cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !text)
		return cell_err(err, ENOMEM, "code interpreter: the request");
	size_t blen = text ? strlen(text) : 0;
	if (blen > INTERP_REQUEST_MAX)
		return cell_err_msg(err, EFBIG,
				    "code interpreter: a request of %zu bytes (at most %u)", blen,
				    INTERP_REQUEST_MAX);
	char head[512];
	int hl = snprintf(head, sizeof(head),
			  "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
			  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			  method, path, INTERP_PORT, blen);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		return cell_err_msg(err, EINVAL, "code interpreter: path too long");
	struct cell_error cerr = {0};
	int fd = interp_connect(sb, &cerr);
	if (fd == -ECONNREFUSED)
		return cell_err_msg(
		    err, ECONNREFUSED,
		    "no code interpreter listens in sandbox %s (port %u): its image "
		    "has none, or it has not started yet",
		    sb->id, INTERP_PORT);
	if (fd < 0) {
		*err = cerr;
		return fd;
	}
	if (send_all(fd, head, (size_t)hl, err) < 0 ||
	    (blen && send_all(fd, text, blen, err) < 0)) {
		close(fd);
		return -err->code;
	}
	return fd;
}

/* ---- the answer ---- */

enum body_kind { BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };
enum chunk_at { AT_SIZE, AT_DATA, AT_DATA_END, AT_TRAILER, AT_DONE };

struct body {
	enum body_kind kind;
	uint64_t left; /* BODY_LENGTH: bytes to come; AT_DATA: of the chunk */
	enum chunk_at at;
	char line[CHUNK_LINE_MAX + 1];
	size_t line_len;
	bool done;
};

/* The head in raw (read whole): the status and how the body comes; the head is dropped
 * from raw. 0, or -EPROTO with err. */
static int parse_head(struct bytes *raw, size_t head_len, int *status, struct body *bd,
		      char context[CELL_ID_MAX + 1], struct cell_error *err)
{
	context[0] = '\0';
	char *save = NULL;
	raw->data[head_len - 2] = '\0'; /* the head's last CRLF */
	char *line = strtok_r(raw->data, "\r\n", &save);
	int st = 0;
	if (!line || sscanf(line, "HTTP/1.%*1[01] %3d", &st) != 1 || st < 100 || st > 599)
		return cell_err_msg(err, EPROTO, "code interpreter: no HTTP/1.1 status line");
	*status = st;
	*bd = (struct body){.kind = BODY_CLOSE};
	while ((line = strtok_r(NULL, "\r\n", &save))) {
		char *colon = strchr(line, ':');
		if (!colon)
			return cell_err_msg(err, EPROTO,
					    "code interpreter: a header line without ':'");
		*colon = '\0';
		const char *v = colon + 1 + strspn(colon + 1, " \t");
		if (!strcasecmp(line, "Transfer-Encoding")) {
			if (strcasecmp(v, "chunked"))
				return cell_err_msg(
				    err, EPROTO, "code interpreter: Transfer-Encoding '%.40s'", v);
			bd->kind = BODY_CHUNKED;
		} else if (!strcasecmp(line, "Content-Length") && bd->kind != BODY_CHUNKED) {
			char *end;
			errno = 0;
			unsigned long long n = strtoull(v, &end, 10);
			if (errno || end == v || *end || *v == '-')
				return cell_err_msg(err, EPROTO,
						    "code interpreter: a bad Content-Length");
			bd->kind = BODY_LENGTH;
			bd->left = n;
		} else if (!strcasecmp(line, "X-Context-Id") && cell_id_valid(v)) {
			snprintf(context, CELL_ID_MAX + 1, "%s", v);
		}
	}
	if (bd->kind == BODY_LENGTH && !bd->left)
		bd->done = true;
	bytes_drop(raw, head_len);
	return 0;
}

/* The chunked body's framing in raw, consumed: its data appended to out (at most max in
 * all). 0 (wants more, or done), or -EPROTO/-EMSGSIZE/-ENOMEM. */
static int unchunk(struct body *bd, struct bytes *raw, struct bytes *out, size_t max)
{
	size_t i = 0;
	int r = 0;
	while (i < raw->len && !bd->done && !r) {
		char c = raw->data[i];
		if (bd->at == AT_DATA) {
			size_t n = raw->len - i < bd->left ? raw->len - i : (size_t)bd->left;
			r = bytes_add(out, raw->data + i, n, max);
			i += n;
			if (!(bd->left -= n))
				bd->at = AT_DATA_END;
			continue;
		}
		i++;
		if (c == '\r')
			continue;
		if (c != '\n') {
			if (bd->line_len >= CHUNK_LINE_MAX)
				r = -EPROTO;
			else
				bd->line[bd->line_len++] = c;
			continue;
		}
		bd->line[bd->line_len] = '\0';
		if (bd->at == AT_SIZE) {
			char *end;
			errno = 0;
			unsigned long long n = strtoull(bd->line, &end, 16);
			if (errno || end == bd->line || (*end && *end != ';'))
				r = -EPROTO;
			bd->left = n;
			bd->at = n ? AT_DATA : AT_TRAILER;
		} else if (bd->at == AT_DATA_END) {
			r = bd->line_len ? -EPROTO : 0;
			bd->at = AT_SIZE;
		} else if (bd->at == AT_TRAILER && !bd->line_len) {
			bd->done = true;
		}
		bd->line_len = 0;
	}
	bytes_drop(raw, i);
	return r;
}

/* What of raw belongs to the body, appended to out (consumed from raw). */
static int take_body(struct body *bd, struct bytes *raw, struct bytes *out, size_t max)
{
	if (bd->kind == BODY_CHUNKED)
		return unchunk(bd, raw, out, max);
	size_t n = raw->len;
	if (bd->kind == BODY_LENGTH && n > bd->left)
		n = (size_t)bd->left;
	int r = bytes_add(out, raw->data, n, max);
	if (r < 0)
		return r;
	bytes_drop(raw, n);
	if (bd->kind == BODY_LENGTH && !(bd->left -= n))
		bd->done = true;
	return 0;
}

/* The answer's head from fd, waiting up to HEAD_MS: 0 with *status and *bd, what came
 * after the head left in raw. */
static int read_head(int fd, struct bytes *raw, int *status, struct body *bd,
		     char context[CELL_ID_MAX + 1], struct cell_error *err)
{
	for (;;) {
		char *end = raw->data ? strstr(raw->data, "\r\n\r\n") : NULL;
		if (end)
			return parse_head(raw, (size_t)(end - raw->data) + 4, status, bd, context,
					  err);
		int w = wait_for(fd, POLLIN, HEAD_MS);
		if (w <= 0)
			return cell_err(err, w ? -w : ETIMEDOUT, "code interpreter: its answer");
		if (raw->len > HEAD_MAX)
			return cell_err_msg(err, EPROTO,
					    "code interpreter: an answer head over %u bytes",
					    HEAD_MAX);
		ssize_t n = recv_into(fd, raw, HEAD_MAX + RECV_PIECE);
		if (n == -EAGAIN)
			continue;
		if (n < 0)
			return cell_err(err, (int)-n, "code interpreter: its answer");
		if (n == 0)
			return cell_err_msg(err, EPROTO,
					    "code interpreter: closed before answering");
	}
}

/* A whole (bounded) body after the head. */
static int read_body(int fd, struct body *bd, struct bytes *raw, struct bytes *out,
		     struct cell_error *err)
{
	for (;;) {
		int r = take_body(bd, raw, out, INTERP_ANSWER_MAX);
		if (r < 0)
			return cell_err_msg(
			    err, r == -ENOMEM ? ENOMEM : EPROTO, "code interpreter: %s",
			    r == -EMSGSIZE ? "an answer over 1 MiB" : "a bad answer body");
		if (bd->done)
			return 0;
		int w = wait_for(fd, POLLIN, UNARY_BODY_MS);
		if (w <= 0)
			return cell_err(err, w ? -w : ETIMEDOUT, "code interpreter: its answer");
		ssize_t n = recv_into(fd, raw, RECV_PIECE * 2);
		if (n == -EAGAIN)
			continue;
		if (n < 0)
			return cell_err(err, (int)-n, "code interpreter: its answer");
		if (n == 0) {
			if (bd->kind == BODY_CLOSE)
				return 0;
			return cell_err_msg(err, EPROTO, "code interpreter: its answer cut short");
		}
	}
}

void interp_answer_free(struct interp_answer *a)
{
	free(a->body);
	*a = (struct interp_answer){0};
}

static int answer_of(int fd, struct body *bd, struct bytes *raw, int status,
		     struct interp_answer *a, struct cell_error *err)
{
	struct bytes out = {0};
	int r = read_body(fd, bd, raw, &out, err);
	if (r < 0) {
		free(out.data);
		return r;
	}
	if (!out.data && !(out.data = strdup("")))
		return cell_err(err, ENOMEM, "code interpreter: its answer");
	*a = (struct interp_answer){.status = status, .body = out.data, .len = out.len};
	return 0;
}

int interp_call(struct sandbox *sb, const char *method, const char *path, json_t *body,
		struct interp_answer *a, struct cell_error *err)
{
	*a = (struct interp_answer){0};
	int fd = open_request(sb, method, path, body, err);
	if (fd < 0)
		return fd;
	struct bytes raw = {0};
	struct body bd;
	int status = 0;
	char context[CELL_ID_MAX + 1];
	int r = read_head(fd, &raw, &status, &bd, context, err);
	if (r == 0)
		r = answer_of(fd, &bd, &raw, status, a, err);
	free(raw.data);
	close(fd);
	return r;
}

/* ---- a run ---- */

struct interp_run {
	int fd;
	struct body bd;
	struct bytes raw;  /* from the socket, not yet through the body's framing */
	struct bytes text; /* the body: lines not yet handed out */
	bool eof;
	char context[CELL_ID_MAX + 1];
};

int interp_run_open(struct sandbox *sb, json_t *req, struct interp_run **out,
		    struct interp_answer *refused, struct cell_error *err)
{
	*out = NULL;
	*refused = (struct interp_answer){0};
	struct interp_run *run = calloc(1, sizeof(*run));
	if (!run)
		return cell_err(err, ENOMEM, "code interpreter: a run");
	run->fd = open_request(sb, "POST", "/execute", req, err);
	int status = 0;
	int r = run->fd < 0 ? run->fd
			    : read_head(run->fd, &run->raw, &status, &run->bd, run->context, err);
	if (r == 0 && status != 200) {
		r = answer_of(run->fd, &run->bd, &run->raw, status, refused, err);
		if (r == 0)
			r = 1;
	}
	if (r != 0) {
		interp_run_close(run);
		return r;
	}
	*out = run;
	return 0;
}

const char *interp_run_context(const struct interp_run *run)
{
	return run->context[0] ? run->context : NULL;
}

int interp_run_fd(const struct interp_run *run)
{
	return run->fd;
}

/* The first whole line of run->text as a JSON object: 1, 0 when none is whole yet (empty
 * lines are skipped). */
static int take_line(struct interp_run *run, json_t **line, struct cell_error *err)
{
	for (;;) {
		char *nl = run->text.data ? memchr(run->text.data, '\n', run->text.len) : NULL;
		if (!nl)
			return 0;
		size_t n = (size_t)(nl - run->text.data);
		json_error_t jerr;
		json_t *j = n ? json_loadb(run->text.data, n, 0, &jerr) : NULL;
		bytes_drop(&run->text, n + 1);
		if (!n)
			continue;
		if (!json_is_object(j)) {
			json_decref(j);
			return cell_err_msg(err, EPROTO,
					    "code interpreter: a line that is no JSON object");
		}
		*line = j;
		return 1;
	}
}

int interp_run_next(struct interp_run *run, json_t **line, struct cell_error *err)
{
	*line = NULL;
	for (;;) {
		int r = take_line(run, line, err);
		if (r != 0)
			return r;
		if (run->bd.done || run->eof) {
			if (run->text.len)
				return cell_err_msg(err, EPROTO,
						    "code interpreter: a last line cut short");
			if (!run->bd.done && run->bd.kind != BODY_CLOSE)
				return cell_err_msg(err, EPROTO,
						    "code interpreter: the run's answer cut short");
			return 0;
		}
		r = take_body(&run->bd, &run->raw, &run->text, INTERP_LINE_MAX);
		if (r == -EMSGSIZE)
			return cell_err_msg(err, EPROTO, "code interpreter: a line over %u bytes",
					    INTERP_LINE_MAX);
		if (r < 0)
			return cell_err_msg(err, r == -ENOMEM ? ENOMEM : EPROTO,
					    "code interpreter: a bad answer body");
		if (memchr(run->text.data ? run->text.data : "", '\n', run->text.len) ||
		    run->bd.done)
			continue;
		ssize_t n = recv_into(run->fd, &run->raw, RECV_PIECE * 2);
		if (n == -EAGAIN)
			return -EAGAIN;
		if (n < 0)
			return cell_err(err, (int)-n, "code interpreter: the run's answer");
		if (n == 0)
			run->eof = true;
	}
}

void interp_run_close(struct interp_run *run)
{
	if (!run)
		return;
	if (run->fd >= 0)
		close(run->fd);
	free(run->raw.data);
	free(run->text.data);
	free(run);
}
