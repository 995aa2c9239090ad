/* Client side of the relay to a sandbox's cell-init.
 *
 * init runs inside the sandbox, so everything it sends is hostile: frame sizes are bounded
 * (control JSON ≤ 64 KiB, output/data ≤ one chunk), only the frame types a conversation
 * allows are accepted, every JSON field is type- and range-checked, and every socket has
 * send/receive timeouts so a stalled init cannot pin a celld thread inside a frame. On any
 * violation the caller drops the connection. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "celld.h"

#define RELAY_IO_TIMEOUT_MS 30000

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int connect_timeout(const struct sandbox *sb, int timeout_ms, struct cell_error *err)
{
	/* Through the sandbox dir's O_PATH fd: no length limit from sun_path and no lookup of
	 * the state dir path again. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/init.sock", sb->dirfd);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "socket");
	/* The send timeout also bounds connect() when init's backlog is full. */
	set_timeouts(fd, timeout_ms);
	int r;
	do
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return cell_err(err, errno, "connecting to cell-init of sandbox %s", sb->id);
	if (timeout_ms != RELAY_IO_TIMEOUT_MS)
		set_timeouts(fd, RELAY_IO_TIMEOUT_MS);
	return move_fd(fd);
}

int relay_connect(const struct sandbox *sb, struct cell_error *err)
{
	return connect_timeout(sb, RELAY_IO_TIMEOUT_MS, err);
}

int relay_wait(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t deadline = timeout_ms < 0 ? 0 : celld_now_ms() + timeout_ms;
	for (;;) {
		int left = timeout_ms < 0 ? -1 : (int)(deadline - celld_now_ms());
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		int r = poll(&p, 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		return r > 0 ? 1 : 0;
	}
}

static int relay_send_json(int fd, uint16_t type, json_t *payload, struct cell_error *err)
{
	_cleanup_free_ char *text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
	if (payload && !text)
		return cell_err(err, ENOMEM, "encoding %s frame", cell_frame_type_name(type));
	return cell_frame_send_str(fd, type, text, err);
}

static bool is_control(uint16_t type)
{
	switch (type) {
	case CELL_FRAME_PONG:
	case CELL_FRAME_STARTED:
	case CELL_FRAME_EXIT:
	case CELL_FRAME_ERROR:
	case CELL_FRAME_STAT:
	case CELL_FRAME_OK:
		return true;
	default:
		return false;
	}
}

/* One frame from init, with the limits of its type. Types init never sends are refused. */
static int recv_frame(int fd, struct cell_frame *f, struct cell_error *err)
{
	int r = cell_frame_recv(fd, f, CELL_FRAME_MAX, err);
	if (r < 0)
		return r == -EAGAIN ? cell_err(err, ETIMEDOUT, "cell-init stalled mid-frame") : r;
	switch (f->type) {
	case CELL_FRAME_STDOUT:
	case CELL_FRAME_STDERR:
	case CELL_FRAME_DATA:
		if (f->len > CELL_FRAME_CHUNK)
			goto bad;
		return 0;
	case CELL_FRAME_END:
		if (f->len)
			goto bad;
		return 0;
	default:
		if (!is_control(f->type) || f->len > RELAY_CONTROL_MAX)
			goto bad;
		return 0;
	}
bad:
	r = cell_err(err, EPROTO, "cell-init sent a bad %s frame (%u bytes)",
		     cell_frame_type_name(f->type), f->len);
	cell_frame_free(f);
	return r;
}

/* The payload of a control frame as a JSON object (a new reference). */
static int frame_json(const struct cell_frame *f, json_t **out, struct cell_error *err)
{
	json_error_t jerr;
	*out = NULL;
	if (!f->len)
		return cell_err(err, EPROTO, "cell-init sent an empty %s frame",
				cell_frame_type_name(f->type));
	json_t *o = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return cell_err(err, EPROTO, "cell-init sent a %s frame that is not a JSON object",
				cell_frame_type_name(f->type));
	}
	*out = o;
	return 0;
}

/* Integer member within [min, max]. */
static int get_int(json_t *o, const char *key, long long min, long long max, long long *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return -EPROTO;
	long long n = json_integer_value(v);
	if (n < min || n > max)
		return -EPROTO;
	*out = n;
	return 0;
}

/* Copy a string from init: control bytes become '?' (it ends up in logs and messages) and a
 * cut never splits a UTF-8 character (jansson has already checked it is UTF-8). */
static void copy_text(char *dst, size_t size, const char *src)
{
	size_t n = 0;
	const unsigned char *p = (const unsigned char *)src;
	for (; p[n] && n < size - 1; n++)
		dst[n] = (p[n] < 0x20 || p[n] == 0x7f) ? '?' : (char)p[n];
	if (p[n]) {
		size_t start = n;
		while (start && (p[start - 1] & 0xc0) == 0x80)
			start--;
		if (start && p[start - 1] >= 0xc0) {
			unsigned char lead = p[start - 1];
			size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
			if (n - (start - 1) < want)
				n = start - 1;
		}
	}
	dst[n] = '\0';
}

static int parse_error(const struct cell_frame *f, struct relay_error *rerr, struct cell_error *err)
{
	json_t *o;
	int r = frame_json(f, &o, err);
	if (r < 0)
		return r;
	long long e;
	if (get_int(o, "errno", 1, 4095, &e) < 0) {
		json_decref(o);
		return cell_err(err, EPROTO, "cell-init sent an ERROR without a valid errno");
	}
	rerr->errnum = (int)e;
	json_t *m = json_object_get(o, "message");
	copy_text(rerr->message, sizeof(rerr->message),
		  json_is_string(m) ? json_string_value(m) : strerror((int)e));
	json_decref(o);
	return 0;
}

int relay_ping(const struct sandbox *sb, int timeout_ms, struct cell_error *err)
{
	int64_t deadline = celld_now_ms() + timeout_ms;
	_cleanup_close_ int fd = connect_timeout(sb, timeout_ms, err);
	if (fd < 0)
		return fd;
	int r = cell_frame_send(fd, CELL_FRAME_PING, NULL, 0, err);
	if (r < 0)
		return r;
	r = relay_wait(fd, (int)(deadline - celld_now_ms()));
	if (r <= 0)
		return cell_err(err, r < 0 ? -r : ETIMEDOUT, "waiting for PONG from sandbox %s",
				sb->id);
	struct cell_frame f;
	r = recv_frame(fd, &f, err);
	if (r < 0)
		return r;
	json_t *o = NULL;
	if (f.type != CELL_FRAME_PONG)
		r = cell_err(err, EPROTO, "cell-init answered PING with %s",
			     cell_frame_type_name(f.type));
	else
		r = frame_json(&f, &o, err);
	json_decref(o);
	cell_frame_free(&f);
	return r;
}

int relay_exec_start(int fd, json_t *req, pid_t *pid, struct relay_error *rerr,
		     struct cell_error *err)
{
	int r = relay_send_json(fd, CELL_FRAME_EXEC, req, err);
	if (r < 0)
		return r;
	r = relay_wait(fd, RELAY_IO_TIMEOUT_MS);
	if (r <= 0)
		return cell_err(err, r < 0 ? -r : ETIMEDOUT, "waiting for cell-init to start it");
	struct cell_frame f;
	r = recv_frame(fd, &f, err);
	if (r < 0)
		return r;
	if (f.type == CELL_FRAME_ERROR) {
		r = parse_error(&f, rerr, err);
		cell_frame_free(&f);
		return r < 0 ? r : 1;
	}
	json_t *o = NULL;
	long long p = 0;
	if (f.type != CELL_FRAME_STARTED)
		r = cell_err(err, EPROTO, "cell-init answered EXEC with %s",
			     cell_frame_type_name(f.type));
	else if ((r = frame_json(&f, &o, err)) == 0 && get_int(o, "pid", 1, 1 << 22, &p) < 0)
		r = cell_err(err, EPROTO, "cell-init sent STARTED without a valid pid");
	json_decref(o);
	cell_frame_free(&f);
	if (r == 0)
		*pid = (pid_t)p;
	return r;
}

static int parse_exit(const struct cell_frame *f, struct relay_exit *ex, struct cell_error *err)
{
	json_t *o;
	int r = frame_json(f, &o, err);
	if (r < 0)
		return r;
	long long code = 0, sig = 0, dur = 0;
	json_t *to = json_object_get(o, "timed_out");
	if (get_int(o, "exit_code", 0, 255, &code) < 0 ||
	    (json_object_get(o, "signal") && get_int(o, "signal", 0, 64, &sig) < 0) ||
	    (json_object_get(o, "duration_ms") &&
	     get_int(o, "duration_ms", 0, (long long)1 << 50, &dur) < 0) ||
	    (to && !json_is_boolean(to)))
		r = cell_err(err, EPROTO, "cell-init sent an invalid EXIT");
	json_decref(o);
	if (r < 0)
		return r;
	ex->exit_code = (int)code;
	ex->signal = (int)sig;
	ex->timed_out = json_is_true(to);
	ex->duration_ms = dur;
	return 0;
}

/* Turn the frame in ev->frame into an event. Output frames stay in ev->frame for the
 * caller; any other frame is consumed here: parsed (EXIT, ERROR) or refused, then cleared
 * from ev->frame, its payload freed when `owned` (relay_exec_read's is borrowed). */
static int frame_event(struct relay_event *ev, bool owned, struct cell_error *err)
{
	struct cell_frame f = ev->frame;
	int r;
	switch (f.type) {
	case CELL_FRAME_STDOUT:
		ev->kind = RELAY_EV_STDOUT;
		return 0;
	case CELL_FRAME_STDERR:
		ev->kind = RELAY_EV_STDERR;
		return 0;
	case CELL_FRAME_EXIT:
		ev->kind = RELAY_EV_EXIT;
		r = parse_exit(&f, &ev->exit, err);
		break;
	case CELL_FRAME_ERROR: {
		struct relay_error rerr;
		r = parse_error(&f, &rerr, err);
		if (r == 0)
			r = cell_err(err, 0, "cell-init: %s", rerr.message);
		break;
	}
	default:
		r = cell_err(err, EPROTO, "cell-init sent %s during a command",
			     cell_frame_type_name(f.type));
		break;
	}
	ev->frame = (struct cell_frame){0};
	if (owned)
		cell_frame_free(&f);
	return r;
}

int relay_exec_next(int fd, struct relay_event *ev, struct cell_error *err)
{
	memset(ev, 0, sizeof(*ev));
	int r = recv_frame(fd, &ev->frame, err);
	if (r < 0)
		return r == -ECONNRESET ? cell_err(err, ECONNRESET, "cell-init closed the relay")
					: r;
	return frame_event(ev, true, err);
}

void relay_reader_free(struct relay_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
	rd->cap = 0;
}

/* Exactly len bytes (the socket's receive timeout bounds a stalled peer). 0, -ECONNRESET
 * on EOF before any byte (when eof_ok), -EPIPE on EOF mid-way, or -errno. */
static int read_exact(int fd, uint8_t *p, size_t len, bool eof_ok)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got == 0 && eof_ok ? -ECONNRESET : -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

int relay_exec_read(int fd, struct relay_reader *rd, struct relay_event *ev, struct cell_error *err)
{
	memset(ev, 0, sizeof(*ev));
	uint8_t hdr[CELL_FRAME_HEADER];
	int r = read_exact(fd, hdr, sizeof(hdr), true);
	if (r == -ECONNRESET)
		return cell_err(err, ECONNRESET, "cell-init closed the relay");
	if (r == -EAGAIN)
		return cell_err(err, ETIMEDOUT, "cell-init stalled mid-frame");
	if (r < 0)
		return cell_err(err, -r, "reading frame header");
	uint16_t type;
	uint32_t len;
	r = cell_frame_header_decode(hdr, CELL_FRAME_MAX, &type, &len);
	if (r < 0)
		return cell_err(err, -r, "bad frame header");
	/* The limits of recv_frame, checked before a byte of the payload is read. */
	bool output = type == CELL_FRAME_STDOUT || type == CELL_FRAME_STDERR;
	if ((output && len > CELL_FRAME_CHUNK) ||
	    (!output && (!is_control(type) || len > RELAY_CONTROL_MAX)))
		return cell_err(err, EPROTO, "cell-init sent a bad %s frame (%u bytes)",
				cell_frame_type_name(type), len);
	if (rd->cap < (size_t)len + 1) {
		size_t cap = (size_t)CELL_FRAME_CHUNK + 1;
		if (cap < (size_t)len + 1)
			cap = (size_t)len + 1;
		uint8_t *nb = realloc(rd->buf, cap);
		if (!nb)
			return cell_err(err, ENOMEM, "frame payload");
		rd->buf = nb;
		rd->cap = cap;
	}
	r = read_exact(fd, rd->buf, len, false);
	if (r < 0)
		return cell_err(err, r == -EAGAIN ? ETIMEDOUT : -r, "reading frame payload");
	rd->buf[len] = '\0';
	ev->frame = (struct cell_frame){.type = type, .len = len, .payload = len ? rd->buf : NULL};
	return frame_event(ev, false, err);
}

int relay_signal(int fd, int sig, struct cell_error *err)
{
	json_t *o = json_pack("{s:i}", "signal", sig);
	int r = relay_send_json(fd, CELL_FRAME_SIGNAL, o, err);
	json_decref(o);
	return r;
}

static const char *const stat_types[] = {"file", "directory", "symlink", "other"};

static int parse_stat(const struct cell_frame *f, struct relay_stat *st, struct cell_error *err)
{
	json_t *o;
	int r = frame_json(f, &o, err);
	if (r < 0)
		return r;
	memset(st, 0, sizeof(*st));
	long long size = 0, mode = 0, uid = 0, gid = 0;
	json_t *type = json_object_get(o, "type");
	json_t *owner = json_object_get(o, "owner"), *group = json_object_get(o, "group");
	json_t *mt = json_object_get(o, "mtime"), *ct = json_object_get(o, "ctime");
	bool ok = json_is_string(type) && get_int(o, "size", 0, INT64_MAX, &size) == 0 &&
		  get_int(o, "mode", 0, 07777, &mode) == 0 &&
		  get_int(o, "uid", 0, UINT32_MAX, &uid) == 0 &&
		  get_int(o, "gid", 0, UINT32_MAX, &gid) == 0 && json_is_number(mt) &&
		  json_is_number(ct) && (!owner || json_is_string(owner)) &&
		  (!group || json_is_string(group));
	if (ok) {
		ok = false;
		for (size_t i = 0; i < CELL_ARRAY_SIZE(stat_types); i++)
			if (!strcmp(json_string_value(type), stat_types[i]))
				ok = true;
	}
	double m = ok ? json_number_value(mt) : 0, c = ok ? json_number_value(ct) : 0;
	if (ok && (!isfinite(m) || !isfinite(c) || fabs(m) > 1e12 || fabs(c) > 1e12))
		ok = false;
	if (!ok) {
		json_decref(o);
		return cell_err(err, EPROTO, "cell-init sent an invalid STAT");
	}
	snprintf(st->type, sizeof(st->type), "%s", json_string_value(type));
	st->size = size;
	st->mode = (uint32_t)mode;
	st->uid = uid;
	st->gid = gid;
	st->mtime = m;
	st->ctime = c;
	if (owner)
		copy_text(st->owner, sizeof(st->owner), json_string_value(owner));
	else
		snprintf(st->owner, sizeof(st->owner), "%lld", uid);
	if (group)
		copy_text(st->group, sizeof(st->group), json_string_value(group));
	else
		snprintf(st->group, sizeof(st->group), "%lld", gid);
	json_decref(o);
	return 0;
}

/* First answer to FILE_STAT / FILE_READ: STAT (0) or ERROR (1). */
static int recv_stat(int fd, struct relay_stat *st, struct relay_error *rerr,
		     struct cell_error *err)
{
	int r = relay_wait(fd, RELAY_IO_TIMEOUT_MS);
	if (r <= 0)
		return cell_err(err, r < 0 ? -r : ETIMEDOUT, "waiting for cell-init");
	struct cell_frame f;
	r = recv_frame(fd, &f, err);
	if (r < 0)
		return r;
	if (f.type == CELL_FRAME_STAT)
		r = parse_stat(&f, st, err);
	else if (f.type == CELL_FRAME_ERROR)
		r = parse_error(&f, rerr, err) < 0 ? -EPROTO : 1;
	else
		r = cell_err(err, EPROTO, "cell-init answered with %s",
			     cell_frame_type_name(f.type));
	cell_frame_free(&f);
	return r;
}

int relay_file_stat(const struct sandbox *sb, const char *path, struct relay_stat *st,
		    struct relay_error *rerr, struct cell_error *err)
{
	_cleanup_close_ int fd = relay_connect(sb, err);
	if (fd < 0)
		return fd;
	json_t *o = json_pack("{s:s}", "path", path);
	int r = relay_send_json(fd, CELL_FRAME_FILE_STAT, o, err);
	json_decref(o);
	return r < 0 ? r : recv_stat(fd, st, rerr, err);
}

int relay_file_read(const struct sandbox *sb, const char *path, int64_t offset, int64_t limit,
		    int *fdp, struct relay_stat *st, struct relay_error *rerr,
		    struct cell_error *err)
{
	*fdp = -1;
	_cleanup_close_ int fd = relay_connect(sb, err);
	if (fd < 0)
		return fd;
	json_t *o = json_pack("{s:s, s:I, s:I}", "path", path, "offset", (json_int_t)offset,
			      "limit", (json_int_t)limit);
	int r = relay_send_json(fd, CELL_FRAME_FILE_READ, o, err);
	json_decref(o);
	if (r < 0)
		return r;
	r = recv_stat(fd, st, rerr, err);
	if (r == 0)
		*fdp = move_fd(fd);
	return r;
}

int relay_file_read_next(int fd, struct cell_frame *frame, struct cell_error *err)
{
	int r = recv_frame(fd, frame, err);
	if (r < 0)
		return r;
	switch (frame->type) {
	case CELL_FRAME_DATA:
		return 1;
	case CELL_FRAME_END:
		return 0;
	case CELL_FRAME_ERROR: {
		struct relay_error rerr;
		r = parse_error(frame, &rerr, err);
		cell_frame_free(frame);
		return r < 0 ? r : cell_err(err, rerr.errnum, "cell-init: %s", rerr.message);
	}
	default:
		r = cell_err(err, EPROTO, "cell-init sent %s during a read",
			     cell_frame_type_name(frame->type));
		cell_frame_free(frame);
		return r;
	}
}

int relay_file_write(const struct sandbox *sb, json_t *req, int *fdp, struct cell_error *err)
{
	*fdp = -1;
	_cleanup_close_ int fd = relay_connect(sb, err);
	if (fd < 0)
		return fd;
	int r = relay_send_json(fd, CELL_FRAME_FILE_WRITE, req, err);
	if (r == 0)
		*fdp = move_fd(fd);
	return r;
}

int relay_file_write_end(int fd, int64_t *size, struct relay_error *rerr, struct cell_error *err)
{
	int r = cell_frame_send(fd, CELL_FRAME_END, NULL, 0, err);
	if (r < 0)
		return relay_take_error(fd, rerr, 1000) == 1 ? 1 : r;
	r = relay_wait(fd, RELAY_IO_TIMEOUT_MS);
	if (r <= 0)
		return cell_err(err, r < 0 ? -r : ETIMEDOUT, "waiting for cell-init to finish");
	struct cell_frame f;
	r = recv_frame(fd, &f, err);
	if (r < 0)
		return r;
	json_t *o = NULL;
	long long n = 0;
	if (f.type == CELL_FRAME_ERROR)
		r = parse_error(&f, rerr, err) < 0 ? -EPROTO : 1;
	else if (f.type != CELL_FRAME_OK)
		r = cell_err(err, EPROTO, "cell-init answered END with %s",
			     cell_frame_type_name(f.type));
	else if ((r = frame_json(&f, &o, err)) == 0 && get_int(o, "size", 0, INT64_MAX, &n) < 0)
		r = cell_err(err, EPROTO, "cell-init sent OK without a valid size");
	json_decref(o);
	cell_frame_free(&f);
	if (r == 0)
		*size = n;
	return r;
}

int relay_take_error(int fd, struct relay_error *rerr, int timeout_ms)
{
	if (relay_wait(fd, timeout_ms) <= 0)
		return 0;
	struct cell_frame f;
	struct cell_error e;
	if (recv_frame(fd, &f, &e) < 0)
		return 0;
	int r = f.type == CELL_FRAME_ERROR && parse_error(&f, rerr, &e) == 0 ? 1 : -EPROTO;
	cell_frame_free(&f);
	return r;
}
