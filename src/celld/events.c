/* A sandbox's events (events.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/log.h"
#include "audit.h"
#include "config.h"
#include "events.h"
#include "timefmt.h"

/* What this process keeps per sandbox: its next seq, its OOM count. */
struct chan {
	char id[80];
	uint64_t next; /* 0: not read from the file yet */
	uint64_t oom;
	bool oom_known;
	struct chan *link;
};

static struct {
	pthread_mutex_t lock; /* the channels, every append; a leaf lock */
	pthread_cond_t cond;  /* broadcast on every event */
	uint64_t gen;
	struct chan *chans;
} ev = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static struct chan *chan_of_locked(const char *id, bool make)
{
	for (struct chan *c = ev.chans; c; c = c->link)
		if (!strcmp(c->id, id))
			return c;
	if (!make)
		return NULL;
	struct chan *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->link = ev.chans;
	ev.chans = c;
	return c;
}

static bool id_ok(const char *id)
{
	return id && id[0] && strlen(id) < 80 && !strchr(id, '/') && strcmp(id, ".") &&
	       strcmp(id, "..");
}

/* The seq of a line ("{"seq":N,...}"), 0 when it has none. */
static uint64_t line_seq(const char *line, size_t n)
{
	static const char key[] = "{\"seq\":";
	if (n < sizeof(key) || memcmp(line, key, sizeof(key) - 1))
		return 0;
	return strtoull(line + sizeof(key) - 1, NULL, 10);
}

/* The largest seq of a file (0: none or no file). */
static uint64_t file_last_seq(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return 0;
	}
	uint64_t last = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		uint64_t s = line_seq(line, (size_t)n);
		if (s > last)
			last = s;
	}
	free(line);
	fclose(f);
	return last;
}

static char *event_line(uint64_t seq, const char *type, json_t *data, size_t *len)
{
	char t[32];
	audit_time_now(t);
	/* seq first: readers find it without parsing the line. */
	json_t *head =
	    json_pack("{s:I, s:s, s:s}", "seq", (json_int_t)seq, "time", t, "type", type);
	return audit_json_line(head, data, JSON_COMPACT | JSON_PRESERVE_ORDER, EVENTS_LINE_MAX,
			       len);
}

uint64_t events_emit_at(int sandboxes_fd, const char *id, const char *type, json_t *data,
			uint64_t max_bytes)
{
	uint64_t seq = 0;
	if (!id_ok(id) || !type) {
		json_decref(data);
		return 0;
	}
	pthread_mutex_lock(&ev.lock);
	int dfd = openat(sandboxes_fd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct chan *c = dfd >= 0 ? chan_of_locked(id, true) : NULL;
	if (c && !c->next) {
		uint64_t a = file_last_seq(dfd, EVENTS_FILE);
		uint64_t b = a ? a : file_last_seq(dfd, EVENTS_FILE ".1");
		c->next = (a > b ? a : b) + 1;
	}
	size_t len = 0;
	char *line = c ? event_line(c->next, type, data, &len) : NULL;
	int fd = line ? openat(dfd, EVENTS_FILE,
			       O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)
		      : -1;
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
	    (uint64_t)st.st_size + len > max_bytes) {
		close(fd);
		if (renameat(dfd, EVENTS_FILE, dfd, EVENTS_FILE ".1") < 0)
			log_warn("sandbox %s: rotating its events: %s", id, strerror(errno));
		fd = openat(dfd, EVENTS_FILE,
			    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd >= 0) {
		if (write(fd, line, len) == (ssize_t)len) {
			seq = c->next++;
			ev.gen++;
			pthread_cond_broadcast(&ev.cond);
		}
		close(fd);
	}
	if (dfd >= 0)
		close(dfd);
	pthread_mutex_unlock(&ev.lock);
	free(line);
	json_decref(data);
	return seq;
}

uint64_t events_emit(const char *id, const char *type, json_t *data)
{
	if (celld.sandboxes_fd < 0) {
		json_decref(data);
		return 0;
	}
	return events_emit_at(celld.sandboxes_fd, id, type, data, EVENTS_MAX_BYTES);
}

void events_check_oom(const char *id, const char *cgroup_rel)
{
	if (!id_ok(id) || !cgroup_rel || !cgroup_rel[0] || !celld.cgroup ||
	    !celld.cgroup->oom_kills)
		return;
	events_oom_count(id, celld.cgroup->oom_kills(cgroup_rel));
}

void events_oom_count(const char *id, uint64_t n)
{
	if (!id_ok(id))
		return;
	pthread_mutex_lock(&ev.lock);
	struct chan *c = chan_of_locked(id, true);
	uint64_t grew = 0;
	if (c && c->oom_known && n > c->oom)
		grew = n - c->oom;
	if (c && (!c->oom_known || n > c->oom)) {
		c->oom = n;
		c->oom_known = true;
	}
	pthread_mutex_unlock(&ev.lock);
	if (grew)
		events_emit(
		    id, "oom",
		    json_pack("{s:I, s:I}", "killed", (json_int_t)grew, "total", (json_int_t)n));
}

void events_forget(const char *id)
{
	pthread_mutex_lock(&ev.lock);
	for (struct chan **pp = &ev.chans; *pp; pp = &(*pp)->link) {
		if (!strcmp((*pp)->id, id)) {
			struct chan *c = *pp;
			*pp = c->link;
			free(c);
			break;
		}
	}
	/* Readers look again: their sandbox may be gone. */
	ev.gen++;
	pthread_cond_broadcast(&ev.cond);
	pthread_mutex_unlock(&ev.lock);
}

uint64_t events_generation(void)
{
	pthread_mutex_lock(&ev.lock);
	uint64_t g = ev.gen;
	pthread_mutex_unlock(&ev.lock);
	return g;
}

void events_wait(uint64_t gen, int timeout_ms)
{
	struct timespec until;
	celld_deadline(timeout_ms, &until);
	pthread_mutex_lock(&ev.lock);
	while (ev.gen == gen)
		if (pthread_cond_timedwait(&ev.cond, &ev.lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&ev.lock);
}

/* ---- readers ---- */

void events_cursor_init(struct events_cursor *c, int sandboxes_fd, const char *id, uint64_t since)
{
	*c = (struct events_cursor){.sandboxes_fd = sandboxes_fd, .last = since, .fd = -1};
	snprintf(c->id, sizeof(c->id), "%s", id);
}

void events_cursor_close(struct events_cursor *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int grow(char **out, size_t *len, const char *s, size_t n)
{
	char *p = realloc(*out, *len + n + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p + *len, s, n);
	*len += n;
	p[*len] = '\0';
	*out = p;
	return 0;
}

int events_sse_append(const char *line, size_t n, char **out, size_t *len)
{
	json_t *o = json_loadb(line, n, 0, NULL);
	const char *type = json_string_value(json_object_get(o, "type"));
	json_int_t seq = json_integer_value(json_object_get(o, "seq"));
	char head[160];
	int hn =
	    snprintf(head, sizeof(head), "id: %" PRId64 "\nevent: %.100s\ndata: ", (int64_t)seq,
		     type ? type : "event");
	json_decref(o);
	if (grow(out, len, head, (size_t)hn) < 0 || grow(out, len, line, n) < 0 ||
	    grow(out, len, "\n\n", 2) < 0)
		return -ENOMEM;
	return 0;
}

/* Whole lines of fd from *off on, those after c->last onto *out. */
static int read_lines(struct events_cursor *c, int fd, uint64_t *off, char **out, size_t *len)
{
	int count = 0;
	char buf[64 << 10];
	char *pend = NULL; /* a line longer than buf, being put together */
	size_t plen = 0;
	for (;;) {
		ssize_t got = pread(fd, buf, sizeof(buf), (off_t)(*off + plen));
		if (got <= 0)
			break;
		size_t start = 0;
		for (size_t i = 0; i < (size_t)got; i++) {
			if (buf[i] != '\n')
				continue;
			const char *line = buf + start;
			size_t n = i - start;
			if (plen) {
				if (grow(&pend, &plen, line, n) < 0) {
					free(pend);
					return -ENOMEM;
				}
				line = pend;
				n = plen;
			}
			uint64_t seq = line_seq(line, n);
			if (seq > c->last) {
				if (events_sse_append(line, n, out, len) < 0) {
					free(pend);
					return -ENOMEM;
				}
				c->last = seq;
				count++;
			}
			*off += n + 1;
			free(pend);
			pend = NULL;
			plen = 0;
			start = i + 1;
		}
		if (start < (size_t)got) {
			/* The rest of a line (its end not written yet, or beyond buf). */
			if (plen + (size_t)got - start > EVENTS_LINE_MAX * 2) {
				/* Not one of ours: skip to its end later. */
				free(pend);
				return count;
			}
			if (grow(&pend, &plen, buf + start, (size_t)got - start) < 0) {
				free(pend);
				return -ENOMEM;
			}
		}
	}
	free(pend);
	return count;
}

int events_cursor_read(struct events_cursor *c, char **out, size_t *len)
{
	int dfd = openat(c->sandboxes_fd, c->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int count = 0, r;
	if (!c->started) {
		c->started = true;
		/* The rotated file first, when it may hold what the reader wants. */
		int old = dfd >= 0
			      ? openat(dfd, EVENTS_FILE ".1", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
			      : -1;
		if (old >= 0) {
			uint64_t off = 0;
			r = read_lines(c, old, &off, out, len);
			close(old);
			if (r < 0)
				goto fail;
			count += r;
		}
	}
	for (int round = 0; round < 3; round++) {
		if (c->fd < 0 && dfd >= 0) {
			c->fd = openat(dfd, EVENTS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			c->off = 0;
		}
		if (c->fd < 0)
			break;
		r = read_lines(c, c->fd, &c->off, out, len);
		if (r < 0)
			goto fail;
		count += r;
		/* Rotated since it was opened: the rest of the old one was just read; go on
		 * with the new one. */
		struct stat a, b;
		if (dfd < 0 || fstat(c->fd, &a) < 0 || fstatat(dfd, EVENTS_FILE, &b, 0) < 0 ||
		    (a.st_ino == b.st_ino && a.st_dev == b.st_dev))
			break;
		/* What reached the old file between the read above and its rename: nothing
		 * is written to it once renamed. */
		r = read_lines(c, c->fd, &c->off, out, len);
		if (r < 0)
			goto fail;
		count += r;
		close(c->fd);
		c->fd = -1;
	}
	if (dfd >= 0)
		close(dfd);
	return count;
fail:
	if (dfd >= 0)
		close(dfd);
	return -ENOMEM;
}
