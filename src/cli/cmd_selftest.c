/* cell selftest: the escape battery, on this host and kernel, with a readable report.
 *
 * Two sandboxes are created through the API: a victim, which plants secrets (files in /tmp,
 * /dev/shm and /workspace, SysV objects, an abstract socket held by a daemon) and proves
 * they are reachable where they live; and the battery's sandbox, where the helper
 * (tests/security/escape.c, installed as cell-escape) tries every escape against the host,
 * PID 1 and the victim. From here, the host side tries to reach a marker file on the host
 * through the files API (`..`, absolute host paths, absolute and relative symlinks made
 * inside, a hard link, /proc magic links) and checks the marker is never read or changed.
 * The battery's sandbox also has a host directory as a volume, with root's files and a
 * device node in it: the helper tries them, plants set-id files and a file capability
 * there, and the host side checks that none of it belongs to root or acts for root.
 * Everything is reported as TAP with a summary; the sandboxes and the marker go away at the
 * end, also on ^C. Exit 0 only when every attempt passed (skips allowed). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <dirent.h>
#include <linux/nsfs.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "cell/pool.h"
#include "client.h"
#include "commands.h"
#include "create.h"
#include "delete.h"
#include "error.h"
#include "exec.h"
#include "global.h"
#include "output.h"
#include "signals.h"

#define HELPER_NAME   "cell-escape"
#define HELPER_IN_BOX "/tmp/cell-escape"
#define BATTERY_MS    (1800LL * 1000) /* the tools (apt, pip, npm, gdb) take a while */
#define SMALL_MS      (120LL * 1000)
#define CAPTURE_MAX   (8u << 20)
#define DOWNLOAD_MAX  (1u << 20)
#define VOLUME_IN_BOX "/vol"
/* The owner of the volume directory: an ordinary account's uid (login.defs gives users
 * 1000-60000), so that celld maps the sandbox's root to it, as for a CI checkout. */
#define VOLUME_OWNER 59999u

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell selftest [--image NAME] [--keep] [--json]\n"
		"\n"
		"Run cell's escape battery on this host and kernel: create two sandboxes, try\n"
		"every escape the threat model (man cell-security(7)) says is closed - denied\n"
		"syscalls, capabilities, mounts, /proc and /sys writes, device nodes, ptrace and\n"
		"signals outside, the other sandbox's files and IPC, the host's files through the\n"
		"files API with '..', symlinks, hard links and /proc magic links, leaked fds,\n"
		"set-id files, file capabilities and device nodes on a host volume -\n"
		"and check that ordinary work (dpkg, apt, pip, npm, git, gcc, strace, gdb, a\n"
		"server on port 80) still succeeds. Prints TAP and a summary; exits 0 only when\n"
		"every attempt passed. Tools missing from the image are skipped.\n"
		"\n"
		"Options:\n"
		"  -i, --image NAME   image of both sandboxes (default: default)\n"
		"      --keep         keep the sandboxes afterwards (their ids go to stderr)\n"
		"      --json         print the report as JSON\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n"
		"\n"
		"The helper that runs inside is %s next to the cell binary, else\n"
		"%s/%s.\n",
		HELPER_NAME, CELL_LIBEXEC_DIR, HELPER_NAME);
}

/* ---- the report --------------------------------------------------------------------- */

enum verdict { V_PASS, V_FAIL, V_SKIP };

struct result {
	enum verdict v;
	char *desc;   /* "class: attempt" */
	char *detail; /* what happened (failures, skips), or NULL */
};

struct report {
	struct result *r;
	size_t n, cap;
};

static void report_add(struct report *rep, enum verdict v, const char *desc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report_add(struct report *rep, enum verdict v, const char *desc, const char *fmt, ...)
{
	if (rep->n == rep->cap) {
		size_t cap = rep->cap ? rep->cap * 2 : 64;
		struct result *r = realloc(rep->r, cap * sizeof(*r));
		if (!r)
			return;
		rep->r = r;
		rep->cap = cap;
	}
	char *detail = NULL;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(&detail, fmt, ap) < 0)
			detail = NULL;
		va_end(ap);
		/* One TAP line per result: no newlines in the detail. */
		for (char *c = detail; c && *c; c++)
			if (*c == '\n' || *c == '\r')
				*c = ' ';
	}
	rep->r[rep->n++] = (struct result){v, strdup(desc), detail};
}

static void report_free(struct report *rep)
{
	for (size_t i = 0; i < rep->n; i++) {
		free(rep->r[i].desc);
		free(rep->r[i].detail);
	}
	free(rep->r);
}

/* One TAP line of the helper: "ok N - D", "ok N - D # SKIP W", "not ok N - D # W". Returns
 * true when it was a result line. */
static bool parse_tap_line(struct report *rep, char *line)
{
	bool ok;
	char *p;
	if (!strncmp(line, "ok ", 3)) {
		ok = true;
		p = line + 3;
	} else if (!strncmp(line, "not ok ", 7)) {
		ok = false;
		p = line + 7;
	} else {
		return false;
	}
	p += strspn(p, "0123456789");
	if (!strncmp(p, " - ", 3))
		p += 3;
	else
		p += strspn(p, " ");
	char *hash = strstr(p, " # ");
	char *detail = NULL;
	if (hash) {
		*hash = '\0';
		detail = hash + 3;
	}
	if (ok && detail && !strncmp(detail, "SKIP", 4)) {
		detail += 4;
		detail += strspn(detail, " ");
		report_add(rep, V_SKIP, p, "%s", detail);
	} else if (ok) {
		report_add(rep, V_PASS, p, NULL);
	} else {
		report_add(rep, V_FAIL, p, "%s", detail ? detail : "failed");
	}
	return true;
}

/* Merge the helper's TAP into the report. A battery that stops early (the helper killed,
 * a hung attempt) is a failure of its own, named. */
static void merge_tap(struct report *rep, const char *what, char *out, int exit_code,
		      const char *err_text)
{
	long plan = -1, seen = 0;
	bool failed = false;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "1..", 3)) {
			plan = strtol(line + 3, NULL, 10);
			continue;
		}
		size_t before = rep->n;
		if (parse_tap_line(rep, line)) {
			seen++;
			if (rep->n > before && rep->r[rep->n - 1].v == V_FAIL)
				failed = true;
		}
	}
	if (plan < 0 || seen != plan)
		report_add(rep, V_FAIL, what,
			   "the helper reported %ld of %ld attempts (exit code %d): %.400s", seen,
			   plan, exit_code, err_text && *err_text ? err_text : "no output");
	else if (exit_code != 0 && !failed)
		report_add(rep, V_FAIL, what, "the helper exited with %d: %.400s", exit_code,
			   err_text ? err_text : "");
}

/* ---- talking to the sandboxes ----------------------------------------------------------- */

/* A memfd's contents as a string. */
static char *memfd_text(int fd, size_t *len_out)
{
	off_t end = lseek(fd, 0, SEEK_END);
	if (end < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return NULL;
	size_t len = (size_t)end > CAPTURE_MAX ? CAPTURE_MAX : (size_t)end;
	char *buf = malloc(len + 1);
	if (!buf)
		return NULL;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	if (len_out)
		*len_out = got;
	return buf;
}

/* Run argv in sandbox id with its stdout and stderr captured (cli_exec_stream writes to
 * fds 1 and 2, which point at two memfds meanwhile). */
static int exec_capture(const char *id, char *const *argv, long long timeout_ms, int *exit_code,
			char **out, char **err_text, struct cell_error *err)
{
	*out = *err_text = NULL;
	_cleanup_close_ int ofd = memfd_create("cell-selftest-out", MFD_CLOEXEC);
	_cleanup_close_ int efd = memfd_create("cell-selftest-err", MFD_CLOEXEC);
	if (ofd < 0 || efd < 0)
		return cell_err(err, errno, "memfd_create");
	fflush(stdout);
	fflush(stderr);
	_cleanup_close_ int saved_out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	_cleanup_close_ int saved_err = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (saved_out < 0 || saved_err < 0)
		return cell_err(err, errno, "dup");
	dup2(ofd, STDOUT_FILENO);
	dup2(efd, STDERR_FILENO);
	struct cli_exec_req xr = {.id = id, .argv = argv, .timeout_ms = timeout_ms};
	int r = cli_exec_stream(&xr, exit_code, err);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, STDOUT_FILENO);
	dup2(saved_err, STDERR_FILENO);
	*out = memfd_text(ofd, NULL);
	*err_text = memfd_text(efd, NULL);
	if (!*out || !*err_text) {
		free(*out);
		free(*err_text);
		*out = *err_text = NULL;
		return r < 0 ? r : cell_err(err, ENOMEM, "reading the command's output");
	}
	return r;
}

/* Download path into *data (NUL-terminated). Returns 0 or the client's -errno. */
static int download_mem(const char *id, const char *path, char **data, size_t *len,
			struct cell_error *err)
{
	*data = NULL;
	_cleanup_close_ int fd = memfd_create("cell-selftest-dl", MFD_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "memfd_create");
	int r = cell_client_download(cli_client(), id, path, fd, err);
	*data = memfd_text(fd, len);
	if (!*data)
		return r < 0 ? r : cell_err(err, ENOMEM, "download");
	return r;
}

static int upload_mem(const char *id, const char *path, const char *data, struct cell_error *err)
{
	_cleanup_close_ int fd = memfd_create("cell-selftest-ul", MFD_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "memfd_create");
	if (cell_write_all(fd, data, strlen(data)) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return cell_err(err, errno, "memfd");
	return cell_client_upload(
	    cli_client(),
	    &(struct cell_client_upload){
		.id = id, .dest = path, .mode = 0644, .fd = fd, .filename = "cell-selftest"},
	    err);
}

static int file_info(const char *id, const char *path, char *code, size_t code_size,
		     struct cell_error *err)
{
	_cleanup_free_ char *enc = cell_client_urlencode(path);
	_cleanup_free_ char *url = NULL;
	if (!enc ||
	    asprintf(&url, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/files/info?path=%s", id, enc) < 0)
		return cell_err(err, ENOMEM, "files/info");
	json_t *out = NULL;
	int r =
	    cli_client_api_code("GET", url, NULL, "files/info", &out, NULL, code, code_size, err);
	json_decref(out);
	return r;
}

/* ---- the host side: a marker the files API must never reach ---------------------------- */

struct host_marker {
	char dir[256];	   /* $TMPDIR/cell-selftest.XXXXXX, 0755 */
	char path[280];	   /* <dir>/marker, 0666 */
	char drop[280];	   /* <dir>/dropzone, 0777, empty */
	char content[96];  /* what the marker holds */
	struct stat st;	   /* its stat when planted */
	char *image_file;  /* <images>/<image>/rootfs/etc/passwd */
	char *image_bytes; /* its contents before, or NULL when unreadable here */
	size_t image_len;
	char volume[256]; /* $TMPDIR/cell-selftest-volume.XXXXXX, the battery's /vol:
			     host-secret, host-public, host-null planted by root */
	struct stat public_st;
};

/* World-accessible on purpose: if a path ever escaped the sandbox, permissions would not be
 * what stopped it, and the attempt would show the escape. */
static int marker_plant(struct host_marker *m, const char *images_dir, const char *image)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	if (cell_id_random(rnd) < 0)
		return -EIO;
	/* $TMPDIR when it is an absolute path (tests keep it inside their own dir). */
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/' || strlen(tmp) > sizeof(m->dir) - 32)
		tmp = "/tmp";
	snprintf(m->dir, sizeof(m->dir), "%s/cell-selftest.XXXXXX", tmp);
	if (!mkdtemp(m->dir) || chmod(m->dir, 0755) < 0)
		return -errno;
	snprintf(m->path, sizeof(m->path), "%s/marker", m->dir);
	snprintf(m->drop, sizeof(m->drop), "%s/dropzone", m->dir);
	snprintf(m->content, sizeof(m->content), "cell-selftest-host-marker-%s\n", rnd);
	int fd = open(m->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	int r = cell_write_all(fd, m->content, strlen(m->content));
	if (r == 0 && (fchmod(fd, 0666) < 0 || fstat(fd, &m->st) < 0))
		r = -errno;
	close(fd);
	if (r < 0)
		return r;
	if (mkdir(m->drop, 0777) < 0 || chmod(m->drop, 0777) < 0)
		return -errno;
	snprintf(m->volume, sizeof(m->volume), "%s/cell-selftest-volume.XXXXXX", tmp);
	char p[300];
	if (!mkdtemp(m->volume) || chmod(m->volume, 0755) < 0 ||
	    chown(m->volume, VOLUME_OWNER, VOLUME_OWNER) < 0)
		return -errno;
	snprintf(p, sizeof(p), "%s/host-secret", m->volume);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 || close(fd) < 0)
		return -errno;
	snprintf(p, sizeof(p), "%s/host-public", m->volume);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		return -errno;
	r = cell_write_all(fd, "root's\n", 7);
	if (r == 0 && fstat(fd, &m->public_st) < 0)
		r = -errno;
	close(fd);
	snprintf(p, sizeof(p), "%s/host-null", m->volume);
	if (r < 0 || mknod(p, S_IFCHR | 0666, makedev(1, 3)) < 0)
		return r < 0 ? r : -errno;
	if (images_dir &&
	    asprintf(&m->image_file, "%s/%s/rootfs/etc/passwd", images_dir, image) >= 0) {
		_cleanup_close_ int ifd = open(m->image_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (ifd >= 0)
			m->image_bytes = memfd_text(ifd, &m->image_len);
	}
	return 0;
}

static void marker_remove(struct host_marker *m)
{
	if (!m->dir[0])
		return;
	DIR *d = opendir(m->drop);
	for (struct dirent *e; d && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(m->drop);
	d = m->volume[0] ? opendir(m->volume) : NULL;
	for (struct dirent *e; d && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	if (m->volume[0])
		rmdir(m->volume);
	unlink(m->path);
	rmdir(m->dir);
	free(m->image_file);
	free(m->image_bytes);
	m->dir[0] = '\0';
}

/* NULL when the host side is exactly as planted, else what changed (static buffer). */
static const char *marker_changed(const struct host_marker *m)
{
	static char why[512];
	struct stat st;
	if (lstat(m->path, &st) < 0)
		return snprintf(why, sizeof(why), "the host marker %s is gone", m->path), why;
	if (st.st_ino != m->st.st_ino || st.st_size != m->st.st_size ||
	    st.st_mtim.tv_sec != m->st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != m->st.st_mtim.tv_nsec || st.st_nlink != 1)
		return snprintf(why, sizeof(why), "the host marker %s was modified", m->path), why;
	_cleanup_close_ int fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *now = fd >= 0 ? memfd_text(fd, NULL) : NULL;
	if (!now || strcmp(now, m->content))
		return snprintf(why, sizeof(why), "the host marker %s changed content", m->path),
		       why;
	int entries = 0;
	DIR *d = opendir(m->dir);
	for (struct dirent *e; d && (e = readdir(d));)
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	d = opendir(m->drop);
	char first[256] = "";
	int dropped = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !dropped++)
			snprintf(first, sizeof(first), "%s", e->d_name);
	if (d)
		closedir(d);
	if (dropped)
		return snprintf(why, sizeof(why), "a file appeared on the host: %s/%s", m->drop,
				first),
		       why;
	if (entries != 2)
		return snprintf(why, sizeof(why), "%s now holds %d entries, want 2", m->dir,
				entries),
		       why;
	return NULL;
}

struct selftest {
	const char *image;
	struct report rep;
	struct host_marker m;
	char victim[CELL_ID_MAX + 1];  /* sandbox A: plants secrets, host-side attempts */
	char battery[CELL_ID_MAX + 1]; /* sandbox B: runs the battery */
	char secret[48];	       /* the victim's marker */
	long long victim_pid;
	char *victim_dir;
	char *victim_addr; /* its network address, NULL without a network */
	char *state_dir, *images_dir, *cgroup, *version;
};

/* A download must not succeed with host data. want: the client's -errno expected (0: any
 * refusal that is not a server failure). */
static void dl_attempt(struct selftest *t, const char *id, const char *desc, const char *path,
		       int want, const char *forbidden)
{
	char *data = NULL;
	size_t len = 0;
	struct cell_error err = {0};
	int r = download_mem(id, path, &data, &len, &err);
	if (data && forbidden && strstr(data, forbidden))
		report_add(&t->rep, V_FAIL, desc, "%s returned the host's data", path);
	else if (r == 0)
		report_add(&t->rep, V_FAIL, desc, "%s downloaded %zu bytes, want a refusal", path,
			   len);
	else if (want ? r != want : (r != -ENOENT && r != -EINVAL && r != -EACCES))
		report_add(&t->rep, V_FAIL, desc, "%s: %s", path, err.msg);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
	free(data);
}

static void ul_attempt(struct selftest *t, const char *desc, const char *path, bool must_refuse)
{
	struct cell_error err = {0};
	int r = upload_mem(t->victim, path, "cell-selftest-upload\n", &err);
	const char *changed = marker_changed(&t->m);
	if (changed)
		report_add(&t->rep, V_FAIL, desc, "upload to %s: %s", path, changed);
	else if (must_refuse && r == 0)
		report_add(&t->rep, V_FAIL, desc, "upload to %s succeeded, want a refusal", path);
	else if (r < 0 && r != -ENOENT && r != -EINVAL && r != -EACCES)
		report_add(&t->rep, V_FAIL, desc, "upload to %s: %s", path, err.msg);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
}

static void files_api_attempts(struct selftest *t)
{
	const char *D = t->m.dir, *M = t->m.content;
	char p[PATH_MAX];
	const char *A = t->victim;

	snprintf(p, sizeof(p), "/../../../../../../..%s/marker", D);
	dl_attempt(t, A, "files-api: download of /../..<host dir>/marker (..) finds nothing: 404",
		   p, -ENOENT, M);
	snprintf(p, sizeof(p), "%s/marker", D);
	dl_attempt(t, A,
		   "files-api: download of the marker's absolute host path finds nothing: 404", p,
		   -ENOENT, M);
	snprintf(p, sizeof(p), "/workspace/../../../../..%s/marker", D);
	char code[64] = "";
	struct cell_error err = {0};
	int r = file_info(A, p, code, sizeof(code), &err);
	if (r == -ENOENT && !strcmp(code, "FILE_NOT_FOUND"))
		report_add(&t->rep, V_PASS,
			   "files-api: info of /workspace/../..<host dir>/marker "
			   "finds nothing: 404",
			   NULL);
	else
		report_add(
		    &t->rep, V_FAIL,
		    "files-api: info of /workspace/../..<host dir>/marker finds nothing: 404", "%s",
		    r == 0 ? "found it" : err.msg);
	dl_attempt(t, A,
		   "files-api: download through an absolute symlink (made inside) to the marker "
		   "finds nothing: 404",
		   "/workspace/cell-links/abs", -ENOENT, M);
	dl_attempt(t, A,
		   "files-api: download through a relative symlink (../../..) to the marker finds "
		   "nothing: 404",
		   "/workspace/cell-links/rel", -ENOENT, M);
	dl_attempt(t, A,
		   "files-api: download through a symlinked directory to the marker finds nothing: "
		   "404",
		   "/workspace/cell-links/dir/marker", -ENOENT, M);
	snprintf(p, sizeof(p), "/proc/1/root%s/marker", D);
	dl_attempt(t, A, "files-api: download through the /proc/1/root magic link is refused", p, 0,
		   M);
	snprintf(p, sizeof(p), "/proc/self/root%s/marker", D);
	dl_attempt(t, A, "files-api: download through the /proc/self/root magic link is refused", p,
		   0, M);
	dl_attempt(t, A,
		   "files-api: download of /proc/self/fd/3 (cell-init's relay socket) is refused",
		   "/proc/self/fd/3", 0, M);
	snprintf(p, sizeof(p), "/proc/self/cwd/../../../../..%s/marker", D);
	dl_attempt(t, A, "files-api: download through the /proc/self/cwd magic link is refused", p,
		   0, M);

	snprintf(p, sizeof(p), "/../../../../../..%s/dropzone/up-dotdot", D);
	ul_attempt(t,
		   "files-api: upload to /../..<host dir>/dropzone (..) stays inside the sandbox",
		   p, false);
	snprintf(p, sizeof(p), "%s/marker", D);
	ul_attempt(t, "files-api: upload to the marker's absolute host path leaves it unchanged", p,
		   false);
	ul_attempt(t,
		   "files-api: upload through an absolute symlink to the host's dropzone stays "
		   "inside",
		   "/workspace/cell-links/updir/up-symlink", false);
	ul_attempt(t, "files-api: upload onto a symlink to the host marker leaves it unchanged",
		   "/workspace/cell-links/file", false);
	snprintf(p, sizeof(p), "/proc/1/root%s/dropzone/up-magic", D);
	ul_attempt(t, "files-api: upload through the /proc/1/root magic link is refused", p, true);

	/* The hard link: made inside to the image's /etc/passwd, written through, then
	 * uploaded onto. The image on the host stays as it was. */
	const char *hl = "files-api: writes through a hard link to an image file leave the host's "
			 "image unchanged";
	r = upload_mem(A, "/workspace/cell-links/hard", "cell-selftest-hardlink\n", &err);
	if (!t->m.image_bytes) {
		report_add(&t->rep, V_SKIP, hl, "%s is not readable here (run as root)",
			   t->m.image_file ? t->m.image_file : "the image");
	} else {
		_cleanup_close_ int fd = open(t->m.image_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		size_t len = 0;
		_cleanup_free_ char *now = fd >= 0 ? memfd_text(fd, &len) : NULL;
		if (!now || len != t->m.image_len || memcmp(now, t->m.image_bytes, len))
			report_add(&t->rep, V_FAIL, hl, "%s changed", t->m.image_file);
		else if (r < 0)
			report_add(&t->rep, V_FAIL, hl, "upload onto the hard link: %s", err.msg);
		else
			report_add(&t->rep, V_PASS, hl, NULL);
	}

	/* The other sandbox's files through the battery sandbox's files API. */
	snprintf(p, sizeof(p), "/proc/%lld/root/tmp/cell-secret-%s", t->victim_pid, t->secret);
	dl_attempt(t, t->battery,
		   "files-api: another sandbox's /tmp file through /proc/<its host pid>/root is "
		   "refused",
		   p, 0, t->secret);
	if (t->victim_dir) {
		snprintf(p, sizeof(p), "%s/upper/workspace/cell-secret-%s", t->victim_dir,
			 t->secret);
		dl_attempt(t, t->battery,
			   "files-api: another sandbox's layer through its host path finds "
			   "nothing: 404",
			   p, -ENOENT, t->secret);
	}

	const char *changed = marker_changed(&t->m);
	if (changed)
		report_add(&t->rep, V_FAIL, "files-api: the host marker was never changed", "%s",
			   changed);
	else
		report_add(&t->rep, V_PASS, "files-api: the host marker was never changed", NULL);
}

/* Controls: the files API works, and the victim's secret is where the battery looks. */
static void files_api_controls(struct selftest *t)
{
	const char *desc = "ordinary: files API upload and download round-trip";
	struct cell_error err = {0};
	char *data = NULL;
	int r = upload_mem(t->victim, "/workspace/cell-selftest-roundtrip", "round-trip\n", &err);
	if (r == 0)
		r = download_mem(t->victim, "/workspace/cell-selftest-roundtrip", &data, NULL,
				 &err);
	if (r < 0)
		report_add(&t->rep, V_FAIL, desc, "%s", err.msg);
	else if (!data || strcmp(data, "round-trip\n"))
		report_add(&t->rep, V_FAIL, desc, "downloaded '%.80s'", data ? data : "");
	else
		report_add(&t->rep, V_PASS, desc, NULL);
	free(data);
	data = NULL;

	desc = "other-sandbox: control: its /workspace secret downloads from its own sandbox";
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/workspace/cell-secret-%s", t->secret);
	r = download_mem(t->victim, p, &data, NULL, &err);
	if (r < 0)
		report_add(&t->rep, V_FAIL, desc, "%s", err.msg);
	else if (!data || strcmp(data, t->secret))
		report_add(&t->rep, V_FAIL, desc, "downloaded '%.80s'", data ? data : "");
	else
		report_add(&t->rep, V_PASS, desc, NULL);
	free(data);
}

/* ---- the run ------------------------------------------------------------------------------ */

static int find_helper(char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			int w = snprintf(buf, size, "%s/%s", exe, HELPER_NAME);
			if (w > 0 && (size_t)w < size && access(buf, R_OK) == 0)
				return 0;
		}
	}
	snprintf(buf, size, "%s/%s", CELL_LIBEXEC_DIR, HELPER_NAME);
	return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

static char *jdup(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? strdup(s) : NULL;
}

static int get_info(struct selftest *t, struct cell_error *err)
{
	json_t *info = NULL;
	int r = cli_client_api("GET", "/v1/info", NULL, "info", &info, NULL, err);
	if (r < 0)
		return r;
	t->version = jdup(info, "version");
	t->cgroup = jdup(info, "cgroup");
	t->state_dir = jdup(info, "stateDir");
	t->images_dir = jdup(info, "imagesDir");
	json_decref(info);
	return 0;
}

/* GET /v1/sandboxes/{id}/inspect into *j (a new reference). */
static int inspect(const char *id, json_t **j, struct cell_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/inspect", id);
	*j = NULL;
	return cli_client_api("GET", path, NULL, "inspect", j, NULL, err);
}

static int inspect_victim(struct selftest *t, struct cell_error *err)
{
	json_t *j;
	int r = inspect(t->victim, &j, err);
	if (r < 0)
		return r;
	t->victim_pid = json_integer_value(json_object_get(j, "pid"));
	t->victim_dir = jdup(j, "dir");
	t->victim_addr = jdup(json_object_get(j, "network"), "address");
	json_decref(j);
	return 0;
}

static int upload_helper(const char *id, const char *helper, struct cell_error *err)
{
	_cleanup_close_ int fd = open(helper, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", helper);
	return cell_client_upload(
	    cli_client(),
	    &(struct cell_client_upload){
		.id = id, .dest = HELPER_IN_BOX, .mode = 0755, .fd = fd, .filename = HELPER_NAME},
	    err);
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("cell selftest: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Run argv in id and merge its TAP; what names the step in failures. */
static int run_helper(struct selftest *t, const char *id, char *const *argv, long long ms,
		      const char *what)
{
	int code = -1;
	char *out = NULL, *errt = NULL;
	struct cell_error err = {0};
	int r = exec_capture(id, argv, ms, &code, &out, &errt, &err);
	if (r < 0) {
		report_add(&t->rep, V_FAIL, what, "%s", err.msg);
	} else {
		merge_tap(&t->rep, what, out, code, errt);
	}
	free(out);
	free(errt);
	return r;
}

static int make_links(struct selftest *t)
{
	char *argv[] = {HELPER_IN_BOX, "--links", t->m.dir, NULL};
	int code = -1;
	char *out = NULL, *errt = NULL;
	struct cell_error err = {0};
	int r = exec_capture(t->victim, argv, SMALL_MS, &code, &out, &errt, &err);
	if (r == 0 && code != 0)
		report_add(&t->rep, V_FAIL, "files-api: making the links inside",
			   "exit code %d: %.400s", code, errt ? errt : "");
	else if (r < 0)
		report_add(&t->rep, V_FAIL, "files-api: making the links inside", "%s", err.msg);
	free(out);
	free(errt);
	return r == 0 && code == 0 ? 0 : -1;
}

static int run_battery(struct selftest *t)
{
	char pid[32], vpid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	snprintf(vpid, sizeof(vpid), "%lld", t->victim_pid);
	char *argv[20];
	size_t n = 0;
	argv[n++] = HELPER_IN_BOX;
	argv[n++] = "--victim";
	argv[n++] = t->secret;
	argv[n++] = "--victim-pid";
	argv[n++] = vpid;
	if (t->victim_dir) {
		argv[n++] = "--victim-dir";
		argv[n++] = t->victim_dir;
	}
	if (t->victim_addr) {
		argv[n++] = "--net-peer";
		argv[n++] = t->victim_addr;
	}
	argv[n++] = "--host-pid";
	argv[n++] = pid;
	if (t->state_dir) {
		argv[n++] = "--host-path";
		argv[n++] = t->state_dir;
	}
	if (t->images_dir) {
		argv[n++] = "--host-path";
		argv[n++] = t->images_dir;
	}
	argv[n] = NULL;
	return run_helper(t, t->battery, argv, BATTERY_MS, "battery: the helper ran to the end");
}

/* ---- volumes: what the sandbox left in a host directory ---------------------------------- */

/* The host ids the sandbox's root (uid and gid) and its uid 1 have on the volume. */
struct volume_ids {
	char map[16];
	uint32_t root_uid, root_gid, one;
};

static int volume_ids(const struct selftest *t, struct volume_ids *v, struct cell_error *err)
{
	json_t *j;
	int r = inspect(t->battery, &j, err);
	if (r < 0)
		return r;
	json_t *vol = json_array_get(json_object_get(j, "volumes"), 0);
	uint32_t base = (uint32_t)json_integer_value(
	    json_object_get(json_object_get(j, "uidMap"), "hostStart"));
	const char *map = json_string_value(json_object_get(vol, "map"));
	snprintf(v->map, sizeof(v->map), "%s", map ? map : "?");
	json_t *uid = json_object_get(vol, "uid"), *gid = json_object_get(vol, "gid");
	bool owner = !strcmp(v->map, "owner");
	v->root_uid = owner ? (uint32_t)json_integer_value(uid) : base;
	v->root_gid = owner && gid ? (uint32_t)json_integer_value(gid) : base;
	if (!strcmp(v->map, "identity"))
		v->root_uid = v->root_gid = 0;
	v->one = strcmp(v->map, "identity") ? base + 1 : 1;
	json_decref(j);
	return 0;
}

static void check_planted(struct selftest *t, const struct volume_ids *v, const char *name,
			  const char *desc, uint32_t want_uid, uint32_t want_gid)
{
	char p[320];
	snprintf(p, sizeof(p), "%s/%s", t->m.volume, name);
	struct stat st;
	if (lstat(p, &st) < 0)
		report_add(&t->rep, V_FAIL, desc, "%s was not planted: %s", p, strerror(errno));
	else if (st.st_uid == 0 || st.st_gid == 0 || st.st_uid != want_uid || st.st_gid != want_gid)
		report_add(&t->rep, V_FAIL, desc,
			   "%s (mode %o) is %u:%u on the host, want %u:%u (map %s)", p,
			   (unsigned)st.st_mode & 07777, (unsigned)st.st_uid, (unsigned)st.st_gid,
			   want_uid, want_gid, v->map);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
}

/* A file capability written inside is stored as version 3, bound to the uid the sandbox's
 * root has on the volume: it acts only in user namespaces whose root that uid is. */
static void check_capability(struct selftest *t, const struct volume_ids *v)
{
	const char *desc = "volumes: a file capability made on a volume never acts for host root";
	char p[320];
	snprintf(p, sizeof(p), "%s/planted-capped", t->m.volume);
	unsigned char b[64];
	ssize_t n = getxattr(p, "security.capability", b, sizeof(b));
	if (n < 0 && errno == ENODATA) {
		report_add(&t->rep, V_PASS, desc, NULL);
		return;
	}
	uint32_t magic =
	    n >= 4 ? (uint32_t)b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24 : 0;
	uint32_t rootid =
	    n >= 24 ? (uint32_t)b[20] | b[21] << 8 | b[22] << 16 | (uint32_t)b[23] << 24 : 0;
	if (n < 0)
		report_add(&t->rep, V_FAIL, desc, "reading it from %s: %s", p, strerror(errno));
	else if ((magic >> 24) != 3 || rootid == 0 || rootid != v->root_uid)
		report_add(&t->rep, V_FAIL, desc,
			   "%s carries a version %u capability bound to uid %u (want version 3, "
			   "uid %u)",
			   p, magic >> 24, (magic >> 24) == 3 ? rootid : 0, v->root_uid);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
}

static void run_volume(struct selftest *t)
{
	char *argv[] = {HELPER_IN_BOX, "--volume", VOLUME_IN_BOX, NULL};
	run_helper(t, t->battery, argv, SMALL_MS, "volumes: the helper ran to the end");
	struct volume_ids v;
	struct cell_error err = {0};
	if (volume_ids(t, &v, &err) < 0) {
		report_add(&t->rep, V_FAIL, "volumes: the battery's volume", "%s", err.msg);
		return;
	}
	check_planted(t, &v, "planted-suid",
		      "volumes: a set-uid file made on a volume is the owner's on the host, not "
		      "root's",
		      v.root_uid, v.root_gid);
	check_planted(t, &v, "planted-sgid",
		      "volumes: a set-gid file made on a volume is the owner's group's, not root's",
		      v.root_uid, v.root_gid);
	check_planted(t, &v, "planted-other",
		      "volumes: the sandbox's other ids land in its own range, not on host "
		      "accounts",
		      v.one, v.one);
	check_capability(t, &v);
	char p[320];
	snprintf(p, sizeof(p), "%s/host-public", t->m.volume);
	struct stat st;
	const char *desc = "volumes: root's files on a volume are unchanged";
	if (lstat(p, &st) < 0 || st.st_ino != t->m.public_st.st_ino ||
	    st.st_mode != t->m.public_st.st_mode || st.st_uid != 0 ||
	    st.st_size != t->m.public_st.st_size)
		report_add(&t->rep, V_FAIL, desc, "%s changed", p);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
}

/* ---- pools: the kernel's per-user pools, each sandbox's own --------------------------- */

/* The battery's sandbox's user namespace is owned by its own first host uid: what its
 * processes take of the per-user pools is charged to that uid, not to root's. */
static void check_ns_owner(struct selftest *t)
{
	const char *desc = "pools: the sandbox's user namespace is owned by its own host uid";
	json_t *j;
	struct cell_error err = {0};
	if (inspect(t->battery, &j, &err) < 0) {
		report_add(&t->rep, V_FAIL, desc, "%s", err.msg);
		return;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%lld/ns/user",
		 (long long)json_integer_value(json_object_get(j, "pid")));
	json_int_t base =
	    json_integer_value(json_object_get(json_object_get(j, "uidMap"), "hostStart"));
	json_decref(j);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	uid_t owner = (uid_t)-1;
	if (fd < 0 || ioctl(fd, NS_GET_OWNER_UID, &owner) < 0)
		report_add(&t->rep, geteuid() ? V_SKIP : V_FAIL, desc, "%s: %s", path,
			   strerror(errno));
	else if ((json_int_t)owner != base)
		report_add(&t->rep, V_FAIL, desc, "owned by uid %u, the sandbox's is %lld",
			   (unsigned)owner, (long long)base);
	else
		report_add(&t->rep, V_PASS, desc, NULL);
}

/* The battery's sandbox takes all of each pool it is given and holds it; host root (this
 * process, when run as root) and the victim sandbox must still get theirs. */
static void run_pools(struct selftest *t)
{
	check_ns_owner(t);
	char *hold[] = {HELPER_IN_BOX, "--pools", "600", NULL};
	if (run_helper(t, t->battery, hold, SMALL_MS, "pools: the helper ran to the end") < 0)
		return;
	static const char *const what[] = {"an inotify instance", "a POSIX timer",
					   "a message queue"};
	for (int p = POOL_INOTIFY; p <= POOL_MQUEUE; p++) {
		char desc[160];
		snprintf(desc, sizeof(desc),
			 "pools: host root still gets %s while a sandbox holds all of its own",
			 what[p]);
		if (geteuid()) {
			report_add(&t->rep, V_SKIP, desc, "run as root to check root's share");
			continue;
		}
		int r = pool_try((enum pool)p);
		if (r < 0)
			report_add(&t->rep, V_FAIL, desc, "refused: %s", strerror(-r));
		else
			report_add(&t->rep, V_PASS, desc, NULL);
	}
	char *some[] = {HELPER_IN_BOX, "--pools-some", NULL};
	run_helper(t, t->victim, some, SMALL_MS, "pools: the other sandbox's helper ran");
}

/* The steps, in order; stops at the first failure of cell itself or at ^C. */
static int selftest_run(struct selftest *t, const char *helper)
{
	struct cell_error err = {0};
	struct cli_create_opts co = {.image = t->image};
	char rnd[CELL_ID_RANDOM_LEN + 1];
	if (cell_id_random(rnd) < 0)
		return cell_err_msg(&err, EIO, "random"), -EIO;
	snprintf(t->secret, sizeof(t->secret), "%s", rnd);

	progress("creating two sandboxes of image '%s'", t->image);
	if (cli_create_sandbox(&co, t->victim, sizeof(t->victim), NULL, &err) < 0 ||
	    cli_signals_caught)
		goto fail;
	/* The battery's sandbox has the host directory as a volume. */
	struct cli_create_opts bo = co;
	bo.volumes = json_pack("[{s:s, s:s}]", "host", t->m.volume, "dest", VOLUME_IN_BOX);
	int br = cli_create_sandbox(&bo, t->battery, sizeof(t->battery), NULL, &err);
	json_decref(bo.volumes);
	if (br < 0 || cli_signals_caught)
		goto fail;
	if (inspect_victim(t, &err) < 0 || upload_helper(t->victim, helper, &err) < 0 ||
	    upload_helper(t->battery, helper, &err) < 0 || cli_signals_caught)
		goto fail;

	progress("planting secrets in sandbox %s", t->victim);
	char *plant[] = {HELPER_IN_BOX, "--plant", t->secret, NULL};
	if (run_helper(t, t->victim, plant, SMALL_MS, "other-sandbox: planting the secrets") < 0 ||
	    cli_signals_caught)
		goto fail;

	progress("files API attempts on the host marker in %s", t->m.dir);
	files_api_controls(t);
	if (make_links(t) == 0)
		files_api_attempts(t);
	if (cli_signals_caught)
		goto fail;

	progress("running the battery in sandbox %s (a few minutes with the default image)",
		 t->battery);
	if (run_battery(t) < 0 || cli_signals_caught)
		goto fail;
	progress("volume attempts on the host directory %s", t->m.volume);
	run_volume(t);
	if (cli_signals_caught)
		goto fail;
	progress("the kernel's per-user pools: sandbox %s takes all of its own", t->battery);
	run_pools(t);
	if (cli_signals_caught)
		goto fail;
	return 0;
fail:
	if (cli_signals_caught)
		return -EINTR;
	cli_error("selftest: %s", err.msg[0] ? err.msg : "failed");
	return -EIO;
}

/* ---- output ------------------------------------------------------------------------------- */

static void counts(const struct report *rep, size_t *pass, size_t *fail, size_t *skip)
{
	*pass = *fail = *skip = 0;
	for (size_t i = 0; i < rep->n; i++) {
		if (rep->r[i].v == V_PASS)
			(*pass)++;
		else if (rep->r[i].v == V_FAIL)
			(*fail)++;
		else
			(*skip)++;
	}
}

static void print_tap(const struct selftest *t, const struct utsname *u)
{
	printf("# cell selftest: kernel %s %s (%s), cgroup %s, celld %s\n", u->release, u->version,
	       u->machine, t->cgroup ? t->cgroup : "?", t->version ? t->version : "?");
	printf("# image %s; battery in sandbox %s, victim sandbox %s\n", t->image,
	       t->battery[0] ? t->battery : "-", t->victim[0] ? t->victim : "-");
	printf("1..%zu\n", t->rep.n);
	for (size_t i = 0; i < t->rep.n; i++) {
		const struct result *r = &t->rep.r[i];
		if (r->v == V_PASS)
			printf("ok %zu - ", i + 1);
		else
			printf("%s %zu - ", r->v == V_FAIL ? "not ok" : "ok", i + 1);
		cli_output_safe(r->desc, stdout);
		if (r->v != V_PASS) {
			fputs(r->v == V_SKIP ? " # SKIP " : " # ", stdout);
			cli_output_safe(r->detail ? r->detail : "", stdout);
		}
		putchar('\n');
	}
	size_t pass, fail, skip;
	counts(&t->rep, &pass, &fail, &skip);
	printf("# %zu attempts: %zu passed, %zu failed, %zu skipped\n", t->rep.n, pass, fail, skip);
	for (size_t i = 0; i < t->rep.n; i++)
		if (t->rep.r[i].v == V_FAIL) {
			printf("# FAILED %zu - ", i + 1);
			cli_output_safe(t->rep.r[i].desc, stdout);
			putchar('\n');
		}
	printf("# %s\n", fail ? "cell's isolation is NOT as documented on this host: see the "
				"failures above and cell-security(7)"
			      : "every attempt was stopped and ordinary work succeeded");
}

static void print_json(const struct selftest *t, const struct utsname *u)
{
	size_t pass, fail, skip;
	counts(&t->rep, &pass, &fail, &skip);
	json_t *results = json_array();
	for (size_t i = 0; i < t->rep.n; i++) {
		const struct result *r = &t->rep.r[i];
		static const char *const names[] = {"pass", "fail", "skip"};
		json_t *o = json_pack("{s:I, s:s, s:s}", "n", (json_int_t)i + 1, "result",
				      names[r->v], "attempt", r->desc);
		if (o && r->detail)
			json_object_set_new(o, "detail", json_string(r->detail));
		json_array_append_new(results, o);
	}
	json_t *j =
	    json_pack("{s:{s:s, s:s, s:s}, s:s?, s:s?, s:s, s:I, s:I, s:I, s:I, s:o}", "kernel",
		      "release", u->release, "version", u->version, "machine", u->machine, "cgroup",
		      t->cgroup, "celld", t->version, "image", t->image, "total",
		      (json_int_t)t->rep.n, "passed", (json_int_t)pass, "failed", (json_int_t)fail,
		      "skipped", (json_int_t)skip, "results", results);
	cli_output_json(j);
	json_decref(j);
}

static void cleanup(struct selftest *t, bool keep)
{
	const char *ids[] = {t->victim, t->battery};
	for (size_t i = 0; i < 2; i++) {
		if (!ids[i][0])
			continue;
		if (keep) {
			fprintf(stderr, "cell selftest: kept sandbox %s\n", ids[i]);
			continue;
		}
		struct cell_error err = {0};
		if (cli_delete_sandbox(ids[i], &err) < 0)
			cli_error("%s", err.msg);
	}
	marker_remove(&t->m);
}

enum { OPT_KEEP = 0x2000 };

int cmd_selftest(int argc, char **argv)
{
	static const struct option longopts[] = {{"image", required_argument, NULL, 'i'},
						 {"keep", no_argument, NULL, OPT_KEEP},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	struct selftest t = {.image = "default"};
	bool keep = false;
	int c;
	while ((c = getopt_long(argc, argv, "+hi:", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		switch (c) {
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		case 'i':
			t.image = optarg;
			break;
		case OPT_KEEP:
			keep = true;
			break;
		default:
			return cli_error_option("selftest", CLI_EXIT_USAGE);
		}
	}
	if (optind != argc)
		return cli_error_usage("selftest", CLI_EXIT_USAGE, "unexpected argument '%s'",
				       argv[optind]);
	char helper[PATH_MAX];
	if (find_helper(helper, sizeof(helper)) < 0) {
		cli_error("selftest: no %s next to the cell binary nor in %s", HELPER_NAME,
			  CELL_LIBEXEC_DIR);
		return CLI_EXIT_FAIL;
	}
	struct utsname u;
	uname(&u);
	struct cell_error err = {0};
	if (get_info(&t, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	/* From here a signal must not kill the CLI before the sandboxes are deleted. */
	cli_signals_install();
	int r = marker_plant(&t.m, t.images_dir, t.image);
	if (r < 0) {
		cli_error("selftest: planting the host marker: %s", strerror(-r));
		marker_remove(&t.m);
		return CLI_EXIT_FAIL;
	}
	r = selftest_run(&t, helper);
	cleanup(&t, keep);
	int code;
	if (r == -EINTR) {
		cli_error("selftest: interrupted%s", keep ? "" : "; its sandboxes were deleted");
		code = 128 + cli_signals_caught;
	} else {
		if (cli.json)
			print_json(&t, &u);
		else
			print_tap(&t, &u);
		size_t pass, fail, skip;
		counts(&t.rep, &pass, &fail, &skip);
		code = r < 0 || fail ? CLI_EXIT_FAIL : CLI_EXIT_OK;
	}
	report_free(&t.rep);
	free(t.victim_dir);
	free(t.victim_addr);
	free(t.state_dir);
	free(t.images_dir);
	free(t.cgroup);
	free(t.version);
	return code;
}
