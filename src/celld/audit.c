/* celld's audit log and the request context of a thread (audit.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "audit.h"
#include "timefmt.h"

/* ---- the request a thread answers ---- */

static __thread char ctx_rid[136];
static __thread char ctx_who[80];

void audit_context_set(const char *request_id, const char *who)
{
	snprintf(ctx_rid, sizeof(ctx_rid), "%s", request_id ? request_id : "");
	snprintf(ctx_who, sizeof(ctx_who), "%s", who ? who : "");
}

const char *audit_request_id(void)
{
	return ctx_rid;
}

const char *audit_who(void)
{
	return ctx_who[0] ? ctx_who : "celld";
}

/* ---- writing ---- */

static struct {
	pthread_mutex_t lock;
	char *dir;
	int fd; /* -1: closed, records dropped */
	uint64_t size, max;
} lg = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

const char *audit_dir(void)
{
	return lg.dir;
}

static int open_log(int dfd, struct cell_error *err)
{
	int fd =
	    openat(dfd, AUDIT_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/%s", lg.dir, AUDIT_FILE);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "stat %s/%s", lg.dir, AUDIT_FILE);
	}
	fchmod(fd, 0600);
	lg.size = (uint64_t)st.st_size;
	/* A torn last line (a crash mid-write) is ended, so the next record starts a line
	 * of its own; the reader skips the torn one. */
	if (st.st_size > 0) {
		char last = '\n';
		int rfd = openat(dfd, AUDIT_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (rfd >= 0) {
			if (pread(rfd, &last, 1, st.st_size - 1) != 1)
				last = '\n';
			close(rfd);
		}
		if (last != '\n' && write(fd, "\n", 1) == 1)
			lg.size++;
	}
	lg.fd = fd;
	return 0;
}

int audit_open(const char *dir, uint64_t max_bytes, struct cell_error *err)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", dir);
	if (chmod(dir, 0700) < 0)
		return cell_err(err, errno, "chmod %s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(err, errno, "opening %s", dir);
	pthread_mutex_lock(&lg.lock);
	if (lg.fd >= 0)
		close(lg.fd);
	lg.fd = -1;
	free(lg.dir);
	lg.dir = strdup(dir);
	lg.max = max_bytes ? max_bytes : AUDIT_MAX_DEFAULT;
	int r = lg.dir ? open_log(dfd, err) : cell_err(err, ENOMEM, "audit log");
	pthread_mutex_unlock(&lg.lock);
	return r;
}

void audit_close(void)
{
	pthread_mutex_lock(&lg.lock);
	if (lg.fd >= 0)
		close(lg.fd);
	lg.fd = -1;
	free(lg.dir);
	lg.dir = NULL;
	pthread_mutex_unlock(&lg.lock);
}

/* audit.log → .1 → … → .AUDIT_KEEP (the oldest dropped), a new audit.log. Lock held. */
static void rotate_locked(void)
{
	char from[4096], to[4096];
	for (int i = AUDIT_KEEP; i >= 1; i--) {
		if (i > 1)
			snprintf(from, sizeof(from), "%s/%s.%d", lg.dir, AUDIT_FILE, i - 1);
		else
			snprintf(from, sizeof(from), "%s/%s", lg.dir, AUDIT_FILE);
		snprintf(to, sizeof(to), "%s/%s.%d", lg.dir, AUDIT_FILE, i);
		if (rename(from, to) < 0 && errno != ENOENT)
			log_warn("audit: renaming %s: %s", from, strerror(errno));
	}
	close(lg.fd);
	lg.fd = -1;
	struct cell_error err = {0};
	_cleanup_close_ int dfd = open(lg.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || open_log(dfd, &err) < 0)
		log_error("audit: a new %s/%s: %s", lg.dir, AUDIT_FILE,
			  err.msg[0] ? err.msg : strerror(errno));
}

void audit_time_now(char buf[CELLD_TIME_LEN])
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char day[CELLD_TIME_LEN];
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, CELLD_TIME_LEN, "%.20s.%03dZ", day, (int)(ts.tv_nsec / 1000000));
}

char *audit_json_line(json_t *head, json_t *extra, size_t flags, size_t max, size_t *len)
{
	if (!head)
		return NULL;
	json_t *o = json_copy(head);
	const char *k;
	json_t *v;
	json_object_foreach(extra, k, v)
	{
		if (o && !json_object_get(o, k))
			json_object_set(o, k, v);
	}
	char *text = o ? json_dumps(o, flags) : NULL;
	json_decref(o);
	if (text && strlen(text) > max) {
		/* Members larger than a line may be are dropped, the fact kept. */
		free(text);
		json_object_set_new(head, "truncated", json_true());
		text = json_dumps(head, flags);
	}
	json_decref(head);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (!line) {
		free(text);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	*len = n + 1;
	return line;
}

char *audit_line(const char *time_text, const char *request_id, const char *who,
		 const char *sandbox_id, const char *action, json_t *details, size_t *len)
{
	json_t *head = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "time", time_text, "requestId",
				 request_id ? request_id : "", "who", who ? who : "celld",
				 "sandbox", sandbox_id, "action", action);
	return audit_json_line(head, details, JSON_COMPACT, AUDIT_LINE_MAX, len);
}

void audit_log_as(const char *request_id, const char *who, const char *sandbox_id,
		  const char *action, json_t *details)
{
	char t[CELLD_TIME_LEN];
	audit_time_now(t);
	size_t len = 0;
	char *line = audit_line(t, request_id, who, sandbox_id, action, details, &len);
	json_decref(details);
	if (!line) {
		log_error("audit: out of memory for a record of %s", action);
		return;
	}
	pthread_mutex_lock(&lg.lock);
	if (lg.fd >= 0 && lg.size > 0 && lg.size + len > lg.max)
		rotate_locked();
	if (lg.fd >= 0) {
		/* One write(2): the line lands whole or (a crash) torn at its end. */
		ssize_t w = write(lg.fd, line, len);
		if (w < 0)
			log_error("audit: writing %s/%s: %s", lg.dir, AUDIT_FILE, strerror(errno));
		else
			lg.size += (uint64_t)w;
	}
	pthread_mutex_unlock(&lg.lock);
	free(line);
}

void audit_log(const char *sandbox_id, const char *action, json_t *details)
{
	audit_log_as(audit_request_id(), audit_who(), sandbox_id, action, details);
}

/* ---- reading ---- */

struct ring {
	json_t **v;
	size_t cap, n, head; /* the oldest at head */
};

static void ring_push(struct ring *r, json_t *o)
{
	if (r->n < r->cap) {
		r->v[(r->head + r->n++) % r->cap] = o;
		return;
	}
	json_decref(r->v[r->head]);
	r->v[r->head] = o;
	r->head = (r->head + 1) % r->cap;
}

static void read_file(const char *path, const char *sandbox_id, time_t since, struct ring *ring)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		/* A line without its ending is torn (a crash mid-write, or one being written). */
		if (line[n - 1] != '\n')
			break;
		if (sandbox_id && !strstr(line, sandbox_id))
			continue;
		json_t *o = json_loadb(line, (size_t)n, 0, NULL);
		if (!json_is_object(o)) {
			json_decref(o);
			continue;
		}
		const char *sid = json_string_value(json_object_get(o, "sandbox"));
		const char *tt = json_string_value(json_object_get(o, "time"));
		time_t t = 0;
		if ((sandbox_id && (!sid || strcmp(sid, sandbox_id))) ||
		    (since && (!tt || celld_parse_time(tt, &t) < 0 || t < since))) {
			json_decref(o);
			continue;
		}
		ring_push(ring, o);
	}
	free(line);
	fclose(f);
}

int audit_read(const char *dir, const char *sandbox_id, time_t since, size_t limit, json_t **out,
	       struct cell_error *err)
{
	*out = NULL;
	if (!limit || limit > AUDIT_READ_LIMIT_MAX)
		limit = AUDIT_READ_LIMIT_MAX;
	struct ring ring = {.v = calloc(limit, sizeof(json_t *)), .cap = limit};
	json_t *arr = json_array();
	if (!ring.v || !arr) {
		free(ring.v);
		json_decref(arr);
		return cell_err(err, ENOMEM, "reading the audit log");
	}
	char path[4096];
	/* Oldest first: .AUDIT_KEEP … .1, then the live file. A rotation while reading may
	 * show a record twice or skip some: the reader of an audit trail asks again. */
	for (int i = AUDIT_KEEP; i >= 0; i--) {
		if (i)
			snprintf(path, sizeof(path), "%s/%s.%d", dir, AUDIT_FILE, i);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, AUDIT_FILE);
		read_file(path, sandbox_id, since, &ring);
	}
	int r = 0;
	for (size_t i = 0; i < ring.n; i++) {
		json_t *o = ring.v[(ring.head + i) % ring.cap];
		if (r == 0 && json_array_append(arr, o) < 0)
			r = cell_err(err, ENOMEM, "reading the audit log");
		json_decref(o);
	}
	free(ring.v);
	if (r < 0) {
		json_decref(arr);
		return r;
	}
	*out = arr;
	return 0;
}
