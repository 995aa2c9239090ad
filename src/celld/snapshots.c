/* Snapshots of sandboxes' writable layers: see snapshots.h.
 *
 * A capture is made in <state>/snapshots/.tmp-<id> and renamed to <id> once complete
 * (meta.json written, the filesystem synced): a snapshot dir with a name that is an id is
 * always whole. A delete renames it to .del-<id> first, so it is gone for every reader
 * at once; snapshots_init removes whatever a crash left under a dot name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "cell/layercopy.h"
#include "cell/quota.h"
#include "cell/log.h"
#include "admission.h"
#include "config.h"
#include "e2b_templates.h"
#include "fields.h"
#include "images.h"
#include "registry.h"
#include "snapshots.h"
#include "tenancy.h"
#include "timefmt.h"

#define SNAPSHOTS_MAX	 1024	   /* kept at once */
#define HOLDS_MAX	 256	   /* sandboxes being made from snapshots at once */
#define META_MAX	 (1 << 20) /* bytes of a meta.json */
#define META_NAME	 "meta.json"
#define IMAGE_NAME	 "disk.img"
#define LOCK_WAIT_MS	 10000
#define ROOM_RESERVE_MIN (1ull << 30) /* free space a snapshot never takes */

static int snap_fd = -1; /* <state>/snapshots */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char holds[HOLDS_MAX][CELL_ID_MAX + 1]; /* under lock; "" free */

int snapshots_init(struct cell_error *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/snapshots", celld.state_dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", path);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	if (fchmod(fd, 0700) < 0) {
		close(fd);
		return cell_err(err, errno, "setting the mode of %s", path);
	}
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d && dfd >= 0)
		close(dfd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, ".tmp-", 5) && strncmp(de->d_name, ".del-", 5))
			continue;
		struct cell_error rerr = {0};
		if (cell_remove_tree_at(fd, de->d_name, &rerr) < 0)
			log_warn("snapshots: removing %s/%s: %s", path, de->d_name, rerr.msg);
	}
	if (d)
		closedir(d);
	snap_fd = fd;
	return 0;
}

/* ---- meta ---- */

json_t *snapshot_json(json_t *meta)
{
	json_int_t at = json_integer_value(json_object_get(meta, "createdAt"));
	json_t *o =
	    json_pack("{s:O, s:O, s:{s:s, s:s, s:s, s:o}, s:o}", "id", json_object_get(meta, "id"),
		      "sandboxId", json_object_get(meta, "sandboxId"), "status", "state", "Ready",
		      "reason", "snapshot_ready", "message", "captured", "lastTransitionAt",
		      celld_time_json((time_t)at), "createdAt", celld_time_json((time_t)at));
	json_t *name = json_object_get(meta, "name");
	if (o && json_is_string(name))
		json_object_set(o, "name", name);
	return o;
}

static int read_meta(const char *id, json_t **out, struct cell_error *err)
{
	char path[CELL_ID_MAX + sizeof("/" META_NAME)];
	snprintf(path, sizeof(path), "%s/" META_NAME, id);
	char *text = NULL;
	size_t len = 0;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(snap_fd, path, META_MAX, &text, &len, &rerr);
	if (r == -ENOENT || r == -ENOTDIR)
		return cell_err_msg(err, ENOENT, "snapshot %s not found", id), -ENOENT;
	if (r < 0)
		return cell_err(err, -r, "reading snapshot %s", id);
	json_error_t jerr;
	json_t *o = json_loadb(text, len, 0, &jerr);
	free(text);
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "image"))) {
		json_decref(o);
		return cell_err_msg(err, EIO, "snapshot %s: meta.json is not valid", id);
	}
	*out = o;
	return 0;
}

static const char *meta_owner(json_t *meta)
{
	return json_string_value(json_object_get(meta, "owner"));
}

int snapshot_get(const struct adm_principal *who, const char *id, json_t **meta,
		 struct cell_error *err)
{
	if (!cell_id_valid(id))
		return cell_err_msg(err, ENOENT, "snapshot %.80s not found", id), -ENOENT;
	int r = read_meta(id, meta, err);
	if (r == 0 && !tenancy_sees_id(who, meta_owner(*meta))) {
		/* another tenant's: as if there were none */
		json_decref(*meta);
		*meta = NULL;
		return cell_err_msg(err, ENOENT, "snapshot %s not found", id), -ENOENT;
	}
	return r;
}

static int by_created(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t p = json_integer_value(json_object_get(x, "createdAt"));
	json_int_t q = json_integer_value(json_object_get(y, "createdAt"));
	if (p != q)
		return p < q ? -1 : 1;
	return strcmp(json_string_value(json_object_get(x, "id")),
		      json_string_value(json_object_get(y, "id")));
}

int snapshot_list(const struct adm_principal *who, json_t **out, struct cell_error *err)
{
	int dfd = openat(snap_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return cell_err(err, errno, "reading the snapshots");
	}
	json_t *v[SNAPSHOTS_MAX * 2];
	size_t n = 0;
	struct dirent *de;
	while (n < CELL_ARRAY_SIZE(v) && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !cell_id_valid(de->d_name))
			continue;
		struct cell_error rerr = {0};
		if (read_meta(de->d_name, &v[n], &rerr) < 0)
			continue;
		if (tenancy_sees_id(who, meta_owner(v[n])))
			n++;
		else
			json_decref(v[n]);
	}
	closedir(d);
	qsort(v, n, sizeof(v[0]), by_created);
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		if (!a || json_array_append_new(a, v[i]) < 0)
			json_decref(v[i]);
	if (!a)
		return cell_err(err, ENOMEM, "listing snapshots");
	*out = a;
	return 0;
}

int snapshot_request_name(json_t *body, const char **name, struct cell_error *err)
{
	*name = NULL;
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v)
	{
		if (strcmp(k, "name"))
			return field_fail(
			    err, "%.64s is not a field of a snapshot request (only name)", k);
	}
	if (field_string(body, "name", "name", false, name, err) < 0)
		return -EINVAL;
	if (*name && (!(*name)[0] || strlen(*name) > SNAPSHOT_NAME_MAX))
		return field_fail(err, "name must be 1-%d bytes", SNAPSHOT_NAME_MAX);
	/* A name never shadows the operator's catalogue: an E2B templateID resolves to a
	 * listed template, then an image, before a snapshot, and a name equal to one of them
	 * would only confuse who reads a list. Refused for the operator too. */
	char rootfs[4096];
	struct cell_error ierr = {0};
	if (*name && e2b_template_listed(*name))
		return field_fail(err, "name '%.128s' is a template of this host: choose another",
				  *name);
	if (*name && image_resolve(*name, rootfs, sizeof(rootfs), &ierr) == 0)
		return field_fail(err, "name '%.128s' is an image of this host: choose another",
				  *name);
	return 0;
}

int snapshot_find(const struct adm_principal *who, const char *ref, json_t **meta,
		  struct cell_error *err)
{
	*meta = NULL;
	struct cell_error ignored = {0};
	if (snapshot_get(who, ref, meta, &ignored) == 0)
		return 0;
	json_t *all;
	int r = snapshot_list(who, &all, err);
	if (r < 0)
		return r;
	json_t *m, *found = NULL;
	size_t i;
	json_array_foreach(all, i, m) /* oldest first: the last match is the newest */
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		if (name && !strcmp(name, ref) && tenancy_owns_id(who, meta_owner(m)))
			found = m;
	}
	*meta = json_incref(found);
	json_decref(all);
	return found ? 0 : (cell_err_msg(err, ENOENT, "snapshot %.128s not found", ref), -ENOENT);
}

static size_t count_snapshots(void)
{
	int dfd = openat(snap_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- holds ---- */

static bool held_locked(const char *id)
{
	for (size_t i = 0; i < HOLDS_MAX; i++)
		if (!strcmp(holds[i], id))
			return true;
	return false;
}

int snapshot_hold(const char *id, struct cell_error *err)
{
	char path[CELL_ID_MAX + sizeof("/" META_NAME)];
	snprintf(path, sizeof(path), "%s/" META_NAME, id);
	pthread_mutex_lock(&lock);
	int r = -EBUSY;
	if (faccessat(snap_fd, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		r = -ENOENT;
	} else {
		for (size_t i = 0; i < HOLDS_MAX && r < 0; i++) {
			if (!holds[i][0]) {
				snprintf(holds[i], sizeof(holds[i]), "%s", id);
				r = 0;
			}
		}
	}
	pthread_mutex_unlock(&lock);
	if (r == -ENOENT)
		return cell_err_msg(err, ENOENT, "snapshot %s not found", id), r;
	if (r < 0)
		return cell_err_msg(err, EBUSY, "%d sandboxes are being made from snapshots",
				    HOLDS_MAX),
		       r;
	return 0;
}

void snapshot_release(const char *id)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < HOLDS_MAX; i++) {
		if (!strcmp(holds[i], id)) {
			holds[i][0] = '\0';
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

int snapshot_delete(const struct adm_principal *who, const char *id, struct cell_error *err)
{
	json_t *meta = NULL;
	int gr = snapshot_get(who, id, &meta, err);
	if (gr < 0)
		return gr;
	struct adm_principal *owner = admission_principal_by_id(meta_owner(meta));
	uint64_t bytes = (uint64_t)json_integer_value(json_object_get(meta, "bytes"));
	json_decref(meta);
	char gone[CELL_ID_MAX + 8];
	snprintf(gone, sizeof(gone), ".del-%s", id);
	pthread_mutex_lock(&lock);
	int r = 0;
	if (held_locked(id))
		r = cell_err_msg(err, EBUSY, "snapshot %s: a sandbox is being made from it", id);
	else if (renameat(snap_fd, id, snap_fd, gone) < 0)
		r = errno == ENOENT
			? (cell_err_msg(err, ENOENT, "snapshot %s not found", id), -ENOENT)
			: cell_err(err, errno, "removing snapshot %s", id);
	pthread_mutex_unlock(&lock);
	if (r < 0)
		return r;
	/* gone for every reader: its owner's quota is free again */
	admission_put(owner, ADM_SNAPSHOTS);
	admission_put_n(owner, ADM_SNAPSHOT_BYTES, bytes);
	r = cell_remove_tree_at(snap_fd, gone, err);
	if (r == 0)
		log_info("snapshot %s deleted", id);
	return r;
}

/* ---- capture ---- */

/* What a new sandbox needs of sb's record (read under the registry lock; sb is busy, so
 * none of it changes). */
static json_t *record_meta(struct sandbox *sb, const char *id, const char *name,
			   const struct adm_principal *owner, bool image)
{
	registry_lock();
	json_t *o = json_pack(
	    "{s:s, s:s, s:I, s:s, s:I, s:s, s:s, s:O?, s:O?, s:O?, s:I, s:O?, s:s, s:b, s:b, "
	    "s:O?, s:s}",
	    "id", id, "sandboxId", sb->id, "createdAt", (json_int_t)time(NULL), "kind",
	    image ? "image" : "tree", "uidBase", (json_int_t)sb->uid_base, "image", sb->image,
	    "rootfs", sb->rootfs ? sb->rootfs : "", "env", sb->env, "entrypoint", sb->entrypoint,
	    "resourceLimits", sb->resource_limits, "diskBytes", (json_int_t)sb->limits.disk_bytes,
	    "network", sb->network, "seccompProfile",
	    sb->seccomp_profile[0] ? sb->seccomp_profile : "default", "seccompLog", sb->seccomp_log,
	    "sudo", sb->sudo, "metadata", sb->metadata, "sourceState",
	    sandbox_state_name(sb->state));
	/* A store image's layers (content-addressed): the snapshot sits on exactly these. */
	if (o && sb->image_layers)
		json_object_set_new(o, "imageLayers", json_incref(sb->image_layers));
	if (o && sb->image_digest)
		json_object_set_new(o, "imageDigest", json_string(sb->image_digest));
	if (o && sb->interpreter_bind)
		json_object_set_new(o, "interpreterService", json_true());
	registry_unlock();
	if (o && name)
		json_object_set_new(o, "name", json_string(name));
	if (o)
		json_object_set_new(o, "owner", json_string(admission_principal_id(owner)));
	return o;
}

/* A stopped sandbox's image may still be let go by its loop device (the overlay's final
 * release runs off the path of a stop): wait for the device's lock, bounded. */
static int lock_image(int fd, const char *id, struct cell_error *err)
{
	for (int waited = 0;; waited += 20) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return cell_err(err, errno, "locking the disk of %s", id);
		if (waited >= LOCK_WAIT_MS)
			return cell_err(err, EBUSY, "the disk of %s is still in use", id);
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int copy_layer(struct sandbox *sb, bool stopped, bool image, int out_dir,
		      struct cell_layer_stats *stats, struct cell_error *err)
{
	if (image) {
		_cleanup_close_ int in =
		    openat(sb->dirfd, IMAGE_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0)
			return cell_err(err, errno, "opening the disk of %s", sb->id);
		int r = stopped ? lock_image(in, sb->id, err) : 0;
		if (r < 0)
			return r;
		_cleanup_close_ int out =
		    openat(out_dir, IMAGE_NAME,
			   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return cell_err(err, errno, "creating the snapshot's disk");
		int cloned = 0;
		r = cell_file_clone(in, out, &cloned);
		if (r < 0)
			return cell_err(err, -r, "copying the disk of %s", sb->id);
		struct stat st;
		stats->bytes = fstat(in, &st) == 0 ? (uint64_t)st.st_size : 0;
		stats->files = 1;
		stats->cloned = (uint64_t)cloned;
		return 0;
	}
	struct stat st;
	const char *upper =
	    fstatat(sb->dirfd, "layers", &st, AT_SYMLINK_NOFOLLOW) == 0 ? "layers/upper" : "upper";
	_cleanup_close_ int in = openat(sb->dirfd, upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (in < 0 && errno == ENOENT) /* never started: an empty layer */
		return mkdirat(out_dir, "upper", 0755) < 0
			   ? cell_err(err, errno, "creating the snapshot's layer")
			   : 0;
	if (in < 0)
		return cell_err(err, errno, "opening the layer of %s", sb->id);
	return cell_layer_copy(in, out_dir, "upper", sb->uid_base, sb->uid_base, stats, err);
}

/* Everything written so far reaches the layer's files: the overlay's upper filesystem
 * synced (for a loop disk, its ext4 into disk.img). */
static void sync_layer(struct sandbox *sb)
{
	registry_lock();
	pid_t pid = sb->pid;
	registry_unlock();
	if (pid <= 0)
		return;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		log_warn("sandbox %s: syncing its layer for a snapshot: %s", sb->id,
			 strerror(errno));
}

/* Room for the copy: what the layer holds on disk (a loop image's allocated blocks; the
 * upper tree's, through the project quota's count where there is one, else at most the
 * disk quota) plus a reserve must be free on the state dir's filesystem, so that
 * snapshots never fill the disk sandboxes and celld's records live on. */
static int check_room(struct sandbox *sb, bool image, struct cell_error *err)
{
	uint64_t need = sb->limits.disk_bytes;
	struct stat st;
	if (image && fstatat(sb->dirfd, IMAGE_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0)
		need = (uint64_t)st.st_blocks * 512;
	else {
		struct cell_quota_usage u;
		struct cell_error qerr = {0};
		if (cell_quota_usage(sb->dir, 0, 0, &u, &qerr) == 0 && u.used_bytes)
			need = u.used_bytes;
	}
	struct statvfs sv;
	if (fstatvfs(snap_fd, &sv) < 0)
		return cell_err(err, errno, "the free space of the snapshots' filesystem");
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	uint64_t reserve = (uint64_t)sv.f_blocks * sv.f_frsize / 20; /* 5% */
	if (reserve < ROOM_RESERVE_MIN)
		reserve = ROOM_RESERVE_MIN;
	if (need + reserve > avail)
		return cell_err_msg(err, ENOSPC,
				    "no room for a snapshot of %s: its layer takes up to %" PRIu64
				    " bytes, %" PRIu64 " are free and %" PRIu64
				    " are kept in reserve",
				    sb->id, need, avail, reserve);
	return 0;
}

static int capture(struct sandbox *sb, const char *tmp, bool *image, struct cell_layer_stats *stats,
		   struct cell_error *err)
{
	struct stat st;
	*image = fstatat(sb->dirfd, IMAGE_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
	int rr = check_room(sb, *image, err);
	if (rr < 0)
		return rr;
	enum sbx_state state = sb->state; /* stable while busy */
	bool frozen = false;
	int r = 0;
	if (state == SBX_RUNNING) {
		if (!celld.cgroup->freeze)
			return cell_err_msg(err, ENOTSUP, "the %s cgroup backend cannot freeze",
					    celld.cgroup->name);
		if ((r = celld.cgroup->freeze(sb->cgroup_rel, true, err)) < 0)
			return cell_err_wrap(err, "freezing sandbox %s: ", sb->id);
		frozen = true;
	}
	if (state != SBX_STOPPED)
		sync_layer(sb);
	_cleanup_close_ int out =
	    openat(snap_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = out < 0 ? cell_err(err, errno, "opening the new snapshot")
		    : copy_layer(sb, state == SBX_STOPPED, *image, out, stats, err);
	if (frozen) {
		struct cell_error terr = {0};
		if (celld.cgroup->freeze(sb->cgroup_rel, false, &terr) < 0) {
			log_error("sandbox %s: thawing after a snapshot: %s", sb->id, terr.msg);
			if (r == 0)
				r = cell_err_msg(err, terr.code, "thawing sandbox %s: %s", sb->id,
						 terr.msg);
		}
	}
	return r;
}

/* What a snapshot's files take on disk: their allocated blocks (a reflinked block counts
 * as the snapshot's, as it would once its source is gone). */
static __thread uint64_t walked_bytes;

static int add_blocks(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	walked_bytes += (uint64_t)st->st_blocks * 512;
	return 0;
}

static int measure(const char *tmp, uint64_t *bytes, struct cell_error *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/snapshots/%s", celld.state_dir, tmp);
	walked_bytes = 0;
	if (nftw(path, add_blocks, 16, FTW_PHYS | FTW_MOUNT) != 0)
		return cell_err(err, errno ? errno : EIO, "measuring snapshot %s", tmp + 5);
	*bytes = walked_bytes;
	return 0;
}

/* The snapshot's bytes charged to owner (its count was before the copy): 0, or -EUSERS. */
static int charge_bytes(struct adm_principal *owner, const char *tmp, json_t *o, uint64_t *bytes,
			struct cell_error *err)
{
	int r = measure(tmp, bytes, err);
	if (r == 0)
		r = admission_take_n(owner, ADM_SNAPSHOT_BYTES, *bytes, false, err);
	if (r == 0 && json_object_set_new(o, "bytes", json_integer((json_int_t)*bytes)) < 0) {
		admission_put_n(owner, ADM_SNAPSHOT_BYTES, *bytes);
		r = cell_err(err, ENOMEM, "snapshot %s", tmp + 5);
	}
	if (r < 0)
		*bytes = 0;
	return r;
}

int snapshots_charge(void)
{
	json_t *all;
	struct cell_error err = {0};
	int r = snapshot_list(NULL, &all, &err);
	if (r < 0) {
		log_warn("snapshots: counting them against their owners' quotas: %s", err.msg);
		return r;
	}
	size_t i;
	json_t *m;
	json_array_foreach(all, i, m)
	{
		struct adm_principal *p = admission_principal_by_id(meta_owner(m));
		admission_take(p, ADM_SNAPSHOTS, true, NULL);
		admission_take_n(p, ADM_SNAPSHOT_BYTES,
				 (uint64_t)json_integer_value(json_object_get(m, "bytes")), true,
				 NULL);
	}
	json_decref(all);
	return 0;
}

int snapshot_take(struct sandbox *sb, const char *name, struct adm_principal *owner, json_t **meta,
		  struct cell_error *err)
{
	*meta = NULL;
	if (count_snapshots() >= SNAPSHOTS_MAX)
		return cell_err_msg(err, ENOSPC, "%d snapshots exist: delete some first",
				    SNAPSHOTS_MAX);
	/* the count before the copy, its bytes once they are known */
	int qr = admission_take(owner, ADM_SNAPSHOTS, false, err);
	if (qr < 0)
		return qr;
	uint64_t bytes = 0;
	char id[CELL_ID_RANDOM_LEN + 1], tmp[CELL_ID_RANDOM_LEN + 8];
	if (cell_id_random(id) < 0)
		return cell_err(err, EIO, "random id");
	snprintf(tmp, sizeof(tmp), ".tmp-%s", id);
	int r = sandbox_begin(sb, SBX_SNAPSHOTTING, err);
	if (r < 0) {
		admission_put(owner, ADM_SNAPSHOTS);
		return r;
	}
	int64_t t0 = celld_now_ms();
	bool image = false;
	struct cell_layer_stats stats = {0};
	if (mkdirat(snap_fd, tmp, 0700) < 0)
		r = cell_err(err, errno, "creating snapshot %s", id);
	else
		r = capture(sb, tmp, &image, &stats, err);
	json_t *o = r == 0 ? record_meta(sb, id, name, owner, image) : NULL;
	sandbox_end(sb, SBX_SNAPSHOTTING, sb->state, NULL);
	if (r == 0 && !o)
		r = cell_err(err, ENOMEM, "snapshot %s", id);
	if (r == 0)
		r = charge_bytes(owner, tmp, o, &bytes, err);
	char *text = r == 0 ? json_dumps(o, JSON_COMPACT) : NULL;
	if (r == 0 && !text)
		r = cell_err(err, ENOMEM, "snapshot %s", id);
	_cleanup_close_ int dir =
	    r == 0 ? openat(snap_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (r == 0 && dir < 0)
		r = cell_err(err, errno, "opening snapshot %s", id);
	if (r == 0)
		r = cell_write_file_atomic(dir, META_NAME, text, strlen(text), 0600, err);
	free(text);
	/* Whole on disk before it has its name. */
	if (r == 0 && syncfs(dir) < 0)
		r = cell_err(err, errno, "syncing snapshot %s", id);
	if (r == 0 && renameat(snap_fd, tmp, snap_fd, id) < 0)
		r = cell_err(err, errno, "naming snapshot %s", id);
	if (r < 0) {
		struct cell_error rerr = {0};
		if (cell_remove_tree_at(snap_fd, tmp, &rerr) < 0)
			log_warn("snapshot %s: removing what was made: %s", id, rerr.msg);
		admission_put_n(owner, ADM_SNAPSHOT_BYTES, bytes);
		admission_put(owner, ADM_SNAPSHOTS);
		json_decref(o);
		return r;
	}
	fsync(snap_fd);
	log_info("snapshot %s of sandbox %s: %s, %" PRIu64 " entries, %" PRIu64 " files (%" PRIu64
		 " shared), %" PRIu64 " bytes, %lld ms",
		 id, sb->id, image ? "disk image" : "layer", stats.entries, stats.files,
		 stats.cloned, stats.bytes, (long long)(celld_now_ms() - t0));
	*meta = o;
	return 0;
}

/* ---- a new sandbox from a snapshot ---- */

static const char *meta_id(json_t *meta)
{
	const char *id = json_string_value(json_object_get(meta, "id"));
	return id && cell_id_valid(id) ? id : "";
}

static bool meta_image(json_t *meta)
{
	const char *kind = json_string_value(json_object_get(meta, "kind"));
	return kind && !strcmp(kind, "image");
}

int snapshot_seed(json_t *meta, int dirfd, struct cell_error *err)
{
	if (!meta_image(meta))
		return 0;
	const char *id = meta_id(meta);
	char path[CELL_ID_MAX + sizeof("/" IMAGE_NAME)];
	snprintf(path, sizeof(path), "%s/" IMAGE_NAME, id);
	_cleanup_close_ int in = openat(snap_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return cell_err(err, errno, "opening the disk of snapshot %s", id);
	_cleanup_close_ int out =
	    openat(dirfd, IMAGE_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return cell_err(err, errno, "creating a disk from snapshot %s", id);
	int r = cell_file_clone(in, out, NULL);
	return r < 0 ? cell_err(err, -r, "copying the disk of snapshot %s", id) : 0;
}

int snapshot_fill(json_t *meta, const char *layer_dir, uint32_t uid_base, struct cell_error *err)
{
	const char *id = meta_id(meta);
	json_int_t from = json_integer_value(json_object_get(meta, "uidBase"));
	if (from <= 0 || from > UINT32_MAX)
		return cell_err_msg(err, EIO, "snapshot %s: no uid base in its meta.json", id);
	_cleanup_close_ int layer = open(layer_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (layer < 0)
		return cell_err(err, errno, "opening layer dir %s", layer_dir);
	struct cell_layer_stats stats = {0};
	int r;
	if (meta_image(meta)) {
		_cleanup_close_ int upper =
		    openat(layer, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (upper < 0 && errno == ENOENT)
			return 0; /* captured before its first start */
		if (upper < 0)
			return cell_err(err, errno, "opening the layer of snapshot %s", id);
		r = cell_layer_shift(upper, (uint32_t)from, uid_base, &stats, err);
	} else {
		char path[CELL_ID_MAX + sizeof("/upper")];
		snprintf(path, sizeof(path), "%s/upper", id);
		_cleanup_close_ int in =
		    openat(snap_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0)
			return cell_err(err, errno, "opening the layer of snapshot %s", id);
		r = cell_layer_copy(in, layer, "upper", (uint32_t)from, uid_base, &stats, err);
	}
	if (r < 0)
		return cell_err_wrap(err, "snapshot %s: ", id);
	log_info("layer from snapshot %s: %" PRIu64 " entries, %" PRIu64 " files (%" PRIu64
		 " shared), %" PRIu64 " bytes",
		 id, stats.entries, stats.files, stats.cloned, stats.bytes);
	return 0;
}
