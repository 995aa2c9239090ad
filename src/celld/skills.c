/* The skills registry: <state>/skills (0700), one directory per name, one per version
 * below it holding "archive" and "skill.json" (0600). A version is made as
 * <name>/.tmp-<version>-<random> (both files written and synced), then renamed into place
 * without replacing anything, so a registered version is whole or absent, and a second
 * registration of it fails.
 *
 * Pins: <state>/skills/.pins/<name>@<version> ({sha256, owner, pinnedAt}), written (as
 * .pins/.tmp-<random>, synced, renamed without replacing) before the version appears,
 * removed only when that registration fails, never by a delete. Without them a delete
 * freed name@version for other bytes, and the next create naming it ran the new
 * entrypoint.sh as root in a sandbox that asked for the old one. The pins also keep a
 * name its owner's once its last version is gone. Every change and every lookup holds the
 * one lock, so who owns a name is decided once. */
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
#include "admission.h"
#include "config.h"
#include "skillpkg.h"
#include "tenancy.h"
#include "timefmt.h"

#define ARCHIVE	     "archive"
#define META	     "skill.json"
#define PINS	     ".pins"
#define OWNER_ID_MAX 64

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

/* A directory stream on dirfd/name (name NULL: on dirfd itself, which stays open), never
 * following a symlink; NULL when it cannot be opened. */
static DIR *dir_at(int dirfd, const char *name)
{
	int fd = name ? openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
		      : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* A pin half written (.pins/.tmp-*): never renamed, so it pinned nothing. */
static void sweep_pins(int root)
{
	DIR *d = dir_at(root, PINS);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ".tmp-", 5)) {
			log_info("skills: removing the leftover pin %s", de->d_name);
			unlinkat(dirfd(d), de->d_name, 0);
		}
	closedir(d);
}

/* What a celld killed during an upload or a registration left: upload-* files,
 * <name>/.tmp-* directories and .pins/.tmp-* files. Run once, before this process makes
 * any of its own. */
static void sweep(int root)
{
	DIR *d = dir_at(root, NULL);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, "upload-", 7)) {
			log_info("skills: removing the leftover upload %s", de->d_name);
			unlinkat(root, de->d_name, 0);
			continue;
		}
		if (!strcmp(de->d_name, PINS)) {
			sweep_pins(root);
			continue;
		}
		if (!skill_name_valid(de->d_name, SKILL_NAME_MAX))
			continue;
		DIR *nds = dir_at(root, de->d_name);
		if (!nds)
			continue;
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

int skills_sha256_fd(int fd, char hex[CELL_SHA256_HEX_LEN + 1], struct cell_error *err)
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

/* Write text to dirfd/name (0600, created: never an existing file), synced. */
static int write_file(int dirfd, const char *name, const char *text, struct cell_error *err)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cell_err(err, errno, "creating %s", name);
	size_t len = strlen(text), done = 0;
	int r = 0;
	while (done < len && r == 0) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno != EINTR)
			r = cell_err(err, errno, "writing %s", name);
		else if (n > 0)
			done += (size_t)n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = cell_err(err, errno, "syncing %s", name);
	close(fd);
	return r;
}

/* dirfd/name as a JSON object (a new reference), or NULL. */
static json_t *read_object(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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

static json_t *read_meta(int nd, const char *version)
{
	char p[NAME_MAX + 16];
	snprintf(p, sizeof(p), "%s/" META, version);
	return read_object(nd, p);
}

/* ---- owners ---- */

/* An owner as recorded (admission_principal_id's text): a key's "key:<hex>"; anything
 * else, a missing one included (versions from before owners), is the operator's. */
static const char *owner_of(json_t *o)
{
	const char *id = json_string_value(json_object_get(o, "owner"));
	return id && !strncmp(id, "key:", 4) ? id : "unix";
}

static bool operators(const char *owner)
{
	return strncmp(owner, "key:", 4) != 0;
}

/* Whether who may see and name in a create a skill of owner: the operator's catalogue is
 * every key's; a key's skill is its own (tenancy_sees_id: with one key, shared). */
static bool may_use(const struct adm_principal *who, const char *owner)
{
	return operators(owner) || tenancy_sees_id(who, owner);
}

/* Whether who may register a version under or delete a skill of owner: the operator's
 * only the operator (with one key, that key too, as before); a key's, that key. */
static bool may_change(const struct adm_principal *who, const char *owner)
{
	return tenancy_sees_id(who, owner);
}

/* A description as the API answers it: "owner" is the owner's name ("operator" or the
 * tenant's), never the id kept on disk. */
static json_t *answer(json_t *meta)
{
	json_t *o = json_copy(meta);
	if (o)
		json_object_set_new(o, "owner",
				    json_string(admission_principal_name(
					admission_principal_by_id(owner_of(meta)))));
	return o;
}

/* ---- pins ---- */

/* <state>/skills/.pins, made when missing: an fd, or negative errno. */
static int pins_dir(int root, struct cell_error *err)
{
	if (mkdirat(root, PINS, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating skills/" PINS);
	int fd = openat(root, PINS, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cell_err(err, errno, "opening skills/" PINS);
	return fd;
}

static void pin_name(char *buf, size_t size, const char *name, const char *version)
{
	snprintf(buf, size, "%s@%s", name, version);
}

/* name@version's pin: 1 with *pin (a new reference; an unreadable one is an empty object,
 * which matches no digest), 0 when it has none, negative errno. */
static int pin_read(int pd, const char *name, const char *version, json_t **pin,
		    struct cell_error *err)
{
	char pn[NAME_MAX + 1];
	pin_name(pn, sizeof(pn), name, version);
	*pin = NULL;
	if (faccessat(pd, pn, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cell_err(err, errno, "reading skills/" PINS "/%s", pn);
	*pin = read_object(pd, pn);
	if (!*pin) {
		log_warn("skills: the pin %s is unreadable: it matches no content", pn);
		*pin = json_object();
	}
	return *pin ? 1 : cell_err(err, ENOMEM, "pin");
}

/* Pin name@version to sha for owner: written whole under a temp name, then renamed without
 * replacing (a pin never changes), synced. -EEXIST when it has one. */
static int pin_write(int pd, const char *name, const char *version, const char *sha,
		     const char *owner, struct cell_error *err)
{
	char pn[NAME_MAX + 1], rnd[CELL_ID_RANDOM_LEN + 1], tmp[NAME_MAX + 1];
	pin_name(pn, sizeof(pn), name, version);
	if (cell_id_random(rnd) < 0)
		return cell_err(err, EIO, "random name");
	snprintf(tmp, sizeof(tmp), ".tmp-%s", rnd);
	json_t *o = json_pack("{s:s, s:s, s:o}", "sha256", sha, "owner", owner, "pinnedAt",
			      celld_time_json(time(NULL)));
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return cell_err(err, ENOMEM, "pin");
	int r = write_file(pd, tmp, text, err);
	if (r == 0 && renameat2(pd, tmp, pd, pn, RENAME_NOREPLACE) < 0)
		r = errno == EEXIST ? cell_err_msg(err, EEXIST, "skill %s is pinned already", pn)
				    : cell_err(err, errno, "naming skills/" PINS "/%s", pn);
	if (r < 0) {
		unlinkat(pd, tmp, 0);
		return r;
	}
	if (fsync(pd) < 0)
		return cell_err(err, errno, "syncing skills/" PINS);
	return 0;
}

/* Who owns name: the owner its versions record, else (its last version deleted) its pins'.
 * 1 with owner filled, 0 when the name is free. */
static int name_owner(int root, int pd, const char *name, char owner[OWNER_ID_MAX])
{
	int found = 0;
	DIR *d = dir_at(root, name);
	struct dirent *de;
	while (d && !found && (de = readdir(d)))
		if (skill_name_valid(de->d_name, SKILL_VERSION_MAX)) {
			json_t *m = read_meta(dirfd(d), de->d_name);
			if (m) {
				snprintf(owner, OWNER_ID_MAX, "%s", owner_of(m));
				found = 1;
			}
			json_decref(m);
		}
	if (d)
		closedir(d);
	if (found)
		return 1;
	d = dir_at(pd, NULL);
	size_t n = strlen(name);
	while (d && !found && (de = readdir(d)))
		if (!strncmp(de->d_name, name, n) && de->d_name[n] == '@') {
			json_t *p = read_object(dirfd(d), de->d_name);
			snprintf(owner, OWNER_ID_MAX, "%s", owner_of(p));
			json_decref(p);
			found = 1;
		}
	if (d)
		closedir(d);
	return found;
}

/* ---- registering ---- */

int skills_register(const struct adm_principal *who, const char *name, const char *version, int fd,
		    const char *path, json_t **out, struct cell_error *err)
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
	if ((r = skills_sha256_fd(fd, sha, err)) < 0 || fsync(fd) < 0) {
		skills_upload_drop(path);
		return r < 0 ? r : cell_err(err, errno, "syncing the upload");
	}
	char rnd[CELL_ID_RANDOM_LEN + 1], tmp[NAME_MAX + 1], pn[NAME_MAX + 1];
	if (cell_id_random(rnd) < 0) {
		skills_upload_drop(path);
		return cell_err(err, EIO, "random name");
	}
	snprintf(tmp, sizeof(tmp), ".tmp-%s-%s", version, rnd);
	pin_name(pn, sizeof(pn), name, version);
	char owner[OWNER_ID_MAX];
	json_t *meta = NULL, *pin = NULL;
	_cleanup_free_ char *text = NULL;
	bool pinned_now = false;
	pthread_mutex_lock(&lock);
	_cleanup_close_ int root = registry_dir(err), nd = -1, td = -1, pd = -1;
	r = root < 0 ? root : 0;
	if (r == 0 && (pd = pins_dir(root, err)) < 0)
		r = pd;
	/* The name is whoever's registered it first: its later versions are theirs too. */
	if (r == 0 && name_owner(root, pd, name, owner)) {
		if (!may_change(who, owner))
			r = cell_err_msg(
			    err, SKILL_ENAME_TAKEN,
			    operators(owner)
				? "name: skill %s is the operator's, shared with every "
				  "key and changed by the operator alone: register "
				  "yours under another name"
				: "name: skill name %s is taken (names are one "
				  "namespace for every key): register under another "
				  "name",
			    name);
	} else if (r == 0) {
		snprintf(owner, sizeof(owner), "%s", admission_principal_id(who));
	}
	if (r == 0) {
		meta =
		    json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:o, s:s}", "name", name, "version",
			      version, "sha256", sha, "size", (json_int_t)info.file_size, "format",
			      info.format, "entries", (json_int_t)info.entries, "createdAt",
			      celld_time_json(time(NULL)), "owner", owner);
		text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
		if (!text)
			r = cell_err(err, ENOMEM, "skill.json");
	}
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
	/* Pinned for good: the same bytes again (after a delete) are that version again;
	 * other bytes never are. */
	int had = r == 0 ? pin_read(pd, name, version, &pin, err) : 0;
	if (had < 0)
		r = had;
	const char *pinned = json_string_value(json_object_get(pin, "sha256"));
	if (r == 0 && had == 1 && !(pinned && !strcmp(pinned, sha))) {
		if (pinned && may_use(who, owner_of(pin)))
			r = cell_err_msg(err, SKILL_EPINNED,
					 "skill %s@%s is pinned for good to sha256 %s, and this "
					 "file's is %s: a version's content never changes, even "
					 "after a delete; register another version",
					 name, version, pinned, sha);
		else
			r = cell_err_msg(err, SKILL_EPINNED,
					 "skill %s@%s is pinned for good to other content: a "
					 "version's content never changes, even after a delete; "
					 "register another version",
					 name, version);
	}
	if (r == 0 && had == 0 && (r = pin_write(pd, name, version, sha, owner, err)) == 0)
		pinned_now = true;
	if (r == 0 && mkdirat(nd, tmp, 0700) < 0)
		r = cell_err(err, errno, "creating skills/%s/%s", name, tmp);
	if (r == 0 && (td = openat(nd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		r = cell_err(err, errno, "opening skills/%s/%s", name, tmp);
	if (r == 0 && renameat(AT_FDCWD, path, td, ARCHIVE) < 0)
		r = cell_err(err, errno, "moving the upload into skills/%s/%s", name, tmp);
	if (r == 0)
		r = write_file(td, META, text, err);
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
		/* A name made for this registration alone goes with it. */
		unlinkat(root, name, AT_REMOVEDIR);
	}
	/* The pin this registration wrote pins nothing that was registered. */
	if (r < 0 && pinned_now && unlinkat(pd, pn, 0) < 0)
		log_warn("skill %s@%s: removing the pin of a failed registration: %s", name,
			 version, strerror(errno));
	pthread_mutex_unlock(&lock);
	json_decref(pin);
	skills_upload_drop(path); /* gone already when it was moved */
	if (r < 0) {
		json_decref(meta);
		return r;
	}
	log_info("skill %s@%s registered for %s (%s, %llu bytes, %u entries, sha256 %s)", name,
		 version, admission_principal_name(admission_principal_by_id(owner)), info.format,
		 (unsigned long long)info.file_size, info.entries, sha);
	*out = answer(meta);
	json_decref(meta);
	return *out ? 0 : cell_err(err, ENOMEM, "skill.json");
}

/* ---- listing ---- */

static int cmp_meta(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(json_string_value(json_object_get(x, "name")) ?: "",
		       json_string_value(json_object_get(y, "name")) ?: "");
	return c ? c
		 : strcmp(json_string_value(json_object_get(x, "version")) ?: "",
			  json_string_value(json_object_get(y, "version")) ?: "");
}

static int list_name(const struct adm_principal *who, int root, const char *name, json_t *arr)
{
	DIR *d = dir_at(root, name);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (skill_name_valid(de->d_name, SKILL_VERSION_MAX)) {
			json_t *m = read_meta(dirfd(d), de->d_name);
			if (m && may_use(who, owner_of(m)))
				json_array_append_new(arr, answer(m));
			json_decref(m);
		}
	closedir(d);
	return 0;
}

json_t *skills_list(const struct adm_principal *who, const char *name)
{
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	pthread_mutex_lock(&lock);
	int root = registry_dir(NULL);
	if (root >= 0 && name) {
		list_name(who, root, name, arr);
	} else if (root >= 0) {
		DIR *d = dir_at(root, NULL);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (skill_name_valid(de->d_name, SKILL_NAME_MAX))
				list_name(who, root, de->d_name, arr);
		if (d)
			closedir(d);
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

/* ---- deleting ---- */

/* Pin version (of the name whose directory is nd) before it goes, when it has no pin yet:
 * a version registered before pins. */
static int pin_before_delete(int nd, int pd, const char *name, const char *version,
			     struct cell_error *err)
{
	json_t *pin = NULL;
	int had = pin_read(pd, name, version, &pin, err);
	json_decref(pin);
	if (had != 0)
		return had < 0 ? had : 0;
	json_t *m = read_meta(nd, version);
	const char *sha = json_string_value(json_object_get(m, "sha256"));
	int r = 0;
	if (sha && strlen(sha) == CELL_SHA256_HEX_LEN)
		r = pin_write(pd, name, version, sha, owner_of(m), err);
	else
		log_warn("skill %s@%s has no readable " META ": removed without a pin", name,
			 version);
	json_decref(m);
	if (r == 0 && sha)
		log_info("skill %s@%s pinned to sha256 %s as it is deleted", name, version, sha);
	return r;
}

static int delete_version(int nd, int pd, const char *name, const char *version,
			  struct cell_error *err)
{
	int r = pin_before_delete(nd, pd, name, version, err);
	return r < 0 ? r : cell_remove_tree_at(nd, version, err);
}

int skills_delete(const struct adm_principal *who, const char *name, const char *version,
		  struct cell_error *err)
{
	if (!skill_name_valid(name, SKILL_NAME_MAX) ||
	    (version && !skill_name_valid(version, SKILL_VERSION_MAX)))
		return cell_err_msg(err, ENOENT, "no skill %.64s%s%.64s", name, version ? "@" : "",
				    version ? version : "");
	pthread_mutex_lock(&lock);
	int root = registry_dir(err), r = root < 0 ? root : 0, nd = -1, pd = -1;
	if (r == 0 && (pd = pins_dir(root, err)) < 0)
		r = pd;
	char owner[OWNER_ID_MAX];
	if (r == 0) {
		nd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		json_t *m = nd >= 0 && version ? read_meta(nd, version) : NULL;
		/* Another key's skill is not told to exist. */
		if (nd < 0 || (version && !m) || !name_owner(root, pd, name, owner) ||
		    !may_use(who, owner))
			r = cell_err_msg(err, ENOENT, "no skill %s%s%s", name, version ? "@" : "",
					 version ? version : "");
		else if (!may_change(who, owner))
			r = cell_err_msg(err, SKILL_ESHARED,
					 "skill %s is the operator's, shared with every key: only "
					 "the operator deletes it",
					 name);
		json_decref(m);
	}
	if (r == 0 && version) {
		r = delete_version(nd, pd, name, version, err);
	} else if (r == 0) {
		DIR *d = dir_at(nd, NULL);
		struct dirent *de;
		while (r == 0 && d && (de = readdir(d)))
			if (skill_name_valid(de->d_name, SKILL_VERSION_MAX))
				r = delete_version(nd, pd, name, de->d_name, err);
		if (d)
			closedir(d);
		else
			r = cell_err(err, errno, "reading skills/%s", name);
	}
	if (nd >= 0)
		close(nd);
	/* The name goes with its last version. */
	if (r == 0)
		unlinkat(root, name, AT_REMOVEDIR);
	if (r == 0 && (fsync(pd) < 0 || fsync(root) < 0))
		log_warn("skills: syncing after deleting %s: %s", name, strerror(errno));
	if (pd >= 0)
		close(pd);
	if (root >= 0)
		close(root);
	pthread_mutex_unlock(&lock);
	if (r == 0)
		log_info("skill %s%s%s removed", name, version ? "@" : "", version ? version : "");
	return r;
}

/* ---- installing ---- */

int skills_open(const struct adm_principal *who, const char *name, const char *version,
		char sha[CELL_SHA256_HEX_LEN + 1], struct cell_error *err)
{
	sha[0] = '\0';
	if (!skill_name_valid(name, SKILL_NAME_MAX) ||
	    !skill_name_valid(version, SKILL_VERSION_MAX))
		return cell_err_msg(err, ENOENT, "no skill %.64s@%.64s", name, version);
	pthread_mutex_lock(&lock);
	_cleanup_close_ int root = registry_dir(err), nd = -1, pd = -1;
	int r = root < 0 ? root : 0, fd = -1;
	json_t *m = NULL, *pin = NULL;
	if (r == 0)
		nd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (r == 0 && nd >= 0)
		m = read_meta(nd, version);
	const char *msha = json_string_value(json_object_get(m, "sha256"));
	/* Another key's skill is as if it were not registered. */
	if (r == 0 && (!m || !may_use(who, owner_of(m))))
		r = cell_err_msg(err, ENOENT, "no skill %s@%s", name, version);
	if (r == 0 && (!msha || strlen(msha) != CELL_SHA256_HEX_LEN))
		r = cell_err_msg(err, EIO, "skill %s@%s: its " META " names no sha256", name,
				 version);
	if (r == 0 &&
	    (pd = openat(root, PINS, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		int had = pin_read(pd, name, version, &pin, err);
		const char *psha = json_string_value(json_object_get(pin, "sha256"));
		if (had < 0)
			r = had;
		else if (had == 1 && !(psha && !strcmp(psha, msha)))
			r = cell_err_msg(err, EIO,
					 "skill %s@%s: its " META " (sha256 %s) disagrees with its "
					 "pin (%s)",
					 name, version, msha, psha ? psha : "unreadable");
	}
	if (r == 0) {
		char p[NAME_MAX + 16];
		snprintf(p, sizeof(p), "%s/" ARCHIVE, version);
		fd = openat(nd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			r = errno == ENOENT
				? cell_err_msg(err, ENOENT, "no skill %s@%s", name, version)
				: cell_err(err, errno, "opening skills/%s/%s", name, p);
	}
	if (r == 0)
		snprintf(sha, CELL_SHA256_HEX_LEN + 1, "%s", msha);
	json_decref(m);
	json_decref(pin);
	pthread_mutex_unlock(&lock);
	return r < 0 ? r : fd;
}
