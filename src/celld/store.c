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
#include "cell/log.h"
#include "admission.h"
#include "config.h"
#include "record.h"
#include "registry.h"
#include "sandbox.h"
#include "store.h"
#include "fields.h"
#include "resource_policy.h"

#define STATE_FILE "state.json"
#define STATE_MAX  (1u << 20)

/* The record of sb in state, borrowing sb's members. A reference, not a copy: the json
 * members of an entry are immutable once published (sandbox.h), so the snapshot taken
 * under the registry lock costs O(1) per member and is serialised after the lock is
 * released. */
static json_t *snapshot_locked(struct sandbox *sb, enum sbx_state state)
{
	struct record rec = {
	    .state = state,
	    .image = sb->image,
	    .rootfs = sb->rootfs,
	    .session_key = sb->session_key,
	    .snapshot_id = sb->snapshot_id,
	    .name = sb->name,
	    .image_digest = sb->image_digest,
	    .image_layers = sb->image_layers,
	    .image_workdir = sb->image_workdir,
	    .image_user = sb->image_user,
	    .reason = sb->reason,
	    .owner = (char *)admission_principal_id(sb->owner),
	    .dir = sb->dir,
	    .cgroup_rel = sb->cgroup_rel,
	    .metadata = sb->metadata,
	    .env = sb->env,
	    .entrypoint = sb->entrypoint,
	    .resource_limits = sb->resource_limits,
	    .volumes = sb->volumes,
	    .network = sb->network,
	    .provision = sb->provision,
	    .provision_result = sb->provision_result,
	    .created_at = sb->created_at,
	    .created_ms = sb->created_ms,
	    .expires_at = sb->expires_at,
	    .transition_at = sb->transition_at,
	    .slot = sb->slot,
	    .uid_base = sb->uid_base,
	    .pid = sb->pid,
	    .starttime = sb->starttime,
	    .has_limits = true,
	    .limits = sb->limits,
	    .has_seccomp = true,
	    .seccomp_log = sb->seccomp_log,
	    .sudo = sb->sudo,
	    .manual_resume = sb->manual_resume,
	    .public_ports = sb->public_ports,
	    .interpreter_bind = sb->interpreter_bind,
	    .has_lifecycle = true,
	    .timers = sb->timers,
	    .active_at = sandbox_active_at(sb),
	    .running_seconds = sb->running_seconds,
	};
	snprintf(rec.id, sizeof(rec.id), "%s", sb->id);
	snprintf(rec.seccomp_profile, sizeof(rec.seccomp_profile), "%s", sb->seccomp_profile);
	return record_encode(&rec);
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
	int64_t active_at = sandbox_active_at(sb);
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
		r = cell_err_msg(err, EFBIG,
				 "the record of sandbox %s would be %zu bytes, more than the %u "
				 "celld loads back",
				 sb->id, len, STATE_MAX);
	else if (how == STORE_SYNCED)
		r = cell_write_file_atomic(sb->dirfd, STATE_FILE, text, len, 0600, err);
	else
		r = write_renamed(sb->dirfd, text, len, how, err);
	if (r == 0) /* at least this recent (the snapshot read it after) */
		__atomic_store_n(&sb->active_at_saved, active_at, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&sb->store_lock);
	free(text);
	if (r < 0)
		cell_err_wrap(err, "saving %s/%s: ", sb->dir, STATE_FILE);
	return r;
}

/* Move what rec holds into sb (rec keeps nothing sb took). */
static void take_record(struct sandbox *sb, struct record *rec)
{
	sb->state = rec->state;
	sb->slot = rec->slot;
	sb->uid_base = rec->uid_base;
	sb->pid = rec->pid;
	sb->starttime = rec->starttime;
	sb->created_at = rec->created_at;
	sb->created_ms = rec->created_ms;
	sb->expires_at = rec->expires_at;
	sb->transition_at = rec->transition_at;
	if (rec->metadata) {
		json_decref(sb->metadata);
		sb->metadata = steal_ptr(rec->metadata);
	}
	sb->env = steal_ptr(rec->env);
	sb->entrypoint = steal_ptr(rec->entrypoint);
	sb->resource_limits = steal_ptr(rec->resource_limits);
	sb->volumes = steal_ptr(rec->volumes);
	sb->network = steal_ptr(rec->network);
	sb->provision = steal_ptr(rec->provision);
	sb->provision_result = steal_ptr(rec->provision_result);
	sb->image = steal_ptr(rec->image);
	sb->rootfs = steal_ptr(rec->rootfs);
	sb->session_key = steal_ptr(rec->session_key);
	sb->snapshot_id = steal_ptr(rec->snapshot_id);
	sb->name = steal_ptr(rec->name);
	sb->image_digest = steal_ptr(rec->image_digest);
	sb->image_layers = steal_ptr(rec->image_layers);
	sb->image_workdir = steal_ptr(rec->image_workdir);
	sb->image_user = steal_ptr(rec->image_user);
	sb->reason = steal_ptr(rec->reason);
	sb->owner = admission_principal_by_id(rec->owner);
	/* A record older than "limits": the policy's defaults for its resourceLimits. What
	 * the record does not keep (io, the instance totals) comes from the policy either
	 * way, so a sandbox started again from its record is held to all of it. */
	if (rec->has_limits)
		sb->limits = rec->limits;
	else if (limits_resolve(sb->resource_limits, &sb->limits, false, NULL) < 0)
		log_warn("sandbox %s: its resourceLimits no longer fit the policy; "
			 "the policy's defaults apply where they do not",
			 sb->id);
	limits_complete(sb->id, sb->resource_limits, &sb->limits);
	snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "%s", rec->seccomp_profile);
	sb->seccomp_log = rec->seccomp_log;
	sb->sudo = rec->sudo;
	sb->manual_resume = rec->manual_resume;
	sb->public_ports = rec->public_ports;
	sb->interpreter_bind = rec->interpreter_bind;
	if (rec->has_lifecycle) {
		sb->timers = rec->timers;
		sb->running_seconds = rec->running_seconds;
		sb->active_at = sb->active_at_saved = rec->active_at;
	}
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
	struct record rec;
	struct cell_error rerr = {0};
	r = record_decode(o, id, &rec, &rerr);
	json_decref(o);
	struct sandbox *sb = r < 0 ? NULL : sandbox_new(id);
	if (sb)
		take_record(sb, &rec);
	record_free(&rec);
	if (r == -EINVAL)
		/* Named by the record's codec; no errno text (the file is readable). */
		return cell_err_msg(err, EINVAL, "sandbox %s: invalid %s: %s", id, STATE_FILE,
				    rerr.msg);
	if (r < 0)
		return cell_err(err, -r, "sandbox %s: %s", id, rerr.msg);
	if (!sb)
		return cell_err(err, ENOMEM, "sandbox %s", id);
	sb->dirfd = move_fd(dirfd);
	*out = sb;
	return 0;
}
