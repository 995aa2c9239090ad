/* cell cp: copy one file into a sandbox (multipart upload) or out of it (download), or a
 * directory out of it (its tar archive, unpacked here by untar.c or written to stdout). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "signals.h"
#include "untar.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell cp SRC DST\n"
		"\n"
		"Copy one file between the host and a sandbox, or a directory out of a sandbox.\n"
		"Exactly one side is ID:/path.\n"
		"  cell cp ./build.sh ID:/workspace/     upload (keeps the file's mode)\n"
		"  cell cp ID:/workspace/out.log ./      download (into a file or directory)\n"
		"  cell cp ID:/etc/os-release -          download to stdout\n"
		"  cell cp - ID:/workspace/in.txt        upload from stdin (mode 0644)\n"
		"  cell cp ID:/workspace/proj ./         a directory: into ./proj (DST a\n"
		"                                        directory), or DST itself when it\n"
		"                                        does not exist yet\n"
		"  cell cp ID:/workspace/proj - >p.tar   a directory as a tar archive on stdout\n"
		"\n"
		"A directory comes as a tar archive made inside the sandbox and is unpacked\n"
		"here as hostile input: no absolute names or '..', no symbolic link followed\n"
		"(links are made as links), no set-id bits, owners not kept, at most 100000\n"
		"entries. An archive cut short in the sandbox is an error (what came stays).\n"
		"\n"
		"Options:\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n");
}

struct remote {
	char id[CELL_ID_MAX + 1];
	const char *path;
};

/* "ID:/path", ID a sandbox's id, name or unique start of an id (characters of ids and
 * names only). A local name containing ':' can be written "./a:b". */
static int parse_remote(const char *arg, struct remote *r)
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon == arg || (size_t)(colon - arg) > CELL_ID_MAX)
		return 0;
	char word[CELL_ID_MAX + 1];
	memcpy(word, arg, (size_t)(colon - arg));
	word[colon - arg] = '\0';
	if (strspn(word, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
	    strlen(word))
		return 0;
	const char *id = cli_resolve_id(word);
	if (!id)
		return -ENOENT;
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->path = colon + 1;
	if (r->path[0] != '/') {
		cli_error("cp: %s: the path in the sandbox must be absolute", arg);
		return -EINVAL;
	}
	return 1;
}

/* FileInfo.mode: an integer whose decimal digits are the octal permission (755). */
static unsigned mode_from_digits(json_int_t v)
{
	unsigned m = 0, shift = 0;
	for (; v > 0 && shift < 12; v /= 10, shift += 3)
		m |= (unsigned)(v % 10 & 7) << shift;
	return m;
}

/* GET /files/info for one path; *info is the FileInfo object (owned by *resp). */
static int remote_info(const struct remote *r, json_t **resp, json_t **info, struct cell_error *err)
{
	_cleanup_free_ char *enc = cell_client_urlencode(r->path);
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *what = NULL;
	if (!enc ||
	    asprintf(&path, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/files/info?path=%s", r->id, enc) <
		0 ||
	    asprintf(&what, "%s:%s", r->id, r->path) < 0)
		return cell_err(err, ENOMEM, "stat %s:%s", r->id, r->path);
	int ret = cli_client_api("GET", path, NULL, what, resp, NULL, err);
	if (ret < 0)
		return ret;
	/* {"<path>": {FileInfo}}: take the entry of our path, else the only one. */
	*info = json_object_get(*resp, r->path);
	if (!json_is_object(*info) && json_object_size(*resp) == 1)
		*info = json_object_iter_value(json_object_iter(*resp));
	if (!json_is_object(*info))
		return cell_err_msg(err, EPROTO, "%s: celld's file info has no entry", what);
	return 0;
}

static bool info_is_dir(json_t *info)
{
	const char *type = json_string_value(json_object_get(info, "type"));
	return type && (!strcmp(type, "directory") || !strcmp(type, "dir"));
}

static int upload(const char *src, const struct remote *r)
{
	_cleanup_close_ int fd = -1;
	unsigned mode = 0644;
	_cleanup_free_ char *src_copy = strdup(src);
	if (!src_copy)
		return CLI_EXIT_FAIL;
	const char *name = "stdin";
	if (!strcmp(src, "-")) {
		fd = dup(STDIN_FILENO);
	} else {
		fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			cli_error("cp: %s: %s", src, strerror(errno));
			return CLI_EXIT_FAIL;
		}
		if (!S_ISREG(st.st_mode)) {
			cli_error(
			    "cp: %s: not a regular file (cp copies single files into a sandbox)",
			    src);
			return CLI_EXIT_FAIL;
		}
		/* celld refuses set-id and sticky bits on upload: send the permission bits only. */
		mode = st.st_mode & 0777;
		name = basename(src_copy);
	}
	if (fd < 0) {
		cli_error("cp: %s: %s", src, strerror(errno));
		return CLI_EXIT_FAIL;
	}

	/* A destination that is a directory (or ends in '/') receives the source's name. */
	_cleanup_free_ char *dest = strdup(r->path);
	if (!dest)
		return CLI_EXIT_FAIL;
	bool into_dir = dest[strlen(dest) - 1] == '/';
	if (!into_dir) {
		json_t *resp = NULL, *info = NULL;
		struct cell_error ierr = {0};
		if (remote_info(r, &resp, &info, &ierr) == 0)
			into_dir = info_is_dir(info);
		else if (cli_client()->unreachable) {
			cli_error("%s", ierr.msg);
			return CLI_EXIT_FAIL;
		}
		json_decref(resp);
	}
	if (into_dir) {
		if (!strcmp(src, "-")) {
			cli_error("cp: %s:%s is a directory; name the file to write from stdin",
				  r->id, r->path);
			return CLI_EXIT_FAIL;
		}
		char *joined = NULL;
		bool slash = dest[strlen(dest) - 1] == '/';
		if (asprintf(&joined, "%s%s%s", dest, slash ? "" : "/", name) < 0)
			return CLI_EXIT_FAIL;
		free(dest);
		dest = joined;
	}
	struct cell_error err = {0};
	if (cell_client_upload(
		cli_client(),
		&(struct cell_client_upload){
		    .id = r->id, .dest = dest, .mode = (int)mode, .fd = fd, .filename = name},
		&err) < 0) {
		cli_error("cp: %s -> %s:%s: %s", src, r->id, dest, err.msg);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static int sink_stdout(void *cls, const void *data, size_t len, struct cell_error *err)
{
	(void)cls;
	int r = cell_write_all(STDOUT_FILENO, data, len);
	return r < 0 ? cell_err(err, -r, "writing to stdout") : 0;
}

struct unpack {
	struct untar *u;
	bool failed; /* the unpacking failed, not the transfer */
};

static int sink_untar(void *cls, const void *data, size_t len, struct cell_error *err)
{
	struct unpack *up = cls;
	int r = untar_feed(up->u, data, len, err);
	up->failed = r < 0;
	return r;
}

/* The base name of a path in the sandbox, or NULL for "/" (and a last "." or ".."). */
static char *remote_base(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	if (!copy)
		return NULL;
	for (size_t len = strlen(copy); len > 1 && copy[len - 1] == '/';)
		copy[--len] = '\0';
	const char *base = strrchr(copy, '/') + 1;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return NULL;
	return strdup(base);
}

/* A directory: its tar archive to stdout ("-"), or unpacked into DST/<base> when DST is a
 * directory, else into DST, made now. */
static int download_dir(const struct remote *r, const char *dst)
{
	struct cell_error err = {0};
	if (!strcmp(dst, "-")) {
		if (cell_client_download_tar(cli_client(), r->id, r->path, sink_stdout, NULL,
					     &err) < 0) {
			cli_error("cp: %s:%s: %s", r->id, r->path, err.msg);
			return CLI_EXIT_FAIL;
		}
		return CLI_EXIT_OK;
	}
	_cleanup_free_ char *target = NULL;
	struct stat st;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		_cleanup_free_ char *base = remote_base(r->path);
		if (!base) {
			cli_error("cp: %s:%s: name a destination that does not exist yet", r->id,
				  r->path);
			return CLI_EXIT_FAIL;
		}
		if (asprintf(&target, "%s/%s", dst, base) < 0)
			return CLI_EXIT_FAIL;
	} else if (!(target = strdup(dst))) {
		return CLI_EXIT_FAIL;
	}
	if (mkdir(target, 0700) < 0 && errno != EEXIST) {
		cli_error("cp: %s: %s", target, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	/* The destination is this user's choice; below it nothing is followed. */
	_cleanup_close_ int dfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		cli_error("cp: %s: %s", target, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	struct unpack up = {.u = untar_new(dfd, &err)};
	int rc = up.u
		     ? cell_client_download_tar(cli_client(), r->id, r->path, sink_untar, &up, &err)
		     : -err.code;
	if (rc == 0) {
		rc = untar_finish(up.u, &err);
	} else if (up.u && !up.failed && untar_entries(up.u) > 0) {
		/* The answer had begun: the archive was cut short inside the sandbox. */
		cell_err_wrap(&err, "the archive was cut short in the sandbox (past 100000 "
				    "entries or 32 levels, or a file it could not read; celld's "
				    "log says which), what came is unpacked: ");
	}
	untar_free(up.u);
	if (rc < 0) {
		cli_error("cp: %s:%s -> %s: %s", r->id, r->path, target, err.msg);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static int download(const struct remote *r, const char *dst)
{
	json_t *resp = NULL, *info = NULL;
	struct cell_error err = {0};
	if (remote_info(r, &resp, &info, &err) < 0) {
		cli_error("cp: %s", err.msg);
		json_decref(resp);
		return CLI_EXIT_FAIL;
	}
	bool is_dir = info_is_dir(info);
	/* Never set-id or sticky bits on a file that came out of a sandbox: a root user
	 * copying out a planted set-uid binary must not hand it root. */
	unsigned mode = mode_from_digits(json_integer_value(json_object_get(info, "mode"))) & 0777;
	json_decref(resp);
	if (is_dir)
		return download_dir(r, dst);
	if (!strcmp(dst, "-")) {
		if (cell_client_download(cli_client(), r->id, r->path, STDOUT_FILENO, &err) < 0) {
			cli_error("cp: %s:%s: %s", r->id, r->path, err.msg);
			return CLI_EXIT_FAIL;
		}
		return CLI_EXIT_OK;
	}

	_cleanup_free_ char *target = strdup(dst);
	_cleanup_free_ char *rcopy = strdup(r->path);
	if (!target || !rcopy)
		return CLI_EXIT_FAIL;
	struct stat st;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		free(target);
		target = NULL;
		if (asprintf(&target, "%s/%s", dst, basename(rcopy)) < 0)
			return CLI_EXIT_FAIL;
	}
	/* Write next to the target and rename: a failed download never leaves half a file
	 * under the final name. */
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.cell-XXXXXX", target) < 0)
		return CLI_EXIT_FAIL;
	_cleanup_close_ int fd = mkstemp(tmp);
	if (fd < 0) {
		cli_error("cp: writing %s: %s", target, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	mode_t um = umask(0);
	umask(um);
	int rc = CLI_EXIT_OK;
	if (cell_client_download(cli_client(), r->id, r->path, fd, &err) < 0) {
		cli_error("cp: %s:%s: %s", r->id, r->path, err.msg);
		rc = CLI_EXIT_FAIL;
	} else if (fchmod(fd, (mode ? mode : 0644) & ~um) < 0 || fsync(fd) < 0 ||
		   rename(tmp, target) < 0) {
		cli_error("cp: writing %s: %s", target, strerror(errno));
		rc = CLI_EXIT_FAIL;
	}
	if (rc != CLI_EXIT_OK)
		unlink(tmp);
	return rc;
}

int cmd_cp(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "+h", "cp", usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_error_usage("cp", CLI_EXIT_USAGE, "expected SRC and DST");
	const char *src = argv[optind], *dst = argv[optind + 1];
	struct remote rs, rd;
	int s = parse_remote(src, &rs), d = parse_remote(dst, &rd);
	if (s < 0 || d < 0)
		return CLI_EXIT_USAGE;
	if (s == d)
		return cli_error_usage("cp", CLI_EXIT_USAGE,
				       "exactly one of SRC and DST must be ID:/path");
	cli_signals_install();
	return s ? download(&rs, dst) : upload(src, &rd);
}
