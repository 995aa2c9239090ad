/* FILE_STAT, FILE_READ and FILE_WRITE, confined beneath the sandbox root.
 *
 * Every path from celld is resolved with cell_open_in_root() against an O_PATH fd of "/"
 * (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): `..` clamps at the root, absolute symlinks are
 * re-rooted, and /proc magic links (/proc/self/root, /proc/<pid>/fd/N) are refused, so a
 * symlink planted by a sandboxed process can never point an operation elsewhere. Whatever
 * the path leads to is then checked on the opened fd, never by name: its type with fstat(),
 * and that it is no process's state in /proc (files_refuse_process_state). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <dirent.h>
#include <fnmatch.h>
#include <unistd.h>

#include "cell/error.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "base.h"
#include "conn.h"
#include "files.h"

#define NAME_DB_MAX	  (1u << 20) /* bytes of /etc/passwd or /etc/group we look at */
#define READ_PER_TURN	  (1u << 20) /* FILE_READ bytes per loop turn, for fairness */
#define ID_MAX		  0xfffffffeu
#define DEFAULT_FILE_MODE 0644
#define DIR_MODE	  0755

/* File metadata: extended attributes CELL_META_PREFIX "<key>" (cell/proto.h). */
#define META_PREFIX	CELL_META_PREFIX
#define META_PREFIX_LEN (sizeof(META_PREFIX) - 1)
#define META_BUDGET	CELL_META_MAX
#define META_KEY_MAX	CELL_META_KEY_MAX
#define META_LIST_MAX	(16u << 10) /* bytes of xattr names of one file we look at */

/* ---- paths ---- */

struct split_path {
	char parent[PATH_MAX];
	char name[NAME_MAX + 1]; /* empty for the root itself */
	bool trailing_slash;
};

static int get_path(json_t *req, const char *what, const char **out, struct cell_error *err)
{
	json_t *j = json_object_get(req, "path");
	const char *p = json_string_value(j);
	if (!p)
		return cell_err(err, EINVAL, "%s: path must be a string", what);
	if (p[0] != '/')
		return cell_err(err, EINVAL, "%s: path '%s' is not absolute", what, p);
	if (json_string_length(j) >= PATH_MAX)
		return cell_err(err, ENAMETOOLONG, "%s: path", what);
	*out = p;
	return 0;
}

static int split(const char *path, struct split_path *sp, struct cell_error *err)
{
	size_t len = strlen(path);
	if (len >= sizeof(sp->parent))
		return cell_err(err, ENAMETOOLONG, "%s", path);
	char buf[PATH_MAX];
	memcpy(buf, path, len + 1);
	sp->trailing_slash = false;
	while (len > 1 && buf[len - 1] == '/') {
		buf[--len] = '\0';
		sp->trailing_slash = true;
	}
	char *slash = strrchr(buf, '/');
	const char *name = slash + 1;
	if (strlen(name) > NAME_MAX)
		return cell_err(err, ENAMETOOLONG, "%s", path);
	strcpy(sp->name, name);
	if (slash == buf)
		strcpy(sp->parent, "/");
	else {
		*slash = '\0';
		strcpy(sp->parent, buf);
	}
	return 0;
}

static bool is_dot_name(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* ---- process state ---- */

/* The first component of a path below procfs's root names one process: <pid>, self or
 * thread-self (the only entries there that start with a digit are pids). */
static bool names_a_process(const char *top)
{
	size_t n = strcspn(top, "/ ");
	return (top[0] >= '0' && top[0] <= '9') || (n == 4 && !strncmp(top, "self", 4)) ||
	       (n == 11 && !strncmp(top, "thread-self", 11));
}

/* Files operations never reach an object of procfs that belongs to one process: a
 * /proc/<pid> directory or anything below it (task/<tid>/..., fd, ns, maps, environ, mem),
 * and the self and thread-self links. For PID 1 they would hand a client cell-init's own
 * memory map, environment and status (PID 1 does the reading, so /proc/self is PID 1, and
 * a line-mode download has no size-0 limit). For any other process, reading them takes
 * that process's locks (its mmap_lock for cmdline, environ and maps), which a process in
 * the sandbox can hold, and PID 1 must never wait on the sandbox. Commands still read them,
 * with their own credentials.
 *
 * Judged on the opened fd, however the path was spelled (symlinks made inside, "..",
 * /proc/self/../1): fstatfs() says procfs, and the fd's own path, as the kernel gives it
 * for /proc/self/fd/N, says under which entry of procfs's root it lies. The sandbox has
 * one procfs, at /proc, and no right to mount or move it. 0, or -EACCES with err set. */
int files_refuse_process_state(int fd, const char *what, const char *path, struct cell_error *err)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return cell_err(err, errno, "%s %s", what, path);
	if (sf.f_type != PROC_SUPER_MAGIC)
		return 0;
	char link[32], real[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, real, sizeof(real) - 1);
	if (n < 0)
		return cell_err(err, errno, "%s %s: locating it in /proc", what, path);
	real[n] = '\0';
	const char *top = NULL;
	if (!strncmp(real, "/proc/", 6))
		top = real + 6;
	else if (!strcmp(real, "/proc"))
		top = "";
	if (top && !names_a_process(top))
		return 0;
	return cell_err(err, EACCES,
			"%s %s: refused: it is %s, state of a process (files operations do not "
			"reach /proc/<pid>, /proc/self or /proc/thread-self)",
			what, path, real);
}

/* Open path beneath the root for flags, after files_refuse_process_state() has passed what it
 * leads to: the object is first opened O_PATH (which runs none of its open code, so a
 * procfs file of another process never takes that process's locks), checked, then opened
 * again through its fd. Returns an fd or -errno with err set. */
static int open_checked(const char *path, int flags, const char *what, struct cell_error *err)
{
	int pfd = cell_open_in_root(init_base.rootfd, path, O_PATH, 0, 0);
	if (pfd < 0)
		return cell_err(err, -pfd, "%s %s", what, path);
	int r = files_refuse_process_state(pfd, what, path, err);
	if (r < 0) {
		close(pfd);
		return r;
	}
	char link[32];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
	int fd = open(link, flags | O_CLOEXEC);
	r = fd < 0 ? cell_err(err, errno, "%s %s", what, path) : fd;
	close(pfd);
	return r;
}

/* lstat() semantics beneath the root: the parent is resolved (symlinks followed, confined),
 * the final component is not followed. */
static int lstat_in_root(const char *path, struct stat *st, struct cell_error *err)
{
	struct split_path sp;
	int r = split(path, &sp, err);
	if (r < 0)
		return r;
	if (!sp.name[0]) {
		if (fstat(init_base.rootfd, st) < 0)
			return cell_err(err, errno, "stat %s", path);
		return 0;
	}
	int fd;
	/* A trailing slash or a final . / .. names a directory to resolve, not an entry. */
	if (sp.trailing_slash || is_dot_name(sp.name)) {
		fd = cell_open_in_root(init_base.rootfd, path, O_PATH, 0, 0);
	} else {
		int dfd =
		    cell_open_in_root(init_base.rootfd, sp.parent, O_PATH | O_DIRECTORY, 0, 0);
		if (dfd < 0)
			return cell_err(err, -dfd, "stat %s", path);
		/* O_NOFOLLOW with O_PATH: the entry itself, a symlink included. */
		fd = openat(dfd, sp.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		fd = fd < 0 ? -errno : fd;
		close(dfd);
	}
	if (fd < 0)
		return cell_err(err, -fd, "stat %s", path);
	r = files_refuse_process_state(fd, "stat", path, err);
	if (r == 0 && fstat(fd, st) < 0)
		r = cell_err(err, errno, "stat %s", path);
	close(fd);
	return r;
}

/* ---- owner and group names ---- */

/* Read the start of /etc/passwd or /etc/group inside the sandbox. It is the sandbox's own
 * file (hostile): opened confined, never a process's state (a link to /proc/self/environ),
 * non-blocking (a FIFO there must not hang PID 1), only if regular, at most NAME_DB_MAX
 * bytes. No NSS: cell-init is static. */
static char *read_name_db(const char *path, size_t *len)
{
	struct cell_error ignored;
	int fd = open_checked(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, "reading", &ignored);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		size_t cap = st.st_size > 0 && (size_t)st.st_size < NAME_DB_MAX
				 ? (size_t)st.st_size + 1
				 : NAME_DB_MAX;
		buf = malloc(cap + 1);
		size_t got = 0;
		while (buf && got < cap) {
			ssize_t n = read(fd, buf + got, cap - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += n;
		}
		if (buf) {
			buf[got] = '\0';
			*len = got;
		}
	}
	close(fd);
	return buf;
}

static bool parse_id(const char *s, size_t len, uint32_t *out)
{
	if (len == 0 || len > 10)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* One line of /etc/passwd or /etc/group: its first fields (":"-separated), each a start and
 * a length (the last one found runs to the line's end). */
#define DB_FIELDS_MAX 7
struct db_line {
	const char *f[DB_FIELDS_MAX];
	size_t len[DB_FIELDS_MAX];
	int n;
};

/* Split the line at line (ending at '\n' or end) into at most max fields of l; returns
 * where the next line starts. */
static char *db_line_split(char *line, char *end, int max, struct db_line *l)
{
	char *eol = memchr(line, '\n', (size_t)(end - line));
	if (!eol)
		eol = end;
	l->n = 0;
	for (char *p = line, *start = line; l->n < max; p++) {
		if (p != eol && *p != ':')
			continue;
		l->f[l->n] = start;
		l->len[l->n++] = (size_t)(p - start);
		if (p == eol)
			break;
		start = p + 1;
	}
	return eol + 1;
}

/* "name:password:id:..." — the first line whose third field is id names it. */
static json_t *id_name(const char *db, uint32_t id)
{
	size_t len = 0;
	char *buf = read_name_db(db, &len);
	json_t *name = NULL;
	for (char *line = buf; line && line < buf + len && !name;) {
		struct db_line l;
		line = db_line_split(line, buf + len, 3, &l);
		uint32_t v;
		/* json_stringn refuses invalid UTF-8: such a name falls back to the number. */
		if (l.n == 3 && l.len[0] > 0 && l.len[0] <= 256 && parse_id(l.f[2], l.len[2], &v) &&
		    v == id)
			name = json_stringn(l.f[0], l.len[0]);
	}
	free(buf);
	if (!name) {
		char num[16];
		snprintf(num, sizeof(num), "%u", id);
		name = json_string(num);
	}
	return name;
}

/* The sandbox's /etc/passwd read whole (*db, freed by the caller) and in l the fields of
 * the first "name:password:uid:gid:gecos:home:shell" line whose uid is uid; false when
 * there is none. */
static bool passwd_entry(uint32_t uid, char **db, struct db_line *l)
{
	size_t len = 0;
	*db = read_name_db("/etc/passwd", &len);
	for (char *line = *db; line && line < *db + len;) {
		line = db_line_split(line, *db + len, 7, l);
		uint32_t v;
		if (l->n == 7 && parse_id(l->f[2], l->len[2], &v) && v == uid)
			return true;
	}
	return false;
}

bool files_user_home(uint32_t uid, char *buf, size_t size)
{
	char *db;
	struct db_line l;
	bool found = passwd_entry(uid, &db, &l);
	size_t home_len = found ? l.len[5] : 0;
	found = found && home_len > 0 && home_len < size && l.f[5][0] == '/' &&
		!memchr(l.f[5], '\0', home_len);
	if (found) {
		memcpy(buf, l.f[5], home_len);
		buf[home_len] = '\0';
	}
	free(db);
	return found;
}

/* The primary group of uid in the sandbox's /etc/passwd: true when a line names uid with a
 * group id in the sandbox's range. */
bool files_user_gid(uint32_t uid, uint32_t *gid)
{
	char *db;
	struct db_line l;
	bool found = passwd_entry(uid, &db, &l) && parse_id(l.f[3], l.len[3], gid);
	free(db);
	return found;
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "directory";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

json_t *files_stat_json(const char *path, const struct stat *st)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "path", json_string(path));
	json_object_set_new(o, "type", json_string(type_name(st->st_mode)));
	json_object_set_new(o, "size", json_integer((json_int_t)st->st_size));
	json_object_set_new(o, "mode", json_integer(st->st_mode & 07777));
	json_object_set_new(o, "uid", json_integer(st->st_uid));
	json_object_set_new(o, "gid", json_integer(st->st_gid));
	json_object_set_new(o, "owner", id_name("/etc/passwd", st->st_uid));
	json_object_set_new(o, "group", id_name("/etc/group", st->st_gid));
	json_object_set_new(o, "mtime",
			    json_real((double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9));
	json_object_set_new(o, "ctime",
			    json_real((double)st->st_ctim.tv_sec + st->st_ctim.tv_nsec / 1e9));
	return o;
}

/* A symlink's "target" (its text, as readlink(2) gives it) into o; nothing when it cannot be
 * read or is not UTF-8. */
static void add_target(json_t *o, int dfd, const char *name)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	json_t *t = json_string(buf);
	if (t)
		json_object_set_new(o, "target", t);
}

/* ---- metadata (user.e2b.* extended attributes) ---- */

/* The metadata of the entry name in dfd (not followed; a regular file or a directory whose
 * lstat was st) into o as "xattrs":{key:value}; nothing when it has none or they cannot be
 * read. The entry is opened O_PATH (no open code runs) and checked to be the inode st
 * describes; an O_PATH fd takes no xattr call, its /proc/self/fd link names the same inode.
 * Names or values that are not valid metadata are left out, and so are the keys past the
 * budget. Returns the bytes added (keys plus values), for the caller's frame budget. */
static size_t add_xattrs(json_t *o, int dfd, const char *name, const struct stat *st)
{
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return 0;
	int fd = openat(dfd, name[0] ? name : ".", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat now;
	char link[32];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	char *names = NULL;
	ssize_t len = -1;
	if (fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino &&
	    (names = malloc(META_LIST_MAX)))
		len = listxattr(link, names, META_LIST_MAX);
	json_t *meta = NULL;
	size_t spent = 0, added = 0;
	for (ssize_t at = 0; len > 0 && at < len;) {
		const char *xn = names + at;
		size_t xlen = strnlen(xn, (size_t)(len - at));
		at += (ssize_t)xlen + 1;
		if (xlen <= META_PREFIX_LEN || strncmp(xn, META_PREFIX, META_PREFIX_LEN) ||
		    !cell_meta_key_ok(xn + META_PREFIX_LEN, xlen - META_PREFIX_LEN))
			continue;
		char value[META_BUDGET + 1];
		ssize_t vlen = getxattr(link, xn, value, sizeof(value) - 1);
		if (vlen < 0 || !cell_meta_value_ok(value, (size_t)vlen) ||
		    spent + xlen + (size_t)vlen > META_BUDGET)
			continue;
		value[vlen] = '\0';
		if (!meta && !(meta = json_object()))
			break;
		if (json_object_set_new(meta, xn + META_PREFIX_LEN,
					json_stringn(value, (size_t)vlen)) == 0) {
			spent += xlen + (size_t)vlen;
			added += xlen - META_PREFIX_LEN + (size_t)vlen + 8;
		}
	}
	free(names);
	close(fd);
	if (meta && json_object_size(meta))
		json_object_set_new(o, "xattrs", meta);
	else
		json_decref(meta), added = 0;
	return added;
}

/* ---- FILE_STAT ---- */

void files_stat(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	struct stat st;
	if (get_path(req, "FILE_STAT", &path, &err) < 0 || lstat_in_root(path, &st, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	json_t *o = files_stat_json(path, &st);
	struct split_path sp;
	if (o && split(path, &sp, &err) == 0) {
		int pfd = cell_open_in_root(init_base.rootfd, sp.name[0] ? sp.parent : "/",
					    O_PATH | O_DIRECTORY, 0, 0);
		if (pfd >= 0) {
			if (S_ISLNK(st.st_mode) && sp.name[0])
				add_target(o, pfd, sp.name);
			else
				add_xattrs(o, pfd, sp.name, &st);
			close(pfd);
		}
	}
	conn_send_json(c, CELL_FRAME_STAT, o);
	conn_finish(c);
}

/* ---- FILE_READ ---- */

struct fread_op {
	int fd;
	int64_t pos;
	uint64_t left; /* UINT64_MAX: to EOF */
	char path[];
};

static void fread_done(struct conn *c)
{
	conn_send(c, CELL_FRAME_END, NULL, 0);
	conn_finish(c);
}

/* Produce DATA until the connection's queue is full; conn_want_drain() brings us back. A
 * regular file cannot be polled, so the socket's writability paces the reading. */
static void fread_pump(void *opp, struct conn *c)
{
	struct fread_op *op = opp;
	size_t produced = 0;
	while (conn_queued(c) < CONN_HIGH_WATER && produced < READ_PER_TURN) {
		if (op->left == 0) {
			fread_done(c);
			return;
		}
		uint32_t want = op->left < CELL_FRAME_CHUNK ? (uint32_t)op->left : CELL_FRAME_CHUNK;
		long n = conn_send_from_fd(c, CELL_FRAME_DATA, op->fd, want, op->pos);
		if (n == 0) {
			fread_done(c);
			return;
		}
		if (n < 0) {
			/* After STAT and maybe some DATA: the ERROR ends the stream. */
			conn_fail(c, (int)-n, "reading %s: %s", op->path, strerror((int)-n));
			return;
		}
		op->pos += n;
		if (op->left != UINT64_MAX)
			op->left -= (uint64_t)n;
		produced += (size_t)n;
	}
	conn_want_drain(c);
}

static void fread_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	(void)op;
	(void)payload;
	(void)len;
	conn_fail(c, EPROTO, "unexpected %s frame during FILE_READ", cell_frame_type_name(type));
}

static void fread_closed(void *opp, struct conn *c)
{
	(void)c;
	struct fread_op *op = opp;
	close(op->fd);
	free(op);
}

static const struct conn_handler fread_handler = {
    .frame = fread_frame,
    .drain = fread_pump,
    .closed = fread_closed,
    .keep_on_eof = true,
};

static int get_int(json_t *req, const char *what, const char *key, json_int_t min, json_int_t max,
		   json_int_t def, json_int_t *out, struct cell_error *err)
{
	json_t *j = json_object_get(req, key);
	*out = def;
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < min || json_integer_value(j) > max)
		return cell_err(err, EINVAL, "%s: %s must be an integer in %lld..%lld", what, key,
				(long long)min, (long long)max);
	*out = json_integer_value(j);
	return 0;
}

void files_read(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	json_int_t offset, limit;
	if (get_path(req, "FILE_READ", &path, &err) < 0 ||
	    get_int(req, "FILE_READ", "offset", 0, INT64_MAX, 0, &offset, &err) < 0 ||
	    get_int(req, "FILE_READ", "limit", -1, INT64_MAX, -1, &limit, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	/* O_NONBLOCK: opening a FIFO planted at the path must not block PID 1, nor a lease
	 * a process holds on the file (EWOULDBLOCK instead of waiting for the break);
	 * O_NOCTTY: a terminal must never become ours. The type is checked on the fd
	 * afterwards. */
	int fd = open_checked(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, "opening", &err);
	if (fd < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	struct stat st;
	int e = 0;
	if (fstat(fd, &st) < 0)
		e = errno;
	else if (S_ISDIR(st.st_mode))
		e = EISDIR;
	else if (!S_ISREG(st.st_mode))
		e = EINVAL;
	struct fread_op *op = e ? NULL : malloc(sizeof(*op) + strlen(path) + 1);
	if (!op) {
		close(fd);
		e = e ? e : ENOMEM;
		conn_fail(c, e, "reading %s: %s", path,
			  e == EINVAL ? "not a regular file" : strerror(e));
		return;
	}
	op->fd = fd;
	op->pos = offset;
	op->left = limit < 0 ? UINT64_MAX : (uint64_t)limit;
	strcpy(op->path, path);
	conn_send_json(c, CELL_FRAME_STAT, files_stat_json(path, &st));
	conn_attach(c, &fread_handler, op);
	fread_pump(op, c);
}

/* ---- FILE_WRITE ---- */

struct fwrite_op {
	int dirfd, fd;
	uint64_t size;
	bool failed; /* ERROR sent: swallow DATA until END, then close */
	bool tmp_made;
	bool set_uid, set_gid;
	uint32_t uid, gid;
	mode_t mode;
	char name[NAME_MAX + 1];
	char tmp[NAME_MAX + 1];
	char path[];
};

/* mkdir -p beneath the root. Each component is resolved from the root again (confined,
 * magic links refused); a missing one is created with mkdirat() in its resolved parent,
 * which never follows a symlink at the name it creates. */
static int open_dir_p(const char *dir, struct cell_error *err)
{
	int fd = cell_open_in_root(init_base.rootfd, dir, O_PATH | O_DIRECTORY, 0, 0);
	if (fd >= 0) {
		int r = files_refuse_process_state(fd, "writing into", dir, err);
		if (r < 0) {
			close(fd);
			return r;
		}
		return fd;
	}
	if (fd != -ENOENT)
		return cell_err(err, -fd, "opening directory %s", dir);
	char buf[PATH_MAX];
	size_t len = strlen(dir);
	if (len >= sizeof(buf))
		return cell_err(err, ENAMETOOLONG, "%s", dir);
	memcpy(buf, dir, len + 1);
	int parent = cell_open_in_root(init_base.rootfd, "/", O_PATH | O_DIRECTORY, 0, 0);
	if (parent < 0)
		return cell_err(err, -parent, "opening /");
	size_t i = 0;
	while (i < len) {
		while (i < len && buf[i] == '/')
			i++;
		if (i >= len)
			break;
		size_t start = i;
		while (i < len && buf[i] != '/')
			i++;
		char saved = buf[i];
		buf[i] = '\0';
		int next = cell_open_in_root(init_base.rootfd, buf, O_PATH | O_DIRECTORY, 0, 0);
		if (next == -ENOENT) {
			if (mkdirat(parent, buf + start, DIR_MODE) < 0 && errno != EEXIST) {
				int e = errno;
				close(parent);
				return cell_err(err, e, "creating directory %s", buf);
			}
			next = cell_open_in_root(init_base.rootfd, buf, O_PATH | O_DIRECTORY, 0, 0);
		}
		if (next < 0) {
			close(parent);
			return cell_err(err, -next, "opening directory %s", buf);
		}
		close(parent);
		int r = files_refuse_process_state(next, "writing into", buf, err);
		if (r < 0) {
			close(next);
			return r;
		}
		parent = next;
		buf[i] = saved;
	}
	return parent;
}

static int make_tmp(struct fwrite_op *op, struct cell_error *err)
{
	int nlen = (int)strlen(op->name);
	if (nlen > NAME_MAX - 22)
		nlen = NAME_MAX - 22;
	for (int attempt = 0; attempt < 8; attempt++) {
		uint64_t rnd;
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd)) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			rnd = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)attempt;
		}
		snprintf(op->tmp, sizeof(op->tmp), ".%.*s.%016llx.tmp", nlen, op->name,
			 (unsigned long long)rnd);
		/* O_EXCL|O_NOFOLLOW: never opens something planted under the temp name. */
		op->fd = openat(op->dirfd, op->tmp,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (op->fd >= 0) {
			op->tmp_made = true;
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	return cell_err(err, errno, "creating a temporary file next to %s", op->path);
}

static void fwrite_discard_tmp(struct fwrite_op *op)
{
	if (op->fd >= 0) {
		close(op->fd);
		op->fd = -1;
	}
	if (op->tmp_made) {
		unlinkat(op->dirfd, op->tmp, 0);
		op->tmp_made = false;
	}
}

/* An operation error (not a protocol one): ERROR now, keep the connection to swallow the
 * rest of the upload, close at END. */
static void fwrite_fail(struct fwrite_op *op, struct conn *c, const struct cell_error *err)
{
	log_debug("FILE_WRITE refused: %s", err->msg);
	fwrite_discard_tmp(op);
	op->failed = true;
	conn_send_error(c, err->code, err->msg);
}

static int fwrite_commit(struct fwrite_op *op, struct cell_error *err)
{
	/* chown before chmod: chown clears set-id bits. */
	if ((op->set_uid || op->set_gid) && fchown(op->fd, op->set_uid ? op->uid : (uid_t)-1,
						   op->set_gid ? op->gid : (gid_t)-1) < 0)
		return cell_err(err, errno, "chown %s", op->path);
	if (fchmod(op->fd, op->mode) < 0)
		return cell_err(err, errno, "chmod %s", op->path);
	int fd = op->fd;
	op->fd = -1;
	if (close(fd) < 0)
		return cell_err(err, errno, "writing %s", op->path);
	if (renameat(op->dirfd, op->tmp, op->dirfd, op->name) < 0)
		return cell_err(err, errno, "replacing %s", op->path);
	op->tmp_made = false;
	return 0;
}

static void fwrite_frame(void *opp, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	struct fwrite_op *op = opp;
	struct cell_error err = {0};
	if (type == CELL_FRAME_DATA) {
		if (op->failed)
			return;
		int r = cell_write_all(op->fd, payload, len);
		if (r < 0) {
			cell_err(&err, -r, "writing %s", op->path);
			fwrite_fail(op, c, &err);
			return;
		}
		op->size += len;
		return;
	}
	if (type != CELL_FRAME_END) {
		conn_fail(c, EPROTO, "unexpected %s frame during FILE_WRITE",
			  cell_frame_type_name(type));
		return;
	}
	if (!op->failed) {
		if (fwrite_commit(op, &err) < 0)
			fwrite_fail(op, c, &err);
		else
			conn_send_json(c, CELL_FRAME_OK,
				       json_pack("{s:I}", "size", (json_int_t)op->size));
	}
	conn_finish(c); /* fwrite_closed frees op */
}

static void fwrite_drain(void *op, struct conn *c)
{
	(void)op;
	(void)c;
}

static void fwrite_closed(void *opp, struct conn *c)
{
	(void)c;
	struct fwrite_op *op = opp;
	fwrite_discard_tmp(op); /* an upload cut short leaves nothing behind */
	if (op->dirfd >= 0)
		close(op->dirfd);
	free(op);
}

static const struct conn_handler fwrite_handler = {
    .frame = fwrite_frame,
    .drain = fwrite_drain,
    .closed = fwrite_closed,
    .keep_on_eof = false, /* EOF before END: the upload is abandoned */
};

static int get_owner(json_t *req, const char *what, const char *num_key, const char *name_key,
		     const char *db, bool *set, uint32_t *out, struct cell_error *err);

/* FILE_WRITE's "xattrs" {key: value} set on the temporary file (a new inode: the file it
 * replaces keeps its own, so an overwrite replaces the metadata). Validated as add_xattrs()
 * reads them back. */
static int set_xattrs(struct fwrite_op *op, json_t *meta, struct cell_error *err)
{
	const char *key;
	json_t *v;
	size_t spent = 0;
	json_object_foreach(meta, key, v)
	{
		size_t klen = strlen(key), vlen = json_string_length(v);
		if (!cell_meta_key_ok(key, klen))
			return cell_err(err, EINVAL,
					"FILE_WRITE: xattrs key \"%.64s\" is not valid", key);
		if (!json_is_string(v) || !cell_meta_value_ok(json_string_value(v), vlen))
			return cell_err(err, EINVAL,
					"FILE_WRITE: xattrs value of \"%s\" is not printable ASCII",
					key);
		if ((spent += META_PREFIX_LEN + klen + vlen) > META_BUDGET)
			return cell_err(err, EINVAL, "FILE_WRITE: xattrs exceed %u bytes",
					META_BUDGET);
		char name[META_PREFIX_LEN + META_KEY_MAX + 1];
		snprintf(name, sizeof(name), META_PREFIX "%s", key);
		if (fsetxattr(op->fd, name, json_string_value(v), vlen, 0) < 0) {
			if (errno == ENOTSUP)
				return cell_err(err, ENOTSUP,
						"metadata on %s: its filesystem keeps no user "
						"extended attributes",
						op->path);
			return cell_err(err, errno, "metadata on %s", op->path);
		}
	}
	return 0;
}

static int fwrite_prepare(struct fwrite_op *op, json_t *req, struct cell_error *err)
{
	json_int_t mode;
	if (get_int(req, "FILE_WRITE", "mode", 0, 07777, DEFAULT_FILE_MODE, &mode, err) < 0 ||
	    get_owner(req, "FILE_WRITE", "uid", "owner", "/etc/passwd", &op->set_uid, &op->uid,
		      err) < 0 ||
	    get_owner(req, "FILE_WRITE", "gid", "group", "/etc/group", &op->set_gid, &op->gid,
		      err) < 0)
		return -err->code;
	op->mode = (mode_t)mode;
	struct split_path sp;
	int r = split(op->path, &sp, err);
	if (r < 0)
		return r;
	if (!sp.name[0] || sp.trailing_slash)
		return cell_err(err, EISDIR, "FILE_WRITE: %s names a directory", op->path);
	if (is_dot_name(sp.name))
		return cell_err(err, EINVAL, "FILE_WRITE: %s does not name a file", op->path);
	strcpy(op->name, sp.name);
	json_t *meta = json_object_get(req, "xattrs");
	if (meta && !json_is_object(meta))
		return cell_err(err, EINVAL, "FILE_WRITE: xattrs must be an object");
	op->dirfd = open_dir_p(sp.parent, err);
	if (op->dirfd < 0)
		return op->dirfd;
	r = make_tmp(op, err);
	return r < 0 ? r : set_xattrs(op, meta, err);
}

void files_write(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	if (get_path(req, "FILE_WRITE", &path, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	struct fwrite_op *op = calloc(1, sizeof(*op) + strlen(path) + 1);
	if (!op) {
		conn_fail(c, ENOMEM, "FILE_WRITE %s", path);
		return;
	}
	op->dirfd = op->fd = -1;
	strcpy(op->path, path);
	conn_attach(c, &fwrite_handler, op);
	if (fwrite_prepare(op, req, &err) < 0)
		fwrite_fail(op, c, &err);
}

/* ---- owner and group by name ---- */

/* name → id in the sandbox's /etc/passwd or /etc/group ("name:password:id:..."): the first
 * line whose first field is name. The file is read as read_name_db() reads it (confined,
 * regular, at most NAME_DB_MAX bytes). 0, or -ENOENT when no line names it. */
static int name_id(const char *db, const char *name, uint32_t *out)
{
	size_t len = 0, nlen = strlen(name);
	char *buf = read_name_db(db, &len);
	int r = -ENOENT;
	for (char *line = buf; line && line < buf + len && r < 0;) {
		struct db_line l;
		line = db_line_split(line, buf + len, 3, &l);
		uint32_t v;
		if (l.n == 3 && l.len[0] == nlen && !memcmp(l.f[0], name, nlen) &&
		    parse_id(l.f[2], l.len[2], &v) && v <= ID_MAX) {
			*out = v;
			r = 0;
		}
	}
	free(buf);
	return r;
}

int files_user_uid(const char *name, uint32_t *uid)
{
	return name_id("/etc/passwd", name, uid);
}

int files_group_gid(const char *name, uint32_t *gid)
{
	return name_id("/etc/group", name, gid);
}

/* The request's "uid"/"owner" (or "gid"/"group"): a number, or a name looked up in the
 * sandbox's own database. *set false when neither is there. */
static int get_owner(json_t *req, const char *what, const char *num_key, const char *name_key,
		     const char *db, bool *set, uint32_t *out, struct cell_error *err)
{
	json_int_t v;
	*set = false;
	if (get_int(req, what, num_key, 0, ID_MAX, 0, &v, err) < 0)
		return -err->code;
	if (json_object_get(req, num_key)) {
		*set = true;
		*out = (uint32_t)v;
		return 0;
	}
	json_t *j = json_object_get(req, name_key);
	if (!j)
		return 0;
	const char *name = json_string_value(j);
	size_t n = json_string_length(j);
	if (!name || n == 0 || n > 256 || strlen(name) != n || strchr(name, ':') ||
	    strchr(name, '\n'))
		return cell_err(err, EINVAL, "%s: %s must be a user or group name", what, name_key);
	if (parse_id(name, n, out)) {
		if (*out > ID_MAX)
			return cell_err(err, EINVAL, "%s: %s %s is out of range", what, name_key,
					name);
		*set = true;
		return 0;
	}
	if (name_id(db, name, out) < 0)
		return cell_err(err, EINVAL, "%s: %s: no '%s' in the sandbox's %s", what, name_key,
				name, db);
	*set = true;
	return 0;
}

struct owner_req {
	bool set_uid, set_gid, set_mode;
	uint32_t uid, gid;
	mode_t mode;
};

static int get_owner_req(json_t *req, const char *what, struct owner_req *o, struct cell_error *err)
{
	json_int_t mode;
	if (get_int(req, what, "mode", 0, 07777, 0, &mode, err) < 0 ||
	    get_owner(req, what, "uid", "owner", "/etc/passwd", &o->set_uid, &o->uid, err) < 0 ||
	    get_owner(req, what, "gid", "group", "/etc/group", &o->set_gid, &o->gid, err) < 0)
		return -err->code;
	o->set_mode = json_object_get(req, "mode") != NULL;
	o->mode = (mode_t)mode;
	return 0;
}

/* chown before chmod (chown clears set-id bits), on an fd, never by name. */
static int apply_owner(int fd, const struct owner_req *o, const char *path, struct cell_error *err)
{
	if ((o->set_uid || o->set_gid) &&
	    fchown(fd, o->set_uid ? o->uid : (uid_t)-1, o->set_gid ? o->gid : (gid_t)-1) < 0)
		return cell_err(err, errno, "chown %s", path);
	if (o->set_mode && fchmod(fd, o->mode) < 0)
		return cell_err(err, errno, "chmod %s", path);
	return 0;
}

/* The end of a request that changes one thing: err's failure, or OK {key: value}. */
static void answer_done(struct conn *c, int r, const struct cell_error *err, const char *key,
			bool value)
{
	if (r < 0) {
		conn_fail(c, err->code, "%s", err->msg);
		return;
	}
	conn_send_json(c, CELL_FRAME_OK, json_pack("{s:b}", key, value));
	conn_finish(c);
}

/* ---- FILE_MKDIR ---- */

/* mkdir -p path: missing components are created 0755 (open_dir_p: each resolved confined,
 * created with mkdirat() in its resolved parent). mode/owner apply to path itself when this
 * request created it; an existing directory is left as it is (mkdir -p -m). */
void files_mkdir(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	struct owner_req o;
	if (get_path(req, "FILE_MKDIR", &path, &err) < 0 ||
	    get_owner_req(req, "FILE_MKDIR", &o, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int pre = cell_open_in_root(init_base.rootfd, path, O_PATH, 0, 0);
	bool existed = pre >= 0;
	if (pre >= 0)
		close(pre);
	int pfd = open_dir_p(path, &err);
	if (pfd < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int r = 0;
	if (!existed) {
		int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = fd < 0 ? cell_err(&err, errno, "opening %s", path)
			   : apply_owner(fd, &o, path, &err);
		if (fd >= 0)
			close(fd);
	}
	close(pfd);
	answer_done(c, r, &err, "created", !existed);
}

/* ---- FILE_REMOVE ---- */

#define RM_DEPTH_MAX   256		 /* directory levels below the one removed */
#define RM_ENTRIES_MAX FILES_ENTRIES_MAX /* entries one request removes */
/* ... and for at most this long: PID 1 answers nothing else meanwhile, and celld waits 30 s
 * for an answer (a slow disk or an emulated machine removes far fewer entries per second). */
#define RM_TIME_MAX_S 10

struct rm_walk {
	const char *path; /* for messages: the directory the request names */
	dev_t dev;	  /* its filesystem: removal never crosses into another mount */
	unsigned long removed;
	struct timespec deadline; /* CLOCK_MONOTONIC */
};

/* Has the walk used its entries or its time? Checked per entry, the clock every 256. */
static bool rm_spent(const struct rm_walk *w)
{
	if (w->removed >= RM_ENTRIES_MAX)
		return true;
	if (w->removed % 256)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > w->deadline.tv_sec ||
	       (now.tv_sec == w->deadline.tv_sec && now.tv_nsec >= w->deadline.tv_nsec);
}

static int rm_contents(int fd, int depth, struct rm_walk *w, struct cell_error *err);

/* Remove name in dirfd, whatever it is now: unlink, and when it is a directory (EISDIR),
 * open it O_NOFOLLOW (a symlink swapped in fails with ELOOP/ENOTDIR and is unlinked as a
 * link on the next turn), empty it through that fd and rmdir it. Every step is relative to
 * an fd of a directory checked on this filesystem, so a racing process can move things
 * around inside the sandbox but never point the walk outside it. */
static int rm_entry(int dirfd, const char *name, int depth, struct rm_walk *w,
		    struct cell_error *err)
{
	for (int turn = 0; turn < 8; turn++) {
		if (rm_spent(w))
			return cell_err(err, EFBIG,
					"removing %s: more than %d entries or %d s in one request "
					"(removed %lu; the rest stays, remove it again)",
					w->path, RM_ENTRIES_MAX, RM_TIME_MAX_S, w->removed);
		if (unlinkat(dirfd, name, 0) == 0) {
			w->removed++;
			return 0;
		}
		if (errno == ENOENT)
			return 0;
		if (errno != EISDIR)
			return cell_err(err, errno, "removing %s/.../%s", w->path, name);
		int fd = openat(dirfd, name,
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
				continue; /* gone or swapped: look again */
			return cell_err(err, errno, "opening %s/.../%s", w->path, name);
		}
		struct stat st;
		int r = 0;
		if (fstat(fd, &st) < 0)
			r = cell_err(err, errno, "stat %s/.../%s", w->path, name);
		else if (st.st_dev != w->dev)
			r = cell_err(err, EBUSY,
				     "removing %s: %s below it is another mount; not crossed",
				     w->path, name);
		else if (depth >= RM_DEPTH_MAX)
			r = cell_err(err, ENAMETOOLONG, "removing %s: deeper than %d levels",
				     w->path, RM_DEPTH_MAX);
		else
			r = rm_contents(fd, depth + 1, w, err);
		close(fd);
		if (r < 0)
			return r;
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
			w->removed++;
			return 0;
		}
		if (errno == ENOENT)
			return 0;
		if (errno != ENOTEMPTY && errno != ENOTDIR)
			return cell_err(err, errno, "removing %s/.../%s", w->path, name);
		/* refilled or swapped meanwhile: another turn */
	}
	return cell_err(err, EBUSY, "removing %s: %s keeps changing", w->path, name);
}

/* Empty the directory open on fd: passes over its entries until one finds none. */
static int rm_contents(int fd, int depth, struct rm_walk *w, struct cell_error *err)
{
	for (;;) {
		int dfd = dup(fd);
		if (dfd < 0)
			return cell_err(err, errno, "removing %s", w->path);
		DIR *d = fdopendir(dfd);
		if (!d) {
			close(dfd);
			return cell_err(err, errno, "removing %s", w->path);
		}
		rewinddir(d);
		unsigned long seen = 0;
		int r = 0;
		struct dirent *de;
		while (r == 0 && (errno = 0, de = readdir(d))) {
			if (is_dot_name(de->d_name))
				continue;
			seen++;
			r = rm_entry(fd, de->d_name, depth, w, err);
		}
		if (r == 0 && errno)
			r = cell_err(err, errno, "reading a directory below %s", w->path);
		closedir(d);
		if (r < 0 || seen == 0)
			return r;
	}
}

/* {"path","recursive"}: recursive false removes one entry that is not a directory (a
 * symlink itself, never its target); true removes a directory and everything below it. */
void files_remove(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	struct split_path sp;
	json_t *jr = json_object_get(req, "recursive");
	if (get_path(req, "FILE_REMOVE", &path, &err) < 0 || split(path, &sp, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	if (jr && !json_is_boolean(jr)) {
		conn_fail(c, EINVAL, "FILE_REMOVE: recursive must be a boolean");
		return;
	}
	if (!sp.name[0] || is_dot_name(sp.name)) {
		conn_fail(c, EINVAL, "FILE_REMOVE: %s: refusing to remove it", path);
		return;
	}
	bool recursive = json_is_true(jr);
	int dirfd = cell_open_in_root(init_base.rootfd, sp.parent, O_PATH | O_DIRECTORY, 0, 0);
	if (dirfd < 0) {
		conn_fail(c, -dirfd, "removing %s: %s", path, strerror(-dirfd));
		return;
	}
	int r = files_refuse_process_state(dirfd, "removing in", path, &err);
	struct stat st;
	int fd = -1;
	if (r == 0) {
		fd = openat(dirfd, sp.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			r = cell_err(&err, errno, "removing %s", path);
		else
			r = files_refuse_process_state(fd, "removing", path, &err);
	}
	if (r == 0 && !recursive) {
		if (S_ISDIR(st.st_mode))
			r = cell_err(&err, EISDIR, "removing %s: is a directory", path);
		else if (unlinkat(dirfd, sp.name, 0) < 0)
			r = cell_err(&err, errno, "removing %s", path);
	} else if (r == 0) {
		struct rm_walk w = {.path = path, .dev = st.st_dev};
		clock_gettime(CLOCK_MONOTONIC, &w.deadline);
		w.deadline.tv_sec += RM_TIME_MAX_S;
		int dfd = -1;
		if (!S_ISDIR(st.st_mode))
			r = cell_err(&err, ENOTDIR, "removing %s: is a %s, not a directory", path,
				     type_name(st.st_mode));
		else if ((dfd = openat(dirfd, sp.name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
					   O_CLOEXEC)) < 0)
			r = cell_err(&err, errno == ELOOP ? ENOTDIR : errno, "removing %s", path);
		else if (fstat(dfd, &st) < 0 || st.st_dev != w.dev)
			r = cell_err(&err, EBUSY, "removing %s: it changed while opened", path);
		else if ((r = files_refuse_process_state(dfd, "removing", path, &err)) < 0)
			;
		else if ((r = rm_contents(dfd, 0, &w, &err)) == 0 &&
			 unlinkat(dirfd, sp.name, AT_REMOVEDIR) < 0)
			r = cell_err(&err, errno, "removing %s", path);
		if (dfd >= 0)
			close(dfd);
	}
	if (fd >= 0)
		close(fd);
	close(dirfd);
	answer_done(c, r, &err, "removed", true);
}

/* ---- FILE_LIST: listing and search ---- */

#define LIST_DEPTH_MAX	  FILES_DEPTH_MAX /* levels below the directory */
#define LIST_ENTRIES_MAX  10000		  /* entries (or search matches) one answer holds */
#define SEARCH_VISIT_MAX  200000	  /* entries one search looks at */
#define LIST_FRAME_BUDGET (48u << 10)

/* The sandbox's /etc/passwd or /etc/group read once per request and indexed by id, so a
 * listing of many entries with many owners costs one read and a binary search each. */
struct name_entry {
	uint32_t id, line;
	const char *name;
	size_t len;
};

static int name_entry_cmp(const void *a, const void *b)
{
	const struct name_entry *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

void files_names_load(struct files_names *ix, const char *db)
{
	size_t len = 0, cap = 0;
	ix->buf = read_name_db(db, &len);
	ix->v = NULL;
	ix->n = 0;
	for (char *line = ix->buf; line && line < ix->buf + len;) {
		struct db_line l;
		line = db_line_split(line, ix->buf + len, 3, &l);
		uint32_t v;
		size_t name_len = l.n == 3 ? l.len[0] : 0;
		if (name_len > 0 && name_len <= 256 && parse_id(l.f[2], l.len[2], &v)) {
			if (ix->n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct name_entry *nv = realloc(ix->v, ncap * sizeof(*nv));
				if (!nv)
					break;
				ix->v = nv;
				cap = ncap;
			}
			ix->v[ix->n] = (struct name_entry){v, (uint32_t)ix->n, l.f[0], name_len};
			ix->n++;
		}
	}
	if (ix->n)
		qsort(ix->v, ix->n, sizeof(*ix->v), name_entry_cmp);
}

void files_names_free(struct files_names *ix)
{
	free(ix->buf);
	free(ix->v);
}

const char *files_names_find(const struct files_names *ix, uint32_t id, size_t *len)
{
	size_t lo = 0, hi = ix->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ix->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= ix->n || ix->v[lo].id != id)
		return NULL;
	*len = ix->v[lo].len;
	return ix->v[lo].name;
}

/* The first line naming id (the same answer id_name gives), else the number. */
static json_t *name_index_get(const struct files_names *ix, uint32_t id)
{
	size_t len = 0;
	const char *found = files_names_find(ix, id, &len);
	json_t *name = found ? json_stringn(found, len) : NULL;
	if (!name) {
		char num[16];
		snprintf(num, sizeof(num), "%u", id);
		name = json_string(num);
	}
	return name;
}

/* Glob match of a search: '*' and '?' and [...] within one component (fnmatch with
 * FNM_PATHNAME), and a whole component "**" for any number of components. */
static bool glob_match(const char *pat, const char *path)
{
	if (!strncmp(pat, "**", 2) && (pat[2] == '/' || !pat[2])) {
		const char *rest = pat[2] ? pat + 3 : pat + 2;
		if (!*rest)
			return true;
		for (const char *p = path;; p++) {
			if ((p == path || p[-1] == '/') && glob_match(rest, p))
				return true;
			if (!*p)
				return false;
		}
	}
	const char *ps = strchr(pat, '/'), *xs = strchr(path, '/');
	size_t pl = ps ? (size_t)(ps - pat) : strlen(pat);
	size_t xl = xs ? (size_t)(xs - path) : strlen(path);
	char pc[NAME_MAX * 2 + 1], xc[NAME_MAX + 1];
	if (pl >= sizeof(pc) || xl >= sizeof(xc))
		return false;
	memcpy(pc, pat, pl);
	pc[pl] = '\0';
	memcpy(xc, path, xl);
	xc[xl] = '\0';
	if (fnmatch(pc, xc, FNM_PERIOD) != 0)
		return false;
	if (!ps || !xs)
		return !ps && !xs;
	return glob_match(ps + 1, xs + 1);
}

struct list_walk {
	struct conn *c;
	const char *pattern; /* NULL: a listing */
	size_t root_len;     /* length of the root's path, for relative paths */
	int max_depth;
	unsigned long emitted, visited, max_entries;
	struct files_names pw, gr;
	json_t *batch;
	size_t batch_bytes;
};

static void list_flush(struct list_walk *w)
{
	if (!json_array_size(w->batch))
		return;
	conn_send_json(w->c, CELL_FRAME_ENTRIES, json_pack("{s:O}", "entries", w->batch));
	json_array_clear(w->batch);
	w->batch_bytes = 0;
}

static int list_emit(struct list_walk *w, int dfd, const char *name, const char *path,
		     const struct stat *st, struct cell_error *err)
{
	if (w->emitted >= w->max_entries)
		return cell_err(err, EFBIG,
				"%s: more than %lu entries (ask for a smaller depth or a narrower "
				"pattern)",
				w->pattern ? "search" : "listing", w->max_entries);
	json_t *o = json_object();
	json_t *p = json_string(path);
	if (!o || !p) { /* a name that is not UTF-8 cannot be reported in JSON: left out */
		json_decref(o);
		json_decref(p);
		return 0;
	}
	json_object_set_new(o, "path", p);
	json_object_set_new(o, "type", json_string(type_name(st->st_mode)));
	json_object_set_new(o, "size", json_integer((json_int_t)st->st_size));
	json_object_set_new(o, "mode", json_integer(st->st_mode & 07777));
	json_object_set_new(o, "uid", json_integer(st->st_uid));
	json_object_set_new(o, "gid", json_integer(st->st_gid));
	json_object_set_new(o, "owner", name_index_get(&w->pw, st->st_uid));
	json_object_set_new(o, "group", name_index_get(&w->gr, st->st_gid));
	json_object_set_new(o, "mtime",
			    json_real((double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9));
	json_object_set_new(o, "ctime",
			    json_real((double)st->st_ctim.tv_sec + st->st_ctim.tv_nsec / 1e9));
	size_t meta = 0;
	if (S_ISLNK(st->st_mode))
		add_target(o, dfd, name);
	else
		meta = add_xattrs(o, dfd, name, st);
	/* Worst case of its encoding: every byte of the path escaped as \u00XX, every byte of
	 * metadata (printable ASCII) as \X. */
	size_t cost =
	    strlen(path) * 6 + 4096 + (S_ISLNK(st->st_mode) ? PATH_MAX * 6 : 0) + meta * 2;
	if (w->batch_bytes + cost > LIST_FRAME_BUDGET)
		list_flush(w);
	json_array_append_new(w->batch, o);
	w->batch_bytes += cost;
	w->emitted++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One directory open on fd, named path: its entries in lexical order, each followed by
 * what lies below it when it is a directory (opened O_NOFOLLOW relative to fd: a symlink
 * is reported, never entered, even one swapped in meanwhile). */
static int list_dir(struct list_walk *w, int fd, const char *path, int depth,
		    struct cell_error *err)
{
	int dfd = dup(fd);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return cell_err(err, errno, "reading %s", path);
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	unsigned long limit = w->pattern ? SEARCH_VISIT_MAX : w->max_entries;
	struct dirent *de;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		if (is_dot_name(de->d_name))
			continue;
		if (w->visited + n >= limit) {
			r = cell_err(err, EFBIG,
				     "%s: more than %lu entries below %s (ask for a smaller depth "
				     "or a narrower path)",
				     w->pattern ? "search" : "listing", limit, path);
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **nn = realloc(names, ncap * sizeof(*nn));
			if (!nn) {
				r = cell_err(err, ENOMEM, "reading %s", path);
				break;
			}
			names = nn;
			cap = ncap;
		}
		if (!(names[n] = strdup(de->d_name)))
			r = cell_err(err, ENOMEM, "reading %s", path);
		else
			n++;
	}
	if (r == 0 && errno)
		r = cell_err(err, errno, "reading %s", path);
	closedir(d);
	w->visited += n;
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	char child[PATH_MAX];
	for (size_t i = 0; i < n && r == 0; i++) {
		int len = snprintf(child, sizeof(child), "%s%s%s", path,
				   path[strlen(path) - 1] == '/' ? "" : "/", names[i]);
		if (len < 0 || (size_t)len >= sizeof(child))
			continue; /* deeper than a path can name */
		struct stat st;
		if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		bool is_dir = S_ISDIR(st.st_mode);
		if (!w->pattern)
			r = list_emit(w, fd, names[i], child, &st, err);
		else if (!is_dir && glob_match(w->pattern, strchr(w->pattern, '/')
							       ? child + w->root_len +
								     (child[w->root_len] == '/')
							       : names[i]))
			r = list_emit(w, fd, names[i], child, &st, err);
		if (r < 0 || !is_dir || depth + 1 >= w->max_depth)
			continue;
		int sub = openat(fd, names[i],
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub < 0)
			continue; /* swapped for a link, or gone: not entered */
		struct cell_error ignored;
		if (files_refuse_process_state(sub, "listing", child, &ignored) == 0)
			r = list_dir(w, sub, child, depth + 1, err);
		close(sub);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/* {"path","depth"?,"max_entries"?,"pattern"?}: without pattern, the entries below path up
 * to depth levels; with it, the non-directories at any depth (to LIST_DEPTH_MAX) whose
 * name (or, for a pattern with '/', path relative to path) matches. */
void files_list(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	json_int_t depth, max;
	json_t *jp = json_object_get(req, "pattern");
	if (get_path(req, "FILE_LIST", &path, &err) < 0 ||
	    get_int(req, "FILE_LIST", "depth", 1, LIST_DEPTH_MAX, 1, &depth, &err) < 0 ||
	    get_int(req, "FILE_LIST", "max_entries", 1, LIST_ENTRIES_MAX, LIST_ENTRIES_MAX, &max,
		    &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	if (jp &&
	    (!json_is_string(jp) || !json_string_length(jp) || json_string_length(jp) > 1024 ||
	     strlen(json_string_value(jp)) != json_string_length(jp))) {
		conn_fail(c, EINVAL, "FILE_LIST: pattern must be a string of 1 to 1024 bytes");
		return;
	}
	struct split_path sp;
	if (split(path, &sp, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int fd;
	if (!sp.name[0] || is_dot_name(sp.name) || sp.trailing_slash) {
		fd = cell_open_in_root(init_base.rootfd, path,
				       O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0, 0);
	} else {
		int pfd =
		    cell_open_in_root(init_base.rootfd, sp.parent, O_PATH | O_DIRECTORY, 0, 0);
		fd = pfd < 0 ? pfd
			     : openat(pfd, sp.name,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (pfd >= 0 && fd < 0)
			fd = -errno;
		if (fd == -ELOOP || fd == -ENOTDIR) {
			struct stat st;
			int e = -fd;
			if (fstatat(pfd, sp.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode)) {
				close(pfd);
				conn_fail(c, EINVAL,
					  "%s is a symbolic link: pass the directory it names",
					  path);
				return;
			}
			fd = -e;
		}
		if (pfd >= 0)
			close(pfd);
	}
	if (fd < 0) {
		conn_fail(c, -fd, "listing %s: %s", path,
			  -fd == ENOTDIR ? "not a directory" : strerror(-fd));
		return;
	}
	if (files_refuse_process_state(fd, "listing", path, &err) < 0) {
		close(fd);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	struct list_walk w = {
	    .c = c,
	    .pattern = jp ? json_string_value(jp) : NULL,
	    .root_len = strlen(path),
	    .max_depth = jp ? LIST_DEPTH_MAX : (int)depth,
	    .max_entries = (unsigned long)max,
	    .batch = json_array(),
	};
	while (w.root_len > 1 && path[w.root_len - 1] == '/')
		w.root_len--;
	files_names_load(&w.pw, "/etc/passwd");
	files_names_load(&w.gr, "/etc/group");
	int r = w.batch ? list_dir(&w, fd, path, 0, &err) : cell_err(&err, ENOMEM, "listing");
	close(fd);
	files_names_free(&w.pw);
	files_names_free(&w.gr);
	if (r == 0)
		list_flush(&w);
	json_decref(w.batch);
	if (r < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	conn_send(c, CELL_FRAME_END, NULL, 0);
	conn_finish(c);
}

/* ---- FILE_MOVE, FILE_CHMOD, FILE_REPLACE ---- */

#define REPLACE_FILE_MAX (8u << 20)  /* bytes of a file FILE_REPLACE rewrites */
#define REPLACE_TEXT_MAX (64u << 10) /* bytes of "old" and of "new" */

/* The directory holding path's last entry, resolved confined, and that entry's name (never
 * ".", ".." or the root's empty name). An O_PATH fd or -errno with err set. */
static int open_parent(const char *what, const char *path, struct split_path *sp,
		       struct cell_error *err)
{
	int r = split(path, sp, err);
	if (r < 0)
		return r;
	if (!sp->name[0] || is_dot_name(sp->name))
		return cell_err(err, EINVAL, "%s %s: names no entry", what, path);
	int fd = cell_open_in_root(init_base.rootfd, sp->parent, O_PATH | O_DIRECTORY, 0, 0);
	if (fd < 0)
		return cell_err(err, -fd, "%s %s", what, path);
	r = files_refuse_process_state(fd, what, path, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static const char *get_str(json_t *req, const char *key)
{
	json_t *j = json_object_get(req, key);
	return json_string_value(j);
}

/* {"src","dest"}: rename(2) of src's entry (a symlink is moved as a link) into dest's
 * directory, which must exist; an existing dest is replaced as rename(2) replaces it. */
void files_move(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *src = get_str(req, "src"), *dest = get_str(req, "dest");
	if (!src || !dest || src[0] != '/' || dest[0] != '/') {
		conn_fail(c, EINVAL, "FILE_MOVE: src and dest must be absolute paths");
		return;
	}
	struct split_path ss, ds;
	int sfd = open_parent("moving", src, &ss, &err);
	int dfd = sfd < 0 ? -1 : open_parent("moving to", dest, &ds, &err);
	int r = dfd < 0 ? -err.code : 0;
	if (r == 0 && ds.trailing_slash) {
		/* "dest/" names a directory: the entry keeps its name inside it. */
		close(dfd);
		dfd = cell_open_in_root(init_base.rootfd, dest, O_PATH | O_DIRECTORY, 0, 0);
		if (dfd < 0)
			r = cell_err(&err, -dfd, "moving to %s", dest);
		else if ((r = files_refuse_process_state(dfd, "moving to", dest, &err)) == 0)
			strcpy(ds.name, ss.name);
	}
	if (r == 0 && renameat(sfd, ss.name, dfd, ds.name) < 0)
		r = cell_err(&err, errno, "moving %s to %s", src, dest);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	answer_done(c, r, &err, "moved", true);
}

/* The entry path names, not followed, as an O_PATH fd with *st; a symbolic link is EINVAL
 * (its target is never changed through it). */
static int open_entry_nofollow(const char *what, const char *path, struct stat *st,
			       struct cell_error *err)
{
	struct split_path sp;
	int pfd, fd;
	if (!strcmp(path, "/")) {
		fd = dup(init_base.rootfd);
		if (fd < 0)
			return cell_err(err, errno, "%s /", what);
	} else {
		pfd = open_parent(what, path, &sp, err);
		if (pfd < 0)
			return pfd;
		fd = openat(pfd, sp.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			fd = cell_err(err, errno, "%s %s", what, path);
		close(pfd);
		if (fd < 0)
			return fd;
	}
	int r = files_refuse_process_state(fd, what, path, err);
	if (r == 0 && fstat(fd, st) < 0)
		r = cell_err(err, errno, "%s %s", what, path);
	if (r == 0 && S_ISLNK(st->st_mode))
		r = cell_err(err, EINVAL, "%s %s: is a symbolic link (never followed)", what, path);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* {"path","mode"?,"uid"|"owner"?,"gid"|"group"?}: owner first, then mode, on the entry
 * itself through its fd (a symbolic link is refused, never followed). */
void files_chmod(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	struct owner_req o;
	struct stat st;
	if (get_path(req, "FILE_CHMOD", &path, &err) < 0 ||
	    get_owner_req(req, "FILE_CHMOD", &o, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int fd = open_entry_nofollow("changing", path, &st, &err);
	if (fd < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int r = 0;
	if ((o.set_uid || o.set_gid) && fchownat(fd, "", o.set_uid ? o.uid : (uid_t)-1,
						 o.set_gid ? o.gid : (gid_t)-1, AT_EMPTY_PATH) < 0)
		r = cell_err(&err, errno, "chown %s", path);
	if (r == 0 && o.set_mode) {
		/* An O_PATH fd takes no fchmod(); its /proc/self/fd link names the same inode
		 * (not a symlink: refused above). */
		char link[32];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		if (chmod(link, o.mode) < 0)
			r = cell_err(&err, errno, "chmod %s", path);
	}
	close(fd);
	answer_done(c, r, &err, "changed", true);
}

static int read_all_fd(int fd, char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shrank meanwhile */
		got += (size_t)n;
	}
	return 0;
}

/* {"path","old","new"}: every occurrence of old (non-empty) replaced by new in the regular
 * file path (a symbolic link is refused). The result goes to a temporary file beside it,
 * given the file's owner and mode, renamed over it; nothing is written when old does not
 * occur. OK {"replaced":N}. */
void files_replace(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	const char *path;
	json_t *jo = json_object_get(req, "old"), *jn = json_object_get(req, "new");
	if (get_path(req, "FILE_REPLACE", &path, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	if (!json_is_string(jo) || !json_string_length(jo) ||
	    json_string_length(jo) > REPLACE_TEXT_MAX || !json_is_string(jn) ||
	    json_string_length(jn) > REPLACE_TEXT_MAX) {
		conn_fail(c, EINVAL,
			  "FILE_REPLACE: old (1 to %u bytes) and new (at most %u) must be strings",
			  REPLACE_TEXT_MAX, REPLACE_TEXT_MAX);
		return;
	}
	const char *old = json_string_value(jo), *new = json_string_value(jn);
	size_t olen = json_string_length(jo), nlen = json_string_length(jn);
	struct split_path sp;
	int dirfd = open_parent("replacing in", path, &sp, &err);
	if (dirfd < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	/* O_PATH first (no open code of what is there runs), checked, then opened through its
	 * fd: a process's state in /proc is never opened, a FIFO never waited on. */
	int pfd = openat(dirfd, sp.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int fd = -1;
	struct stat st;
	char *buf = NULL, *out = NULL;
	size_t count = 0, size = 0;
	int r = 0;
	if (pfd < 0)
		r = cell_err(&err, errno, "replacing in %s", path);
	else if ((r = files_refuse_process_state(pfd, "replacing in", path, &err)) < 0)
		;
	else if (fstat(pfd, &st) < 0)
		r = cell_err(&err, errno, "replacing in %s", path);
	else if (S_ISLNK(st.st_mode))
		r = cell_err(&err, EINVAL, "replacing in %s: is a symbolic link (never followed)",
			     path);
	else if (S_ISDIR(st.st_mode))
		r = cell_err(&err, EISDIR, "replacing in %s: is a directory", path);
	else if (!S_ISREG(st.st_mode))
		r = cell_err(&err, EINVAL, "replacing in %s: not a regular file", path);
	else if ((uint64_t)st.st_size > REPLACE_FILE_MAX)
		r = cell_err(&err, EFBIG, "replacing in %s: larger than %u bytes", path,
			     REPLACE_FILE_MAX);
	if (r == 0) {
		char link[32];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
		fd = open(link, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			r = cell_err(&err, errno, "replacing in %s", path);
		else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > REPLACE_FILE_MAX)
			r = cell_err(&err, EBUSY, "replacing in %s: it changed meanwhile", path);
	}
	if (pfd >= 0)
		close(pfd);
	if (r == 0 && !(buf = malloc((size_t)st.st_size + 1)))
		r = cell_err(&err, ENOMEM, "replacing in %s", path);
	if (r == 0 && (r = read_all_fd(fd, buf, (size_t)st.st_size)) < 0)
		r = cell_err(&err, -r, "reading %s", path);
	size = r == 0 ? (size_t)st.st_size : 0;
	for (const char *p = buf;
	     r == 0 && p && (p = memmem(p, size - (size_t)(p - buf), old, olen)); p += olen)
		count++;
	size_t out_len = size - count * olen + count * nlen;
	if (r == 0 && count && out_len > REPLACE_FILE_MAX)
		r = cell_err(&err, EFBIG, "replacing in %s: the result would pass %u bytes", path,
			     REPLACE_FILE_MAX);
	if (r == 0 && count && !(out = malloc(out_len + 1)))
		r = cell_err(&err, ENOMEM, "replacing in %s", path);
	if (r == 0 && count) {
		char *w = out;
		const char *p = buf, *end = buf + size;
		for (const char *m; (m = memmem(p, (size_t)(end - p), old, olen)); p = m + olen) {
			memcpy(w, p, (size_t)(m - p));
			w += m - p;
			memcpy(w, new, nlen);
			w += nlen;
		}
		memcpy(w, p, (size_t)(end - p));
		struct fwrite_op *op = calloc(1, sizeof(*op) + strlen(path) + 1);
		if (!op) {
			r = cell_err(&err, ENOMEM, "replacing in %s", path);
		} else {
			strcpy(op->path, path);
			snprintf(op->name, sizeof(op->name), "%s", sp.name);
			op->dirfd = dirfd;
			op->fd = -1;
			op->set_uid = op->set_gid = true;
			op->uid = st.st_uid;
			op->gid = st.st_gid;
			op->mode = st.st_mode & 07777;
			if ((r = make_tmp(op, &err)) == 0) {
				int wr = cell_write_all(op->fd, out, out_len);
				if (wr < 0)
					r = cell_err(&err, -wr, "writing %s", path);
			}
			if (r == 0)
				r = fwrite_commit(op, &err);
			fwrite_discard_tmp(op); /* nothing left behind on a failure */
			free(op);
		}
	}
	free(buf);
	free(out);
	if (fd >= 0)
		close(fd);
	close(dirfd);
	if (r < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	conn_send_json(c, CELL_FRAME_OK, json_pack("{s:I}", "replaced", (json_int_t)count));
	conn_finish(c);
}
