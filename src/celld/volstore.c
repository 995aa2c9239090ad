/* celld's named volumes (a create's volumes[].pvc.claimName) on disk.
 *
 *   <state>/volumes/<name>/volume.json   its record: name, created, quota, access, owner
 *   <state>/volumes/<name>/disk.img      its filesystem, with the loop way of a disk quota,
 *   <state>/volumes/<name>/layers/       or the directory under its project quota
 *                          .../data/     what sandboxes mount (or a subPath below it)
 *
 * The quota is the runtime's, as for a sandbox's writable layer (include/cell/quota.h),
 * with a project id of the volumes' own range. Files on disk belong to VOLSTORE_UID_BASE
 * and the 65535 ids above it: a sandbox mounts the volume idmapped, so its own ids, whatever
 * its uid range, are the volume's, and the host sees a range nobody runs as. A volume is
 * made in a dir named ".new-<name>-<random>" and renamed into place once whole, so a crash
 * never leaves a half-made volume under its name.
 *
 * One mutex serialises creates, opens and removals: they take milliseconds, and a remove
 * must never run while a start opens the same volume. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "cell/log.h"
#include "cell/quota.h"
#include "timefmt.h"
#include "volstore.h"

#define RECORD	      "volume.json"
#define RECORD_MAX    (16u << 10)
#define DATA_DIR      "data"
#define NEW_PREFIX    ".new-"
#define IMAGE_NAME    "disk.img"
#define BUSY_WAIT_MS  10000
#define BUSY_STEP_MS  20
#define SUB_DEPTH_MAX 32
/* Project ids of volumes: above every sandbox's (their uid bases, uidrange.h). */
#define PROJECT_FIRST VOLSTORE_UID_BASE

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

static const char *const access_names[] = {
    [VOL_RWO] = "ReadWriteOnce",
    [VOL_ROX] = "ReadOnlyMany",
    [VOL_RWX] = "ReadWriteMany",
    [VOL_RWOP] = "ReadWriteOncePod",
};

static struct {
	char *dir; /* <state>/volumes */
	char *templates;
	int fd;
	pthread_mutex_t lock;
} store = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

const char *volstore_access_name(enum volstore_access a)
{
	return access_names[a];
}

int volstore_access_parse(const char *text, enum volstore_access *a)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(access_names); i++)
		if (!strcmp(text, access_names[i]))
			return *a = (enum volstore_access)i, 0;
	return -EINVAL;
}

bool volstore_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (!n || n > VOLSTORE_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

/* The volumes dir for a listing, on a file description of its own (a dup of store.fd would
 * share, and leave behind, its position). */
static DIR *open_store_dir(void)
{
	int fd = openat(store.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* ---- records ---- */

static int record_parse(const char *text, const char *name, struct volstore_info *out,
			struct cell_error *err)
{
	json_error_t jerr;
	_cleanup_json_ json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	const char *created = NULL, *access = NULL, *owner = NULL, *with = NULL;
	json_int_t bytes = 0, project = 0;
	if (!o ||
	    json_unpack(o, "{s:s, s:I, s:s, s?s, s:I, s?s}", "created", &created, "bytes", &bytes,
			"access", &access, "owner", &owner, "project", &project,
			"deleteWithSandbox", &with) < 0 ||
	    bytes <= 0 || project < PROJECT_FIRST || project >= UINT32_MAX)
		return cell_err_msg(err, EINVAL, "%s/%s/" RECORD " is not a volume record",
				    store.dir, name);
	*out = (struct volstore_info){.bytes = (uint64_t)bytes, .project = (uint32_t)project};
	snprintf(out->name, sizeof(out->name), "%s", name);
	snprintf(out->owner, sizeof(out->owner), "%s", owner ? owner : "");
	snprintf(out->delete_with, sizeof(out->delete_with), "%s", with ? with : "");
	if (celld_parse_time(created, &out->created_at) < 0 ||
	    volstore_access_parse(access, &out->access) < 0)
		return cell_err_msg(err, EINVAL, "%s/%s/" RECORD " is not a volume record",
				    store.dir, name);
	return 0;
}

static int record_write(int dirfd, const struct volstore_info *info, struct cell_error *err)
{
	char created[CELLD_TIME_LEN];
	celld_format_time(info->created_at, created);
	_cleanup_json_ json_t *o =
	    json_pack("{s:s, s:s, s:I, s:s, s:s, s:I}", "name", info->name, "created", created,
		      "bytes", (json_int_t)info->bytes, "access", access_names[info->access],
		      "owner", info->owner, "project", (json_int_t)info->project);
	if (o && info->delete_with[0])
		json_object_set_new(o, "deleteWithSandbox", json_string(info->delete_with));
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!text)
		return cell_err(err, ENOMEM, "volume record");
	return cell_write_file_atomic(dirfd, RECORD, text, strlen(text), 0600, err);
}

static int get_locked(const char *name_in, struct volstore_info *out, struct cell_error *err)
{
	char name[VOLSTORE_NAME_MAX + 1]; /* name_in may be out->name */
	if (!volstore_name_valid(name_in))
		return -ENOENT;
	snprintf(name, sizeof(name), "%s", name_in);
	char path[VOLSTORE_NAME_MAX + sizeof("/" RECORD)];
	snprintf(path, sizeof(path), "%s/" RECORD, name);
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int dirfd =
	    openat(store.fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return errno == ENOENT ? -ENOENT : cell_err(err, errno, "opening volume %s", name);
	int r = cell_read_file_at(dirfd, RECORD, RECORD_MAX, &text, NULL, err);
	if (r < 0)
		return r == -ENOENT
			   ? cell_err_msg(err, EIO, "%s/%s has no " RECORD, store.dir, name)
			   : r;
	return record_parse(text, name, out, err);
}

int volstore_get(const char *name, struct volstore_info *out, struct cell_error *err)
{
	pthread_mutex_lock(&store.lock);
	int r = get_locked(name, out, err);
	pthread_mutex_unlock(&store.lock);
	return r;
}

/* ---- the volume's filesystem ---- */

static int quota_open(const char *dir, uint32_t project, uint64_t bytes, struct cell_quota *q,
		      struct cell_error *err)
{
	struct cell_quota_req req = {.dir = dir,
				     .templates_dir = store.templates,
				     .project_id = project,
				     .bytes = bytes,
				     .shared = true};
	return cell_quota_prepare(&req, q, err);
}

/* The project id a new volume takes: one above the highest any volume has. */
static uint32_t next_project(void)
{
	uint32_t next = PROJECT_FIRST;
	_cleanup_closedir_ DIR *d = open_store_dir();
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[NAME_MAX + sizeof("/" RECORD)];
		snprintf(path, sizeof(path), "%s/" RECORD, de->d_name);
		_cleanup_free_ char *text = NULL;
		if (cell_read_file_at(store.fd, path, RECORD_MAX, &text, NULL, NULL) < 0)
			continue;
		_cleanup_json_ json_t *o = json_loads(text, 0, NULL);
		json_int_t p = json_integer_value(json_object_get(o, "project"));
		if (p >= (json_int_t)next && p < (json_int_t)UINT32_MAX)
			next = (uint32_t)p + 1;
	}
	return next;
}

/* <root>/data, owned by the sandboxes' root (VOLSTORE_UID_BASE) with mode 0755, or by
 * like's owner with its mode (a sandbox's ids: below CELL_UID_RANGE). */
static int make_data(int root, const char *what, const struct stat *like, struct cell_error *err)
{
	uint32_t uid = 0, gid = 0;
	mode_t mode = 0755;
	if (like && like->st_uid < CELL_UID_RANGE && like->st_gid < CELL_UID_RANGE) {
		uid = (uint32_t)like->st_uid;
		gid = (uint32_t)like->st_gid;
		mode = like->st_mode & 01777; /* never set-id */
	}
	if (mkdirat(root, DATA_DIR, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s/" DATA_DIR, what);
	_cleanup_close_ int fd =
	    openat(root, DATA_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, VOLSTORE_UID_BASE + uid, VOLSTORE_UID_BASE + gid) < 0 ||
	    fchmod(fd, mode) < 0)
		return cell_err(err, errno, "preparing %s/" DATA_DIR, what);
	return 0;
}

/* The new volume's quota filesystem and data dir, in the dir being made. */
static int make_volume(const char *tmp, const struct volstore_info *info, const struct stat *like,
		       struct cell_error *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", store.dir, tmp);
	struct cell_quota q;
	int r = quota_open(dir, info->project, info->bytes, &q, err);
	if (r < 0)
		return r;
	_cleanup_close_ int root =
	    open(q.layer_dir[0] ? q.layer_dir : dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	r = root < 0 ? cell_err(err, errno, "opening volume %s", info->name)
		     : make_data(root, info->name, like, err);
	cell_quota_close(&q);
	if (r < 0)
		return r;
	_cleanup_close_ int dirfd = openat(store.fd, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW);
	return dirfd < 0 ? cell_err(err, errno, "opening %s", dir) : record_write(dirfd, info, err);
}

/* rm -rf of <volumes>/<entry> after its project quota let go. */
static int remove_entry(const char *entry, struct cell_error *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", store.dir, entry);
	int r = cell_quota_release(dir, err);
	return r < 0 ? r : cell_remove_tree_at(store.fd, entry, err);
}

int volstore_create(struct volstore_info *info, const struct stat *like, struct cell_error *err)
{
	if (!volstore_name_valid(info->name))
		return cell_err_msg(err, EINVAL, "volume name '%.64s' is not a DNS label",
				    info->name);
	pthread_mutex_lock(&store.lock);
	int r = get_locked(info->name, info, err);
	if (r != -ENOENT) {
		pthread_mutex_unlock(&store.lock);
		return r;
	}
	char rnd[CELL_ID_RANDOM_LEN + 1], tmp[NAME_MAX + 1];
	if (cell_id_random(rnd) < 0) {
		pthread_mutex_unlock(&store.lock);
		return cell_err(err, EIO, "random name");
	}
	snprintf(tmp, sizeof(tmp), NEW_PREFIX "%.200s-%s", info->name, rnd);
	info->created_at = time(NULL);
	info->project = next_project();
	r = mkdirat(store.fd, tmp, 0700) < 0 ? cell_err(err, errno, "creating volume %s", tmp)
					     : make_volume(tmp, info, like, err);
	if (r == 0 && renameat2(store.fd, tmp, store.fd, info->name, RENAME_NOREPLACE) < 0)
		r = cell_err(err, errno, "naming volume %s", info->name);
	if (r < 0) {
		struct cell_error e2 = {0};
		if (remove_entry(tmp, &e2) < 0)
			log_warn("volume %s: removing what a failed create made: %s", info->name,
				 e2.msg);
	}
	pthread_mutex_unlock(&store.lock);
	if (r == 0)
		log_info("volume %s created (%" PRIu64 " bytes, %s)", info->name, info->bytes,
			 access_names[info->access]);
	return r < 0 ? r : 1;
}

/* <root>/data/<sub>: each component made where missing (owned by the sandboxes' root) and
 * opened beneath root without following a symlink: a sandbox made what is there. */
static int open_sub(int root, const char *sub, char *rel, size_t rel_size, struct cell_error *err)
{
	if (snprintf(rel, rel_size, DATA_DIR "%s%s", sub && sub[0] ? "/" : "", sub ? sub : "") >=
	    (int)rel_size)
		return cell_err(err, ENAMETOOLONG, "volume subPath");
	_cleanup_free_ char *copy = strdup(rel);
	if (!copy)
		return cell_err(err, ENOMEM, "volume subPath");
	_cleanup_close_ int cur = dup(root);
	if (cur < 0)
		return cell_err(err, errno, "volume root");
	int depth = 0;
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (++depth > SUB_DEPTH_MAX)
			return cell_err_msg(err, EINVAL, "volume subPath is deeper than %d",
					    SUB_DEPTH_MAX);
		bool made = mkdirat(cur, c, 0755) == 0;
		if (!made && errno != EEXIST)
			return cell_err(err, errno == ENOTDIR ? EINVAL : errno,
					"volumes: subPath %s of the volume: creating %s", sub, c);
		struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
						  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
		int next = (int)syscall(SYS_openat2, cur, c, &how, sizeof(how));
		/* The volume's tree is a sandbox's work: what is wrong with it is the
		 * request's problem (400), not celld's. */
		if (next < 0)
			return cell_err_msg(err, EINVAL,
					    "volumes: subPath %s of the volume: %s is not a "
					    "directory (symlinks are refused)",
					    sub ? sub : "", c);
		close(cur);
		cur = next;
		if (made && fchown(cur, VOLSTORE_UID_BASE, VOLSTORE_UID_BASE) < 0)
			return cell_err(err, errno, "volume subPath %s: owner of %s", sub, c);
	}
	return 0;
}

int volstore_open(const char *name, const char *sub, int *fd, char *rel, size_t rel_size,
		  struct cell_error *err)
{
	*fd = -1;
	pthread_mutex_lock(&store.lock);
	struct volstore_info info;
	int r = get_locked(name, &info, err);
	if (r == -ENOENT)
		r = cell_err_msg(err, ENOENT, "volume %s does not exist (any more)", name);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", store.dir, name);
	struct cell_quota q = {.mount_fd = -1};
	bool opened = false;
	if (r == 0 && (r = quota_open(dir, info.project, info.bytes, &q, err)) == 0)
		opened = true;
	if (r == 0) {
		/* A loop image's detached mount is handed on as it is: only the fd fsmount
		 * gave keeps it a detached tree that can be attached (a reopened path of it
		 * would be a dissolved mount once that fd closes). */
		if (q.mount_fd >= 0) {
			*fd = q.mount_fd;
			q.mount_fd = -1;
		} else {
			*fd = open(q.layer_dir[0] ? q.layer_dir : dir,
				   O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
		r = *fd < 0 ? cell_err(err, errno, "opening volume %s", name)
			    : open_sub(*fd, sub, rel, rel_size, err);
	}
	if (opened)
		cell_quota_close(&q);
	pthread_mutex_unlock(&store.lock);
	if (r < 0 && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return r;
}

/* A loop image's flock is held for as long as a loop device uses it (loopdev.c): while any
 * sandbox's mount holds the filesystem. Released a moment after the last sandbox that
 * mounted it is gone; waited for, bounded. */
static int wait_detached(const char *name, struct cell_error *err)
{
	char path[VOLSTORE_NAME_MAX + sizeof("/" IMAGE_NAME)];
	snprintf(path, sizeof(path), "%s/" IMAGE_NAME, name);
	_cleanup_close_ int image = openat(store.fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (image < 0)
		return errno == ENOENT ? 0 : cell_err(err, errno, "opening volume %s", name);
	for (int waited = 0; flock(image, LOCK_EX | LOCK_NB) < 0; waited += BUSY_STEP_MS) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return cell_err(err, errno, "locking volume %s", name);
		if (waited >= BUSY_WAIT_MS)
			return cell_err_msg(err, EBUSY,
					    "volume %s is still mounted by a sandbox that is "
					    "going away; try again",
					    name);
		struct timespec ts = {0, BUSY_STEP_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	return 0;
}

int volstore_remove(const char *name, struct cell_error *err)
{
	pthread_mutex_lock(&store.lock);
	struct volstore_info info;
	int r = get_locked(name, &info, err);
	if (r == 0)
		r = wait_detached(name, err);
	if (r == 0)
		r = remove_entry(name, err);
	pthread_mutex_unlock(&store.lock);
	if (r == 0)
		log_info("volume %s removed", name);
	return r;
}

json_t *volstore_json(const struct volstore_info *info)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", store.dir, info->name);
	struct cell_quota_usage u = {0};
	bool measured = cell_quota_usage(dir, 0, 0, &u, NULL) == 0;
	json_t *o = json_pack("{s:s, s:o, s:I, s:s, s:s}", "name", info->name, "createdAt",
			      celld_time_json(info->created_at), "sizeBytes",
			      (json_int_t)info->bytes, "accessMode", access_names[info->access],
			      "quota", measured ? cell_quota_kind_name(u.kind) : "unknown");
	if (o && measured)
		json_object_set_new(o, "usedBytes", json_integer((json_int_t)u.used_bytes));
	if (o && info->delete_with[0])
		json_object_set_new(o, "deleteWithSandbox", json_string(info->delete_with));
	return o;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *volstore_names(void)
{
	json_t *arr = json_array();
	size_t n = 0, cap = 0;
	char **names = NULL;
	pthread_mutex_lock(&store.lock);
	_cleanup_closedir_ DIR *d = open_store_dir();
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!volstore_name_valid(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **grown = realloc(names, cap * sizeof(*names));
			if (!grown)
				break;
			names = grown;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	pthread_mutex_unlock(&store.lock);
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_string(names[i]));
		free(names[i]);
	}
	free(names);
	return arr;
}

int volstore_init(const char *state_dir, struct cell_error *err)
{
	if (asprintf(&store.dir, "%s/volumes", state_dir) < 0 ||
	    asprintf(&store.templates, "%s/disk-templates", state_dir) < 0)
		return cell_err(err, ENOMEM, "volumes dir");
	if (mkdir(store.dir, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", store.dir);
	store.fd = open(store.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (store.fd < 0)
		return cell_err(err, errno, "opening %s", store.dir);
	/* What a create cut short (celld killed mid-way) left under a temporary name. */
	_cleanup_closedir_ DIR *d = open_store_dir();
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, NEW_PREFIX, strlen(NEW_PREFIX)))
			continue;
		struct cell_error e = {0};
		if (remove_entry(de->d_name, &e) < 0)
			log_warn("volumes: removing the unfinished %s: %s", de->d_name, e.msg);
	}
	return 0;
}
