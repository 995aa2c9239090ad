/* Every transition of a sandbox: create, start (again), delete, pause and resume, recovery
 * after its init died, adoption at start; and every change of its record (renew, metadata).
 * The order of the steps over the runtime, the registry, uid ranges, admission and
 * state.json lives here. Each operation runs between sandbox_begin and sandbox_end
 * (sandbox.c), long work (spawn, teardown, freezing) with the registry lock released. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics.h"
#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/quota.h"
#include "admission.h"
#include "audit.h"
#include "commands.h"
#include "config.h"
#include "images.h"
#include "interp_service.h"
#include "http/keys.h"
#include "lifecycle.h"
#include "registry.h"
#include "relay.h"
#include "sandbox.h"
#include "secrets.h"
#include "seccomp_log.h"
#include "seccomp_policy.h"
#include "snapshots.h"
#include "store.h"
#include "tenancy.h"
#include "timefmt.h"
#include "uidrange.h"
#include "volume_use.h"
#include "volumes.h"
#include "network.h"
#include "provision.h"
#include "watch.h"
#include "fields.h"
#include "resource_policy.h"

#define START_TIMEOUT_MS 10000 /* spawn → init answers PING */
#define ADOPT_PING_MS	 3000

/* Reap init if it is our child and already dead (never waitpid(-1): other children, such
 * as those of the runtime, belong to whoever made them). */
static void reap(int pidfd)
{
	siginfo_t si;
	if (pidfd >= 0)
		waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
}

/* cell_teardown also covers pid 0 (nothing recorded): then only the cgroup is emptied. */
static int teardown(pid_t pid, int pidfd, uint64_t starttime, const char *rel,
		    struct cell_error *err)
{
	int r = cell_teardown(pid, pidfd, starttime, celld.cgroup, rel, err);
	reap(pidfd);
	return r;
}

static bool pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return pidfd >= 0 && poll(&p, 1, 0) > 0;
}

/* Until init answers PING, bounded; fails early when init died. */
static int wait_ready(struct sandbox *sb, struct cell_error *err)
{
	int64_t deadline = celld_now_ms() + START_TIMEOUT_MS;
	for (;;) {
		int64_t left = deadline - celld_now_ms();
		if (left <= 0)
			return cell_err_wrap(
			    err, "cell-init did not answer within %d ms: ", START_TIMEOUT_MS);
		if (relay_ping(sb, left < 1000 ? (int)left : 1000, err) == 0)
			return 0;
		if (pidfd_exited(sb->pidfd))
			return cell_err(err, ECHILD, "cell-init exited during start");
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

static int start_entrypoint(struct sandbox *sb, struct cell_error *err)
{
	if (create_entrypoint_is_noop(sb->entrypoint))
		return 0;
	_cleanup_free_ char *content = NULL;
	json_t *req =
	    command_exec_request(sb, NULL, sb->entrypoint, NULL, NULL, 0, -1, -1, &content);
	if (!req)
		return cell_err(err, ENOMEM, "entrypoint");
	struct command *c;
	struct relay_error rerr;
	int fd;
	int r = command_start(sb, req, content, sb->owner, &c, &fd, &rerr, err);
	json_decref(req);
	if (r == 1) {
		/* Init refused to start it (not found, not executable): the request named a
		 * program the image does not have, the client's error. */
		command_unref(c);
		return cell_err_msg(
		    err, EINVAL, "entrypoint '%.200s' cannot start in the image: %s",
		    json_string_value(json_array_get(sb->entrypoint, 0)), rerr.message);
	}
	if (r < 0)
		return cell_err_wrap(err, "starting the entrypoint: ");
	cmd_table_set_entrypoint(sb->cmds, c); /* this run is the one its status and logs show */
	r = command_drain(c, fd, err);
	command_unref(c);
	return r;
}

/* Take over sb's init (registry lock held): unwatched, its pidfd ours to close. */
static void take_init_locked(struct sandbox *sb, pid_t *pid, int *pidfd, uint64_t *starttime)
{
	watch_remove_locked(sb);
	*pid = sb->pid;
	*pidfd = sb->pidfd;
	*starttime = sb->starttime;
	sb->pidfd = -1;
}

static void take_init(struct sandbox *sb, pid_t *pid, int *pidfd, uint64_t *starttime)
{
	registry_lock();
	take_init_locked(sb, pid, pidfd, starttime);
	registry_unlock();
}

/* Its init is gone (or never was): nothing recorded any more. */
static void forget_init(struct sandbox *sb)
{
	registry_lock();
	sb->pid = 0;
	sb->starttime = 0;
	registry_unlock();
}

/* End whatever runs of sb (init and everything in its cgroup) and forget its init. */
static int stop_processes(struct sandbox *sb, struct cell_error *err)
{
	pid_t pid;
	int pidfd;
	uint64_t st;
	take_init(sb, &pid, &pidfd, &st);
	int r = teardown(pid, pidfd, st, sb->cgroup_rel, err);
	if (pidfd >= 0)
		close(pidfd);
	forget_init(sb);
	if (r == 0)
		network_detach(sb);
	return r;
}

/* Out of the table: its uid range is free for any celld again (its state dir is gone) and
 * it no longer counts as one of its owner's sandboxes. */
static void unpublish(struct sandbox *sb)
{
	registry_lock();
	bool removed = registry_remove_locked(sb);
	registry_unlock();
	if (!removed)
		return;
	uidrange_release(sb->id, sb->slot);
	admission_put(sb->owner, ADM_SANDBOXES);
	sandbox_unref(sb); /* the table's reference */
}

/* ---- the record: a new sandbox from a create's spec ---- */

static int fill_new(struct sandbox *sb, const struct create_spec *spec)
{
	sb->image = strdup(spec->image);
	sb->rootfs = strdup(spec->rootfs);
	sb->image_layers = json_incref(spec->image_layers);
	if ((spec->image_digest[0] && !(sb->image_digest = strdup(spec->image_digest))) ||
	    (spec->image_workdir && !(sb->image_workdir = strdup(spec->image_workdir))) ||
	    (spec->image_user && !(sb->image_user = strdup(spec->image_user))))
		return -ENOMEM;
	sb->session_key = spec->session_key ? strdup(spec->session_key) : NULL;
	sb->name = spec->name ? strdup(spec->name) : NULL;
	if (spec->name && !sb->name)
		return -ENOMEM;
	sb->owner = spec->owner;
	const char *snap = json_string_value(json_object_get(spec->snapshot, "id"));
	sb->snapshot_id = snap ? strdup(snap) : NULL;
	if (!sb->image || !sb->rootfs || (spec->session_key && !sb->session_key) ||
	    (snap && !sb->snapshot_id))
		return -ENOMEM;
	if (spec->metadata) {
		json_decref(sb->metadata);
		sb->metadata = json_deep_copy(spec->metadata);
		if (!sb->metadata)
			return -ENOMEM;
	}
	sb->env = json_incref(spec->env);
	sb->entrypoint = json_incref(spec->entrypoint);
	sb->resource_limits = json_incref(spec->resource_limits);
	sb->limits = spec->limits;
	sb->volumes = json_incref(spec->volumes_json);
	sb->network = json_incref(spec->network);
	sb->provision = json_incref(spec->provision);
	snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "%s",
		 spec->seccomp_profile ? spec->seccomp_profile : "default");
	sb->seccomp_log = spec->seccomp_log;
	sb->sudo = spec->sudo;
	sb->manual_resume = spec->manual_resume;
	sb->public_ports = spec->public_ports;
	sb->interpreter_bind = spec->interpreter_bind;
	sb->expires_at = spec->timeout ? sb->created_at + spec->timeout : 0;
	sb->timers = spec->timers;
	return 0;
}

/* An entry with the same id is there: -EEXIST, or with a session key 1 and *existing once it
 * is no longer being created or deleted — only when it was created with that same key: the
 * id is 64 bits of the key's hash, and two keys that share them (or a random id that equals
 * one) must never hand one session another's sandbox (-EADDRINUSE). -EAGAIN when there is
 * none (registry lock held). */
static int find_existing_locked(const char *id, const char *session_key,
				const struct adm_principal *owner, struct sandbox **existing)
{
	struct sandbox *cur;
	while ((cur = registry_find_locked(id))) {
		if (!session_key)
			return -EEXIST;
		if (!cur->session_key || strcmp(cur->session_key, session_key) ||
		    !tenancy_sees(owner, cur->owner))
			return -EADDRINUSE;
		/* A racing create with the same session key: wait for it to finish, then
		 * answer with its sandbox (or create afresh if it failed and vanished). */
		if (sandbox_settling_locked(cur)) {
			registry_wait();
			continue;
		}
		sandbox_ref(cur);
		*existing = cur;
		return 1;
	}
	return -EAGAIN;
}

/* Drop what publish() took for a sandbox that is not published after all. */
static void publish_undo(struct sandbox *sb, int slot)
{
	admission_put(sb->owner, ADM_SANDBOXES);
	uidrange_release(sb->id, slot);
	sb->slot = -1;
}

/* Publish sb (busy creating) under its id, with the lowest uid slot free host-wide,
 * counted as one of its owner's sandboxes (-EUSERS with err when that is over a quota).
 * When the id exists and sb has a session key: wait while that entry is being created or
 * deleted and return it referenced in *existing (returns 1) when it was created with the
 * same key, else -EADDRINUSE. -EEXIST (id taken, no session key), -ENOSPC (no free slot)
 * or another -errno (the reservation failed; logged). */
static int publish(struct sandbox *sb, struct sandbox **existing, struct cell_error *err)
{
	*existing = NULL;
	int slot = -1;
	for (;;) {
		registry_lock();
		int r = find_existing_locked(sb->id, sb->session_key, sb->owner, existing);
		/* A name is the host's: checked in the same hold of the lock as the publish, so
		 * two creates of one name never both succeed. A create-or-resume that finds its
		 * sandbox keeps that sandbox's name. */
		if (r == -EAGAIN && sb->name && registry_find_name_locked(sb->name))
			r = -ENOTUNIQ;
		if (r == -EAGAIN && slot >= 0) {
			sb->slot = slot;
			sb->uid_base = uidrange_base(slot);
			r = registry_publish_locked(sb);
			registry_unlock();
			if (r < 0)
				publish_undo(sb, slot);
			return r;
		}
		registry_unlock();
		if (r != -EAGAIN) {
			/* Someone else published the id while we reserved (a create-or-resume
			 * that finds its sandbox is not a new one: not counted). */
			if (slot >= 0)
				publish_undo(sb, slot);
			return r;
		}
		/* A new sandbox: counted against its owner's quota before a uid range is
		 * reserved for it, so a create over the quota costs nothing. */
		if ((r = admission_take(sb->owner, ADM_SANDBOXES, false, err)) < 0)
			return r;
		/* Reserved with the registry lock released: it may wait on another celld. */
		struct cell_error rerr = {0};
		r = uidrange_reserve(sb->id, &slot, &rerr);
		if (r < 0) {
			admission_put(sb->owner, ADM_SANDBOXES);
			if (r != -ENOSPC)
				log_error("sandbox %s: reserving a uid range: %s", sb->id,
					  rerr.msg);
			return r;
		}
	}
}

static int claim_error(int r, const char *id, struct cell_error *err)
{
	if (r == -ENOSPC)
		return cell_err_msg(err, ENOSPC, "no free uid range: %u sandboxes exist",
				    CELLD_SLOTS);
	if (r == -EUSERS)
		return r;
	if (r == -ENOTUNIQ)
		return cell_err_msg(err, EEXIST,
				    "extensions.cell.name: the name is taken by "
				    "another sandbox on this host");
	if (r == -EADDRINUSE)
		return cell_err_msg(err, EEXIST,
				    "extensions.cell.sessionKey: sandbox %s, whose id this key's "
				    "hash gives, belongs to another session key",
				    id);
	return cell_err(err, -r, "registering sandbox");
}

/* The id of spec's session key: its hash alone for the operator and the default key (as
 * ids were before tenants), and the hash of the owner's id with it for every other key, so
 * two tenants' session keys never name one sandbox. */
static int session_id(const struct create_spec *spec, char id[CELL_ID_RANDOM_LEN + 1])
{
	if (!spec->owner || spec->owner == keys_default()) {
		cell_id_from_session_key(spec->session_key, strlen(spec->session_key), id);
		return 0;
	}
	_cleanup_free_ char *both = NULL;
	int n = asprintf(&both, "%s\n%s", admission_principal_id(spec->owner), spec->session_key);
	if (n < 0)
		return -ENOMEM;
	cell_id_from_session_key(both, (size_t)n, id);
	return 0;
}

/* Publish a new entry, busy creating, under a fresh id (or the session key's). */
static int claim(const struct create_spec *spec, struct sandbox **sbp, struct sandbox **existing,
		 struct cell_error *err)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		char id[CELL_ID_RANDOM_LEN + 1];
		if (spec->session_key) {
			if (session_id(spec, id) < 0)
				return cell_err(err, ENOMEM, "session id");
		} else if (cell_id_random(id) < 0) {
			return cell_err(err, EIO, "random id");
		}
		struct sandbox *sb = sandbox_new(id);
		if (!sb || fill_new(sb, spec) < 0) {
			sandbox_unref(sb);
			return cell_err(err, ENOMEM, "new sandbox");
		}
		/* Busy before anyone can see it: a create-or-resume racing this one waits. */
		int r = sandbox_begin(sb, SBX_CREATING, err);
		if (r == 0)
			r = publish(sb, existing, err);
		if (r == 0) {
			*sbp = sb;
			return 0;
		}
		sandbox_unref(sb);
		if (r == 1)
			return 1;
		if (r != -EEXIST)
			return claim_error(r, id, err);
	}
	return cell_err(err, EEXIST, "could not find an unused sandbox id");
}

static int make_dir(struct sandbox *sb, struct cell_error *err)
{
	if (mkdirat(celld.sandboxes_fd, sb->id, 0700) < 0)
		return cell_err(err, errno, "creating %s", sb->dir);
	sb->dirfd =
	    openat(celld.sandboxes_fd, sb->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sb->dirfd < 0)
		return cell_err(err, errno, "opening %s", sb->dir);
	return 0;
}

/* rm -rf of a sandbox's dir, after its layer's quota let go of it. */
static int remove_dir(const char *id, struct cell_error *err)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", celld.state_dir, id);
	int r = cell_quota_release(dir, err);
	return r < 0 ? r : cell_remove_tree_at(celld.sandboxes_fd, id, err);
}

/* ---- starting a sandbox from its record ---- */

/* The dir for upper/ and work/ under the sandbox's disk quota (see include/cell/quota.h);
 * the formatted images it copies are kept in <state>/disk-templates. A sandbox started
 * before keeps its layer (and its files). */
static int quota_prepare(struct sandbox *sb, struct cell_quota *q, struct cell_error *err)
{
	char templates[4096];
	snprintf(templates, sizeof(templates), "%s/disk-templates", celld.state_dir);
	struct cell_quota_req qr = {.dir = sb->dir,
				    .templates_dir = templates,
				    .project_id = sb->uid_base,
				    .bytes = sb->limits.disk_bytes};
	return cell_quota_prepare(&qr, q, err);
}

/* A new sandbox made from a snapshot: its writable layer (upper/) becomes a copy of the
 * snapshot's, owned by its own uid range, before its first start. The snapshot's disk
 * image (a loop quota) is its disk; else its tree is copied into the layer dir the disk
 * quota sets up. */
static int fill_from_snapshot(struct sandbox *sb, json_t *meta, struct cell_error *err)
{
	const char *id = json_string_value(json_object_get(meta, "id"));
	int r = snapshot_hold(id ? id : "", err);
	if (r < 0)
		return r;
	r = snapshot_seed(meta, sb->dirfd, err);
	struct cell_quota quota;
	if (r == 0)
		r = quota_prepare(sb, &quota, err);
	if (r == 0) {
		r = snapshot_fill(meta, quota.layer_dir[0] ? quota.layer_dir : sb->dir,
				  sb->uid_base, err);
		cell_quota_close(&quota);
	}
	snapshot_release(id);
	return r;
}

/* What a record written before these members lacks, filled in before a start (under the
 * registry lock: the record's snapshot reads them): its image resolved as the create did,
 * and the default seccomp profile for one older than profiles ("": no filter). */
static int complete_old_record(struct sandbox *sb, struct cell_error *err)
{
	char rootfs[4096];
	char *copy = NULL;
	if (!sb->rootfs) {
		int r = image_resolve(sb->image, rootfs, sizeof(rootfs), err);
		if (r < 0)
			return r;
		if (!(copy = strdup(rootfs)))
			return cell_err(err, ENOMEM, "rootfs of %s", sb->id);
	}
	registry_lock();
	if (copy)
		sb->rootfs = copy;
	if (!sb->seccomp_profile[0])
		snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "default");
	registry_unlock();
	return 0;
}

/* The host's code-interpreter service after the record's volumes (so that it shows over
 * a volume at /opt). */
static int add_interp_service(struct cell_volume **volumes, size_t *n, struct cell_error *err)
{
	struct cell_volume *v = realloc(*volumes, (*n + 1) * sizeof(*v));
	if (!v)
		return cell_err(err, ENOMEM, "volumes");
	*volumes = v;
	int r = interp_service_volume(&v[*n], err);
	if (r == 0)
		(*n)++;
	return r;
}

/* The runtime's request, from sb's record alone (volumes point into sb->volumes). */
static int spawn_req(struct sandbox *sb, struct cell_spawn_req *req, struct cell_volume **volumes,
		     const struct cell_quota *quota, char *resolv, size_t resolv_size,
		     struct cell_error *err)
{
	int rr = network_resolv_conf(sb, resolv, resolv_size, err);
	if (rr < 0)
		return rr;
	/* Installed last before exec in the child; there is no "no filter" (fill_new named
	 * the default profile when the create named none). */
	const struct cell_seccomp_prog *prog =
	    seccomp_policy_prog(sb->seccomp_profile, sb->seccomp_log);
	if (!prog)
		return cell_err_msg(err, ENOENT, "seccomp profile '%s' is not loaded",
				    sb->seccomp_profile);
	size_t n_volumes = 0;
	*volumes = NULL;
	int r = volumes_from_json(sb->volumes, volumes, &n_volumes, err);
	if (r == 0 && sb->interpreter_bind)
		r = add_interp_service(volumes, &n_volumes, err);
	if (r == 0)
		r = volumes_open_named(sb->volumes, *volumes, json_array_size(sb->volumes), err);
	if (r < 0) {
		free(*volumes);
		*volumes = NULL;
		return r;
	}
	*req = (struct cell_spawn_req){
	    .id = sb->id,
	    .dir = sb->dir,
	    .image_rootfs = sb->rootfs,
	    .uid_base = sb->uid_base,
	    .hostname = sb->id,
	    .resolv_conf = resolv[0] ? resolv : NULL,
	    .init_exe_fd = celld.init_fd,
	    .cgroup = celld.cgroup,
	    .cgroup_rel = sb->cgroup_rel,
	    .volumes = *volumes,
	    .n_volumes = n_volumes,
	    .layer_dir = quota->layer_dir[0] ? quota->layer_dir : NULL,
	    .limits = &sb->limits,
	    .seccomp = prog,
	    .allow_setuid = sb->sudo,
	};
	req->rlimits = limits_rlimits(&req->n_rlimits);
	return 0;
}

/* A store image's lower dirs as the runtime takes them (borrowing sb's record, which is
 * immutable once published); NULL for a built image (its rootfs alone). */
static int image_layers(struct sandbox *sb, const char ***out, struct cell_error *err)
{
	size_t n = json_array_size(sb->image_layers);
	*out = NULL;
	if (!n)
		return 0;
	if (n > CELL_IMAGE_LAYERS_MAX)
		return cell_err_msg(err, EINVAL, "an image of %zu layers", n);
	const char **v = calloc(n, sizeof(*v));
	if (!v)
		return cell_err(err, ENOMEM, "image layers of %s", sb->id);
	for (size_t i = 0; i < n; i++)
		v[i] = json_string_value(json_array_get(sb->image_layers, i));
	*out = v;
	return 0;
}

static int spawn(struct sandbox *sb, struct cell_error *err)
{
	struct cell_quota quota;
	int r = complete_old_record(sb, err);
	if (r == 0)
		r = quota_prepare(sb, &quota, err);
	if (r < 0)
		return r;
	struct cell_spawn_req req;
	struct cell_volume *volumes = NULL;
	struct cell_spawn_result res = {.pidfd = -1};
	char resolv[256];
	_cleanup_free_ const char **layers = NULL;
	r = spawn_req(sb, &req, &volumes, &quota, resolv, sizeof(resolv), err);
	if (r == 0 && (r = image_layers(sb, &layers, err)) == 0 && layers) {
		req.image_layers = layers;
		req.n_image_layers = json_array_size(sb->image_layers);
	}
	if (r == 0)
		r = cell_spawn(&req, &res, err);
	if (volumes) /* the sandbox's mounts hold the named volumes now */
		volumes_close_named(volumes, req.n_volumes);
	free(volumes);
	cell_quota_close(&quota); /* the sandbox's overlay holds its layer now */
	if (r < 0)
		return r;
	registry_lock();
	sb->pid = res.pid;
	sb->pidfd = res.pidfd;
	sb->starttime = res.starttime;
	registry_unlock();
	/* Denied calls wait for an answer from here on: the listener is watched before
	 * anything waits for init. */
	if (res.seccomp_listener >= 0 &&
	    (r = seccomp_log_attach(sb->id, sb->seccomp_profile, res.seccomp_listener, err)) < 0)
		return r;
	/* Before init is waited for: the first command finds its network ready. */
	if ((r = network_attach(sb, err)) < 0)
		return r;
	/* The pid reaches state.json with Running, one write later (writes are a large part
	 * of the cost of a create). A celld crash before that leaves a Pending
	 * record, and a restart removes such a sandbox through its cgroup: the runtime puts
	 * the sandbox's first process in it before that process does anything else, so
	 * killing the cgroup's members ends every process of the sandbox, init included. */
	return 0;
}

/* Start sb from its record (image, rootfs, volumes, limits, seccomp profile, uid base),
 * on the disk it has: a create's first start, or a Failed sandbox's start again. Returns
 * once init answers and the entrypoint runs; on failure whatever started is left for the
 * caller's undo. */
static int lifecycle_start(struct sandbox *sb, struct cell_error *err)
{
	int r = spawn(sb, err);
	if (r == 0)
		r = wait_ready(sb, err);
	if (r == 0)
		r = start_entrypoint(sb, err);
	if (r == 0)
		provision_run(sb);
	return r;
}

/* The operation op, begun on sb, made it Running: recorded (synced), published, watched. */
static int end_running(struct sandbox *sb, enum sbx_op op, enum store_sync how,
		       struct cell_error *err)
{
	int r = store_save_as(sb, SBX_RUNNING, how, err);
	if (r < 0)
		return r;
	sandbox_end(sb, op, SBX_RUNNING, NULL);
	registry_lock();
	watch_add_locked(sb);
	registry_unlock();
	return 0;
}

/* ---- create ---- */

/* Undo a failed create. The entry is dropped only when nothing is left on disk; otherwise
 * it stays Failed, keeping its uid slot reserved. */
static void undo_create(struct sandbox *sb, bool made_dir, json_t *made_volumes, const char *why)
{
	struct cell_error err = {0};
	int r = stop_processes(sb, &err);
	seccomp_log_detach(sb->id);
	if (r == 0 && made_dir)
		r = remove_dir(sb->id, &err);
	if (r == 0) {
		unpublish(sb);
		sandbox_end(sb, SBX_CREATING, SBX_PENDING, NULL);
		volume_use_undo(made_volumes);
		return;
	}
	char reason[CELL_ERROR_MSG_MAX * 2];
	snprintf(reason, sizeof(reason), "create failed: %s; cleanup failed: %s", why, err.msg);
	log_error("sandbox %s: %s", sb->id, reason);
	sandbox_end(sb, SBX_CREATING, SBX_FAILED, reason);
	if (made_dir)
		store_save(sb, &err);
}

/* The provisioning a create-or-resume names, when it differs from sb's, becomes sb's
 * (recorded): true then. A create naming none leaves sb's as it is. */
static bool take_provision(struct sandbox *sb, json_t *provision)
{
	if (!provision)
		return false;
	registry_lock();
	bool same = sb->provision && json_equal(sb->provision, provision);
	json_t *old = same ? NULL : sb->provision;
	if (!same)
		sb->provision = json_incref(provision);
	registry_unlock();
	if (same)
		return false;
	json_decref(old);
	struct cell_error serr = {0};
	if (store_save(sb, &serr) < 0)
		log_error("%s", serr.msg);
	return true;
}

/* create-or-resume of an existing session: a paused one comes back, a stopped one starts
 * again; a changed startup script, package list or skill list (the session's app edited
 * them) runs before the answer, as at a start (a cold start runs it itself). */
static int resume_session(struct sandbox *sb, json_t *provision, struct cell_error *err)
{
	bool changed = take_provision(sb, provision);
	registry_lock();
	bool cold = sb->state == SBX_STOPPED;
	registry_unlock();
	int r = lifecycle_wake(sb, err);
	if (r < 0 || !changed || cold)
		return r;
	if (sandbox_begin(sb, SBX_PROVISIONING, NULL) < 0)
		return 0; /* no longer Running: its next start runs it */
	provision_run(sb);
	sandbox_end(sb, SBX_PROVISIONING, SBX_RUNNING, NULL);
	struct cell_error serr = {0};
	if (store_save(sb, &serr) < 0)
		log_error("%s", serr.msg);
	return 0;
}

int lifecycle_create(const struct create_spec *spec, struct sandbox **out, bool *created,
		     struct cell_error *err)
{
	struct sandbox *sb = NULL, *existing = NULL;
	*out = NULL;
	*created = false;
	int r = claim(spec, &sb, &existing, err);
	if (r < 0)
		return r;
	if (r == 1) {
		/* create-or-resume: a paused or stopped session comes back running. */
		sandbox_touch(existing);
		r = resume_session(existing, spec->provision, err);
		if (r < 0 && r != -EBUSY) {
			sandbox_unref(existing);
			return r;
		}
		*out = existing;
		return 0;
	}
	/* Two writes of state.json and one sync to disk (a sync is one of the largest costs
	 * of a create). The first write exists for a celld that is killed while the
	 * sandbox is being made: visible at once (the page cache survives a killed process),
	 * it keeps the uid range reserved and names the sandbox for the restart that cleans
	 * it up. The last one, Running, is synced together with its rename before the create
	 * is answered. Only a power loss during the create itself, before that sync, can
	 * leave the first write empty on disk; such a sandbox, never reported to a client, is
	 * then left to an operator (as any unreadable state.json is) instead of removed.
	 * Everything the start needs is in that first record: the start reads nothing else. */
	bool made_dir = false;
	json_t *made_volumes = NULL;
	r = spec->volume_claims ? volume_use_claim(sb, spec->volume_claims, &made_volumes, err) : 0;
	if (r == 0)
		r = make_dir(sb, err);
	if (r == 0) {
		made_dir = true;
		r = store_save_sync(sb, STORE_UNSYNCED, err);
	}
	if (r == 0 && spec->secrets)
		r = secrets_save(sb->dirfd, spec->secrets, err);
	if (r == 0 && spec->snapshot)
		r = fill_from_snapshot(sb, spec->snapshot, err);
	if (r == 0)
		r = lifecycle_start(sb, err);
	if (r == 0)
		r = end_running(sb, SBX_CREATING, STORE_SYNC_RENAMED, err);
	if (r < 0) {
		/* A refusal of the request's volumes is the client's error, as it is. */
		if (r != -ENOENT && r != -EINVAL && r != -EBUSY)
			cell_err_wrap(err, "creating sandbox %s: ", sb->id);
		undo_create(sb, made_dir, made_volumes, err->msg);
		metrics_add(METRIC_CREATE_FAILURES, 1);
		json_decref(made_volumes);
		sandbox_unref(sb);
		return r;
	}
	json_decref(made_volumes);
	log_info("sandbox %s created (image %s, pid %d, uid base %u)", sb->id, sb->image,
		 (int)sb->pid, sb->uid_base);
	metrics_add(METRIC_CREATES, 1);
	*out = sb;
	*created = true;
	return 0;
}

/* ---- delete ---- */

/* A running sandbox's processes are asked to end (SIGTERM) and given grace_s seconds; what
 * is left after that is killed all the same. A paused one gets no grace: its processes are
 * frozen and could not act on the signal without running again. */
static void ask_to_end(struct sandbox *sb, pid_t pid, int pidfd, uint64_t st, unsigned grace_s)
{
	if (grace_s == 0 || sb->state != SBX_RUNNING)
		return;
	struct cell_error err = {0};
	int r = cell_terminate(pid, pidfd, st, (long)grace_s * 1000, &err);
	if (r == -ETIMEDOUT)
		log_info("sandbox %s: still running after a grace of %u s, killing it", sb->id,
			 grace_s);
	else if (r < 0)
		cell_err_drop(&err, "the kill that follows ends it all the same");
}

/* End everything of sb that runs (init, the rest of its cgroup, its seccomp listener and
 * its network's chain and resolver socket), after a grace of grace_s seconds for a running
 * one, and forget its init; its disk and uid range stay. sb is busy with the operation
 * that calls this. */
static int end_processes(struct sandbox *sb, unsigned grace_s, struct cell_error *err)
{
	pid_t pid;
	int pidfd;
	uint64_t st;
	take_init(sb, &pid, &pidfd, &st);
	ask_to_end(sb, pid, pidfd, st, grace_s);
	/* A frozen init cannot act on SIGKILL on v1 until thawed: the cgroup's kill (which
	 * signals, then thaws, on v1; cgroup.kill ends frozen tasks on v2) goes first, so no
	 * process of the sandbox runs again before it dies. (sb->state is stable while busy.) */
	int r = 0;
	if (sb->state == SBX_PAUSED)
		r = celld.cgroup->kill_all(sb->cgroup_rel, err);
	if (r == 0)
		r = teardown(pid, pidfd, st, sb->cgroup_rel, err);
	if (pidfd >= 0)
		close(pidfd);
	forget_init(sb);
	seccomp_log_detach(sb->id);
	if (r == 0)
		network_detach(sb);
	return r;
}

int lifecycle_delete(struct sandbox *sb, struct cell_error *err)
{
	int r = sandbox_begin(sb, SBX_DELETING, err);
	if (r < 0)
		return r;
	r = end_processes(sb, 0, err);
	if (r == 0)
		r = remove_dir(sb->id, err);
	if (r == 0) {
		unpublish(sb);
		sandbox_end(sb, SBX_DELETING, sb->state, NULL);
		log_info("sandbox %s deleted", sb->id);
		metrics_add(METRIC_DELETES, 1);
		volume_use_release(sb->id, sb->volumes);
		return 0;
	}
	cell_err_wrap(err, "deleting sandbox %s: ", sb->id);
	sandbox_end(sb, SBX_DELETING, SBX_FAILED, err->msg);
	struct cell_error e2;
	store_save(sb, &e2);
	return r;
}

void lifecycle_delete_after_command(uint64_t serial)
{
	registry_lock();
	struct sandbox *sb = registry_find_serial_locked(serial);
	if (sb)
		sandbox_ref(sb);
	registry_unlock();
	if (!sb)
		return; /* deleted already */
	struct cell_error err = {0};
	int r = lifecycle_delete(sb, &err);
	if (r < 0 && r != -ENOENT)
		log_error("sandbox %s: deleting it when its command ended: %s", sb->id, err.msg);
	else if (r == 0)
		log_info("sandbox %s deleted: the command it was to be deleted after ended",
			 sb->id);
	sandbox_unref(sb);
}

/* ---- stop: processes and memory gone, the disk kept ---- */

int lifecycle_stop(struct sandbox *sb, unsigned grace_s, const char *why, struct cell_error *err)
{
	int r = sandbox_begin(sb, SBX_STOPPING, err);
	if (r < 0)
		return r;
	r = end_processes(sb, grace_s, err);
	if (r < 0) {
		cell_err_wrap(err, "stopping sandbox %s: ", sb->id);
		sandbox_end(sb, SBX_STOPPING, SBX_FAILED, err->msg);
	} else {
		sandbox_end(sb, SBX_STOPPING, SBX_STOPPED, why);
		log_info("sandbox %s stopped (%s)", sb->id, why);
	}
	/* Synced: a Stopped sandbox may stay so for days, and a restart must find it so. */
	struct cell_error serr = {0};
	if (store_save(sb, &serr) < 0)
		log_error("%s", serr.msg);
	return r;
}

/* ---- init died; a Failed or Stopped sandbox started again ---- */

void lifecycle_init_died(struct sandbox *sb, const char *why)
{
	/* Not Running (any more), being deleted or gone: nothing to recover. */
	if (sandbox_begin(sb, SBX_RECOVERING, NULL) < 0)
		return;
	struct cell_error err = {0};
	/* PID 1 took its pid namespace with it; whatever else sits in the cgroup goes too.
	 * The disk stays: lifecycle_resume starts the sandbox again on it. */
	if (stop_processes(sb, &err) < 0)
		log_warn("sandbox %s: cleaning up after init: %s", sb->id, err.msg);
	sandbox_end(sb, SBX_RECOVERING, SBX_FAILED, why);
	log_warn("sandbox %s failed: %s", sb->id, why);
	if (store_save(sb, &err) < 0)
		log_error("%s", err.msg);
}

/* resume of a Failed or Stopped sandbox: a cold start on its kept disk, from its record. A
 * failed start ends its processes again and leaves it Failed with the reason. */
static int start_again(struct sandbox *sb, struct cell_error *err)
{
	int r = sandbox_begin(sb, SBX_STARTING, err);
	if (r < 0)
		return r;
	/* Never in a uid range someone else may hold: one adopted Failed because another
	 * owner held its range starts only once the range is ours again (0 at once when it
	 * is already). Refused, it stays Failed as it was. */
	r = uidrange_adopt(sb->id, sb->slot, err);
	if (r < 0) {
		sandbox_end(sb, SBX_STARTING, sb->state, NULL);
		return r == -EALREADY ? -EBUSY : r;
	}
	enum sbx_state from = sb->state; /* stable while busy */
	r = lifecycle_start(sb, err);
	if (r == 0) {
		sandbox_touch(sb); /* its idle timer starts afresh */
		r = end_running(sb, SBX_STARTING, STORE_SYNCED, err);
	}
	if (r == 0) {
		log_info("sandbox %s started again from %s (pid %d)", sb->id,
			 sandbox_state_name(from), (int)sb->pid);
		return 0;
	}
	cell_err_wrap(err, "starting sandbox %s again: ", sb->id);
	struct cell_error serr = {0};
	if (stop_processes(sb, &serr) < 0)
		log_warn("sandbox %s: cleaning up a failed start: %s", sb->id, serr.msg);
	sandbox_end(sb, SBX_STARTING, SBX_FAILED, err->msg);
	log_warn("%s", err->msg);
	if (store_save(sb, &serr) < 0)
		log_error("%s", serr.msg);
	return r;
}

/* ---- pause and resume ----
 *
 * Every process of a sandbox frozen through its cgroup (cgroup.freeze on v2, the v1
 * freezer), its memory kept; the state Paused is persisted, so a restarted celld adopts the
 * sandbox as Paused (a frozen init cannot answer a ping, and need not). */

static int freeze(struct sandbox *sb, bool frozen, struct cell_error *err)
{
	enum sbx_op op = frozen ? SBX_PAUSING : SBX_RESUMING;
	enum sbx_state from = frozen ? SBX_RUNNING : SBX_PAUSED;
	enum sbx_state to = frozen ? SBX_PAUSED : SBX_RUNNING;
	int r = sandbox_begin(sb, op, err);
	if (r < 0)
		return r;
	if (!celld.cgroup->freeze)
		r = cell_err_msg(err, ENOTSUP, "the %s cgroup backend cannot freeze",
				 celld.cgroup->name);
	else
		r = celld.cgroup->freeze(sb->cgroup_rel, frozen, err);
	sandbox_end(sb, op, r == 0 ? to : from, NULL);
	if (r < 0)
		return cell_err_wrap(err, "%s sandbox %s: ", frozen ? "pausing" : "resuming",
				     sb->id);
	struct cell_error serr = {0};
	/* Not synced to disk (a sync would be most of a pause's cost): a killed celld's
	 * successor still reads it from the page cache, and a power loss ends the sandbox's
	 * processes anyway, frozen or not. A failed write only means a restart would see the
	 * previous state (then resume or pause finds out). */
	if (store_save_sync(sb, STORE_UNSYNCED, &serr) < 0)
		log_error("%s", serr.msg);
	log_info("sandbox %s %s", sb->id, frozen ? "paused" : "resumed");
	return 0;
}

int lifecycle_pause(struct sandbox *sb, struct cell_error *err)
{
	return freeze(sb, true, err);
}

int lifecycle_resume(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	bool cold = sb->state == SBX_FAILED || sb->state == SBX_STOPPED;
	registry_unlock();
	/* Read without the sandbox busy: if it changes before the begin, the begin's check
	 * answers (a Failed one started meanwhile is "already Running"). */
	int r = cold ? start_again(sb, err) : freeze(sb, false, err);
	if (r == 0)
		sandbox_touch(sb);
	return r;
}

/* Is an operation running on sb that ends Paused or Stopped, or begins from there? A
 * snapshot is waited for too: a use of a sandbox being captured goes on once the copy is
 * done (seconds at most), instead of being refused as busy. */
static bool waking_busy(enum sbx_op op)
{
	return op == SBX_PAUSING || op == SBX_RESUMING || op == SBX_STOPPING ||
	       op == SBX_STARTING || op == SBX_SNAPSHOTTING;
}

int lifecycle_wake(struct sandbox *sb, struct cell_error *err)
{
	/* Twice at most: a sandbox paused or stopped again between our look and our begin is
	 * woken from its new state. */
	for (int attempt = 0; attempt < 3; attempt++) {
		registry_lock();
		while (sb->in_table && waking_busy(sb->busy))
			registry_wait();
		enum sbx_state st = sb->state;
		registry_unlock();
		int r;
		if (st == SBX_PAUSED)
			r = freeze(sb, false, err);
		else if (st == SBX_STOPPED)
			r = start_again(sb, err);
		else
			return 0;
		if (r == -EALREADY)
			return 0;
		if (r != -EBUSY)
			return r;
	}
	return 0;
}

bool lifecycle_asleep(struct sandbox *sb)
{
	registry_lock();
	bool asleep = sb->manual_resume && sb->state != SBX_RUNNING && sb->state != SBX_PENDING;
	registry_unlock();
	return asleep;
}

int lifecycle_use(struct sandbox *sb, bool by_traffic, enum sbx_use *use, struct sbx_use_view *view,
		  struct cell_error *err)
{
	*view = (struct sbx_use_view){0};
	if (by_traffic && lifecycle_asleep(sb)) {
		*use = SBX_USE_ASLEEP;
		registry_lock();
		view->state = sb->state;
		registry_unlock();
		return 0;
	}
	sandbox_touch(sb);
	int r = lifecycle_wake(sb, err);
	if (r < 0 && r != -EBUSY && r != -ENOENT)
		return r;
	cell_err_clear(err);
	registry_lock();
	view->state = sb->state;
	bool busy = sb->busy != SBX_IDLE;
	snprintf(view->reason, sizeof(view->reason), "%s", sb->reason ? sb->reason : "");
	registry_unlock();
	*use = view->state == SBX_RUNNING && !busy ? SBX_USE_READY
	       : busy				   ? SBX_USE_BUSY
						   : SBX_USE_NOT_RUNNING;
	return 0;
}

/* ---- the record's changes: expiry, metadata ---- */

int lifecycle_renew(struct sandbox *sb, time_t expires_at, struct cell_error *err)
{
	registry_lock();
	bool ok = sandbox_idle_locked(sb);
	time_t old = sb->expires_at;
	if (ok)
		sb->expires_at = expires_at;
	registry_unlock();
	if (!ok)
		return cell_err_msg(err, EBUSY, "sandbox %s is being changed", sb->id);
	int r = store_save(sb, err);
	if (r < 0) {
		registry_lock();
		if (sb->expires_at == expires_at)
			sb->expires_at = old;
		registry_unlock();
		return r;
	}
	/* 0: the expiry cleared (an E2B pause: a paused sandbox has no timeout there). */
	audit_log(sb->id, "renew",
		  json_pack("{s:o}", "expiresAt",
			    expires_at ? celld_time_json(expires_at) : json_null()));
	return 0;
}

int lifecycle_expire_stop(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	bool live = sb->state == SBX_RUNNING || sb->state == SBX_PAUSED;
	registry_unlock();
	/* One already Stopped (or Failed) stays as it is; only its expiry is spent. */
	int r = live ? lifecycle_stop(sb, 0, "its timeout passed (cell.onTimeout: stop)", err) : 0;
	if (r < 0 && r != -EALREADY)
		return r;
	/* Stopped, its expiry is spent: cleared, or the reaper would find it again. */
	registry_lock();
	sb->expires_at = 0;
	registry_unlock();
	return store_save(sb, err);
}

/* metadata with patch (a JSON merge patch: null deletes a key) applied, as a new object:
 * the published one is never changed in place (readers share it unlocked). */
static json_t *merge_metadata(json_t *old, json_t *patch, const struct field_caps *caps,
			      struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(patch, k, v)
	{
		if (!json_is_null(v) && !json_is_clean_string(v))
			return field_fail(err, "metadata.%.64s must be a string or null", k), NULL;
	}
	json_t *md = json_copy(old);
	if (!md)
		return cell_err(err, ENOMEM, "metadata"), NULL;
	json_object_foreach(patch, k, v)
	{
		if (json_is_null(v))
			json_object_del(md, k);
		else
			json_object_set(md, k, v);
	}
	if (field_check_map_caps(md, "metadata", caps, err) < 0) {
		json_decref(md);
		return NULL;
	}
	return md;
}

static json_t *patch_keys(json_t *patch)
{
	json_t *keys = json_array();
	const char *k;
	json_t *v;
	json_object_foreach(patch, k, v) json_array_append_new(keys, json_string(k));
	return keys;
}

/* Patches of one sandbox one at a time (each reads, merges and saves); the copy and the
 * save run outside the registry lock, which only swaps the pointer. A patch that cannot be
 * saved changes nothing. */
int lifecycle_patch_metadata(struct sandbox *sb, json_t *patch, const struct field_caps *caps,
			     struct cell_error *err)
{
	pthread_mutex_lock(&sb->meta_lock);
	registry_lock();
	json_t *old = json_incref(sb->metadata); /* ours, besides the sandbox's own */
	registry_unlock();
	json_t *md = merge_metadata(old, patch, caps, err);
	int r = md ? 0 : -(err->code ? err->code : EINVAL);
	if (md) {
		registry_lock();
		sb->metadata = md; /* the sandbox's reference moves from old to md */
		registry_unlock();
		r = store_save(sb, err);
		registry_lock();
		if (r < 0)
			sb->metadata = old; /* undone: back to old, md is dropped below */
		registry_unlock();
		json_decref(r == 0 ? old : md);
	}
	if (r == 0) /* which keys, never their values */
		audit_log(sb->id, "metadata", json_pack("{s:o}", "keys", patch_keys(patch)));
	pthread_mutex_unlock(&sb->meta_lock);
	json_decref(old);
	return r;
}

/* ---- adoption at start ---- */

static int pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* End every process of sandbox id through its cgroup, whose name follows from the id
 * alone (nothing of its record is needed). */
static int stop_by_cgroup(const char *id, struct cell_error *err)
{
	char rel[sizeof(((struct sandbox *)0)->cgroup_rel)];
	int r = cell_cgroup_name(celld.state_dir, id, rel, sizeof(rel));
	if (r < 0)
		return cell_err(err, -r, "naming the cgroup of %s", id);
	return teardown(0, -1, 0, rel, err);
}

/* A dir without a readable state.json is what a crash between mkdir and the first write
 * leaves: nothing of it can be running outside its cgroup. */
static void remove_orphan(const char *id, const char *why)
{
	struct cell_error err = {0};
	if (stop_by_cgroup(id, &err) < 0 || remove_dir(id, &err) < 0)
		log_error("sandbox %s (%s): cleanup failed: %s", id, why, err.msg);
	else
		log_info("sandbox %s (%s): removed", id, why);
}

/* Is the recorded init still the same process? Then a pidfd for it, else -1. */
static int find_init(const struct sandbox *sb)
{
	if (sb->pid <= 0 || !sb->starttime || cell_proc_starttime(sb->pid) != sb->starttime)
		return -1;
	int fd = pidfd_open(sb->pid);
	/* Checked again with the pidfd held: the pid cannot be recycled under it now. A zombie
	 * (dead, not yet reaped by its new parent) still has its starttime: the pidfd tells. */
	if (fd >= 0 && (cell_proc_starttime(sb->pid) != sb->starttime || pidfd_exited(fd))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A sandbox recorded Running or Paused: is its init still there (and, unless frozen,
 * answering)? If not, its processes go and why says so (it is adopted Failed, its disk
 * kept for a resume). */
static void adopt_running(struct sandbox *sb, char *why, size_t size)
{
	struct cell_error err = {0};
	int pidfd = find_init(sb);
	const char *gone = NULL;
	if (pidfd < 0) {
		gone = "cell-init exited while celld was down";
	} else {
		sb->pidfd = pidfd;
		/* A paused (frozen) init cannot answer; it is adopted as Paused as it is. */
		if (sb->state != SBX_PAUSED && relay_ping(sb, ADOPT_PING_MS, &err) < 0)
			gone = "cell-init did not answer after a celld restart";
	}
	if (!gone)
		return;
	if (stop_processes(sb, &err) < 0)
		log_warn("sandbox %s: cleanup: %s", sb->id, err.msg);
	snprintf(why, size, "%s", gone);
	log_warn("sandbox %s: %s", sb->id, gone);
}

/* Re-reserve the slot recorded in sb's state.json. When another live owner holds it, the
 * sandbox's processes are stopped and why says so (it is published Failed rather than
 * sharing the range; its files remain until it is deleted). -EALREADY (not to be
 * published, untouched) when another celld on this state dir holds it; -EINVAL/-EEXIST
 * for a slot out of range or an id already known. */
static int adopt_slot(struct sandbox *sb, char *why, size_t size, struct cell_error *err)
{
	if (sb->slot < 0 || (unsigned)sb->slot >= CELLD_SLOTS)
		return cell_err(err, EINVAL, "uid slot %d of sandbox %s is invalid", sb->slot,
				sb->id);
	registry_lock();
	bool known = registry_find_locked(sb->id) != NULL;
	registry_unlock();
	if (known)
		return cell_err(err, EEXIST, "sandbox %s is already known", sb->id);
	struct cell_error rerr = {0};
	int ar = uidrange_adopt(sb->id, sb->slot, &rerr);
	if (ar == -EALREADY)
		return cell_err_msg(err, EALREADY, "%s", rerr.msg);
	if (ar < 0) {
		log_error("sandbox %s: %s; marking it Failed rather than sharing the range", sb->id,
			  rerr.msg);
		struct cell_error serr = {0};
		if (stop_processes(sb, &serr) < 0)
			log_error("sandbox %s: stopping it: %s", sb->id, serr.msg);
		snprintf(why, size, "uid range not reserved: %s", rerr.msg);
	}
	return 0;
}

/* Publish an adopted entry, counted whatever the quota (it exists already). */
static int adopt_publish(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	int r = registry_find_locked(sb->id) ? -EEXIST : registry_publish_locked(sb);
	if (r == 0)
		admission_take(sb->owner, ADM_SANDBOXES, true, NULL);
	registry_unlock();
	if (r < 0) {
		uidrange_release(sb->id, sb->slot);
		return cell_err(err, -r, "adopting %s", sb->id);
	}
	return 0;
}

/* A sandbox celld cannot adopt must not run on unmanaged (past its expiry, invisible to
 * the API, holding its uid range and disk): its processes are ended through its cgroup,
 * whose name follows from the id alone, and its files stay for an operator. */
static void stop_unadoptable(const char *id, const char *why)
{
	struct cell_error err = {0};
	if (stop_by_cgroup(id, &err) < 0)
		log_error("not adopting %s: %s; stopping its processes failed: %s", id, why,
			  err.msg);
	else
		log_error("not adopting %s: %s; its processes were stopped, its files are left "
			  "in %s/sandboxes/%s for an operator to inspect or remove",
			  id, why, celld.state_dir, id);
}

/* Adopt the sandbox of <sandboxes>/<id>: as recorded, or Failed (with why) when its init
 * is gone or its uid range cannot be reserved again; a half-created one is removed. */
static void adopt_one(const char *id)
{
	struct cell_error err = {0};
	struct sandbox *sb;
	int r = store_load(id, &sb, &err);
	if (r == -ENOENT) {
		remove_orphan(id, "no state.json");
		return;
	}
	if (r < 0) {
		/* Not understood: its files are left for an operator rather than guessed at. */
		stop_unadoptable(id, err.msg);
		return;
	}
	if (sb->state == SBX_PENDING) {
		/* Half-created when celld stopped: clean it up completely. */
		if (teardown(sb->pid, -1, sb->starttime, sb->cgroup_rel, &err) < 0 ||
		    remove_dir(id, &err) < 0)
			log_error("sandbox %s (half-created): cleanup failed: %s", id, err.msg);
		else
			log_info("sandbox %s (half-created): removed", id);
		sandbox_unref(sb);
		return;
	}
	/* Not yet published: nothing else can see sb while it is set up. */
	sandbox_begin(sb, SBX_ADOPTING, NULL);
	char why[CELL_ERROR_MSG_MAX + 64] = "";
	if (sb->state == SBX_RUNNING || sb->state == SBX_PAUSED)
		adopt_running(sb, why, sizeof(why));
	r = adopt_slot(sb, why, sizeof(why), &err);
	sandbox_end(sb, SBX_ADOPTING, why[0] ? SBX_FAILED : sb->state, why[0] ? why : NULL);
	if (r == 0)
		r = adopt_publish(sb, &err);
	bool live = sb->state == SBX_RUNNING || sb->state == SBX_PAUSED;
	if (r == 0 && live && network_adopt(sb, &err) < 0)
		log_warn("sandbox %s: taking its network back: %s", id, err.msg);
	if (r < 0) {
		if (sb->pidfd >= 0) {
			close(sb->pidfd);
			sb->pidfd = -1;
		}
		/* Another celld on this state dir manages it: not ours to stop. */
		if (r == -EALREADY)
			log_error("not adopting %s: %s", id, err.msg);
		else
			stop_unadoptable(id, err.msg);
		sandbox_unref(sb);
		return;
	}
	if (store_save(sb, &err) < 0)
		log_error("%s", err.msg);
	registry_lock();
	watch_add_locked(sb);
	registry_unlock();
	log_info("sandbox %s adopted: %s", id, sandbox_state_name(sb->state));
	sandbox_unref(sb);
}

void lifecycle_adopt_all(void)
{
	int fd = fcntl(celld.sandboxes_fd, F_DUPFD_CLOEXEC, 0);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		log_error("listing %s/sandboxes: %s", celld.state_dir, strerror(errno));
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (!cell_id_valid(de->d_name) ||
		    fstatat(celld.sandboxes_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode)) {
			log_warn("ignoring %s/sandboxes/%s: not a sandbox dir", celld.state_dir,
				 de->d_name);
			continue;
		}
		adopt_one(de->d_name);
	}
	network_reconcile();
}
