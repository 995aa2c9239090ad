/* The skills registry: <state>/skills (0700), one directory per name, one per version
 * below it holding "archive" and "skill.json" (0600). A version is made as
 * <name>/.tmp-<version>-<random> (both files written and synced), then renamed into place
 * without replacing anything, so a registered version is whole or absent, and a second
 * registration of it fails. */
#include "skills.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "cell/log.h"
#include "config.h"
#include "skillpkg.h"
#include "timefmt.h"

#define ARCHIVE "archive"
#define META	"skill.json"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

bool skill_name_valid(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* What a celld killed during an upload or a registration left: upload-* files and
 * <name>/.tmp-* directories. Run once, before this process makes any of its own. */
static void sweep(int root)
{
	int d2 = dup(root);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, "upload-", 7)) {
			log_info("skills: removing the leftover upload %s", de->d_name);
			unlinkat(root, de->d_name, 0);
			continue;
		}
		if (!skill_name_valid(de->d_name, SKILL_NAME_MAX))
			continue;
		int nd = openat(root, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *nds = nd >= 0 ? fdopendir(nd) : NULL;
		if (!nds) {
			if (nd >= 0)
				close(nd);
			continue;
		}
		struct dirent *ve;
		while ((ve = readdir(nds)))
			if (!strncmp(ve->d_name, ".tmp-", 5)) {
				struct cell_error e = {0};
				log_info("skills: removing the leftover %s/%s", de->d_name,
					 ve->d_name);
				if (cell_remove_tree_at(dirfd(nds), ve->d_name, &e) < 0)
					log_warn("skills: %s", e.msg);
			}
		closedir(nds);
	}
	closedir(d);
}

static pthread_once_t swept = PTHREAD_ONCE_INIT;

static void sweep_once(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/skills", celld.state_dir);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		sweep(fd);
		close(fd);
	}
}

/* <state>/skills, made root-only when missing: an fd (O_PATH|O_DIRECTORY). */
static int registry_dir(struct cell_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/skills", celld.state_dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", path);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	/* Every caller waits for the sweep before it makes anything. */
	pthread_once(&swept, sweep_once);
	return fd;
}

int skills_upload_open(char *path, size_t size, int *fd, struct cell_error *err)
{
	snprintf(path, size, "%s/skills/upload-XXXXXX", celld.state_dir);
	int d = registry_dir(err);
	if (d < 0)
		return d;
	close(d);
	*fd = mkostemp(path, O_CLOEXEC);
	if (*fd < 0)
		return cell_err(err, errno, "creating %s", path);
	fchmod(*fd, 0600);
	return 0;
}

void skills_upload_drop(const char *path)
{
	if (path && path[0] && unlink(path) < 0 && errno != ENOENT)
		log_warn("removing %s: %s", path, strerror(errno));
}

static int sha256_fd(int fd, char hex[CELL_SHA256_HEX_LEN + 1], struct cell_error *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return cell_err(err, ENOMEM, "sha256");
	}
	char buf[65536];
	off_t off = 0;
	int r = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = cell_err(err, errno, "reading the upload");
			break;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		off += n;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	if (r == 0)
		EVP_DigestFinal_ex(ctx, md, &len);
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < len && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return r;
}

/* Write text to dirfd/name (0600), synced. */
static int write_meta(int dirfd, const char *text, struct cell_error *err)
{
	int fd = openat(dirfd, META, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cell_err(err, errno, "creating " META);
	size_t len = strlen(text), done = 0;
	int r = 0;
	while (done < len && r == 0) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno != EINTR)
			r = cell_err(err, errno, "writing " META);
		else if (n > 0)
			done += (size_t)n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = cell_err(err, errno, "syncing " META);
	close(fd);
	return r;
}

int skills_register(const char *name, const char *version, int fd, const char *path, json_t **out,
		    struct cell_error *err)
{
	*out = NULL;
	if (!skill_name_valid(name, SKILL_NAME_MAX)) {
		skills_upload_drop(path);
		return cell_err_msg(err, EINVAL,
				    "name must be 1-%d characters of [A-Za-z0-9._-], not starting "
				    "with a dot",
				    SKILL_NAME_MAX);
	}
	if (!skill_name_valid(version, SKILL_VERSION_MAX)) {
		skills_upload_drop(path);
		return cell_err_msg(err, EINVAL,
				    "version must be 1-%d characters of [A-Za-z0-9._-], not "
				    "starting with a dot",
				    SKILL_VERSION_MAX);
	}
	struct skillpkg_info info;
	int r = skillpkg_scan(fd, NULL, NULL, &info, err);
	if (r < 0) {
		skills_upload_drop(path);
		return r == -EINVAL ? cell_err_wrap(err, "file: ") : r;
	}
	char sha[CELL_SHA256_HEX_LEN + 1] = "";
	if ((r = sha256_fd(fd, sha, err)) < 0 || fsync(fd) < 0) {
		skills_upload_drop(path);
		return r < 0 ? r : cell_err(err, errno, "syncing the upload");
	}
	time_t now = time(NULL);
	json_t *meta =
	    json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:o}", "name", name, "version", version,
		      "sha256", sha, "size", (json_int_t)info.file_size, "format", info.format,
		      "entries", (json_int_t)info.entries, "createdAt", celld_time_json(now));
	_cleanup_free_ char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
	if (!text) {
		json_decref(meta);
		skills_upload_drop(path);
		return cell_err(err, ENOMEM, "skill.json");
	}
	char rnd[CELL_ID_RANDOM_LEN + 1], tmp[NAME_MAX + 1];
	if (cell_id_random(rnd) < 0) {
		json_decref(meta);
		skills_upload_drop(path);
		return cell_err(err, EIO, "random name");
	}
	snprintf(tmp, sizeof(tmp), ".tmp-%s-%s", version, rnd);
	pthread_mutex_lock(&lock);
	int root = registry_dir(err), nd = -1, td = -1;
	r = root < 0 ? root : 0;
	if (r == 0 && mkdirat(root, name, 0700) < 0 && errno != EEXIST)
		r = cell_err(err, errno, "creating skills/%s", name);
	if (r == 0 &&
	    (nd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		r = cell_err(err, errno, "opening skills/%s", name);
	if (r == 0 && faccessat(nd, version, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		r = cell_err_msg(err, EEXIST,
				 "skill %s@%s is already registered (a version is "
				 "immutable: register another version)",
				 name, version);
	if (r == 0 && mkdirat(nd, tmp, 0700) < 0)
		r = cell_err(err, errno, "creating skills/%s/%s", name, tmp);
	if (r == 0 && (td = openat(nd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		r = cell_err(err, errno, "opening skills/%s/%s", name, tmp);
	if (r == 0 && renameat(AT_FDCWD, path, td, ARCHIVE) < 0)
		r = cell_err(err, errno, "moving the upload into skills/%s/%s", name, tmp);
	if (r == 0)
		r = write_meta(td, text, err);
	if (r == 0 && fsync(td) < 0)
		r = cell_err(err, errno, "syncing skills/%s/%s", name, tmp);
	if (r == 0 && renameat2(nd, tmp, nd, version, RENAME_NOREPLACE) < 0)
		r = errno == EEXIST ? cell_err_msg(err, EEXIST, "skill %s@%s is already registered",
						   name, version)
				    : cell_err(err, errno, "naming skills/%s/%s", name, version);
	if (r == 0 && (fsync(nd) < 0 || fsync(root) < 0))
		r = cell_err(err, errno, "syncing skills/%s", name);
	if (r < 0 && nd >= 0) {
		struct cell_error e2 = {0};
		if (faccessat(nd, tmp, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
		    cell_remove_tree_at(nd, tmp, &e2) < 0)
			log_warn("skill %s@%s: removing a failed registration: %s", name, version,
				 e2.msg);
	}
	if (td >= 0)
		close(td);
	if (nd >= 0)
		close(nd);
	if (root >= 0)
		close(root);
	pthread_mutex_unlock(&lock);
	skills_upload_drop(path); /* gone already when it was moved */
	if (r < 0) {
		json_decref(meta);
		return r;
	}
	log_info("skill %s@%s registered (%s, %llu bytes, %u entries, sha256 %s)", name, version,
		 info.format, (unsigned long long)info.file_size, info.entries, sha);
	*out = meta;
	return 0;
}

static json_t *read_meta(int nd, const char *version)
{
	char p[NAME_MAX + 16];
	snprintf(p, sizeof(p), "%s/" META, version);
	int fd = openat(nd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	json_t *o = json_loadfd(fd, 0, NULL);
	close(fd);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

static int cmp_meta(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(json_string_value(json_object_get(x, "name")) ?: "",
		       json_string_value(json_object_get(y, "name")) ?: "");
	return c ? c
		 : strcmp(json_string_value(json_object_get(x, "version")) ?: "",
			  json_string_value(json_object_get(y, "version")) ?: "");
}

static int list_name(int root, const char *name, json_t *arr)
{
	int nd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (nd < 0)
		return 0;
	DIR *d = fdopendir(nd);
	if (!d) {
		close(nd);
		return 0;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (skill_name_valid(de->d_name, SKILL_VERSION_MAX)) {
			json_t *m = read_meta(dirfd(d), de->d_name);
			if (m)
				json_array_append_new(arr, m);
		}
	closedir(d);
	return 0;
}

json_t *skills_list(const char *name)
{
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	pthread_mutex_lock(&lock);
	int root = registry_dir(NULL);
	if (root >= 0 && name) {
		list_name(root, name, arr);
	} else if (root >= 0) {
		int d2 = dup(root);
		DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (skill_name_valid(de->d_name, SKILL_NAME_MAX))
				list_name(root, de->d_name, arr);
		if (d)
			closedir(d);
		else if (d2 >= 0)
			close(d2);
	}
	if (root >= 0)
		close(root);
	pthread_mutex_unlock(&lock);
	size_t n = json_array_size(arr);
	if (n > 1) {
		json_t **v = calloc(n, sizeof(*v));
		if (v) {
			for (size_t i = 0; i < n; i++)
				v[i] = json_incref(json_array_get(arr, i));
			qsort(v, n, sizeof(*v), cmp_meta);
			json_array_clear(arr);
			for (size_t i = 0; i < n; i++)
				json_array_append_new(arr, v[i]);
			free(v);
		}
	}
	return arr;
}

int skills_delete(const char *name, const char *version, struct cell_error *err)
{
	if (!skill_name_valid(name, SKILL_NAME_MAX) ||
	    (version && !skill_name_valid(version, SKILL_VERSION_MAX)))
		return cell_err_msg(err, ENOENT, "no skill %.64s%s%.64s", name, version ? "@" : "",
				    version ? version : "");
	pthread_mutex_lock(&lock);
	int root = registry_dir(err), r = root < 0 ? root : 0;
	if (r == 0 && !version) {
		if (faccessat(root, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			r = cell_err_msg(err, ENOENT, "no skill %s", name);
		else
			r = cell_remove_tree_at(root, name, err);
	} else if (r == 0) {
		int nd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (nd < 0 || faccessat(nd, version, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			r = cell_err_msg(err, ENOENT, "no skill %s@%s", name, version);
		else
			r = cell_remove_tree_at(nd, version, err);
		if (nd >= 0)
			close(nd);
		/* The name goes with its last version. */
		if (r == 0)
			unlinkat(root, name, AT_REMOVEDIR);
	}
	if (root >= 0)
		close(root);
	pthread_mutex_unlock(&lock);
	if (r == 0)
		log_info("skill %s%s%s removed", name, version ? "@" : "", version ? version : "");
	return r;
}

int skills_open(const char *name, const char *version, struct cell_error *err)
{
	if (!skill_name_valid(name, SKILL_NAME_MAX) ||
	    !skill_name_valid(version, SKILL_VERSION_MAX))
		return cell_err_msg(err, ENOENT, "no skill %.64s@%.64s", name, version);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/skills/%s/%s/" ARCHIVE, celld.state_dir, name, version);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? cell_err_msg(err, ENOENT, "no skill %s@%s", name, version)
				       : cell_err(err, errno, "opening %s", p);
	return fd;
}
