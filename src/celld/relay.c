/* Client side of the relay to a sandbox's cell-init.
 *
 * init runs inside the sandbox, so everything it sends is hostile: frame sizes are bounded
 * (control JSON ≤ 64 KiB, output/data ≤ one chunk), only the frame types a conversation
 * allows are accepted, every JSON field is type- and range-checked, and a stalled init
 * pins a celld thread for a bounded time only: the control steps of one request (connect,
 * request, answer) share one struct relay_budget and wait with poll() against its deadline,
 * and every socket has send/receive timeouts for the streamed frames in between. On any
 * violation the caller drops the connection. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "metrics.h"
#include "cell/cleanup.h"
#include "relay.h"
#include "sandbox.h"
#include "timefmt.h"

/* Idle timeout of the streamed frames (output, download and upload data). */
#define RELAY_IO_TIMEOUT_MS 30000

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- the budget: one deadline over a request's control steps ---- */

/* The deadline of the next step, or -ETIMEDOUT (err set) when the budget is spent. */
static int64_t budget_deadline(const struct relay_budget *b, struct cell_error *err)
{
	if (b->left_ms <= 0)
		return cell_err(err, ETIMEDOUT,
				"cell-init did not answer within this request's %d s",
				RELAY_BUDGET_MS / 1000);
	return celld_now_ms() + b->left_ms;
}

static void budget_spend(struct relay_budget *b, int64_t deadline)
{
	int64_t left = deadline - celld_now_ms();
	b->left_ms = left > 0 ? left : 0;
}

static int timed_out(const char *what, struct cell_error *err)
{
	return cell_err(err, ETIMEDOUT, "%s: no answer from cell-init within this request's %d s",
			what, RELAY_BUDGET_MS / 1000);
}

/* Wait for events on fd until deadline (celld_now_ms() clock): 0 ready, -ETIMEDOUT, -errno. */
static int wait_until(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - celld_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		return r ? 0 : -ETIMEDOUT;
	}
}

/* Move exactly len bytes in (recv) or out (send). deadline < 0: blocking, the socket's
 * timeouts bound a stalled peer (-EAGAIN); else no later than deadline (-ETIMEDOUT). 0,
 * -ECONNRESET on EOF before any byte (when eof_ok), -EPIPE on EOF mid-way, or -errno. */
static int transfer(int fd, uint8_t *p, size_t len, bool out, bool eof_ok, int64_t deadline)
{
	int flags = (deadline < 0 ? 0 : MSG_DONTWAIT) | (out ? MSG_NOSIGNAL : 0);
	size_t done = 0;
	while (done < len) {
		ssize_t n = out ? send(fd, p + done, len - done, flags)
				: recv(fd, p + done, len - done, flags);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && deadline >= 0) {
			int r = wait_until(fd, out ? POLLOUT : POLLIN, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return done == 0 && eof_ok ? -ECONNRESET : -EPIPE;
		metrics_add(out ? METRIC_RELAY_SENT : METRIC_RELAY_RECEIVED, (size_t)n);
		done += (size_t)n;
	}
	return 0;
}

static int read_exact(int fd, uint8_t *p, size_t len, bool eof_ok, int64_t deadline)
{
	return transfer(fd, p, len, false, eof_ok, deadline);
}

/* One frame, sent no later than deadline. */
static int send_frame_by(int fd, uint16_t type, const void *payload, uint32_t len, int64_t deadline,
			 struct cell_error *err)
{
	uint8_t hdr[CELL_FRAME_HEADER];
	cell_frame_header_encode(hdr, type, len);
	int r = transfer(fd, hdr, sizeof(hdr), true, false, deadline);
	if (r == 0 && len)
		r = transfer(fd, (uint8_t *)payload, len, true, false, deadline);
	if (r == -ETIMEDOUT)
		return timed_out(cell_frame_type_name(type), err);
	return r < 0 ? cell_err(err, -r, "sending %s frame", cell_frame_type_name(type)) : 0;
}

static int connect_by(const struct sandbox *sb, int64_t deadline, struct cell_error *err)
{
	/* Through the sandbox dir's O_PATH fd: no length limit from sun_path and no lookup of
	 * the state dir path again. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/init.sock", sb->dirfd);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "socket");
	/* The send timeout bounds connect() when init's backlog is full. */
	int64_t left = deadline - celld_now_ms();
	set_timeouts(fd, left < 1		      ? 1
			 : left < RELAY_IO_TIMEOUT_MS ? (int)left
						      : RELAY_IO_TIMEOUT_MS);
	int r;
	do
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN)
		return timed_out("connecting", err);
	if (r < 0)
		return cell_err(err, errno, "connecting to cell-init of sandbox %s", sb->id);
	set_timeouts(fd, RELAY_IO_TIMEOUT_MS);
	return move_fd(fd);
}

int relay_connect(const struct sandbox *sb, struct relay_budget *b, struct cell_error *err)
{
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	int fd = connect_by(sb, deadline, err);
	budget_spend(b, deadline);
	return fd;
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

static int relay_send_json(int fd, uint16_t type, json_t *payload, int64_t deadline,
			   struct cell_error *err)
{
	_cleanup_free_ char *text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
	if (payload && !text)
		return cell_err(err, ENOMEM, "encoding %s frame", cell_frame_type_name(type));
	return send_frame_by(fd, type, text, text ? (uint32_t)strlen(text) : 0, deadline, err);
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
	case CELL_FRAME_ENTRIES:
	case CELL_FRAME_STDIN_TAKEN:
	case CELL_FRAME_EVENTS:
		return true;
	default:
		return false;
	}
}

/* The limits of a frame's type, checked before a byte of its payload is read. Types init
 * never sends are refused. */
static bool frame_len_ok(uint16_t type, uint32_t len)
{
	switch (type) {
	case CELL_FRAME_STDOUT:
	case CELL_FRAME_STDERR:
	case CELL_FRAME_DATA:
		return len <= CELL_FRAME_CHUNK;
	case CELL_FRAME_END:
		return len == 0;
	case CELL_FRAME_REPLAY: /* its offset, then scrollback */
		return len >= 8;
	default:
		return is_control(type) && len <= RELAY_CONTROL_MAX;
	}
}

/* One frame from init into buf (len + 1 bytes; NULL: a new allocation), by deadline (< 0:
 * the socket's idle timeout per read). */
static int recv_frame_into(int fd, struct cell_frame *f, uint8_t **buf, size_t *cap,
			   int64_t deadline, struct cell_error *err)
{
	*f = (struct cell_frame){0};
	uint8_t hdr[CELL_FRAME_HEADER];
	int r = read_exact(fd, hdr, sizeof(hdr), true, deadline);
	if (r == -ECONNRESET)
		return cell_err(err, ECONNRESET, "cell-init closed the relay");
	if (r == -ETIMEDOUT)
		return timed_out("waiting for a frame", err);
	if (r == -EAGAIN)
		return cell_err(err, ETIMEDOUT, "cell-init stalled mid-frame");
	if (r < 0)
		return cell_err(err, -r, "reading frame header");
	uint16_t type;
	uint32_t len;
	r = cell_frame_header_decode(hdr, CELL_FRAME_MAX, &type, &len);
	if (r < 0)
		return cell_err(err, -r, "bad frame header");
	if (!frame_len_ok(type, len))
		return cell_err(err, EPROTO, "cell-init sent a bad %s frame (%u bytes)",
				cell_frame_type_name(type), len);
	uint8_t *p = NULL;
	if (cap && *cap >= (size_t)len + 1) {
		p = *buf;
	} else if (cap) {
		size_t want = (size_t)CELL_FRAME_CHUNK + 1 > (size_t)len + 1 ? CELL_FRAME_CHUNK + 1
									     : (size_t)len + 1;
		p = realloc(*buf, want);
		if (!p)
			return cell_err(err, ENOMEM, "frame payload");
		*buf = p;
		*cap = want;
	} else if (len) {
		p = malloc((size_t)len + 1);
		if (!p)
			return cell_err(err, ENOMEM, "frame payload");
	}
	if (len) {
		r = read_exact(fd, p, len, false, deadline);
		if (r < 0) {
			if (!cap)
				free(p);
			if (r == -ETIMEDOUT)
				return timed_out("reading a frame", err);
			return cell_err(err, r == -EAGAIN ? ETIMEDOUT : -r,
					"reading frame payload");
		}
		p[len] = '\0';
	}
	*f = (struct cell_frame){.type = type, .len = len, .payload = len ? p : NULL};
	return 0;
}

/* One frame from init (payload allocated: cell_frame_free). */
static int recv_frame(int fd, struct cell_frame *f, int64_t deadline, struct cell_error *err)
{
	return recv_frame_into(fd, f, NULL, NULL, deadline, err);
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
	_cleanup_close_ int fd = connect_by(sb, deadline, err);
	if (fd < 0)
		return fd;
	int r = send_frame_by(fd, CELL_FRAME_PING, NULL, 0, deadline, err);
	if (r < 0)
		return r;
	struct cell_frame f;
	if (recv_frame(fd, &f, deadline, err) < 0)
		return cell_err_wrap(err, "waiting for PONG from sandbox %s: ", sb->id);
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

int relay_exec_start(int fd, uint16_t type, json_t *req, pid_t *pid, struct relay_error *rerr,
		     struct relay_budget *b, struct cell_error *err)
{
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	struct cell_frame f;
	int r = relay_send_json(fd, type, req, deadline, err);
	if (r == 0)
		r = recv_frame(fd, &f, deadline, err);
	budget_spend(b, deadline);
	if (r < 0)
		return cell_err_wrap(err, "waiting for cell-init to start it: ");
	if (f.type == CELL_FRAME_ERROR) {
		r = parse_error(&f, rerr, err);
		cell_frame_free(&f);
		return r < 0 ? r : 1;
	}
	json_t *o = NULL;
	long long p = 0;
	if (f.type != CELL_FRAME_STARTED)
		r = cell_err(err, EPROTO, "cell-init answered %s with %s",
			     cell_frame_type_name(type), cell_frame_type_name(f.type));
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

static int parse_taken(const struct cell_frame *f, uint64_t *taken, struct cell_error *err)
{
	json_t *o = json_loadb((const char *)f->payload, f->len, 0, NULL);
	long long n = 0;
	int r = 0;
	if (!json_is_object(o) || get_int(o, "bytes", 1, CELL_STDIN_WINDOW, &n) < 0)
		r = cell_err(err, EPROTO, "cell-init sent an invalid STDIN_TAKEN");
	json_decref(o);
	*taken = (uint64_t)n;
	return r;
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
	case CELL_FRAME_STDIN_TAKEN:
		ev->kind = RELAY_EV_STDIN_TAKEN;
		r = parse_taken(&f, &ev->taken, err);
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
	int r = recv_frame(fd, &ev->frame, -1, err);
	return r < 0 ? r : frame_event(ev, true, err);
}

void relay_reader_free(struct relay_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
	rd->cap = 0;
}

int relay_exec_read(int fd, struct relay_reader *rd, struct relay_event *ev, struct cell_error *err)
{
	memset(ev, 0, sizeof(*ev));
	int r = recv_frame_into(fd, &ev->frame, &rd->buf, &rd->cap, -1, err);
	return r < 0 ? r : frame_event(ev, false, err);
}

int relay_signal(int fd, int sig, struct cell_error *err)
{
	json_t *o = json_pack("{s:i}", "signal", sig);
	int r = relay_send_json(fd, CELL_FRAME_SIGNAL, o, celld_now_ms() + RELAY_BUDGET_MS, err);
	json_decref(o);
	return r;
}

static const char *const stat_types[] = {"file", "directory", "symlink", "other"};

/* A STAT's "xattrs" {key: value} into st->meta: invalid pairs, and those past the budget (as
 * cell-init counts it), are left out. */
static void parse_meta(json_t *m, struct relay_stat *st)
{
	const char *key;
	json_t *v;
	size_t spent = 0;
	if (!json_is_object(m))
		return;
	json_object_foreach(m, key, v)
	{
		size_t klen = strlen(key), vlen = json_string_length(v);
		if (!json_is_string(v) || !cell_meta_key_ok(key, klen) ||
		    !cell_meta_value_ok(json_string_value(v), vlen) ||
		    spent + (sizeof(CELL_META_PREFIX) - 1) + klen + vlen > CELL_META_MAX ||
		    st->meta_len + klen + vlen + 2 > sizeof(st->meta))
			continue;
		spent += (sizeof(CELL_META_PREFIX) - 1) + klen + vlen;
		memcpy(st->meta + st->meta_len, key, klen + 1);
		st->meta_len += klen + 1;
		memcpy(st->meta + st->meta_len, json_string_value(v), vlen + 1);
		st->meta_len += vlen + 1;
	}
}

json_t *relay_stat_meta(const struct relay_stat *st)
{
	if (!st->meta_len)
		return NULL;
	json_t *o = json_object();
	for (size_t at = 0; o && at < st->meta_len;) {
		const char *k = st->meta + at;
		const char *v = k + strlen(k) + 1;
		json_object_set_new(o, k, json_string(v));
		at = (size_t)(v - st->meta) + strlen(v) + 1;
	}
	return o;
}

/* One STAT object (a STAT frame's, or an entry of ENTRIES) into st; o is not consumed. */
static int parse_stat_obj(json_t *o, struct relay_stat *st, struct cell_error *err)
{
	memset(st, 0, sizeof(*st));
	long long size = 0, mode = 0, uid = 0, gid = 0;
	json_t *type = json_object_get(o, "type");
	json_t *owner = json_object_get(o, "owner"), *group = json_object_get(o, "group");
	json_t *mt = json_object_get(o, "mtime"), *ct = json_object_get(o, "ctime");
	json_t *target = json_object_get(o, "target");
	bool ok = json_is_string(type) && get_int(o, "size", 0, INT64_MAX, &size) == 0 &&
		  get_int(o, "mode", 0, 07777, &mode) == 0 &&
		  get_int(o, "uid", 0, UINT32_MAX, &uid) == 0 &&
		  get_int(o, "gid", 0, UINT32_MAX, &gid) == 0 && json_is_number(mt) &&
		  json_is_number(ct) && (!owner || json_is_string(owner)) &&
		  (!group || json_is_string(group)) && (!target || json_is_string(target));
	if (ok) {
		ok = false;
		for (size_t i = 0; i < CELL_ARRAY_SIZE(stat_types); i++)
			if (!strcmp(json_string_value(type), stat_types[i]))
				ok = true;
	}
	double m = ok ? json_number_value(mt) : 0, c = ok ? json_number_value(ct) : 0;
	if (ok && (!isfinite(m) || !isfinite(c) || fabs(m) > 1e12 || fabs(c) > 1e12))
		ok = false;
	if (!ok)
		return cell_err(err, EPROTO, "cell-init sent an invalid STAT");
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
	if (target && json_string_length(target) < sizeof(st->target))
		copy_text(st->target, sizeof(st->target), json_string_value(target));
	parse_meta(json_object_get(o, "xattrs"), st);
	return 0;
}

static int parse_stat(const struct cell_frame *f, struct relay_stat *st, struct cell_error *err)
{
	json_t *o;
	int r = frame_json(f, &o, err);
	if (r < 0)
		return r;
	r = parse_stat_obj(o, st, err);
	json_decref(o);
	return r;
}

/* First answer to FILE_STAT / FILE_READ / FILE_TAR: STAT (0) or ERROR (1). */
static int recv_stat(int fd, struct relay_stat *st, struct relay_error *rerr, int64_t deadline,
		     struct cell_error *err)
{
	struct cell_frame f;
	int r = recv_frame(fd, &f, deadline, err);
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

/* A new conversation: connected and its request frame sent by deadline. The fd or -errno. */
static int request_by(const struct sandbox *sb, uint16_t type, json_t *req, int64_t deadline,
		      struct cell_error *err)
{
	_cleanup_close_ int fd = connect_by(sb, deadline, err);
	if (fd < 0)
		return fd;
	int r = relay_send_json(fd, type, req, deadline, err);
	return r < 0 ? r : move_fd(fd);
}

/* FILE_STAT, FILE_READ or FILE_TAR up to its STAT: *fdp open on 0. */
static int stat_conversation(const struct sandbox *sb, uint16_t type, json_t *req, int *fdp,
			     struct relay_stat *st, struct relay_error *rerr,
			     struct relay_budget *b, struct cell_error *err)
{
	*fdp = -1;
	if (!req)
		return cell_err(err, ENOMEM, "%s request", cell_frame_type_name(type));
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	_cleanup_close_ int fd = request_by(sb, type, req, deadline, err);
	int r = fd < 0 ? fd : recv_stat(fd, st, rerr, deadline, err);
	budget_spend(b, deadline);
	if (r == 0)
		*fdp = move_fd(fd);
	return r;
}

int relay_file_stat(const struct sandbox *sb, const char *path, struct relay_stat *st,
		    struct relay_error *rerr, struct relay_budget *b, struct cell_error *err)
{
	json_t *o = json_pack("{s:s}", "path", path);
	int fd;
	int r = stat_conversation(sb, CELL_FRAME_FILE_STAT, o, &fd, st, rerr, b, err);
	json_decref(o);
	if (r == 0)
		close(fd);
	return r;
}

int relay_file_read(const struct sandbox *sb, const char *path, int64_t offset, int64_t limit,
		    int *fdp, struct relay_stat *st, struct relay_error *rerr,
		    struct relay_budget *b, struct cell_error *err)
{
	json_t *o = json_pack("{s:s, s:I, s:I}", "path", path, "offset", (json_int_t)offset,
			      "limit", (json_int_t)limit);
	int r = stat_conversation(sb, CELL_FRAME_FILE_READ, o, fdp, st, rerr, b, err);
	json_decref(o);
	return r;
}

int relay_file_tar(const struct sandbox *sb, const char *path, int *fdp, struct relay_stat *st,
		   struct relay_error *rerr, struct relay_budget *b, struct cell_error *err)
{
	json_t *o = json_pack("{s:s}", "path", path);
	int r = stat_conversation(sb, CELL_FRAME_FILE_TAR, o, fdp, st, rerr, b, err);
	json_decref(o);
	return r;
}

int relay_file_read_next(int fd, struct cell_frame *frame, struct cell_error *err)
{
	int r = recv_frame(fd, frame, -1, err);
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

int relay_file_write(const struct sandbox *sb, json_t *req, int *fdp, struct relay_budget *b,
		     struct cell_error *err)
{
	*fdp = -1;
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	int fd = request_by(sb, CELL_FRAME_FILE_WRITE, req, deadline, err);
	budget_spend(b, deadline);
	if (fd < 0)
		return fd;
	*fdp = fd;
	return 0;
}

int relay_file_write_end(int fd, int64_t *size, struct relay_error *rerr, struct relay_budget *b,
			 struct cell_error *err)
{
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	int r = send_frame_by(fd, CELL_FRAME_END, NULL, 0, deadline, err);
	if (r < 0) {
		budget_spend(b, deadline);
		return relay_take_error(fd, rerr, 1000) == 1 ? 1 : r;
	}
	struct cell_frame f;
	r = recv_frame(fd, &f, deadline, err);
	budget_spend(b, deadline);
	if (r < 0)
		return cell_err_wrap(err, "waiting for cell-init to finish: ");
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
	/* init sends an ERROR in one piece: once it shows, the rest is there or nearly. */
	struct cell_frame f;
	struct cell_error e;
	int64_t deadline = celld_now_ms() + (timeout_ms > 1000 ? timeout_ms : 1000);
	if (recv_frame(fd, &f, deadline, &e) < 0)
		return 0;
	int r = f.type == CELL_FRAME_ERROR && parse_error(&f, rerr, &e) == 0 ? 1 : -EPROTO;
	cell_frame_free(&f);
	return r;
}

/* A request answered by OK or ERROR; with fdp, the conversation stays open after an OK. */
static int op_conversation(const struct sandbox *sb, uint16_t type, json_t *req, int *fdp,
			   json_t **ok, struct relay_error *rerr, struct relay_budget *b,
			   struct cell_error *err);

int relay_file_op(const struct sandbox *sb, uint16_t type, json_t *req, json_t **ok,
		  struct relay_error *rerr, struct relay_budget *b, struct cell_error *err)
{
	return op_conversation(sb, type, req, NULL, ok, rerr, b, err);
}

int relay_pty_attach(const struct sandbox *sb, json_t *req, int *fdp, json_t **ok,
		     struct relay_error *rerr, struct relay_budget *b, struct cell_error *err)
{
	return op_conversation(sb, CELL_FRAME_PTY_ATTACH, req, fdp, ok, rerr, b, err);
}

static int op_conversation(const struct sandbox *sb, uint16_t type, json_t *req, int *fdp,
			   json_t **ok, struct relay_error *rerr, struct relay_budget *b,
			   struct cell_error *err)
{
	*ok = NULL;
	if (fdp)
		*fdp = -1;
	if (!req)
		return cell_err(err, ENOMEM, "%s request", cell_frame_type_name(type));
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	_cleanup_close_ int fd = request_by(sb, type, req, deadline, err);
	if (fd < 0) {
		budget_spend(b, deadline);
		return fd;
	}
	struct cell_frame f;
	int r = recv_frame(fd, &f, deadline, err);
	budget_spend(b, deadline);
	if (r < 0)
		return cell_err_wrap(err, "waiting for cell-init: ");
	if (f.type == CELL_FRAME_ERROR)
		r = parse_error(&f, rerr, err) < 0 ? -EPROTO : 1;
	else if (f.type != CELL_FRAME_OK)
		r = cell_err(err, EPROTO, "cell-init answered %s with %s",
			     cell_frame_type_name(type), cell_frame_type_name(f.type));
	else
		r = frame_json(&f, ok, err);
	cell_frame_free(&f);
	if (r == 0 && fdp)
		*fdp = move_fd(fd);
	return r;
}

int relay_pty_read(int fd, struct relay_reader *rd, struct relay_pty_event *ev,
		   struct cell_error *err)
{
	memset(ev, 0, sizeof(*ev));
	struct cell_frame f;
	int r = recv_frame_into(fd, &f, &rd->buf, &rd->cap, -1, err);
	if (r < 0)
		return r;
	ev->type = f.type;
	switch (f.type) {
	case CELL_FRAME_STDOUT:
	case CELL_FRAME_STDERR:
		ev->data = f.payload;
		ev->len = f.len;
		return 0;
	case CELL_FRAME_REPLAY: /* len >= 8: frame_len_ok */
		ev->data = f.payload;
		ev->len = f.len;
		for (int i = 0; i < 8; i++)
			ev->offset = ev->offset << 8 | f.payload[i];
		return 0;
	case CELL_FRAME_EXIT:
		return parse_exit(&f, &ev->exit, err);
	case CELL_FRAME_ERROR:
		return parse_error(&f, &ev->error, err);
	case CELL_FRAME_STDIN_TAKEN:
		return parse_taken(&f, &ev->taken, err);
	default:
		return cell_err(err, EPROTO, "cell-init sent %s on a terminal",
				cell_frame_type_name(f.type));
	}
}

int relay_send_bytes(int fd, uint16_t type, const void *data, size_t len, struct cell_error *err)
{
	int64_t deadline = celld_now_ms() + RELAY_BUDGET_MS;
	const uint8_t *p = data;
	do {
		uint32_t n = len > CELL_FRAME_CHUNK ? CELL_FRAME_CHUNK : (uint32_t)len;
		int r = send_frame_by(fd, type, p, n, deadline, err);
		if (r < 0)
			return r;
		p += n;
		len -= n;
	} while (len);
	return 0;
}

int relay_send_control(int fd, uint16_t type, json_t *payload, struct cell_error *err)
{
	return relay_send_json(fd, type, payload, celld_now_ms() + RELAY_BUDGET_MS, err);
}

int relay_file_list(const struct sandbox *sb, json_t *req, unsigned long max,
		    int (*each)(void *cls, const char *path, const struct relay_stat *st),
		    void *cls, struct relay_error *rerr, struct relay_budget *b,
		    struct cell_error *err)
{
	if (!req)
		return cell_err(err, ENOMEM, "FILE_LIST request");
	int64_t deadline = budget_deadline(b, err);
	if (deadline < 0)
		return (int)deadline;
	_cleanup_close_ int fd = request_by(sb, CELL_FRAME_FILE_LIST, req, deadline, err);
	if (fd < 0) {
		budget_spend(b, deadline);
		return fd;
	}
	unsigned long n = 0;
	int r;
	for (;;) {
		struct cell_frame f;
		r = recv_frame(fd, &f, deadline, err);
		if (r < 0) {
			cell_err_wrap(err, "waiting for cell-init: ");
			break;
		}
		if (f.type == CELL_FRAME_END) {
			cell_frame_free(&f);
			break;
		}
		if (f.type == CELL_FRAME_ERROR) {
			r = parse_error(&f, rerr, err) < 0 ? -EPROTO : 1;
			cell_frame_free(&f);
			break;
		}
		json_t *o = NULL;
		if (f.type != CELL_FRAME_ENTRIES)
			r = cell_err(err, EPROTO, "cell-init answered FILE_LIST with %s",
				     cell_frame_type_name(f.type));
		else
			r = frame_json(&f, &o, err);
		cell_frame_free(&f);
		json_t *entries = json_object_get(o, "entries");
		if (r == 0 && !json_is_array(entries))
			r = cell_err(err, EPROTO, "cell-init sent ENTRIES without entries");
		size_t i;
		json_t *e;
		json_array_foreach(entries, i, e)
		{
			if (r < 0)
				break;
			struct relay_stat st;
			const char *path = json_string_value(json_object_get(e, "path"));
			if (++n > max)
				r = cell_err(err, EPROTO, "cell-init sent more than %lu entries",
					     max);
			else if (!path || path[0] != '/' || strlen(path) >= PATH_MAX)
				r = cell_err(err, EPROTO, "cell-init sent an entry without a path");
			else if ((r = parse_stat_obj(e, &st, err)) == 0)
				r = each(cls, path, &st);
		}
		json_decref(o);
		if (r < 0)
			break;
	}
	budget_spend(b, deadline);
	return r;
}

int relay_file_watch(const struct sandbox *sb, json_t *req, int *fdp, struct relay_error *rerr,
		     struct relay_budget *b, struct cell_error *err)
{
	json_t *ok = NULL;
	int r = op_conversation(sb, CELL_FRAME_FILE_WATCH, req, fdp, &ok, rerr, b, err);
	json_decref(ok);
	return r;
}

int relay_watch_next(int fd, json_t **events, struct cell_error *err)
{
	*events = NULL;
	struct cell_frame f;
	int r = recv_frame(fd, &f, -1, err);
	if (r == -ECONNRESET)
		return 0; /* cell-init ended the watch */
	if (r < 0)
		return r;
	json_t *o = NULL;
	if (f.type == CELL_FRAME_END) {
		r = 0;
	} else if (f.type == CELL_FRAME_ERROR) {
		struct relay_error rerr;
		r = parse_error(&f, &rerr, err);
		if (r == 0)
			r = cell_err(err, rerr.errnum, "%s", rerr.message);
	} else if (f.type != CELL_FRAME_EVENTS) {
		r = cell_err(err, EPROTO, "cell-init sent %s during a watch",
			     cell_frame_type_name(f.type));
	} else if ((r = frame_json(&f, &o, err)) == 0) {
		json_t *ev = json_object_get(o, "events");
		if (!json_is_array(ev)) {
			r = cell_err(err, EPROTO, "cell-init sent EVENTS without events");
		} else {
			*events = json_incref(ev);
			r = 1;
		}
	}
	json_decref(o);
	cell_frame_free(&f);
	return r;
}
