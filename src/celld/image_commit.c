/* A sandbox's or a snapshot's writable layer made an image: see image_commit.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include "cell/cleanup.h"
#include "cell/layercopy.h"
#include "cell/log.h"
#include "cell/quota.h"
#include "cell/runtime.h"
#include "config.h"
#include "image_commit.h"
#include "image_lookup.h"
#include "oci_image.h"
#include "registry.h"
#include "sandbox.h"
#include "snapshots.h"

#define WH_PREFIX    ".wh."
#define LOCK_WAIT_MS 10000
#define NOBODY	     65534u

/* ---- the walk: a tree into a tar ---- */

struct walk {
	struct archive *a;
	uint32_t base; /* host ids [base, base + CELL_UID_RANGE) are the sandbox's 0... */
	bool overlay;  /* an upper dir: whiteouts and opaque dirs are overlayfs's */
	uint64_t entries, bytes, skipped;
	char path[4096];
	unsigned char buf[128 << 10];
	struct cell_error *err;
};

static uint32_t unshift(const struct walk *w, uint32_t id)
{
	if (!w->base)
		return id;
	return id >= w->base && id - w->base < CELL_UID_RANGE ? id - w->base : NOBODY;
}

static int arch_fail(struct walk *w, const char *what)
{
	return cell_err_msg(w->err, EIO, "writing the layer's tar (%s '%s'): %s", what, w->path,
			    archive_error_string(w->a));
}

static int put_header(struct walk *w, const struct stat *st, mode_t type, const char *link,
		      uint64_t size)
{
	if (++w->entries > CELL_LAYER_MAX_ENTRIES)
		return cell_err_msg(w->err, EFBIG, "the layer has more than %u entries",
				    CELL_LAYER_MAX_ENTRIES);
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return cell_err(w->err, ENOMEM, "tar entry");
	archive_entry_set_pathname(e, w->path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, st ? st->st_mode & 07777 : 0644);
	archive_entry_set_uid(e, st ? unshift(w, st->st_uid) : 0);
	archive_entry_set_gid(e, st ? unshift(w, st->st_gid) : 0);
	if (st)
		archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	archive_entry_set_size(e, (la_int64_t)size);
	if (link)
		archive_entry_set_symlink(e, link);
	int r = archive_write_header(w->a, e) == ARCHIVE_OK ? 0 : arch_fail(w, "header of");
	archive_entry_free(e);
	return r;
}

static int put_file(struct walk *w, int dirfd, const char *name, const struct stat *st)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct stat fst;
	if (fd < 0 || fstat(fd, &fst) < 0)
		return cell_err(w->err, errno, "reading '%s'", w->path);
	if (!S_ISREG(fst.st_mode) || fst.st_ino != st->st_ino)
		return cell_err_msg(w->err, EAGAIN, "'%s' changed during the commit", w->path);
	int r = put_header(w, &fst, AE_IFREG, NULL, (uint64_t)fst.st_size);
	uint64_t left = (uint64_t)fst.st_size;
	while (r == 0 && left) {
		ssize_t n = read(fd, w->buf, left < sizeof(w->buf) ? left : sizeof(w->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? cell_err(w->err, errno, "reading '%s'", w->path)
				  : cell_err_msg(w->err, EAGAIN, "'%s' shrank during the commit",
						 w->path);
			break;
		}
		if (archive_write_data(w->a, w->buf, (size_t)n) != n)
			r = arch_fail(w, "data of");
		left -= (uint64_t)n;
	}
	w->bytes += (uint64_t)fst.st_size;
	return r;
}

static int walk_dir(struct walk *w, int dirfd, size_t plen, unsigned depth);

static int walk_entry(struct walk *w, int dirfd, const char *name, size_t plen, unsigned depth)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
				       : cell_err(w->err, errno, "reading '%s/%s'", w->path, name);
	size_t nlen = strlen(name);
	if (plen + 1 + nlen + sizeof(WH_PREFIX) >= sizeof(w->path))
		return cell_err_msg(w->err, ENAMETOOLONG, "a path of the layer is too long");
	bool whiteout = w->overlay && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
	/* A name that a tar reader would take for a whiteout is not the sandbox's to give. */
	if (!strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) ||
	    (!whiteout && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)))) {
		w->skipped++;
		return 0;
	}
	snprintf(w->path + plen, sizeof(w->path) - plen, "%s%s%s", plen ? "/" : "",
		 whiteout ? WH_PREFIX : "", name);
	size_t len = strlen(w->path);
	int r = 0;
	if (whiteout) {
		r = put_header(w, NULL, AE_IFREG, NULL, 0);
	} else if (S_ISREG(st.st_mode)) {
		r = put_file(w, dirfd, name, &st);
	} else if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return cell_err(w->err, errno, "reading the link '%s'", w->path);
		target[n] = '\0';
		r = put_header(w, &st, AE_IFLNK, target, 0);
	} else if (S_ISFIFO(st.st_mode)) {
		r = put_header(w, &st, AE_IFIFO, NULL, 0);
	} else if (S_ISDIR(st.st_mode)) {
		if (depth >= CELL_LAYER_MAX_DEPTH)
			return cell_err_msg(w->err, EFBIG, "'%s': more than %u directories deep",
					    w->path, CELL_LAYER_MAX_DEPTH);
		_cleanup_close_ int fd =
		    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat dst;
		if (fd < 0 || fstat(fd, &dst) < 0)
			return cell_err(w->err, errno, "opening '%s'", w->path);
		if (dst.st_dev != st.st_dev || dst.st_ino != st.st_ino)
			return cell_err_msg(w->err, EAGAIN, "'%s' changed during the commit",
					    w->path);
		r = put_header(w, &dst, AE_IFDIR, NULL, 0);
		if (r == 0 && w->overlay && layer_dir_opaque(fd)) {
			snprintf(w->path + len, sizeof(w->path) - len,
				 "/" WH_PREFIX WH_PREFIX ".opq");
			r = put_header(w, NULL, AE_IFREG, NULL, 0);
			w->path[len] = '\0';
		}
		if (r == 0)
			r = walk_dir(w, fd, len, depth + 1);
	}
	w->path[plen] = '\0';
	return r;
}

static int walk_dir(struct walk *w, int dirfd, size_t plen, unsigned depth)
{
	int dup_fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return cell_err(w->err, errno, "reading the directory '%s'", w->path);
	}
	struct stat self;
	fstat(dirfd, &self);
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		/* never across a mount */
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    st.st_dev != self.st_dev) {
			w->skipped++;
			continue;
		}
		r = walk_entry(w, dirfd, e->d_name, plen, depth);
	}
	closedir(d);
	return r;
}

/* The tree of dir fd as a tar in workfd/file. */
static int tar_tree(int fd, int workfd, const char *file, uint32_t base, bool overlay,
		    struct commit_result *res, struct cell_error *err)
{
	_cleanup_close_ int out =
	    openat(workfd, file, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return cell_err(err, errno, "making the layer's tar");
	struct walk *w = calloc(1, sizeof(*w));
	if (!w || !(w->a = archive_write_new())) {
		free(w);
		return cell_err(err, ENOMEM, "tar writer");
	}
	w->base = base;
	w->overlay = overlay;
	w->err = err;
	archive_write_set_format_pax_restricted(w->a);
	archive_write_set_bytes_in_last_block(w->a, 1);
	/* Names and link targets are bytes, as the filesystem keeps them: celld's locale is C,
	 * in which the pax writer could not translate a UTF-8 name (Debian's CA certificates
	 * link to some), and a name need not be UTF-8 at all. */
	int r = archive_write_set_format_option(w->a, "pax", "hdrcharset", "BINARY") == ARCHIVE_OK
		    ? 0
		    : arch_fail(w, "choosing binary names");
	if (r == 0 && archive_write_open_fd(w->a, out) != ARCHIVE_OK)
		r = arch_fail(w, "opening");
	if (r == 0)
		r = walk_dir(w, fd, 0, 0);
	if (archive_write_close(w->a) != ARCHIVE_OK && r == 0)
		r = arch_fail(w, "closing");
	archive_write_free(w->a);
	if (res) {
		res->entries = w->entries;
		res->bytes = w->bytes;
		res->skipped = w->skipped;
	}
	free(w);
	return r;
}

/* ---- the image ---- */

struct base {
	struct store_image img; /* its layers and config */
	bool has;
};

/* An image cell built (a rootfs dir): tarred as one layer under a minimal config. */
static int base_from_rootfs(const char *rootfs, int workfd, struct base *b, bool *fresh,
			    struct cell_error *err)
{
	_cleanup_close_ int fd = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening the image's rootfs %s", rootfs);
	int r = tar_tree(fd, workfd, "base.tar", 0, false, NULL, err);
	if (r < 0)
		return cell_err_wrap(err, "the base image: ");
	_cleanup_close_ int tar = openat(workfd, "base.tar", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char diff[STORE_DIGEST_MAX];
	r = tar < 0 ? cell_err(err, errno, "the base image's tar")
		    : store_layer_add_over(tar, NULL, NULL, NULL, 0, diff, err);
	if (r < 0)
		return r;
	*fresh = true;
	struct oci_platform p;
	if (oci_platform_host(&p, err) < 0)
		return -err->code;
	b->img.config =
	    json_pack("{s:s, s:s, s:{}, s:{s:s, s:[s]}, s:[]}", "architecture", p.arch, "os",
		      "linux", "config", "rootfs", "type", "layers", "diff_ids", diff, "history");
	b->img.layers = calloc(1, STORE_DIGEST_MAX);
	if (!b->img.config || !b->img.layers)
		return cell_err(err, ENOMEM, "base image");
	snprintf(b->img.layers[0], STORE_DIGEST_MAX, "%s", diff);
	b->img.n_layers = 1;
	b->has = true;
	return 0;
}

static int put_image(struct base *b, const char *diff, const char *source,
		     const struct commit_opts *o, struct commit_result *res, struct cell_error *err)
{
	json_t *config = json_deep_copy(b->img.config);
	if (!json_is_object(config)) {
		json_decref(config);
		return cell_err_msg(err, EINVAL, "the base image has no config");
	}
	json_t *rootfs = json_object_get(config, "rootfs");
	if (!json_is_object(rootfs)) {
		rootfs = json_pack("{s:s, s:[]}", "type", "layers", "diff_ids");
		json_object_set_new(config, "rootfs", rootfs);
	}
	json_t *ids = json_array();
	for (size_t i = 0; ids && i < b->img.n_layers; i++)
		json_array_append_new(ids, json_string(b->img.layers[i]));
	json_array_append_new(ids, json_string(diff));
	json_object_set_new(rootfs, "diff_ids", ids);
	json_t *history = json_object_get(config, "history");
	if (!json_is_array(history)) {
		history = json_array();
		json_object_set_new(config, "history", history);
	}
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	char by[96];
	snprintf(by, sizeof(by), "cell image commit (%s)", source);
	json_array_append_new(history, json_pack("{s:s, s:s}", "created", when, "created_by", by));
	json_object_set_new(config, "created", json_string(when));
	char *text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS);
	struct oci_digest cd, md;
	struct store_image img = {0};
	img.layers = calloc(b->img.n_layers + 1, STORE_DIGEST_MAX);
	int r = 0;
	if (!text || !img.layers) {
		r = cell_err(err, ENOMEM, "the new image's config");
	} else {
		oci_digest_of(text, strlen(text), OCI_DIGEST_SHA256, &cd);
		/* The image's digest: over its config's digest and its diffIDs. */
		json_t *id = json_pack("{s:s, s:O}", "config", cd.text, "layers", ids);
		char *idtext = id ? json_dumps(id, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(id);
		if (!idtext) {
			r = cell_err(err, ENOMEM, "the new image's digest");
		} else {
			oci_digest_of(idtext, strlen(idtext), OCI_DIGEST_SHA256, &md);
			free(idtext);
			snprintf(img.digest, sizeof(img.digest), "%.71s", md.text);
			snprintf(img.config_digest, sizeof(img.config_digest), "%.71s", cd.text);
			img.config = config;
			for (size_t i = 0; i < b->img.n_layers; i++) {
				snprintf(img.layers[i], STORE_DIGEST_MAX, "%s", b->img.layers[i]);
				img.bytes += store_layer_bytes(b->img.layers[i]);
			}
			snprintf(img.layers[b->img.n_layers], STORE_DIGEST_MAX, "%s", diff);
			img.bytes += store_layer_bytes(diff);
			img.n_layers = b->img.n_layers + 1;
			r = store_image_put_owned(o->name, o->owner_id, o->may_take, o->cls, &img,
						  err);
		}
	}
	if (r == 0) {
		snprintf(res->name, sizeof(res->name), "%s", o->name);
		snprintf(res->digest, sizeof(res->digest), "%s", img.digest);
		res->layers = img.n_layers;
	}
	free(text);
	free(img.layers);
	json_decref(config);
	return r;
}

/* The layer (upper dir fd) over the base: into the store, then named. */
static int commit_layer(int upper, uint32_t uid_base, const char *digest, const char *rootfs,
			const char *source, int workfd, const struct commit_opts *o,
			struct commit_result *res, struct cell_error *err)
{
	snprintf(res->source, sizeof(res->source), "%s", source);
	int r = tar_tree(upper, workfd, "layer.tar", uid_base, true, res, err);
	if (r < 0)
		return cell_err_wrap(err, "%s: ", source);
	struct base b = {0};
	/* Layers this commit brought, removed again on a failure unless an image names them
	 * (store_layers_drop). */
	char added[2][STORE_DIGEST_MAX];
	size_t n_added = 0;
	store_hold();
	if (digest) {
		r = store_image_get(digest, &b.img, err);
		b.has = r == 0;
		if (r < 0)
			cell_err_wrap(err, "the image %s sits on: ", source);
	} else {
		bool fresh = false;
		r = base_from_rootfs(rootfs, workfd, &b, &fresh, err);
		if (r == 0 && fresh)
			snprintf(added[n_added++], STORE_DIGEST_MAX, "%s", b.img.layers[0]);
	}
	const char **parents = calloc(b.img.n_layers + 1, sizeof(*parents));
	if (r == 0 && !parents)
		r = cell_err(err, ENOMEM, "layers");
	char diff[STORE_DIGEST_MAX] = "";
	if (r == 0) {
		for (size_t i = 0; i < b.img.n_layers; i++)
			parents[i] = b.img.layers[b.img.n_layers - 1 - i];
		_cleanup_close_ int tar =
		    openat(workfd, "layer.tar", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		r = tar < 0
			? cell_err(err, errno, "the layer's tar")
			: store_layer_add_over(tar, NULL, NULL, parents, b.img.n_layers, diff, err);
		/* Undone on a failure unless an image names it (store_layers_drop). */
		if (r == 0)
			snprintf(added[n_added++], STORE_DIGEST_MAX, "%s", diff);
	}
	if (r == 0)
		r = put_image(&b, diff, source, o, res, err);
	if (r < 0 && n_added) {
		struct cell_error derr = {0};
		if (store_layers_drop((const char(*)[STORE_DIGEST_MAX])added, n_added, &derr) < 0)
			cell_err_drop(&derr, "the layers stay for a prune");
	}
	store_unhold();
	free(parents);
	if (b.has || b.img.config)
		store_image_free(&b.img);
	return r;
}

/* ---- sources ---- */

/* The upper dir of a loop disk image (dirfd/disk.img): cloned into the work dir, mounted
 * detached from there (the journal replayed on the copy, never on the sandbox's). 1 when
 * the disk has no upper dir yet. */
static int open_disk_upper(int dirfd, bool wait_lock, const char *work_path, int workfd,
			   struct cell_quota *q, int *upper, struct cell_error *err)
{
	_cleanup_close_ int in = openat(dirfd, "disk.img", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return cell_err(err, errno, "opening the disk");
	for (int waited = 0; wait_lock; waited += 20) {
		if (flock(in, LOCK_SH | LOCK_NB) == 0)
			break;
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= LOCK_WAIT_MS)
			return cell_err(err, errno == EWOULDBLOCK ? EBUSY : errno,
					"the disk is still in use");
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	_cleanup_close_ int out =
	    openat(workfd, "disk.img", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return cell_err(err, errno, "copying the disk");
	int r = cell_file_clone(in, out, NULL);
	if (r < 0)
		return cell_err(err, -r, "copying the disk");
	struct stat st;
	if (fstat(in, &st) < 0)
		return cell_err(err, errno, "the disk's size");
	const struct cell_quota_req req = {.dir = work_path, .bytes = (uint64_t)st.st_size};
	if ((r = cell_quota_prepare(&req, q, err)) < 0)
		return r;
	if (q->kind != CELL_QUOTA_LOOP || q->mount_fd < 0)
		return cell_err_msg(err, EIO, "the disk's copy was not mounted");
	*upper = openat(q->mount_fd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*upper < 0 && errno == ENOENT) /* never started: an empty layer */
		return 1;
	return *upper < 0 ? cell_err(err, errno, "opening the disk's layer") : 0;
}

/* An empty dir of the work dir, for a layer that was never written. */
static int empty_dir(int workfd, struct cell_error *err)
{
	if (mkdirat(workfd, "empty", 0755) < 0 && errno != EEXIST)
		return cell_err(err, errno, "an empty layer");
	int fd = openat(workfd, "empty", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? cell_err(err, errno, "an empty layer") : fd;
}

/* Everything written so far reaches the layer's files. */
static void sync_layer(pid_t pid)
{
	if (pid <= 0)
		return;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		syncfs(fd);
}

/* The upper dir of dirfd (a sandbox's dir or a snapshot's), into *upper: from disk.img,
 * layers/upper or upper. */
static int open_upper(int dirfd, bool wait_lock, const char *work_path, int workfd,
		      struct cell_quota *q, int *upper, struct cell_error *err)
{
	struct stat st;
	*upper = -1;
	if (fstatat(dirfd, "disk.img", &st, AT_SYMLINK_NOFOLLOW) == 0) {
		int r = open_disk_upper(dirfd, wait_lock, work_path, workfd, q, upper, err);
		if (r == 1)
			return (*upper = empty_dir(workfd, err)) < 0 ? *upper : 0;
		return r;
	}
	const char *name =
	    fstatat(dirfd, "layers", &st, AT_SYMLINK_NOFOLLOW) == 0 ? "layers/upper" : "upper";
	*upper = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*upper < 0 && errno == ENOENT)
		return (*upper = empty_dir(workfd, err)) < 0 ? *upper : 0;
	return *upper < 0 ? cell_err(err, errno, "opening the writable layer") : 0;
}

struct work {
	char name[64];
	char path[4096];
	int fd;
	struct cell_quota q;
};

static int work_open(struct work *w, struct cell_error *err)
{
	w->q = (struct cell_quota){.mount_fd = -1};
	w->fd = store_tmp_make("commit", w->name, sizeof(w->name), err);
	if (w->fd < 0)
		return w->fd;
	return store_tmp_path(w->name, w->path, sizeof(w->path)) < 0
		   ? cell_err(err, ENAMETOOLONG, "the work dir")
		   : 0;
}

static void work_close(struct work *w)
{
	cell_quota_close(&w->q); /* the copy's mount: the loop device frees itself */
	if (w->fd >= 0)
		close(w->fd);
	store_tmp_remove(w->name);
}

int image_commit_sandbox(struct sandbox *sb, const struct commit_opts *o, struct commit_result *res,
			 struct cell_error *err)
{
	*res = (struct commit_result){0};
	int r = sandbox_begin(sb, SBX_SNAPSHOTTING, err);
	if (r < 0)
		return r;
	enum sbx_state state = sb->state; /* stable while busy */
	if (state != SBX_PAUSED && state != SBX_STOPPED) {
		sandbox_end(sb, SBX_SNAPSHOTTING, state, NULL);
		return cell_err_msg(err, EBUSY, "sandbox %s is %s: pause it first", sb->id,
				    sandbox_state_name(state));
	}
	registry_lock();
	pid_t pid = sb->pid;
	registry_unlock();
	if (state == SBX_PAUSED)
		sync_layer(pid);
	struct work w = {.fd = -1};
	char source[96];
	snprintf(source, sizeof(source), "sandbox %s", sb->id);
	_cleanup_close_ int upper = -1;
	r = work_open(&w, err);
	if (r == 0)
		r = open_upper(sb->dirfd, state == SBX_STOPPED, w.path, w.fd, &w.q, &upper, err);
	if (r == 0)
		r = commit_layer(upper, sb->uid_base, sb->image_digest, sb->rootfs, source, w.fd, o,
				 res, err);
	sandbox_end(sb, SBX_SNAPSHOTTING, state, NULL);
	if (w.name[0])
		work_close(&w);
	return r;
}

int image_commit_snapshot(const struct adm_principal *who, const char *id,
			  const struct commit_opts *o, struct commit_result *res,
			  struct cell_error *err)
{
	*res = (struct commit_result){0};
	json_t *meta = NULL;
	int r = snapshot_get(who, id, &meta, err);
	if (r < 0)
		return r;
	if ((r = snapshot_hold(id, err)) < 0) {
		json_decref(meta);
		return r;
	}
	json_int_t base = json_integer_value(json_object_get(meta, "uidBase"));
	const char *digest = json_string_value(json_object_get(meta, "imageDigest"));
	const char *rootfs = json_string_value(json_object_get(meta, "rootfs"));
	char path[4096], source[96];
	snprintf(path, sizeof(path), "%s/snapshots/%s", celld.state_dir, id);
	snprintf(source, sizeof(source), "snapshot %s", id);
	struct work w = {.fd = -1};
	_cleanup_close_ int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int upper = -1;
	if (base <= 0 || base > UINT32_MAX)
		r = cell_err_msg(err, EIO, "snapshot %s: no uid base in its meta.json", id);
	else if (!digest && (!rootfs || !rootfs[0]))
		r = cell_err_msg(err, EIO, "snapshot %s: no image in its meta.json", id);
	else if (dir < 0)
		r = cell_err(err, errno, "opening snapshot %s", id);
	if (r == 0)
		r = work_open(&w, err);
	if (r == 0)
		r = open_upper(dir, false, w.path, w.fd, &w.q, &upper, err);
	if (r == 0)
		r = commit_layer(upper, (uint32_t)base, digest, rootfs, source, w.fd, o, res, err);
	if (w.name[0])
		work_close(&w);
	snapshot_release(id);
	json_decref(meta);
	return r;
}
