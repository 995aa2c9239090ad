/* The layer store (image_store.h). Every file is reached from the store's directory fds,
 * made at start: nothing below them is named by a client's text (digests are checked for
 * their grammar, names are hashed), and nothing follows a link. A layer is unpacked into
 * tmp/ and renamed into layers/ whole, so a crash leaves either nothing or a whole layer;
 * records are written atomically (write, fsync, rename). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/runtime.h"
#include "image_store.h"

#define RECORD_MAX (4u << 20) /* bytes of an image record (its config within) */
#define BUSY_MAX   64	      /* layers being unpacked at once */

static struct {
	char dir[4096]; /* <images>/.store */
	int store, layers, images, refs, tmp;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char busy[BUSY_MAX][STORE_DIGEST_MAX]; /* diffIDs being unpacked ("": free) */
	unsigned holds; /* pulls and imports under way (store_hold): no prune meanwhile */
	uint64_t used;	/* bytes of every layer's files (their layer.json's) */
} st = {.store = -1,
	.layers = -1,
	.images = -1,
	.refs = -1,
	.tmp = -1,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER};

/* Bounds of one layer: 16 GiB of files, a million entries, 8 GiB for one file, 256 deep. */
static const struct layer_limits limits = {
    .max_bytes = 16ull << 30,
    .max_entries = 1000000,
    .max_file_bytes = 8ull << 30,
    .max_depth = 256,
};

const struct layer_limits *store_layer_limits(void)
{
	return &limits;
}

/* "sha256:<64 lowercase hex>" → its hex (a file name): false for anything else. */
static bool digest_hex(const char *digest, char hex[65])
{
	if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 7 + 64)
		return false;
	for (int i = 0; i < 64; i++) {
		char c = digest[7 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		hex[i] = c;
	}
	hex[64] = '\0';
	return true;
}

/* A name's file: the hex of its SHA-256 and ".json". */
static void name_file(const char *name, char out[CELL_SHA256_HEX_LEN + 6])
{
	cell_sha256_hex(name, strlen(name), out);
	memcpy(out + CELL_SHA256_HEX_LEN, ".json", 6);
}

static int open_sub(int dirfd, const char *name, struct cell_error *err)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "making %s/%s", st.dir, name);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/%s", st.dir, name);
	struct stat s;
	if (fstat(fd, &s) < 0 || s.st_uid != 0 || (s.st_mode & 077)) {
		/* Layers hold set-id files and file capabilities as the image has them: the
		 * store is root's alone, so no host user reaches them. */
		if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0) {
			int e = errno;
			close(fd);
			return cell_err(err, e, "making %s/%s root's alone", st.dir, name);
		}
	}
	return fd;
}

/* A DIR stream of dirfd (its own fd: closedir closes it, not dirfd), or NULL. */
static DIR *open_dir(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* Whether pid is a celld that may still write its entries: alive (a zombie is not) and
 * running the program this one runs (a pid reused by anything else is not). */
static bool celld_alive(int pid)
{
	char path[64], self[4096], theirs[4096];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char stat[512];
	ssize_t n = fd >= 0 ? read(fd, stat, sizeof(stat) - 1) : -1;
	if (n <= 0)
		return false;
	stat[n] = '\0';
	const char *paren = strrchr(stat, ')'); /* the name may hold anything */
	if (!paren || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X')
		return false;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t a = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ssize_t b = readlink(path, theirs, sizeof(theirs) - 1);
	/* Unreadable: keep its entries rather than remove a live unpack's. */
	if (a <= 0 || b <= 0)
		return true;
	return a == b && !memcmp(self, theirs, (size_t)a);
}

/* An entry of tmp/ in use: its maker holds a lock on its directory for as long as it
 * works there, whatever program it runs (another build of celld may share the images
 * dir). 1 when it is locked by someone, 0 when free (then *fd holds the lock), <0 on
 * error. */
static int tmp_busy(const char *name, int *fd)
{
	*fd = openat(st.tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	int e = errno;
	close(*fd);
	*fd = -1;
	return e == EWOULDBLOCK ? 1 : -e;
}

/* What an interrupted unpack or commit left in tmp/ (never a layer: layers arrive by
 * rename). Each entry names the process that made it ("<kind>-<pid>-<random>") and is
 * locked while in use: another celld sharing the images dir may be working there, so only
 * entries nobody holds, of a process that is no live celld, go. */
static void sweep_tmp(void)
{
	DIR *d = open_dir(st.tmp);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		const char *dash = strchr(e->d_name, '-');
		int pid = dash ? atoi(dash + 1) : 0;
		_cleanup_close_ int lock = -1;
		if ((pid > 0 && celld_alive(pid)) || tmp_busy(e->d_name, &lock) != 0)
			continue;
		struct cell_error rerr = {0};
		if (layer_remove_all(st.tmp, e->d_name, &rerr) < 0)
			log_warn("layer store: removing %s/tmp/%s: %s", st.dir, e->d_name,
				 rerr.msg);
	}
	closedir(d);
}

/* The bytes of every layer in the store, from their records. */
static void count_used(void)
{
	DIR *d = open_dir(st.layers);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char digest[STORE_DIGEST_MAX];
		snprintf(digest, sizeof(digest), "sha256:%.64s", e->d_name);
		st.used += store_has_layer(digest) ? store_layer_bytes(digest) : 0;
	}
	if (d)
		closedir(d);
}

uint64_t store_used_bytes(void)
{
	pthread_mutex_lock(&st.lock);
	uint64_t u = st.used;
	pthread_mutex_unlock(&st.lock);
	return u;
}

int store_init(const char *images_dir, struct cell_error *err)
{
	if ((size_t)snprintf(st.dir, sizeof(st.dir), "%s/.store", images_dir) >= sizeof(st.dir))
		return cell_err(err, ENAMETOOLONG, "images dir %s", images_dir);
	_cleanup_close_ int top = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return cell_err(err, errno, "opening images dir %s", images_dir);
	if ((st.store = open_sub(top, ".store", err)) < 0)
		return st.store;
	int *const fds[] = {&st.layers, &st.images, &st.refs, &st.tmp};
	static const char *const names[] = {"layers", "images", "refs", "tmp"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(fds); i++)
		if ((*fds[i] = open_sub(st.store, names[i], err)) < 0)
			return *fds[i];
	/* The store's events (image_events.c) are kept like a sandbox's, in a dir of their own. */
	if (mkdirat(st.store, STORE_EVENTS_ID, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "making %s/%s", st.dir, STORE_EVENTS_ID);
	sweep_tmp();
	count_used();
	return 0;
}

int store_fd(void)
{
	return st.store;
}

/* ---- layers ---- */

bool store_has_layer(const char *diff_id)
{
	char hex[65];
	struct stat s;
	return digest_hex(diff_id, hex) && st.layers >= 0 &&
	       fstatat(st.layers, hex, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s.st_mode);
}

int store_layer_dir(const char *diff_id, char *buf, size_t size)
{
	char hex[65];
	if (!digest_hex(diff_id, hex))
		return -EINVAL;
	if (!store_has_layer(diff_id))
		return -ENOENT;
	return (size_t)snprintf(buf, size, "%s/layers/%s/diff", st.dir, hex) < size ? 0
										    : -ENAMETOOLONG;
}

static json_t *read_json_at(int dirfd, const char *file, struct cell_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int r = cell_read_file_at(dirfd, file, RECORD_MAX, &text, &len, err);
	if (r < 0)
		return errno = -r, NULL;
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		cell_err_msg(err, EINVAL, "%s: not a JSON object (%s)", file, je.text);
		return errno = EINVAL, NULL;
	}
	return o;
}

static int write_json_at(int dirfd, const char *file, json_t *o, struct cell_error *err)
{
	char *text = json_dumps(o, JSON_COMPACT);
	if (!text)
		return cell_err(err, ENOMEM, "%s", file);
	int r = cell_write_file_atomic(dirfd, file, text, strlen(text), 0600, err);
	free(text);
	return r;
}

uint64_t store_layer_bytes(const char *diff_id)
{
	char hex[65], file[80];
	if (!digest_hex(diff_id, hex) || st.layers < 0)
		return 0;
	snprintf(file, sizeof(file), "%s/layer.json", hex);
	struct cell_error err = {0};
	json_t *o = read_json_at(st.layers, file, &err);
	uint64_t b = (uint64_t)json_integer_value(json_object_get(o, "bytes"));
	json_decref(o);
	return b;
}

/* Wait while another caller unpacks diff_id, then claim it: the slot, or -1 when the
 * layer has arrived meanwhile (lock held). */
static int claim_locked(const char *diff_id)
{
	for (;;) {
		int free_slot = -1;
		bool busy = false;
		for (int i = 0; i < BUSY_MAX; i++) {
			if (!st.busy[i][0] && free_slot < 0)
				free_slot = i;
			busy |= !strcmp(st.busy[i], diff_id);
		}
		if (!busy && store_has_layer(diff_id))
			return -1;
		if (!busy && free_slot >= 0) {
			snprintf(st.busy[free_slot], STORE_DIGEST_MAX, "%s", diff_id);
			return free_slot;
		}
		pthread_cond_wait(&st.cond, &st.lock);
	}
}

static void release(int slot)
{
	pthread_mutex_lock(&st.lock);
	st.busy[slot][0] = '\0';
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.lock);
}

static int write_layer_record(int dirfd, const struct layer_stats *ls, struct cell_error *err)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I}", "diffId", ls->diff_id, "blobDigest",
			      ls->blob_digest, "bytes", (json_int_t)ls->bytes, "entries",
			      (json_int_t)ls->entries, "created", (json_int_t)time(NULL));
	if (!o)
		return cell_err(err, ENOMEM, "layer record");
	int r = write_json_at(dirfd, "layer.json", o, err);
	json_decref(o);
	return r;
}

/* The diff/ dirs of the layers below, top first, that the store has (fds into out). */
static size_t open_parents(const char *const *parents, size_t n, int *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k < CELL_IMAGE_LAYERS_MAX; i++) {
		char hex[65], rel[80];
		if (!digest_hex(parents[i], hex))
			continue;
		snprintf(rel, sizeof(rel), "%s/diff", hex);
		int fd = openat(st.layers, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			out[k++] = fd;
	}
	return k;
}

/* Unpack fd into tmp/<name>/diff over parents, check it against what was asked, record
 * it. */
static int unpack_checked(int fd, const char *name, const char *want_blob, const char *want_diff,
			  const char *const *parents, size_t n_parents, struct layer_stats *ls,
			  struct cell_error *err)
{
	if (mkdirat(st.tmp, name, 0700) < 0)
		return cell_err(err, errno, "making %s/tmp/%s", st.dir, name);
	_cleanup_close_ int dir =
	    openat(st.tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Locked while in use (tmp_busy): the lock goes with the fd. */
	if (dir < 0 || flock(dir, LOCK_EX | LOCK_NB) < 0 || mkdirat(dir, "diff", 0755) < 0)
		return cell_err(err, errno, "making %s/tmp/%s/diff", st.dir, name);
	_cleanup_close_ int diff =
	    openat(dir, "diff", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (diff < 0)
		return cell_err(err, errno, "opening %s/tmp/%s/diff", st.dir, name);
	int pfds[CELL_IMAGE_LAYERS_MAX];
	size_t np = open_parents(parents, n_parents, pfds);
	int r = layer_unpack_over(fd, diff, pfds, np, &limits, ls, err);
	for (size_t i = 0; i < np; i++)
		close(pfds[i]);
	if (r < 0)
		return r;
	if (want_blob && strcmp(want_blob, ls->blob_digest))
		return cell_err_msg(err, EINVAL, "its bytes are %s, not %s as the manifest says",
				    ls->blob_digest, want_blob);
	if (want_diff && strcmp(want_diff, ls->diff_id))
		return cell_err_msg(err, EINVAL,
				    "its content is %s, not %s as the image config says",
				    ls->diff_id, want_diff);
	return write_layer_record(dir, ls, err);
}

int store_layer_add(int fd, const char *want_blob, const char *want_diff,
		    char diff_id_out[STORE_DIGEST_MAX], struct cell_error *err)
{
	return store_layer_add_over(fd, want_blob, want_diff, NULL, 0, diff_id_out, err);
}

int store_layer_add_over(int fd, const char *want_blob, const char *want_diff,
			 const char *const *parents, size_t n_parents,
			 char diff_id_out[STORE_DIGEST_MAX], struct cell_error *err)
{
	char hex[65];
	if ((want_blob && !digest_hex(want_blob, hex)) ||
	    (want_diff && !digest_hex(want_diff, hex)))
		return cell_err_msg(err, EINVAL, "a layer digest must be sha256:<64 hex digits>");
	int slot = -1;
	if (want_diff) {
		pthread_mutex_lock(&st.lock);
		slot = claim_locked(want_diff);
		pthread_mutex_unlock(&st.lock);
		if (slot < 0) {
			snprintf(diff_id_out, STORE_DIGEST_MAX, "%s", want_diff);
			return 0;
		}
	}
	unsigned char rnd[6];
	char name[48];
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		if (slot >= 0)
			release(slot);
		return cell_err(err, EIO, "random name");
	}
	snprintf(name, sizeof(name), "unpack-%d-%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	struct layer_stats ls = {0};
	int r = unpack_checked(fd, name, want_blob, want_diff, parents, n_parents, &ls, err);
	if (r == 0 && digest_hex(ls.diff_id, hex)) {
		/* Whole, then in place at once; one already there (unpacked by a caller that
		 * did not know the diffID) stays, and ours goes. */
		if (renameat2(st.tmp, name, st.layers, hex, RENAME_NOREPLACE) == 0) {
			pthread_mutex_lock(&st.lock);
			st.used += ls.bytes;
			pthread_mutex_unlock(&st.lock);
		} else if (errno != EEXIST) {
			r = cell_err(err, errno, "moving layer %s into %s/layers", ls.diff_id,
				     st.dir);
		}
		snprintf(diff_id_out, STORE_DIGEST_MAX, "%s", ls.diff_id);
	}
	struct cell_error rerr = {0};
	if (layer_remove_all(st.tmp, name, &rerr) < 0)
		log_warn("layer store: removing %s/tmp/%s: %s", st.dir, name, rerr.msg);
	if (slot >= 0)
		release(slot);
	return r;
}

/* ---- image records and names ---- */

/* The owner a ref record names ("" when none). */
static const char *ref_owner(json_t *ref)
{
	const char *o = json_string_value(json_object_get(ref, "owner"));
	return o ? o : "";
}

static int put(const char *name, const char *owner_id,
	       bool (*may_take)(const char *owner, void *cls), void *cls,
	       const struct store_image *img, struct cell_error *err)
{
	char hex[65];
	if (!digest_hex(img->digest, hex))
		return cell_err_msg(err, EINVAL, "image digest '%.80s'", img->digest);
	if (name && (!name[0] || strlen(name) >= STORE_NAME_MAX))
		return cell_err_msg(err, EINVAL, "image name of %zu bytes", strlen(name));
	if (!img->config)
		return cell_err_msg(err, EINVAL, "an image record needs its config");
	json_t *layers = json_array();
	for (size_t i = 0; layers && i < img->n_layers; i++) {
		if (!store_has_layer(img->layers[i])) {
			json_decref(layers);
			return cell_err_msg(err, ENOENT, "layer %s is not in the store",
					    img->layers[i]);
		}
		json_array_append_new(layers, json_string(img->layers[i]));
	}
	json_t *o =
	    json_pack("{s:s, s:s, s:O, s:o, s:I, s:I}", "digest", img->digest, "configDigest",
		      img->config_digest, "config", img->config, "layers", layers, "bytes",
		      (json_int_t)img->bytes, "created", (json_int_t)time(NULL));
	if (!o)
		return cell_err(err, ENOMEM, "image record");
	char file[80], nf[CELL_SHA256_HEX_LEN + 6];
	snprintf(file, sizeof(file), "%s.json", hex);
	if (name)
		name_file(name, nf);
	pthread_mutex_lock(&st.lock);
	int r = 0;
	if (name && may_take) {
		/* Checked and written under the lock: two importers of one name never both
		 * pass. */
		struct cell_error rerr = {0};
		json_t *cur = read_json_at(st.refs, nf, &rerr);
		if (cur && !may_take(ref_owner(cur), cls))
			r = cell_err_msg(err, STORE_ENAME_TAKEN,
					 "image name '%.200s' is taken: choose another", name);
		json_decref(cur);
	}
	if (r == 0)
		r = write_json_at(st.images, file, o, err);
	json_decref(o);
	if (r == 0 && name) {
		json_t *ref = json_pack("{s:s, s:s, s:I}", "name", name, "digest", img->digest,
					"created", (json_int_t)time(NULL));
		if (ref && owner_id && owner_id[0])
			json_object_set_new(ref, "owner", json_string(owner_id));
		r = ref ? write_json_at(st.refs, nf, ref, err) : cell_err(err, ENOMEM, "name");
		json_decref(ref);
	}
	pthread_mutex_unlock(&st.lock);
	return r;
}

int store_image_put(const char *name, const struct store_image *img, struct cell_error *err)
{
	return put(name, NULL, NULL, NULL, img, err);
}

int store_image_put_owned(const char *name, const char *owner_id,
			  bool (*may_take)(const char *owner, void *cls), void *cls,
			  const struct store_image *img, struct cell_error *err)
{
	return put(name, owner_id, may_take, cls, img, err);
}

/* The ref record of a name (a new reference), checked to be that name's: NULL with errno
 * and err (ENOENT: no such name). */
static json_t *read_ref(const char *name, struct cell_error *err)
{
	char nf[CELL_SHA256_HEX_LEN + 6];
	name_file(name, nf);
	if (st.refs < 0) {
		cell_err_msg(err, ENOENT, "the layer store is not open");
		return errno = ENOENT, NULL;
	}
	json_t *ref = read_json_at(st.refs, nf, err);
	if (!ref) {
		int e = errno;
		if (e == ENOENT)
			cell_err_msg(err, ENOENT, "image '%.200s' is not in the store", name);
		return errno = e, NULL;
	}
	const char *n = json_string_value(json_object_get(ref, "name"));
	if (!n || strcmp(n, name)) {
		json_decref(ref);
		cell_err_msg(err, EINVAL, "the store's record of '%.200s' is damaged", name);
		return errno = EINVAL, NULL;
	}
	return ref;
}

/* The digest a name names, into digest (and private_to): 0 or -ENOENT. */
static int ref_digest(const char *name, char digest[STORE_DIGEST_MAX], char *private_to,
		      size_t private_size, struct cell_error *err)
{
	json_t *ref = read_ref(name, err);
	if (!ref)
		return -errno;
	const char *d = json_string_value(json_object_get(ref, "digest"));
	const char *p = json_string_value(json_object_get(ref, "privateTo"));
	int r = d && strlen(d) < STORE_DIGEST_MAX
		    ? (snprintf(digest, STORE_DIGEST_MAX, "%s", d), 0)
		    : cell_err_msg(err, EINVAL, "the store's record of '%.200s' is damaged", name);
	if (r == 0)
		snprintf(private_to, private_size, "%s", p ? p : "");
	json_decref(ref);
	return r;
}

int store_name_private(const char *name, const char *owner_id, struct cell_error *err)
{
	char nf[CELL_SHA256_HEX_LEN + 6];
	name_file(name, nf);
	pthread_mutex_lock(&st.lock);
	json_t *ref = read_json_at(st.refs, nf, err);
	int r = ref ? 0 : -errno;
	if (ref) {
		if (owner_id)
			json_object_set_new(ref, "privateTo", json_string(owner_id));
		else
			json_object_del(ref, "privateTo");
		r = write_json_at(st.refs, nf, ref, err);
	}
	pthread_mutex_unlock(&st.lock);
	json_decref(ref);
	return r;
}

int store_name_owner(const char *name, char *owner, size_t size, struct cell_error *err)
{
	json_t *ref = read_ref(name, err);
	if (!ref)
		return -errno;
	snprintf(owner, size, "%s", ref_owner(ref));
	json_decref(ref);
	return 0;
}

static int image_from_json(json_t *o, struct store_image *out, struct cell_error *err)
{
	const char *d = json_string_value(json_object_get(o, "digest"));
	const char *c = json_string_value(json_object_get(o, "configDigest"));
	json_t *layers = json_object_get(o, "layers");
	char hex[65];
	if (!d || !digest_hex(d, hex) || !c || strlen(c) >= STORE_DIGEST_MAX ||
	    !json_is_array(layers) || json_array_size(layers) > 1024)
		return cell_err_msg(err, EINVAL, "an image record of the store is damaged");
	memset(out, 0, sizeof(*out));
	snprintf(out->digest, sizeof(out->digest), "%s", d);
	snprintf(out->config_digest, sizeof(out->config_digest), "%s", c);
	out->config = json_incref(json_object_get(o, "config"));
	out->bytes = (uint64_t)json_integer_value(json_object_get(o, "bytes"));
	out->n_layers = json_array_size(layers);
	out->layers = calloc(out->n_layers ? out->n_layers : 1, sizeof(*out->layers));
	if (!out->layers)
		return cell_err(err, ENOMEM, "image record");
	for (size_t i = 0; i < out->n_layers; i++) {
		const char *l = json_string_value(json_array_get(layers, i));
		if (!l || !digest_hex(l, hex)) {
			store_image_free(out);
			return cell_err_msg(err, EINVAL, "an image record of the store is damaged");
		}
		snprintf(out->layers[i], STORE_DIGEST_MAX, "%s", l);
	}
	return 0;
}

int store_image_get(const char *name_or_digest, struct store_image *out, struct cell_error *err)
{
	char digest[STORE_DIGEST_MAX], hex[65];
	if (st.images < 0)
		return cell_err_msg(err, ENOENT, "the layer store is not open");
	int r = 0;
	char private_to[sizeof(out->private_to)] = "";
	if (!strncmp(name_or_digest, "sha256:", 7))
		snprintf(digest, sizeof(digest), "%.71s", name_or_digest);
	else
		r = ref_digest(name_or_digest, digest, private_to, sizeof(private_to), err);
	if (r < 0)
		return r;
	if (!digest_hex(digest, hex))
		return cell_err_msg(err, EINVAL, "'%.80s' is not a sha256 digest", name_or_digest);
	char file[80];
	snprintf(file, sizeof(file), "%s.json", hex);
	json_t *o = read_json_at(st.images, file, err);
	if (!o)
		return errno == ENOENT
			   ? cell_err_msg(err, ENOENT, "image %s is not in the store", digest)
			   : -errno;
	r = image_from_json(o, out, err);
	json_decref(o);
	if (r == 0)
		snprintf(out->private_to, sizeof(out->private_to), "%s", private_to);
	return r;
}

void store_image_free(struct store_image *img)
{
	json_decref(img->config);
	free(img->layers);
	img->config = NULL;
	img->layers = NULL;
	img->n_layers = 0;
}

void store_dirs_free(char **dirs, size_t n)
{
	for (size_t i = 0; dirs && i < n; i++)
		free(dirs[i]);
	free(dirs);
}

int store_image_dirs(const struct store_image *img, char ***dirs, struct cell_error *err)
{
	char **v = calloc(img->n_layers ? img->n_layers : 1, sizeof(*v));
	if (!v)
		return cell_err(err, ENOMEM, "image layers");
	for (size_t i = 0; i < img->n_layers; i++) {
		char buf[4096];
		/* Top first: the manifest lists them bottom first. */
		const char *diff = img->layers[img->n_layers - 1 - i];
		int r = store_layer_dir(diff, buf, sizeof(buf));
		if (r == 0 && !(v[i] = strdup(buf)))
			r = -ENOMEM;
		if (r < 0) {
			store_dirs_free(v, img->n_layers);
			return cell_err(err, -r, "layer %s of image %s", diff, img->digest);
		}
	}
	*dirs = v;
	return 0;
}

/* Call fn for each JSON record of dirfd (its name, its object) until it returns false. */
static void each_record(int dirfd, bool (*fn)(const char *file, json_t *o, void *cls), void *cls)
{
	DIR *d = open_dir(dirfd);
	if (!d)
		return;
	struct dirent *e;
	bool go = true;
	while (go && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
			continue;
		struct cell_error err = {0};
		json_t *o = read_json_at(dirfd, e->d_name, &err);
		if (o)
			go = fn(e->d_name, o, cls);
		json_decref(o);
	}
	closedir(d);
}

static bool list_one(const char *file, json_t *ref, void *cls)
{
	(void)file;
	json_t *out = cls;
	const char *name = json_string_value(json_object_get(ref, "name"));
	const char *digest = json_string_value(json_object_get(ref, "digest"));
	struct store_image img;
	struct cell_error err = {0};
	if (!name || !digest || store_image_get(digest, &img, &err) < 0)
		return true;
	json_t *item = json_pack("{s:s, s:s, s:I, s:I, s:O}", "name", name, "digest", digest,
				 "bytes", (json_int_t)img.bytes, "layers", (json_int_t)img.n_layers,
				 "created", json_object_get(ref, "created"));
	if (item && ref_owner(ref)[0])
		json_object_set_new(item, "owner", json_string(ref_owner(ref)));
	json_array_append_new(out, item);
	store_image_free(&img);
	return true;
}

json_t *store_image_list(void)
{
	json_t *out = json_array();
	if (out && st.refs >= 0) {
		pthread_mutex_lock(&st.lock);
		each_record(st.refs, list_one, out);
		pthread_mutex_unlock(&st.lock);
	}
	return out;
}

int store_name_remove(const char *name, struct cell_error *err)
{
	char nf[CELL_SHA256_HEX_LEN + 6];
	name_file(name, nf);
	pthread_mutex_lock(&st.lock);
	int r = unlinkat(st.refs, nf, 0) < 0 ? -errno : 0;
	pthread_mutex_unlock(&st.lock);
	if (r == -ENOENT)
		return cell_err_msg(err, ENOENT, "image '%.200s' is not in the store", name);
	return r < 0 ? cell_err(err, -r, "removing the name %.200s", name) : 0;
}

/* ---- work dirs of imports and commits ---- */

int store_tmp_make(const char *kind, char *name, size_t size, struct cell_error *err)
{
	unsigned char rnd[6];
	if (st.tmp < 0)
		return cell_err_msg(err, ENOENT, "the layer store is not open");
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return cell_err(err, EIO, "random name");
	if ((size_t)snprintf(name, size, "%s-%d-%02x%02x%02x%02x%02x%02x", kind, (int)getpid(),
			     rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]) >= size)
		return cell_err(err, ENAMETOOLONG, "work dir of %s", kind);
	if (mkdirat(st.tmp, name, 0700) < 0)
		return cell_err(err, errno, "making %s/tmp/%s", st.dir, name);
	int fd = openat(st.tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) { /* locked while in use (tmp_busy) */
		int e = errno;
		if (fd >= 0)
			close(fd);
		unlinkat(st.tmp, name, AT_REMOVEDIR);
		return cell_err(err, e, "opening %s/tmp/%s", st.dir, name);
	}
	return fd;
}

int store_tmp_path(const char *name, char *buf, size_t size)
{
	return (size_t)snprintf(buf, size, "%s/tmp/%s", st.dir, name) < size ? 0 : -ENAMETOOLONG;
}

void store_tmp_remove(const char *name)
{
	struct cell_error rerr = {0};
	if (name && name[0] && st.tmp >= 0 && layer_remove_all(st.tmp, name, &rerr) < 0)
		log_warn("layer store: removing %s/tmp/%s: %s", st.dir, name, rerr.msg);
}

static bool note_layers(const char *file, json_t *o, void *cls)
{
	(void)file;
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(o, "layers"), i, l)
	{
		if (json_is_string(l))
			json_object_set_new(cls, json_string_value(l), json_true());
	}
	return true;
}

int store_layers_drop(const char (*diff_ids)[STORE_DIGEST_MAX], size_t n, struct cell_error *err)
{
	json_t *named = json_object();
	if (!named)
		return cell_err(err, ENOMEM, "dropping layers");
	int r = 0;
	pthread_mutex_lock(&st.lock);
	if (st.holds > 1) {
		r = cell_err_msg(err, EBUSY,
				 "another pull or import holds the store: a prune removes them");
	} else {
		each_record(st.images, note_layers, named);
		for (size_t i = 0; i < n && r == 0; i++) {
			char hex[65];
			bool busy = false;
			for (int k = 0; k < BUSY_MAX; k++)
				busy |= !strcmp(st.busy[k], diff_ids[i]);
			if (!digest_hex(diff_ids[i], hex) || busy ||
			    json_object_get(named, diff_ids[i]) || !store_has_layer(diff_ids[i]))
				continue;
			uint64_t bytes = store_layer_bytes(diff_ids[i]);
			struct cell_error rerr = {0};
			if (layer_remove_all(st.layers, hex, &rerr) < 0) {
				r = cell_err_msg(err, EIO, "removing layer %s: %s", diff_ids[i],
						 rerr.msg);
				break;
			}
			st.used -= bytes < st.used ? bytes : st.used;
		}
	}
	pthread_mutex_unlock(&st.lock);
	json_decref(named);
	return r;
}

/* ---- prune ---- */

void store_hold(void)
{
	pthread_mutex_lock(&st.lock);
	st.holds++;
	pthread_mutex_unlock(&st.lock);
}

void store_unhold(void)
{
	pthread_mutex_lock(&st.lock);
	st.holds--;
	pthread_mutex_unlock(&st.lock);
}

struct prune {
	json_t *named;	/* digest → true */
	json_t *layers; /* diffIDs kept → true */
	bool (*keep)(const char *digest, void *cls);
	void *cls;
};

static bool note_named(const char *file, json_t *ref, void *cls)
{
	(void)file;
	struct prune *p = cls;
	const char *d = json_string_value(json_object_get(ref, "digest"));
	if (d)
		json_object_set_new(p->named, d, json_true());
	return true;
}

static bool prune_image(const char *file, json_t *o, void *cls)
{
	struct prune *p = cls;
	const char *d = json_string_value(json_object_get(o, "digest"));
	if (d && !json_object_get(p->named, d) && !(p->keep && p->keep(d, p->cls))) {
		unlinkat(st.images, file, 0);
		return true;
	}
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(o, "layers"), i, l)
	{
		if (json_is_string(l))
			json_object_set_new(p->layers, json_string_value(l), json_true());
	}
	return true;
}

/* Remove every layer of the store p keeps none of (lock held). */
static int prune_layers_locked(struct prune *p, uint64_t *freed, struct cell_error *err)
{
	DIR *d = open_dir(st.layers);
	struct dirent *e;
	int r = 0;
	while (d && (e = readdir(d))) {
		char digest[STORE_DIGEST_MAX], hex[65];
		snprintf(digest, sizeof(digest), "sha256:%.64s", e->d_name);
		if (!digest_hex(digest, hex) || strcmp(hex, e->d_name) ||
		    json_object_get(p->layers, digest))
			continue;
		bool busy = false;
		for (int i = 0; i < BUSY_MAX; i++)
			busy |= !strcmp(st.busy[i], digest);
		if (busy)
			continue;
		uint64_t bytes = store_layer_bytes(digest);
		struct cell_error rerr = {0};
		if (layer_remove_all(st.layers, hex, &rerr) < 0) {
			r = cell_err_msg(err, EIO, "removing layer %s: %s", digest, rerr.msg);
			break;
		}
		*freed += bytes;
		st.used -= bytes < st.used ? bytes : st.used;
	}
	if (d)
		closedir(d);
	return r;
}

int store_prune(bool (*keep)(const char *digest, void *cls), void *cls, uint64_t *freed,
		struct cell_error *err)
{
	*freed = 0;
	struct prune p = {
	    .named = json_object(), .layers = json_object(), .keep = keep, .cls = cls};
	int r = 0;
	pthread_mutex_lock(&st.lock);
	if (!p.named || !p.layers)
		r = cell_err(err, ENOMEM, "prune");
	else if (st.holds)
		r = cell_err_msg(err, EBUSY, "%u pulls or imports are under way: prune after them",
				 st.holds);
	if (r == 0) {
		each_record(st.refs, note_named, &p);
		each_record(st.images, prune_image, &p);
		r = prune_layers_locked(&p, freed, err);
	}
	pthread_mutex_unlock(&st.lock);
	json_decref(p.named);
	json_decref(p.layers);
	return r;
}
