/* envd's filesystem service (Connect, JSON): Stat, ListDir, MakeDir, Move, Remove, each a
 * call of the files service (sbfile.h: stat, list, mkdir, move, remove) made as the call's
 * user (e2b_user_lookup: relative paths below its home, what it creates owned by it),
 * answered with envd's EntryInfo, and the watches (WatchDir; the polling watchers, kept on
 * the sandbox: file_watchers.h) on the service's watch. cell-init resolves every path
 * beneath the sandbox's root (RESOLVE_IN_ROOT); here paths are only checked to be NUL-free
 * text of bounded length. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "e2b.h"
#include "fields.h"
#include "file_watchers.h"
#include "http/http.h"
#include "sandbox.h"
#include "sbfile.h"
#include "http/sse.h"
#include "timefmt.h"

/* ---- EntryInfo ---- */

static const char *entry_type(const char *type)
{
	if (!strcmp(type, "file"))
		return "FILE_TYPE_FILE";
	if (!strcmp(type, "directory"))
		return "FILE_TYPE_DIRECTORY";
	if (!strcmp(type, "symlink"))
		return "FILE_TYPE_SYMLINK";
	return "FILE_TYPE_UNSPECIFIED"; /* the SDK leaves such entries out */
}

/* envd's permissions string, as Go prints a file mode: the type and special-bit letters
 * (d, L, u, g, t; '-' when none), then rwx three times. */
static void permissions(const char *type, uint32_t mode, char out[16])
{
	size_t n = 0;
	if (!strcmp(type, "directory"))
		out[n++] = 'd';
	if (!strcmp(type, "symlink"))
		out[n++] = 'L';
	if (mode & 04000)
		out[n++] = 'u';
	if (mode & 02000)
		out[n++] = 'g';
	if (mode & 01000)
		out[n++] = 't';
	if (!n)
		out[n++] = '-';
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[n++] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[n] = '\0';
}

/* RFC 3339 in UTC with nanoseconds, as protobuf's JSON spells a Timestamp. */
static void rfc3339(double t, char out[48])
{
	time_t s = t > 0 ? (time_t)t : 0;
	long ns = (long)((t - (double)s) * 1e9);
	if (ns < 0 || ns > 999999999)
		ns = 0;
	struct tm tm;
	gmtime_r(&s, &tm);
	char base[32];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 48, "%s.%09ldZ", base, ns);
}

/* A symlink's target as envd gives it: absolute, a relative link's text taken from the
 * link's directory, "." and ".." resolved by name (nothing is looked up: the answer
 * describes the link, whatever exists at its end). */
static void link_target(const char *link, const char *text, char *out, size_t size)
{
	char joined[2 * PATH_MAX];
	if (text[0] == '/') {
		snprintf(joined, sizeof(joined), "%s", text);
	} else {
		const char *slash = strrchr(link, '/');
		int dir = slash ? (int)(slash - link) : 0;
		snprintf(joined, sizeof(joined), "%.*s/%s", dir, link, text);
	}
	size_t n = 0;
	out[0] = '\0';
	char *save = NULL;
	for (char *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		if (!strcmp(seg, "."))
			continue;
		if (!strcmp(seg, "..")) {
			char *up = strrchr(out, '/');
			n = up ? (size_t)(up - out) : 0;
			out[n] = '\0';
			continue;
		}
		int w = snprintf(out + n, size - n, "/%s", seg);
		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
	}
	if (!n)
		snprintf(out, size, "/");
}

/* The EntryInfo of path; NULL when a name is not UTF-8 (or out of memory). */
static json_t *entry_info(const char *path, const sbfile_info *st)
{
	char trimmed[PATH_MAX];
	snprintf(trimmed, sizeof(trimmed), "%s", path);
	for (size_t len = strlen(trimmed); len > 1 && trimmed[len - 1] == '/';)
		trimmed[--len] = '\0';
	const char *slash = strrchr(trimmed, '/');
	const char *name = slash && slash[1] ? slash + 1 : trimmed;
	char size[24], perms[16], mt[48];
	snprintf(size, sizeof(size), "%lld", (long long)st->size);
	permissions(st->type, st->mode, perms);
	rfc3339(st->mtime, mt);
	json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "name", name, "type",
			      entry_type(st->type), "path", trimmed, "size", size, "mode",
			      (json_int_t)st->mode, "permissions", perms, "owner", st->owner,
			      "group", st->group, "modifiedTime", mt);
	if (e && st->target[0]) {
		char target[PATH_MAX];
		link_target(trimmed, st->target, target, sizeof(target));
		json_object_set_new(e, "symlinkTarget", json_string(target));
	}
	json_t *meta = e ? sbfile_info_meta(st) : NULL;
	if (meta)
		json_object_set_new(e, "metadata", meta);
	return e;
}

/* ---- one call ---- */

struct fs_call {
	struct http_req *r;
	bool stream; /* a streaming call: its errors answered in its body */
	struct sandbox *sb;
	struct e2b_user user;
	sbfile_budget b;
	json_t *msg;
	char path[PATH_MAX];  /* the first path member, resolved */
	char path2[PATH_MAX]; /* the second (Move's destination) */
};

/* The files service's caller: the sandbox, as the call's user, on its budget. */
static struct sbfile_ctx fs_ctx(struct fs_call *c)
{
	return (struct sbfile_ctx){c->sb, c->user.name, &c->b};
}

static void fs_end(struct fs_call *c)
{
	json_decref(c->msg);
	if (c->sb)
		sandbox_unref(c->sb);
}

/* An error before any answer, in the form the call takes. Returns 0. */
static int fs_error(struct fs_call *c, enum connect_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fs_error(struct fs_call *c, enum connect_code code, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return c->stream ? connect_stream_error(c->r, code, "%s", msg)
			 : connect_error(c->r, code, "%s", msg);
}

/* The path member key of the request, resolved for the call's user. 0, or -1 answered. */
static int fs_path(struct fs_call *c, const char *key, char out[PATH_MAX])
{
	json_t *v = json_object_get(c->msg, key);
	if (!v || !json_is_clean_string(v) || !json_string_length(v)) {
		fs_error(c, CONNECT_INVALID_ARGUMENT, "%s must be a non-empty path", key);
		return -1;
	}
	int rc = e2b_user_path(&c->user, json_string_value(v), out);
	if (rc < 0) {
		fs_error(c, CONNECT_INVALID_ARGUMENT, "%s: path longer than %d bytes", key,
			 PATH_MAX - 1);
		return -1;
	}
	return 0;
}

/* The request (only the fields named, the path ones first; any other is refused), its
 * sandbox, its user and its paths. 0, or -1 answered. */
static int fs_begin(struct http_req *r, const char *const *fields, unsigned paths,
		    struct fs_call *c)
{
	if (connect_request(r, c->stream, &c->msg) < 0)
		return -1;
	const char *key;
	json_t *v;
	json_object_foreach(c->msg, key, v)
	{
		bool known = false;
		for (const char *const *f = fields; *f && !known; f++)
			known = !strcmp(*f, key);
		if (!known)
			return fs_error(c, CONNECT_INVALID_ARGUMENT, "unknown field %.64s", key),
			       -1;
	}
	char name[E2B_USER_NAME_MAX + 1];
	if (e2b_rpc_user_name(r, name) < 0)
		return fs_error(c, CONNECT_INVALID_ARGUMENT,
				"Authorization must be Basic base64(\"<user>:\") naming a "
				"user"),
		       -1;
	c->sb = e2b_envd_sandbox(r, c->stream);
	if (!c->sb)
		return -1;
	struct cell_error err = {0};
	if (e2b_user_lookup(c->sb, name, &c->user, &c->b, &err) < 0)
		return fs_error(c,
				err.code == ENOENT ? CONNECT_INVALID_ARGUMENT
						   : connect_code_from_errno(err.code),
				"%s", err.msg),
		       -1;
	sandbox_touch(c->sb);
	if (paths >= 1 && fs_path(c, fields[0], c->path) < 0)
		return -1;
	if (paths >= 2 && fs_path(c, fields[1], c->path2) < 0)
		return -1;
	return 0;
}

/* One call: its request checked, then op, which answers. */
static int fs_run(struct http_req *r, const char *const *fields, unsigned paths,
		  void (*op)(struct fs_call *c))
{
	struct fs_call c = {.r = r, .b = SBFILE_BUDGET_INIT};
	if (fs_begin(r, fields, paths, &c) == 0)
		op(&c);
	fs_end(&c);
	return 0;
}

/* A failure of the files service about path: cell-init's refusal (1) or the relay's
 * (-errno). */
static int fs_fail(struct fs_call *c, const char *path, int rc, const struct cell_error *err)
{
	int errnum = err->code;
	if (errnum == ENOSPC)
		errnum = EDQUOT; /* the sandbox's own layer at its quota */
	const char *msg = err->msg;
	if (errnum == ENOENT)
		return connect_error(c->r, CONNECT_NOT_FOUND, "path not found: %.1024s: %s", path,
				     msg);
	return connect_error(c->r, rc == 1 ? connect_code_from_errno(errnum) : CONNECT_INTERNAL,
			     "%.1024s: %s", path, msg);
}

/* The entry path names (a symlink itself): 0, or -1 answered. */
static int fs_stat(struct fs_call *c, const char *path, sbfile_info *st)
{
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	int rc = sbfile_stat(&fc, path, st, &err);
	return rc == 0 ? 0 : (fs_fail(c, path, rc, &err), -1);
}

/* {"entry": EntryInfo of path} as the answer. */
static void reply_entry(struct fs_call *c, const char *path)
{
	sbfile_info st;
	if (fs_stat(c, path, &st) < 0)
		return;
	json_t *e = entry_info(path, &st);
	if (!e)
		connect_error(c->r, CONNECT_INTERNAL, "%.1024s: a name is not UTF-8", path);
	else
		connect_reply(c->r, json_pack("{s:o}", "entry", e));
}

/* ---- the calls ---- */

static void op_stat(struct fs_call *c)
{
	reply_entry(c, c->path);
}

int e2b_fs_stat(struct http_req *r)
{
	static const char *const fields[] = {"path", NULL};
	return fs_run(r, fields, 1, op_stat);
}

static int add_entry(void *cls, const char *path, const sbfile_info *st)
{
	json_t *e = entry_info(path, st);
	if (!e)
		return 0; /* a name that is not UTF-8 cannot be said in JSON: left out */
	return json_array_append_new(cls, e) == 0 ? 0 : -ENOMEM;
}

static void op_list_dir(struct fs_call *c)
{
	json_t *jd = json_object_get(c->msg, "depth");
	int64_t depth = 1;
	/* proto3 leaves a 0 out: no depth is envd's default, 1. */
	if (jd && (connect_int64(jd, &depth) < 0 || depth < 0 || depth > SBFILE_LIST_DEPTH_MAX)) {
		connect_error(c->r, CONNECT_INVALID_ARGUMENT,
			      "depth must be an integer from 1 to %d", SBFILE_LIST_DEPTH_MAX);
		return;
	}
	if (depth == 0)
		depth = 1;
	sbfile_info st;
	if (fs_stat(c, c->path, &st) < 0)
		return;
	/* A symlink is followed (confined) by the listing, which refuses a non-directory. */
	if (strcmp(st.type, "directory") && strcmp(st.type, "symlink")) {
		connect_error(c->r, CONNECT_INVALID_ARGUMENT, "path is not a directory: %.1024s",
			      c->path);
		return;
	}
	struct cell_error err = {0};
	/* A trailing '/' has cell-init follow a last symlink (confined) to its directory. */
	char lpath[PATH_MAX + 1];
	snprintf(lpath, sizeof(lpath), "%s%s", c->path, strcmp(st.type, "symlink") ? "" : "/");
	struct sbfile_ctx fc = fs_ctx(c);
	json_t *entries = json_array();
	int rc = entries ? sbfile_list(&fc, lpath, (int)depth, NULL, add_entry, entries, &err)
			 : cell_err(&err, ENOMEM, "listing");
	if (rc != 0) {
		json_decref(entries);
		fs_fail(c, c->path, rc, &err);
		return;
	}
	connect_reply(c->r, json_pack("{s:o}", "entries", entries));
}

int e2b_fs_list_dir(struct http_req *r)
{
	static const char *const fields[] = {"path", "depth", NULL};
	return fs_run(r, fields, 1, op_list_dir);
}

/* The missing directories above path made, each the user's (as envd does): 0, or -1
 * answered. */
static int fs_make_parents(struct fs_call *c, const char *path)
{
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	int rc = sbfile_make_parents(&fc, path, c->user.uid, c->user.gid, &err);
	return rc == 0 ? 0 : (fs_fail(c, path, rc, &err), -1);
}

/* mkdir -p, every level it makes owned by the user; an existing one is envd's
 * already_exists (the SDK's makeDir answers false). */
static void op_make_dir(struct fs_call *c)
{
	if (fs_make_parents(c, c->path) < 0)
		return;
	struct sbfile_perm p = {
	    .mode = 0755, .user = {.id = c->user.uid}, .group = {.id = c->user.gid}};
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	bool created;
	int rc = sbfile_mkdir(&fc, c->path, &p, &created, &err);
	if (rc != 0)
		fs_fail(c, c->path, rc, &err);
	else if (!created)
		connect_error(c->r, CONNECT_ALREADY_EXISTS, "directory already exists: %.1024s",
			      c->path);
	else
		reply_entry(c, c->path);
}

int e2b_fs_make_dir(struct http_req *r)
{
	static const char *const fields[] = {"path", NULL};
	return fs_run(r, fields, 1, op_make_dir);
}

/* rename(2) into a destination whose missing directories are made first, the user's (as
 * envd does), once the source is known to be there. */
static void op_move(struct fs_call *c)
{
	sbfile_info st;
	if (fs_stat(c, c->path, &st) < 0 || fs_make_parents(c, c->path2) < 0)
		return;
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	int rc = sbfile_move(&fc, c->path, c->path2, &err);
	if (rc != 0)
		fs_fail(c, c->path, rc, &err);
	else
		reply_entry(c, c->path2);
}

int e2b_fs_move(struct http_req *r)
{
	static const char *const fields[] = {"source", "destination", NULL};
	return fs_run(r, fields, 2, op_move);
}

/* envd removes a directory with what it holds (the service's recursive remove takes
 * directories only: the entry itself, a symlink not followed, says which), and a path that
 * is not there is removed already: {} (E2B's own suite removes a missing file and expects
 * no error). */
static void op_remove(struct fs_call *c)
{
	sbfile_info st;
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	int rc = sbfile_stat(&fc, c->path, &st, &err);
	if (rc == 1 && err.code == ENOENT) {
		connect_reply(c->r, json_object());
		return;
	}
	if (rc == 0)
		rc = sbfile_remove(&fc, c->path, !strcmp(st.type, "directory"), &err);
	if (rc != 0)
		fs_fail(c, c->path, rc, &err);
	else
		connect_reply(c->r, json_object());
}

int e2b_fs_remove(struct http_req *r)
{
	static const char *const fields[] = {"path", NULL};
	return fs_run(r, fields, 1, op_remove);
}

/* ---- watching ----
 *
 * The files service's watch (cell-init's fswatch.c) turned into envd's events. WatchDir
 * streams them as they come; the polling watchers (CreateWatcher, GetWatcherEvents,
 * RemoveWatcher) keep the watch open on the sandbox (file_watchers.h), its events waiting
 * in the socket and in cell-init's bounded queue until a GetWatcherEvents drains them. */

#define KEEPALIVE_DEFAULT_S 50 /* the SDK asks for 50 s */
#define KEEPALIVE_MAX_S	    300
#define WATCHER_EVENTS_MAX  10000 /* events one GetWatcherEvents answers */

static const char *event_type(const char *op)
{
	if (!op)
		return NULL;
	if (!strcmp(op, "create"))
		return "EVENT_TYPE_CREATE";
	if (!strcmp(op, "write"))
		return "EVENT_TYPE_WRITE";
	if (!strcmp(op, "remove"))
		return "EVENT_TYPE_REMOVE";
	if (!strcmp(op, "rename"))
		return "EVENT_TYPE_RENAME";
	if (!strcmp(op, "chmod"))
		return "EVENT_TYPE_CHMOD";
	return NULL;
}

/* includeEntry: the EntryInfo of each event's path after it, stat-ed by celld (one
 * stat each) for at most ENTRY_STATS_MAX events of one batch of cell-init's, all within
 * ENTRY_BUDGET_MS: a flood of events, or a stalled cell-init, costs a bounded time per batch
 * and the rest go without an entry (which envd sends only when it can, too). */
#define ENTRY_STATS_MAX 64
#define ENTRY_BUDGET_MS 2000

struct entry_opts {
	bool on;
	struct sandbox *sb;
	const char *dir; /* the watched directory, resolved */
	sbfile_budget b;
	unsigned left;
};

static void entry_opts_batch(struct entry_opts *eo)
{
	eo->b = (sbfile_budget){ENTRY_BUDGET_MS};
	eo->left = ENTRY_STATS_MAX;
}

/* cell-init's {"name","op"} as envd's FilesystemEvent; NULL for anything else. */
static json_t *fs_event(json_t *ev, struct entry_opts *eo)
{
	const char *name = json_string_value(json_object_get(ev, "name"));
	const char *op = json_string_value(json_object_get(ev, "op"));
	const char *type = event_type(op);
	json_t *fe = name && type ? json_pack("{s:s, s:s}", "name", name, "type", type) : NULL;
	/* A removal has nothing left to stat; a rename-away finds nothing (ENOENT: none). */
	if (!fe || !eo->on || !strcmp(op, "remove") || !eo->left || eo->b.left_ms <= 0)
		return fe;
	eo->left--;
	char path[PATH_MAX];
	size_t dl = strlen(eo->dir);
	if (snprintf(path, sizeof(path), "%s%s%s", eo->dir, dl && eo->dir[dl - 1] == '/' ? "" : "/",
		     name) >= (int)sizeof(path))
		return fe;
	sbfile_info st;
	struct cell_error err = {0};
	struct sbfile_ctx fc = {eo->sb, NULL, &eo->b};
	if (sbfile_stat(&fc, path, &st, &err) == 0) {
		json_t *e = entry_info(path, &st);
		if (e)
			json_object_set_new(fe, "entry", e);
	}
	return fe;
}

static enum connect_code watch_code(int errnum)
{
	return errnum == EOVERFLOW ? CONNECT_RESOURCE_EXHAUSTED : connect_code_from_errno(errnum);
}

/* The checks every watch shares, then the service's watch of c->path: 0 with *fd, or -1
 * answered. */
static int watch_open(struct fs_call *c, int *fd)
{
	json_t *jr = json_object_get(c->msg, "recursive"),
	       *je = json_object_get(c->msg, "includeEntry"),
	       *jn = json_object_get(c->msg, "allowNetworkMounts");
	const char *bad = (jr && !json_is_boolean(jr))	 ? "recursive must be a boolean"
			  : (je && !json_is_boolean(je)) ? "includeEntry must be a boolean"
			  : (jn && !json_is_boolean(jn)) ? "allowNetworkMounts must be a boolean"
							 : NULL;
	if (bad)
		return fs_error(c, CONNECT_INVALID_ARGUMENT, "%s", bad), -1;
	sbfile_info st;
	struct cell_error err = {0};
	struct sbfile_ctx fc = fs_ctx(c);
	int rc = sbfile_stat(&fc, c->path, &st, &err);
	if (rc == 0 && strcmp(st.type, "directory") && strcmp(st.type, "symlink"))
		return fs_error(c, CONNECT_INVALID_ARGUMENT, "path is not a directory: %.1024s",
				c->path),
		       -1;
	if (rc == 0)
		rc = sbfile_watch_open(&fc, c->path, json_is_true(jr), fd, &err);
	if (rc == 0)
		return 0;
	enum connect_code code = rc < 0		      ? CONNECT_INTERNAL
				 : err.code == ENOENT ? CONNECT_NOT_FOUND
						      : watch_code(err.code);
	fs_error(c, code, "%.1024s: %s", c->path, err.msg);
	return -1;
}

/* ---- WatchDir: a server stream ---- */

struct dir_watch {
	struct sandbox *sb;
	int fd;
	bool include_entry;
	char path[PATH_MAX]; /* the watched directory, resolved */
	struct sse_buf out;
	int64_t deadline; /* CLOCK_MONOTONIC ms; 0: none */
	int keepalive_ms;
	int client_fd; /* the HTTP connection's socket, -1 if unknown */
	bool ended;
};

/* Wait up to ms for cell-init's next frame: 1 readable, 0 timeout, -ECONNRESET when the
 * client hung up (the watch is then ended at once, not at its next keepalive). */
static int watch_wait(const struct dir_watch *w, int64_t ms)
{
	struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN},
			      {.fd = w->client_fd, .events = POLLRDHUP}};
	int n = poll(p, w->client_fd >= 0 ? 2 : 1, (int)ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n > 0 && w->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return -ECONNRESET;
	return n > 0 && p[0].revents ? 1 : 0;
}

static void watch_end(struct dir_watch *w, enum connect_code code, const char *msg)
{
	connect_end(&w->out, code, msg);
	w->ended = true;
}

static void watch_frame(struct dir_watch *w, json_t *msg)
{
	if (!msg || connect_frame(&w->out, msg) < 0)
		watch_end(w, CONNECT_INTERNAL, "out of memory");
	json_decref(msg);
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct dir_watch *w = cls;
	for (;;) {
		if (w->out.len > w->out.off)
			return (ssize_t)connect_buf_take(&w->out, buf, max);
		if (w->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int64_t wait = w->keepalive_ms;
		if (w->deadline) {
			int64_t left = w->deadline - celld_now_ms();
			if (left <= 0) {
				watch_end(w, CONNECT_DEADLINE_EXCEEDED,
					  "the watch's deadline passed");
				continue;
			}
			if (left < wait)
				wait = left;
		}
		int rc = watch_wait(w, wait);
		if (rc == -ECONNRESET)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (rc == 0) {
			if (!w->deadline || celld_now_ms() < w->deadline)
				watch_frame(w, json_pack("{s:{}}", "keepalive"));
			continue;
		}
		json_t *events = NULL;
		struct cell_error err = {0};
		rc = rc < 0 ? cell_err(&err, -rc, "waiting for cell-init")
			    : sbfile_watch_next(w->fd, &events, &err);
		if (rc == 0)
			watch_end(w, CONNECT_OK, "");
		else if (rc < 0)
			watch_end(w, watch_code(err.code), err.msg);
		size_t i;
		json_t *ev;
		struct entry_opts eo = {.on = w->include_entry, .sb = w->sb, .dir = w->path};
		entry_opts_batch(&eo);
		json_array_foreach(events, i, ev)
		{
			json_t *fe = fs_event(ev, &eo);
			if (fe)
				watch_frame(w, json_pack("{s:o}", "filesystem", fe));
		}
		json_decref(events);
	}
}

static void watch_free(void *cls)
{
	struct dir_watch *w = cls;
	if (w->fd >= 0)
		close(w->fd); /* cell-init ends its watch */
	sse_buf_free(&w->out);
	sandbox_stream_end(w->sb);
	sandbox_unref(w->sb);
	free(w);
}

int e2b_fs_watch_dir(struct http_req *r)
{
	static const char *const fields[] = {"path", "recursive", "includeEntry",
					     "allowNetworkMounts", NULL};
	struct fs_call c = {.r = r, .stream = true, .b = SBFILE_BUDGET_INIT};
	int fd = -1;
	/* A streaming call's errors are answered in its body. */
	if (fs_begin(r, fields, 1, &c) < 0 || watch_open(&c, &fd) < 0) {
		fs_end(&c);
		return 0;
	}
	struct dir_watch *w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		fs_end(&c);
		return connect_stream_error(r, CONNECT_INTERNAL, "out of memory");
	}
	w->sb = c.sb;
	c.sb = NULL;
	w->fd = fd;
	w->include_entry = json_is_true(json_object_get(c.msg, "includeEntry"));
	snprintf(w->path, sizeof(w->path), "%s", c.path);
	w->client_fd = http_socket(r);
	sandbox_stream_begin(w->sb); /* a client watching keeps the sandbox from idling */
	int64_t ms = connect_timeout_ms(r);
	w->deadline = ms > 0 ? celld_now_ms() + ms : 0;
	const char *ka = http_header(r, "Keepalive-Ping-Interval");
	int64_t s = KEEPALIVE_DEFAULT_S;
	if (ka && (parse_int64(ka, 1, KEEPALIVE_MAX_S, &s) < 0))
		s = KEEPALIVE_DEFAULT_S;
	w->keepalive_ms = (int)s * 1000;
	fs_end(&c);
	watch_frame(w, json_pack("{s:{}}", "start"));
	return connect_stream(r, watch_read, w, watch_free);
}

/* ---- polling watchers ---- */

static void op_create_watcher(struct fs_call *c)
{
	int fd;
	if (watch_open(c, &fd) < 0)
		return;
	char id[FILE_WATCHER_ID_LEN + 1];
	bool entry = json_is_true(json_object_get(c->msg, "includeEntry"));
	int rc = file_watchers_add(c->sb->watchers, fd, c->path, entry, id);
	if (rc == -ENOSPC)
		connect_error(c->r, CONNECT_RESOURCE_EXHAUSTED,
			      "at most %d watchers per sandbox and %d in all: remove one first",
			      FILE_WATCHERS_PER_SBX, FILE_WATCHERS_MAX);
	else if (rc < 0)
		connect_error(c->r, CONNECT_INTERNAL, "out of memory");
	else
		connect_reply(c->r, json_pack("{s:s}", "watcherId", id));
}

int e2b_fs_create_watcher(struct http_req *r)
{
	static const char *const fields[] = {"path", "recursive", "includeEntry",
					     "allowNetworkMounts", NULL};
	return fs_run(r, fields, 1, op_create_watcher);
}

/* The watcher the request names, taken; NULL answered. */
static struct file_watcher *watcher_named(struct fs_call *c)
{
	json_t *v = json_object_get(c->msg, "watcherId");
	const char *id = json_string_value(v);
	struct file_watcher *w =
	    id && json_is_clean_string(v) ? file_watchers_take(c->sb->watchers, id) : NULL;
	if (!w)
		connect_error(c->r, CONNECT_NOT_FOUND, "watcher %.64s not found (or in use)",
			      id ? id : "");
	return w;
}

static void op_get_watcher_events(struct fs_call *c)
{
	struct file_watcher *w = watcher_named(c);
	if (!w)
		return;
	json_t *out = json_array();
	struct cell_error err = {0};
	int rc = out ? 1 : cell_err(&err, ENOMEM, "events");
	/* One entry budget for the whole call: it answers at once. */
	struct entry_opts eo = {.on = w->include_entry, .sb = c->sb, .dir = w->path};
	entry_opts_batch(&eo);
	while (rc == 1 && json_array_size(out) < WATCHER_EVENTS_MAX &&
	       sbfile_watch_ready(w->fd, 0) == 1) {
		json_t *events = NULL;
		rc = sbfile_watch_next(w->fd, &events, &err);
		size_t i;
		json_t *ev;
		json_array_foreach(events, i, ev)
		{
			json_t *fe = fs_event(ev, &eo);
			if (fe)
				json_array_append_new(out, fe);
		}
		json_decref(events);
	}
	/* The watch ended (its directory gone) or failed: what came before it is answered
	 * first; the next call finds the watcher gone. */
	file_watchers_put(c->sb->watchers, w, rc == 1);
	if (rc < 0 && !json_array_size(out)) {
		json_decref(out);
		connect_error(c->r, watch_code(err.code), "%s", err.msg);
		return;
	}
	connect_reply(c->r, json_pack("{s:o}", "events", out));
}

int e2b_fs_get_watcher_events(struct http_req *r)
{
	static const char *const fields[] = {"watcherId", NULL};
	return fs_run(r, fields, 0, op_get_watcher_events);
}

static void op_remove_watcher(struct fs_call *c)
{
	struct file_watcher *w = watcher_named(c);
	if (!w)
		return;
	file_watchers_put(c->sb->watchers, w, false);
	connect_reply(c->r, json_object());
}

int e2b_fs_remove_watcher(struct http_req *r)
{
	static const char *const fields[] = {"watcherId", NULL};
	return fs_run(r, fields, 0, op_remove_watcher);
}
