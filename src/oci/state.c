/* cell-oci's record of its containers under --root (state.h says the layout and why). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "state.h"

#define STATE_FILE "state.json"

bool oci_id_valid(const char *id)
{
	size_t len = strlen(id);
	if (!len || len > OCI_ID_MAX || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("_+-.", *c)))
			return false;
	return true;
}

int oci_root_open(const char *root, struct cell_error *err)
{
	if (!root || root[0] != '/')
		return cell_err_msg(err, EINVAL, "--root '%s' is not an absolute path",
				    root ? root : "");
	int r = cell_mkdir_p(root, 0700, err);
	if (r < 0)
		return r;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? cell_err(err, errno, "opening --root %s", root) : fd;
}

static int check_id(const char *id, struct cell_error *err)
{
	return oci_id_valid(id) ? 0
				: cell_err_msg(err, EINVAL,
					       "invalid container id '%.64s' (letters, digits, "
					       "'_', '+', '-', '.'; at most %d bytes)",
					       id, OCI_ID_MAX);
}

/* Commands on one container run one at a time: the lock is the directory's, held until
 * the fd is closed (by the process, or when it exits). */
static int lock_dir(int fd, const char *id, struct cell_error *err)
{
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "locking container %s", id);
	}
	return fd;
}

int oci_container_make(int rootfd, const char *id, struct cell_error *err)
{
	int r = check_id(id, err);
	if (r < 0)
		return r;
	if (mkdirat(rootfd, id, 0700) < 0)
		return errno == EEXIST
			   ? cell_err_msg(err, EEXIST, "container %s already exists", id)
			   : cell_err(err, errno, "making the directory of container %s", id);
	int fd = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		int e = errno;
		unlinkat(rootfd, id, AT_REMOVEDIR);
		return cell_err(err, e, "opening the directory of container %s", id);
	}
	return lock_dir(fd, id, err);
}

int oci_container_open(int rootfd, const char *id, struct cell_error *err)
{
	int r = check_id(id, err);
	if (r < 0)
		return r;
	int fd = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
			   ? cell_err_msg(err, ENOENT, "container %s does not exist", id)
			   : cell_err(err, errno, "opening container %s", id);
	return lock_dir(fd, id, err);
}

int oci_container_remove(int rootfd, const char *id, int dirfd, struct cell_error *err)
{
	/* Removed while still locked, so a second delete finds it gone, never half there. */
	int r = check_id(id, err);
	if (r == 0)
		r = cell_remove_tree_at(rootfd, id, err);
	if (dirfd >= 0)
		close(dirfd);
	return r;
}

/* ---- state.json ---- */

int oci_state_write(int dirfd, const struct oci_state *st, struct cell_error *err)
{
	json_t *o =
	    json_pack("{s:s, s:s*, s:s*, s:s*, s:i, s:I, s:b, s:I, s:I, s:O*}", "id", st->id,
		      "bundle", st->bundle, "rootfs", st->rootfs, "cgroup", st->cgroup, "pid",
		      (int)st->pid, "starttime", (json_int_t)st->starttime, "started", st->started,
		      "uidBase", (json_int_t)st->uid_base, "createdMs", (json_int_t)st->created_ms,
		      "annotations", st->annotations);
	if (!o)
		return cell_err(err, ENOMEM, "state of container %s", st->id);
	_cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return cell_err(err, ENOMEM, "state of container %s", st->id);
	return cell_write_file_atomic(dirfd, STATE_FILE, text, strlen(text), 0600, err);
}

static int take_string(json_t *o, const char *key, bool required, char **out,
		       struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	if (!v && !required)
		return 0;
	if (!json_is_string(v))
		return cell_err_msg(err, EINVAL, "state.json: %s is missing or not a string", key);
	*out = strdup(json_string_value(v));
	return *out ? 0 : cell_err(err, ENOMEM, "state.json");
}

static int take_int(json_t *o, const char *key, int64_t min, int64_t max, int64_t *out,
		    struct cell_error *err)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return cell_err_msg(err, EINVAL, "state.json: %s is missing or out of range", key);
	*out = json_integer_value(v);
	return 0;
}

static int parse_state(json_t *o, struct oci_state *st, struct cell_error *err)
{
	const char *id = json_string_value(json_object_get(o, "id"));
	if (!id || !oci_id_valid(id))
		return cell_err_msg(err, EINVAL, "state.json: id is missing or invalid");
	snprintf(st->id, sizeof(st->id), "%s", id);
	int64_t pid, starttime, uid_base, created;
	int r;
	if ((r = take_string(o, "bundle", false, &st->bundle, err)) < 0 ||
	    (r = take_string(o, "rootfs", false, &st->rootfs, err)) < 0 ||
	    (r = take_string(o, "cgroup", false, &st->cgroup, err)) < 0 ||
	    (r = take_int(o, "pid", 0, INT32_MAX, &pid, err)) < 0 ||
	    (r = take_int(o, "starttime", 0, INT64_MAX, &starttime, err)) < 0 ||
	    (r = take_int(o, "uidBase", 0, UINT32_MAX, &uid_base, err)) < 0 ||
	    (r = take_int(o, "createdMs", 0, INT64_MAX, &created, err)) < 0)
		return r;
	json_t *started = json_object_get(o, "started");
	if (!json_is_boolean(started))
		return cell_err_msg(err, EINVAL, "state.json: started is missing or not a boolean");
	json_t *ann = json_object_get(o, "annotations");
	if (ann && !json_is_object(ann))
		return cell_err_msg(err, EINVAL, "state.json: annotations is not an object");
	st->pid = (pid_t)pid;
	st->starttime = (uint64_t)starttime;
	st->uid_base = (uint32_t)uid_base;
	st->created_ms = created;
	st->started = json_is_true(started);
	st->annotations = json_incref(ann);
	json_t *lim = json_object_get(o, "limits");
	if (!lim)
		return 0;
	int64_t mem = 0, cpu = 0, pids = 0;
	if (!json_is_object(lim) || take_int(lim, "memoryBytes", 0, INT64_MAX, &mem, err) < 0 ||
	    take_int(lim, "cpuMillis", 0, INT64_MAX, &cpu, err) < 0 ||
	    take_int(lim, "pids", 0, INT64_MAX, &pids, err) < 0)
		return cell_err_msg(err, EINVAL, "state.json: limits is malformed");
	st->memory_bytes = (uint64_t)mem;
	st->cpu_millis = (uint64_t)cpu;
	st->pids = (uint64_t)pids;
	return 0;
}

int oci_state_read(int dirfd, struct oci_state *st, struct cell_error *err)
{
	*st = (struct oci_state){0};
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = cell_read_file_at(dirfd, STATE_FILE, OCI_STATE_FILE_MAX, &text, &len, err);
	if (r < 0)
		return r;
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return cell_err_msg(err, EINVAL, "state.json: not a JSON object (%s)", je.text);
	}
	r = parse_state(o, st, err);
	json_decref(o);
	if (r < 0)
		oci_state_clear(st);
	return r;
}

void oci_state_clear(struct oci_state *st)
{
	free(st->bundle);
	free(st->rootfs);
	free(st->cgroup);
	json_decref(st->annotations);
	*st = (struct oci_state){0};
}

/* ---- listing ---- */

static int cmp_ids(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int oci_container_ids(int rootfd, char ***ids, size_t *n, struct cell_error *err)
{
	*ids = NULL;
	*n = 0;
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cell_err(err, e, "listing --root");
	}
	size_t cap = 0;
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_type != DT_DIR || !oci_id_valid(de->d_name))
			continue;
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **nv = realloc(*ids, ncap * sizeof(char *));
			if (!nv) {
				r = cell_err(err, ENOMEM, "listing --root");
				break;
			}
			*ids = nv;
			cap = ncap;
		}
		if (!((*ids)[*n] = strdup(de->d_name)))
			r = cell_err(err, ENOMEM, "listing --root");
		else
			(*n)++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < *n; i++)
			free((*ids)[i]);
		free(*ids);
		*ids = NULL;
		*n = 0;
		return r;
	}
	if (*n)
		qsort(*ids, *n, sizeof(char *), cmp_ids);
	return 0;
}
