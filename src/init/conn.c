/* Relay connections: non-blocking frame input and a bounded output queue.
 *
 * Input is read straight into a per-frame buffer (header first, then at most CELL_FRAME_MAX
 * payload bytes). Output is a list of ready-to-send frames (header + payload in one block)
 * written with sendmsg() of many iovecs at once at the end of each loop iteration, so a
 * burst of output chunks costs one syscall. Producers (command pipes, file reads) stop when
 * conn_queued() passes CONN_HIGH_WATER and ask for a call back with conn_want_drain(): the
 * queue never grows without bound, whatever a command prints.
 *
 * A send the kernel refuses for want of memory (ENOBUFS, ENOMEM: the sandbox's memory
 * cgroup, which its socket buffers are charged to, is full, as when a command fills it with
 * socket buffers of its own) is not the connection's end: the queue waits and is sent again
 * every CONN_RETRY_MS (EPOLLOUT would fire at once and spin) until memory is back or
 * CONN_RETRY_GIVE_UP_MS passed. One timer, made at start, serves every stalled connection:
 * under the pressure that stalls a send, a new timerfd and its epoll entry (both charged to
 * the same memory cgroup) would be refused too, and the connection lost. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cell/log.h"
#include "cell/proto.h"
#include "cell/scm.h"
#include "conn.h"
#include "defer.h"
#include "json.h"
#include "watch.h"

#define CONN_IOV_MAX	       64
#define CONN_FRAMES_PER_WAKEUP 64 /* fairness between connections */
#define CONN_RETRY_MS	       20
#define CONN_RETRY_GIVE_UP_MS  60000

struct seg {
	struct seg *next;
	uint32_t len; /* bytes in data (header + payload) */
	uint32_t off; /* bytes already sent */
	uint8_t data[];
};

struct conn {
	struct init_watch w;
	struct init_deferred dead;
	struct conn *next_dirty;
	bool dirty, flushing, gone, closing, in_eof, drain_wanted;
	uint32_t events; /* current epoll mask */

	/* input: header, then payload */
	uint8_t hdr[CELL_FRAME_HEADER];
	uint32_t hdr_got;
	uint16_t in_type;
	uint32_t in_len, in_got;
	uint8_t *in_payload;

	/* output */
	struct seg *out_head, **out_tail;
	size_t out_bytes;
	uint64_t stalled_ms; /* when sends began to fail for memory; 0: they do not */
	bool stalled;	     /* on the retry timer's list */
	struct conn *next_stalled;

	const struct conn_handler *h;
	void *op;
};

static struct conn *dirty_head;
static int n_conns;
static struct init_watch retry_timer = {.fd = -1};
static struct conn *stalled_head; /* connections the retry timer flushes again */
static bool retry_armed;
static conn_request_fn *request; /* set by the top of the program: picks the operation */

void conn_set_request(conn_request_fn *fn)
{
	request = fn;
}

int conn_count(void)
{
	return n_conns;
}

static void conn_mark_dirty(struct conn *c)
{
	if (c->dirty || c->flushing || c->gone)
		return;
	c->dirty = true;
	c->next_dirty = dirty_head;
	dirty_head = c;
}

static void conn_detach(struct conn *c)
{
	const struct conn_handler *h = c->h;
	void *op = c->op;
	c->h = NULL;
	c->op = NULL;
	c->drain_wanted = false;
	if (h)
		h->closed(op, c);
}

/* Off the retry timer's list (freed connections must not stay on it). */
static void conn_unstall(struct conn *c)
{
	if (!c->stalled)
		return;
	c->stalled = false;
	for (struct conn **p = &stalled_head; *p; p = &(*p)->next_stalled)
		if (*p == c) {
			*p = c->next_stalled;
			break;
		}
}

/* The connection is unusable (peer gone, write error): forget it now. */
static void conn_drop(struct conn *c)
{
	if (c->gone)
		return;
	c->gone = true;
	conn_detach(c);
	conn_unstall(c);
	init_watch_del(&c->w);
	close(c->w.fd);
	c->w.fd = -1;
	free(c->in_payload);
	c->in_payload = NULL;
	for (struct seg *s = c->out_head, *n; s; s = n) {
		n = s->next;
		free(s);
	}
	c->out_head = NULL;
	c->out_bytes = 0;
	n_conns--;
	init_defer_free(&c->dead, c);
}

static void conn_update_events(struct conn *c)
{
	if (c->gone)
		return;
	uint32_t ev = 0;
	if (!c->closing && !c->in_eof)
		ev |= EPOLLIN;
	if ((c->out_head || c->drain_wanted) && !c->stalled_ms)
		ev |= EPOLLOUT;
	if (ev != c->events && init_watch_mod(&c->w, ev) == 0)
		c->events = ev;
}

/* Returns 0 (all sent or the socket is full) or -errno. */
static int conn_write_some(struct conn *c)
{
	while (c->out_head) {
		struct iovec iov[CONN_IOV_MAX];
		int n_iov = 0;
		size_t total = 0;
		for (struct seg *s = c->out_head; s && n_iov < CONN_IOV_MAX; s = s->next) {
			iov[n_iov].iov_base = s->data + s->off;
			iov[n_iov].iov_len = s->len - s->off;
			total += iov[n_iov].iov_len;
			n_iov++;
		}
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = n_iov};
		ssize_t n = sendmsg(c->w.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		size_t left = n;
		c->out_bytes -= left;
		while (left) {
			struct seg *s = c->out_head;
			size_t rest = s->len - s->off;
			if (left < rest) {
				s->off += left;
				break;
			}
			left -= rest;
			c->out_head = s->next;
			free(s);
		}
		if (!c->out_head)
			c->out_tail = &c->out_head;
		if ((size_t)n < total)
			return 0; /* socket buffer full: wait for EPOLLOUT */
	}
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void conn_flush(struct conn *c);

/* The retry timer fired: flush every stalled connection once (those still refused go
 * back on the list). A connection dropped meanwhile is skipped: its memory is freed only at
 * the end of the loop's turn. */
static void retry_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	uint64_t x;
	ssize_t n = read(w->fd, &x, sizeof(x));
	(void)n;
	retry_armed = false;
	struct conn *due = stalled_head;
	stalled_head = NULL;
	for (struct conn *c = due, *next; c; c = next) {
		next = c->next_stalled;
		if (!c->stalled)
			continue;
		c->stalled = false;
		conn_flush(c);
	}
}

int conn_setup(void)
{
	retry_timer.fn = retry_event;
	retry_timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (retry_timer.fd < 0)
		return -errno;
	int r = init_watch_add(&retry_timer, EPOLLIN);
	if (r < 0)
		init_watch_close(&retry_timer);
	return r;
}

/* A send failed for want of memory: 0 when it is tried again in CONN_RETRY_MS, -errno when
 * the connection is to go (no timer, or it has waited CONN_RETRY_GIVE_UP_MS). */
static int conn_retry_later(struct conn *c, int err)
{
	uint64_t now = mono_ms();
	if (!c->stalled_ms) {
		c->stalled_ms = now ? now : 1;
		log_debug("relay connection: send: %s: trying again", strerror(err));
	} else if (now - c->stalled_ms > CONN_RETRY_GIVE_UP_MS) {
		return -err;
	}
	if (retry_timer.fd < 0)
		return -err;
	if (!c->stalled) {
		c->stalled = true;
		c->next_stalled = stalled_head;
		stalled_head = c;
	}
	if (!retry_armed) {
		struct itimerspec its = {.it_value = {.tv_nsec = CONN_RETRY_MS * 1000000L}};
		retry_armed = timerfd_settime(retry_timer.fd, 0, &its, NULL) == 0;
	}
	return 0;
}

static void conn_flush(struct conn *c)
{
	if (c->gone)
		return;
	c->flushing = true;
	for (int round = 0; round < 2; round++) {
		int r = conn_write_some(c);
		if (r == -ENOBUFS || r == -ENOMEM)
			r = conn_retry_later(c, -r);
		else if (r == 0)
			c->stalled_ms = 0;
		if (r < 0) {
			log_debug("relay connection: send: %s", strerror(-r));
			c->flushing = false;
			conn_drop(c);
			return;
		}
		if (c->out_bytes < CONN_LOW_WATER && c->drain_wanted && c->h) {
			c->drain_wanted = false;
			c->h->drain(c->op, c);
			if (c->gone)
				return;
			continue;
		}
		break;
	}
	c->flushing = false;
	if (c->closing && !c->out_head) {
		conn_drop(c);
		return;
	}
	conn_update_events(c);
}

void conn_flush_dirty(void)
{
	while (dirty_head) {
		struct conn *c = dirty_head;
		dirty_head = c->next_dirty;
		c->dirty = false;
		conn_flush(c);
	}
}

static void conn_queue(struct conn *c, struct seg *s)
{
	if (c->gone) {
		free(s);
		return;
	}
	s->next = NULL;
	s->off = 0;
	*c->out_tail = s;
	c->out_tail = &s->next;
	c->out_bytes += s->len;
	conn_mark_dirty(c);
}

void conn_send(struct conn *c, uint16_t type, const void *payload, uint32_t len)
{
	if (c->gone)
		return;
	if (len > CELL_FRAME_MAX) {
		log_error("refusing to send a %s frame of %u bytes", cell_frame_type_name(type),
			  len);
		conn_drop(c);
		return;
	}
	struct seg *s = malloc(sizeof(*s) + CELL_FRAME_HEADER + len);
	if (!s) {
		log_error("out of memory queueing a %s frame", cell_frame_type_name(type));
		conn_drop(c);
		return;
	}
	cell_frame_header_encode(s->data, type, len);
	if (len)
		memcpy(s->data + CELL_FRAME_HEADER, payload, len);
	s->len = CELL_FRAME_HEADER + len;
	conn_queue(c, s);
}

void conn_send_json(struct conn *c, uint16_t type, json_t *obj)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!text) {
		log_error("out of memory encoding a %s frame", cell_frame_type_name(type));
		conn_drop(c);
		return;
	}
	conn_send(c, type, text, strlen(text));
	free(text);
}

/* One frame with a descriptor attached (SCM_RIGHTS), sent at once: only as the first
 * answer of a conversation, when nothing else waits in the queue. */
void conn_send_json_with_fd(struct conn *c, uint16_t type, json_t *obj, int fd)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!text || c->out_head || c->gone) {
		log_error("cannot send a %s frame with a descriptor", cell_frame_type_name(type));
		free(text);
		conn_drop(c);
		return;
	}
	uint8_t hdr[CELL_FRAME_HEADER];
	size_t len = strlen(text);
	cell_frame_header_encode(hdr, type, (uint32_t)len);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {text, len}};
	long n = cell_scm_send_fd(c->w.fd, iov, 2, fd, MSG_DONTWAIT);
	free(text);
	if (n != (ssize_t)(sizeof(hdr) + len)) {
		log_debug("relay connection: sending a descriptor: %s",
			  n < 0 ? strerror((int)-n) : "short send");
		conn_drop(c);
	}
}

void conn_send_error(struct conn *c, int errnum, const char *msg)
{
	json_t *o = json_object();
	if (o) {
		json_object_set_new(o, "errno", json_integer(errnum));
		json_object_set_new(o, "message", init_json_string_lossy(msg, strlen(msg)));
	}
	conn_send_json(c, CELL_FRAME_ERROR, o);
}

long conn_send_from_fd(struct conn *c, uint16_t type, int fd, uint32_t max, int64_t pread_off)
{
	if (max > CELL_FRAME_CHUNK)
		max = CELL_FRAME_CHUNK;
	struct seg *s = malloc(sizeof(*s) + CELL_FRAME_HEADER + max);
	if (!s)
		return -ENOMEM;
	ssize_t n;
	do
		n = pread_off >= 0 ? pread(fd, s->data + CELL_FRAME_HEADER, max, pread_off)
				   : read(fd, s->data + CELL_FRAME_HEADER, max);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		int e = n < 0 ? errno : 0;
		free(s);
		return -e;
	}
	/* A short read of a large block: give the slack back, so many small chunks queued up
	 * to the high-water mark cannot pin 64 KiB each. */
	if ((size_t)n < max / 2) {
		struct seg *t = realloc(s, sizeof(*s) + CELL_FRAME_HEADER + n);
		if (t)
			s = t;
	}
	cell_frame_header_encode(s->data, type, (uint32_t)n);
	s->len = CELL_FRAME_HEADER + (uint32_t)n;
	if (c && !c->gone)
		conn_queue(c, s);
	else
		free(s);
	return n;
}

void conn_grow_sndbuf(struct conn *c)
{
	int size = CONN_BULK_SNDBUF;
	if (!c->gone)
		setsockopt(c->w.fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

size_t conn_queued(const struct conn *c)
{
	return c->out_bytes;
}

void conn_want_drain(struct conn *c)
{
	if (c->gone)
		return;
	c->drain_wanted = true;
	conn_mark_dirty(c);
	if (c->flushing)
		return; /* conn_flush re-evaluates the mask when it is done */
	conn_update_events(c);
}

void conn_finish(struct conn *c)
{
	if (c->gone || c->closing)
		return;
	c->closing = true;
	conn_detach(c);
	free(c->in_payload);
	c->in_payload = NULL;
	conn_mark_dirty(c);
	if (!c->flushing)
		conn_update_events(c);
}

void conn_fail(struct conn *c, int errnum, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Framing errors mean a broken peer; operation errors (a missing file) are routine. */
	if (errnum == EPROTO || errnum == EMSGSIZE)
		log_warn("relay connection dropped: %s", msg);
	else
		log_debug("relay request refused: %s", msg);
	if (c->gone || c->closing)
		return;
	conn_send_error(c, errnum, msg);
	conn_finish(c);
}

void conn_attach(struct conn *c, const struct conn_handler *h, void *op)
{
	c->h = h;
	c->op = op;
}

static void conn_deliver(struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	if (c->h)
		c->h->frame(c->op, c, type, payload, len);
	else
		request(c, type, payload, len);
}

/* Read and dispatch frames. Returns false when the connection is gone. */
static bool conn_read(struct conn *c)
{
	for (int frames = 0; frames < CONN_FRAMES_PER_WAKEUP;) {
		if (c->gone)
			return false;
		if (c->closing || c->in_eof)
			return true;
		uint8_t *dst;
		size_t want;
		if (c->hdr_got < CELL_FRAME_HEADER) {
			dst = c->hdr + c->hdr_got;
			want = CELL_FRAME_HEADER - c->hdr_got;
		} else {
			dst = c->in_payload + c->in_got;
			want = c->in_len - c->in_got;
		}
		ssize_t n = read(c->w.fd, dst, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return true;
			conn_drop(c);
			return false;
		}
		if (n == 0) {
			bool idle = c->hdr_got == 0;
			if (!idle || !c->h || !c->h->keep_on_eof) {
				/* EOF mid-frame, before a request, or while celld still had to
				 * send (FILE_WRITE): nothing more can happen here. */
				conn_drop(c);
				return false;
			}
			c->in_eof = true;
			conn_update_events(c);
			return true;
		}
		if (c->hdr_got < CELL_FRAME_HEADER) {
			c->hdr_got += n;
			if (c->hdr_got < CELL_FRAME_HEADER)
				continue;
			int r = cell_frame_header_decode(c->hdr, CELL_FRAME_MAX, &c->in_type,
							 &c->in_len);
			if (r < 0) {
				/* The stream cannot be resynchronised after a bad header. */
				conn_fail(c, -r, "bad frame header (type %u, length %u)",
					  (unsigned)(c->hdr[4] << 8 | c->hdr[5]),
					  (unsigned)((uint32_t)c->hdr[0] << 24 | c->hdr[1] << 16 |
						     c->hdr[2] << 8 | c->hdr[3]));
				return !c->gone;
			}
			c->in_got = 0;
			c->in_payload = malloc(c->in_len + 1);
			if (!c->in_payload) {
				conn_fail(c, ENOMEM, "frame of %u bytes", c->in_len);
				return !c->gone;
			}
		} else {
			c->in_got += n;
		}
		if (c->in_got < c->in_len)
			continue;
		/* A whole frame: hand it over and start the next one. */
		uint8_t *payload = c->in_payload;
		uint32_t len = c->in_len;
		payload[len] = '\0';
		c->in_payload = NULL;
		c->hdr_got = 0;
		c->in_len = c->in_got = 0;
		conn_deliver(c, c->in_type, payload, len);
		free(payload);
		frames++;
	}
	return true;
}

static void conn_event(struct init_watch *w, uint32_t events)
{
	struct conn *c = init_container_of(w, struct conn, w);
	if (events & EPOLLIN) {
		if (!conn_read(c))
			return;
	}
	if (events & (EPOLLERR | EPOLLHUP)) {
		/* celld closed its end: a running command keeps running, output is
		 * discarded from now on. */
		conn_drop(c);
		return;
	}
	if (events & EPOLLOUT)
		conn_mark_dirty(c);
}

void conn_new(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		log_error("out of memory accepting a relay connection");
		close(fd);
		return;
	}
	c->w.fn = conn_event;
	c->w.fd = fd;
	c->out_tail = &c->out_head;
	c->events = EPOLLIN;
	if (init_watch_add(&c->w, EPOLLIN) < 0) {
		close(fd);
		free(c);
		return;
	}
	n_conns++;
}

json_t *conn_parse_json(struct conn *c, const uint8_t *payload, uint32_t len, const char *what)
{
	json_error_t jerr;
	/* jansson refuses \u0000 in strings (no JSON_ALLOW_NUL), so every string below is a
	 * C string without an embedded NUL, and bounds nesting depth itself. */
	json_t *o = json_loadb((const char *)payload, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o) {
		conn_fail(c, EINVAL, "%s: malformed JSON at offset %d: %s", what, jerr.position,
			  jerr.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		conn_fail(c, EINVAL, "%s: payload is not a JSON object", what);
		return NULL;
	}
	return o;
}

int conn_parse_signal(struct conn *c, uint16_t type, const uint8_t *payload, uint32_t len,
		      const char *during)
{
	if (type != CELL_FRAME_SIGNAL) {
		conn_fail(c, EPROTO, "unexpected %s frame while %s runs",
			  cell_frame_type_name(type), during);
		return -1;
	}
	json_t *req = conn_parse_json(c, payload, len, "SIGNAL");
	if (!req)
		return -1;
	json_t *j = json_object_get(req, "signal");
	json_int_t sig = json_is_integer(j) ? json_integer_value(j) : -1;
	json_decref(req);
	if (sig < 1 || sig >= NSIG) {
		conn_fail(c, EINVAL, "SIGNAL: signal must be an integer in 1..%d", NSIG - 1);
		return -1;
	}
	return (int)sig;
}

const char *conn_req_id(struct conn *c, json_t *req, const char *what)
{
	const char *id = json_string_value(json_object_get(req, "id"));
	size_t n = id ? strlen(id) : 0;
	bool ok = n && n <= CONN_ID_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)id[i]) || strchr("._-", id[i]);
	if (!ok) {
		conn_fail(c, EINVAL, "%s: id must be 1-%d letters, digits, '.', '-' or '_'", what,
			  CONN_ID_MAX);
		return NULL;
	}
	return id;
}
