/* <state>/sandboxes/<id>/state.json: what celld needs to re-adopt a sandbox after a restart
 * (or clean up a half-created one). Written atomically (temp file, rename), 0600, and synced
 * to disk (see store_save_sync for the two writes of a create). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "admission.h"
#include "config.h"
#include "registry.h"
#include "sandbox.h"
#include "store.h"
#include "timefmt.h"
#include "uidrange.h"
#include "celld.h" /* limits.c, fields.c: their headers come with the http part */

#define STATE_FILE "state.json"
#define STATE_MAX  (1u << 20)

/* A reference, not a copy: the json members of an entry are immutable once published
 * (sandbox.h), so the snapshot taken under the registry lock costs O(1) per member and is
 * serialised after the lock is released. */
static json_t *ref_or_null(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

static void load_limits(json_t *o, struct sandbox *sb)
{
	json_t *l = json_object_get(o, "limits");
	if (!json_is_object(l)) {
		limits_resolve(sb->resource_limits, &sb->limits, false, NULL);
		return;
	}
	sb->limits.cpu_millis = (uint64_t)json_integer_value(json_object_get(l, "cpuMillis"));
	sb->limits.memory_bytes = (uint64_t)json_integer_value(json_object_get(l, "memoryBytes"));
	sb->limits.pids = (uint64_t)json_integer_value(json_object_get(l, "pids"));
	sb->limits.disk_bytes = (uint64_t)json_integer_value(json_object_get(l, "diskBytes"));
	sb->limits.socket_bytes =
	    (uint64_t)json_integer_value(json_object_get(l, "socketMemoryBytes"));
}

static json_t *snapshot_locked(const struct sandbox *sb, enum sbx_state state)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s?, s:I, "
	    "s:i, s:I, s:I, s:s, s:s, s:s?}",
	    "id", sb->id, "state", sandbox_state_name(state), "image", sb->image, "createdAt",
	    celld_time_json(sb->created_at), "expiresAt", celld_time_json(sb->expires_at),
	    "lastTransitionAt", celld_time_json(sb->transition_at), "metadata",
	    ref_or_null(sb->metadata), "env", ref_or_null(sb->env), "entrypoint",
	    ref_or_null(sb->entrypoint), "resourceLimits", ref_or_null(sb->resource_limits),
	    "volumes", ref_or_null(sb->volumes), "sessionKey", sb->session_key, "uidBase",
	    (json_int_t)sb->uid_base, "slot", sb->slot, "pid", (json_int_t)sb->pid, "starttime",
	    (json_int_t)sb->starttime, "cgroupRel", sb->cgroup_rel, "dir", sb->dir, "reason",
	    sb->reason);
	/* The limits as enforced, so that a policy changed since the create does not change
	 * what is reported for a sandbox whose cgroup still holds the old values. */
	if (o)
		json_object_set_new(o, "limits", limits_json(&sb->limits));
	if (o)
		json_object_set_new(o, "owner", json_string(admission_principal_id(sb->owner)));
	if (o)
		json_object_set_new(o, "rootfs", json_string(sb->rootfs));
	if (o)
		json_object_set_new(o, "seccomp",
				    json_pack("{s:s, s:b}", "profile", sb->seccomp_profile, "log",
					      sb->seccomp_log));
	return o;
}

/* Absent in a record older than profiles: "" (that sandbox runs without a filter). */
static int load_seccomp(json_t *o, struct sandbox *sb)
{
	json_t *sc = json_object_get(o, "seccomp");
	if (!sc)
		return 0;
	const char *name = json_string_value(json_object_get(sc, "profile"));
	json_t *log = json_object_get(sc, "log");
	if (!name || (name[0] && !cell_seccomp_name_valid(name)) || !json_is_boolean(log))
		return -EINVAL;
	snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "%s", name);
	sb->seccomp_log = json_is_true(log);
	return 0;
}

/* Temp file in the same dir, renamed over state.json: a reader (a restarted celld, another
 * celld judging a uid reservation) sees the old or the new file, never a mix, whatever
 * happens to celld. STORE_UNSYNCED stops there; STORE_SYNC_RENAMED then syncs the file
 * under its final name, which makes the data and the rename durable together before it
 * returns (on ext4 and XFS an fsync commits the journal that holds the rename). */
static int write_renamed(int dirfd, const char *text, size_t len, enum store_sync how,
			 struct cell_error *err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "." STATE_FILE ".tmp%d", (int)getpid());
	_cleanup_close_ int fd =
	    openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cell_err(err, errno, "creating %s", tmp);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			unlinkat(dirfd, tmp, 0);
			return cell_err(err, e, "writing %s", tmp);
		}
		off += (size_t)n;
	}
	if (renameat(dirfd, tmp, dirfd, STATE_FILE) < 0) {
		int e = errno;
		unlinkat(dirfd, tmp, 0);
		return cell_err(err, e, "replacing %s", STATE_FILE);
	}
	if (how == STORE_SYNC_RENAMED && fsync(fd) < 0)
		return cell_err(err, errno, "syncing %s", STATE_FILE);
	return 0;
}

int store_save(struct sandbox *sb, struct cell_error *err)
{
	return store_save_sync(sb, STORE_SYNCED, err);
}

int store_save_sync(struct sandbox *sb, enum store_sync how, struct cell_error *err)
{
	return store_save_as(sb, (enum sbx_state) - 1, how, err);
}

/* state -1: sb's state as it is. */
int store_save_as(struct sandbox *sb, enum sbx_state state, enum store_sync how,
		  struct cell_error *err)
{
	pthread_mutex_lock(&sb->store_lock);
	registry_lock();
	json_t *o = snapshot_locked(sb, (int)state < 0 ? sb->state : state);
	registry_unlock();
	char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	size_t len = text ? strlen(text) : 0;
	int r;
	if (!text)
		r = cell_err(err, ENOMEM, "encoding state of sandbox %s", sb->id);
	else if (len > STATE_MAX)
		/* A record store_load would refuse would leave the sandbox unadoptable after a
		 * restart: refused here, before anything depends on it. */
		r = celld_fail(err, EFBIG,
			       "the record of sandbox %s would be %zu bytes, more than the %u "
			       "celld loads back",
			       sb->id, len, STATE_MAX);
	else if (how == STORE_SYNCED)
		r = cell_write_file_atomic(sb->dirfd, STATE_FILE, text, len, 0600, err);
	else
		r = write_renamed(sb->dirfd, text, len, how, err);
	pthread_mutex_unlock(&sb->store_lock);
	free(text);
	if (r < 0)
		cell_err_wrap(err, "saving %s/%s: ", sb->dir, STATE_FILE);
	return r;
}

static int load_time(json_t *o, const char *key, bool nullable, time_t *out)
{
	json_t *v = json_object_get(o, key);
	if (nullable && (!v || json_is_null(v))) {
		*out = 0;
		return 0;
	}
	return json_is_string(v) ? celld_parse_time(json_string_value(v), out) : -EINVAL;
}

/* An optional member of the given kind: a new reference in *out, or NULL. */
static int load_json(json_t *o, const char *key, bool (*ok)(const json_t *), json_t **out)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!ok(v))
		return -EINVAL;
	*out = json_incref(v);
	return 0;
}

static bool is_string_map(const json_t *v)
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return false;
	json_object_foreach((json_t *)v, k, val) if (!json_is_string(val)) return false;
	return true;
}

static bool is_string_array(const json_t *v)
{
	size_t i;
	json_t *val;
	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, val) if (!json_is_string(val)) return false;
	return true;
}

static bool is_array(const json_t *v)
{
	return json_is_array(v);
}

static char *load_string(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static int fill(struct sandbox *sb, json_t *o)
{
	json_t *id = json_object_get(o, "id"), *st = json_object_get(o, "state");
	json_int_t slot, pid, starttime, uid_base;
	if (!json_is_string(id) || strcmp(json_string_value(id), sb->id) || !json_is_string(st) ||
	    sandbox_state_parse(json_string_value(st), &sb->state) < 0 ||
	    json_unpack(o, "{s:I, s:I, s:I, s:I}", "slot", &slot, "uidBase", &uid_base, "pid", &pid,
			"starttime", &starttime) < 0)
		return -EINVAL;
	/* Never trust a recorded uid base: it must be the one its slot implies. */
	if (slot < 0 || slot >= CELLD_SLOTS || uid_base != uidrange_base((int)slot) || pid < 0 ||
	    pid > (1 << 22) || starttime < 0)
		return -EINVAL;
	sb->slot = (int)slot;
	sb->uid_base = (uint32_t)uid_base;
	sb->pid = (pid_t)pid;
	sb->starttime = (uint64_t)starttime;
	if (load_time(o, "createdAt", false, &sb->created_at) < 0 ||
	    load_time(o, "expiresAt", true, &sb->expires_at) < 0 ||
	    load_time(o, "lastTransitionAt", true, &sb->transition_at) < 0)
		return -EINVAL;
	json_decref(sb->metadata);
	sb->metadata = NULL;
	if (load_json(o, "metadata", is_string_map, &sb->metadata) < 0 ||
	    load_json(o, "env", is_string_map, &sb->env) < 0 ||
	    load_json(o, "entrypoint", is_string_array, &sb->entrypoint) < 0 ||
	    load_json(o, "resourceLimits", is_string_map, &sb->resource_limits) < 0 ||
	    load_json(o, "volumes", is_array, &sb->volumes) < 0)
		return -EINVAL;
	if (!sb->metadata && !(sb->metadata = json_object()))
		return -ENOMEM;
	sb->image = load_string(o, "image");
	sb->rootfs =
	    load_string(o, "rootfs"); /* NULL in a record older than it: resolved at start */
	sb->session_key = load_string(o, "sessionKey");
	sb->reason = load_string(o, "reason");
	sb->owner = admission_principal_by_id(json_string_value(json_object_get(o, "owner")));
	load_limits(o, sb);
	if (load_seccomp(o, sb) < 0)
		return -EINVAL;
	return sb->image ? 0 : -EINVAL;
}

int store_load(const char *id, struct sandbox **out, struct cell_error *err)
{
	*out = NULL;
	_cleanup_close_ int dirfd =
	    openat(celld.sandboxes_fd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return cell_err(err, errno, "opening sandbox dir %s", id);
	_cleanup_free_ char *text = NULL;
	int r = cell_read_file_at(dirfd, STATE_FILE, STATE_MAX, &text, NULL, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(o)) {
		json_decref(o);
		return cell_err(err, EINVAL, "sandbox %s: %s is not a JSON object", id, STATE_FILE);
	}
	struct sandbox *sb = sandbox_new(id);
	if (!sb) {
		json_decref(o);
		return cell_err(err, ENOMEM, "sandbox %s", id);
	}
	r = fill(sb, o);
	json_decref(o);
	if (r < 0) {
		sandbox_unref(sb);
		return cell_err(err, -r, "sandbox %s: invalid %s", id, STATE_FILE);
	}
	sb->dirfd = move_fd(dirfd);
	*out = sb;
	return 0;
}
