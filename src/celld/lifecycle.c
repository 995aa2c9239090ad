/* Create, delete and re-adopt sandboxes: the order of the steps over the runtime, the
 * registry and state.json. Long work (spawn, teardown) runs with the entry marked busy and
 * the registry lock released. */
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

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/quota.h"
#include "celld.h"

#define START_TIMEOUT_MS 10000 /* spawn → init answers PING */
#define ADOPT_PING_MS	 3000

json_t *lifecycle_base_env(const struct sandbox *sb)
{
	json_t *env = json_pack("{s:s, s:s, s:s, s:s}", "PATH",
				"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"HOME", "/root", "LANG", "C.UTF-8", "TERM", "xterm");
	if (env && sb->env)
		json_object_update(env, sb->env);
	return env;
}

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

static bool is_noop_entrypoint(json_t *ep)
{
	/* The SDK's default keeps a container alive; init already is the sandbox's main
	 * process, so there is nothing to run. */
	static const char *const noop[] = {"tail", "-f", "/dev/null"};
	if (!ep || json_array_size(ep) == 0)
		return true;
	if (json_array_size(ep) != CELL_ARRAY_SIZE(noop))
		return false;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(noop); i++)
		if (strcmp(json_string_value(json_array_get(ep, i)), noop[i]))
			return false;
	return true;
}

static int start_entrypoint(struct sandbox *sb, struct cell_error *err)
{
	if (is_noop_entrypoint(sb->entrypoint))
		return 0;
	_cleanup_free_ char *content = NULL;
	json_t *req = command_exec_request(sb, NULL, sb->entrypoint, NULL, NULL, 0, 0, 0, &content);
	if (!req)
		return cell_err(err, ENOMEM, "entrypoint");
	struct command *c;
	struct relay_error rerr;
	int fd;
	int r = command_start(sb, req, content, sb->owner, &c, &fd, &rerr, err);
	json_decref(req);
	if (r == 1) {
		command_unref(c);
		return cell_err(err, 0, "entrypoint could not start: %s", rerr.message);
	}
	if (r < 0)
		return cell_err_wrap(err, "starting the entrypoint: ");
	r = command_drain(c, fd, err);
	command_unref(c);
	return r;
}

static int fill_new(struct sandbox *sb, const struct create_spec *spec)
{
	sb->image = strdup(spec->image);
	sb->session_key = spec->session_key ? strdup(spec->session_key) : NULL;
	sb->owner = spec->owner;
	if (!sb->image || (spec->session_key && !sb->session_key))
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
	snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "%s",
		 spec->seccomp_profile ? spec->seccomp_profile : "default");
	sb->seccomp_log = spec->seccomp_log;
	sb->expires_at = spec->timeout ? sb->created_at + spec->timeout : 0;
	return 0;
}

/* Publish a new entry under a fresh id (or the session key's). */
static int claim(const struct create_spec *spec, struct sandbox **sbp, struct sandbox **existing,
		 struct cell_error *err)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		char id[CELL_ID_RANDOM_LEN + 1];
		if (spec->session_key)
			cell_id_from_session_key(spec->session_key, strlen(spec->session_key), id);
		else if (cell_id_random(id) < 0)
			return cell_err(err, EIO, "random id");
		struct sandbox *sb = sandbox_new(id);
		if (!sb || fill_new(sb, spec) < 0) {
			sandbox_unref(sb);
			return cell_err(err, ENOMEM, "new sandbox");
		}
		int r = registry_claim(sb, existing, err);
		if (r == 0) {
			*sbp = sb;
			return 0;
		}
		sandbox_unref(sb);
		if (r == 1)
			return 1;
		if (r == -ENOSPC)
			return celld_fail(err, ENOSPC, "no free uid range: %u sandboxes exist",
					  CELLD_SLOTS);
		if (r == -EUSERS)
			return r;
		if (r == -EADDRINUSE)
			return celld_fail(err, EEXIST,
					  "extensions.cell.sessionKey: sandbox %s, whose id this "
					  "key's hash gives, belongs to another session key",
					  id);
		if (r != -EEXIST)
			return cell_err(err, -r, "registering sandbox");
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

/* The dir for upper/ and work/ under the sandbox's disk quota (see include/cell/quota.h);
 * the formatted images it copies are kept in <state>/disk-templates. */
static int quota_prepare(struct sandbox *sb, const struct create_spec *spec, struct cell_quota *q,
			 struct cell_error *err)
{
	char templates[4096];
	snprintf(templates, sizeof(templates), "%s/disk-templates", celld.state_dir);
	struct cell_quota_req qr = {.dir = sb->dir,
				    .templates_dir = templates,
				    .project_id = sb->uid_base,
				    .bytes = spec->limits.disk_bytes};
	return cell_quota_prepare(&qr, q, err);
}

/* rm -rf of a sandbox's dir, after its layer's quota let go of it. */
static int remove_dir(const char *id, struct cell_error *err)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", celld.state_dir, id);
	int r = cell_quota_release(dir, err);
	return r < 0 ? r : cell_remove_tree_at(celld.sandboxes_fd, id, err);
}

static int spawn(struct sandbox *sb, const struct create_spec *spec, struct cell_error *err)
{
	/* Installed last before exec in the child; there is no "no filter" (fill_new named
	 * the default profile when the create named none). */
	const char *profile = sb->seccomp_profile;
	const struct cell_seccomp_prog *prog = seccomp_policy_prog(profile, sb->seccomp_log);
	if (!prog)
		return celld_fail(err, ENOENT, "seccomp profile '%s' is not loaded", profile);
	struct cell_quota quota;
	int qr = quota_prepare(sb, spec, &quota, err);
	if (qr < 0)
		return qr;
	struct cell_spawn_req req = {
	    .id = sb->id,
	    .dir = sb->dir,
	    .image_rootfs = spec->rootfs,
	    .uid_base = sb->uid_base,
	    .hostname = sb->id,
	    .init_exe_fd = celld.init_fd,
	    .cgroup = celld.cgroup,
	    .cgroup_rel = sb->cgroup_rel,
	    .volumes = spec->volumes,
	    .n_volumes = spec->n_volumes,
	    .layer_dir = quota.layer_dir[0] ? quota.layer_dir : NULL,
	    .limits = &spec->limits,
	};
	req.rlimits = limits_rlimits(&req.n_rlimits);
	req.seccomp = prog;
	struct cell_spawn_result res = {.pidfd = -1};
	int r = cell_spawn(&req, &res, err);
	cell_quota_close(&quota); /* the sandbox's overlay holds its layer now */
	if (r < 0)
		return r;
	/* cell-init is not exempted from the OOM killer with -1000: a write by a process
	 * holding CAP_SYS_RESOURCE also sets the floor (oom_score_adj_min) that every command
	 * would inherit, letting any of them make itself unkillable. Instead each command
	 * starts above init (cell-init's exec.c), so a memory hog, not PID 1, is what a
	 * sandbox's OOM kill picks. */
	registry_lock();
	sb->pid = res.pid;
	sb->pidfd = res.pidfd;
	sb->starttime = res.starttime;
	registry_unlock();
	/* Denied calls wait for an answer from here on: the listener is watched before
	 * anything waits for init. */
	if (res.seccomp_listener >= 0 &&
	    (r = seccomp_log_attach(sb->id, profile, res.seccomp_listener, err)) < 0)
		return r;
	/* The pid reaches state.json with Running, one write later (writes are a large part
	 * of the cost of a create). A celld crash before that leaves a Pending
	 * record, and a restart removes such a sandbox through its cgroup: the runtime puts
	 * the sandbox's first process in it before that process does anything else, so
	 * killing the cgroup's members ends every process of the sandbox, init included. */
	return 0;
}

/* Undo a failed create. The entry is dropped only when nothing is left on disk; otherwise
 * it stays Failed, keeping its uid slot reserved. */
static void undo_create(struct sandbox *sb, bool made_dir, const char *why)
{
	struct cell_error err = {0};
	registry_lock();
	pid_t pid = sb->pid;
	int pidfd = sb->pidfd;
	uint64_t st = sb->starttime;
	sb->pidfd = -1;
	registry_unlock();
	int r = teardown(pid, pidfd, st, sb->cgroup_rel, &err);
	if (pidfd >= 0)
		close(pidfd);
	seccomp_log_detach(sb->id);
	if (r == 0 && made_dir)
		r = remove_dir(sb->id, &err);
	registry_lock();
	sb->busy = SBX_IDLE;
	sb->pid = 0;
	sb->starttime = 0;
	if (r == 0) {
		registry_remove_locked(sb);
	} else {
		char reason[CELL_ERROR_MSG_MAX * 2];
		snprintf(reason, sizeof(reason), "create failed: %s; cleanup failed: %s", why,
			 err.msg);
		sandbox_set_state_locked(sb, SBX_FAILED, reason);
		log_error("sandbox %s: %s", sb->id, reason);
	}
	registry_broadcast();
	registry_unlock();
	if (r < 0 && made_dir)
		store_save(sb, &err);
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
		/* create-or-resume: a paused session comes back running. */
		r = lifecycle_resume_if_paused(existing, err);
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
	 * then left to an operator (as any unreadable state.json is) instead of removed. */
	bool made_dir = false;
	r = make_dir(sb, err);
	if (r == 0) {
		made_dir = true;
		r = store_save_sync(sb, STORE_UNSYNCED, err);
	}
	if (r == 0)
		r = spawn(sb, spec, err);
	if (r == 0)
		r = wait_ready(sb, err);
	if (r == 0)
		r = start_entrypoint(sb, err);
	if (r == 0) {
		registry_lock();
		sandbox_set_state_locked(sb, SBX_RUNNING, NULL);
		registry_unlock();
		r = store_save_sync(sb, STORE_SYNC_RENAMED, err);
	}
	if (r < 0) {
		cell_err_wrap(err, "creating sandbox %s: ", sb->id);
		undo_create(sb, made_dir, err->msg);
		sandbox_unref(sb);
		return r;
	}
	registry_lock();
	sb->busy = SBX_IDLE;
	watch_add_locked(sb);
	registry_broadcast();
	registry_unlock();
	log_info("sandbox %s created (image %s, pid %d, uid base %u)", sb->id, sb->image,
		 (int)sb->pid, sb->uid_base);
	*out = sb;
	*created = true;
	return 0;
}

/* Mark sb busy with `what` once nothing else is working on it, taking over its init pidfd.
 * false when it left the table meanwhile. */
static bool take_busy(struct sandbox *sb, enum sbx_busy what, pid_t *pid, int *pidfd,
		      uint64_t *starttime)
{
	registry_lock();
	while (sb->in_table && sb->busy != SBX_IDLE)
		registry_wait();
	if (!sb->in_table) {
		registry_unlock();
		return false;
	}
	sb->busy = what;
	watch_remove_locked(sb);
	*pid = sb->pid;
	*pidfd = sb->pidfd;
	*starttime = sb->starttime;
	sb->pidfd = -1;
	registry_unlock();
	return true;
}

int lifecycle_delete(struct sandbox *sb, struct cell_error *err)
{
	pid_t pid;
	int pidfd;
	uint64_t st;
	if (!take_busy(sb, SBX_DELETING, &pid, &pidfd, &st))
		return celld_fail(err, ENOENT, "sandbox %s not found", sb->id);
	registry_lock();
	bool paused = sb->state == SBX_PAUSED;
	registry_unlock();
	int r = 0;
	/* A frozen init cannot act on SIGKILL on v1 until thawed: the cgroup's kill (which
	 * signals, then thaws, on v1; cgroup.kill ends frozen tasks on v2) goes first, so no
	 * process of the sandbox runs again before it dies. */
	if (paused)
		r = celld.cgroup->kill_all(sb->cgroup_rel, err);
	if (r == 0)
		r = teardown(pid, pidfd, st, sb->cgroup_rel, err);
	if (pidfd >= 0)
		close(pidfd);
	seccomp_log_detach(sb->id);
	if (r == 0)
		r = remove_dir(sb->id, err);
	registry_lock();
	sb->busy = SBX_IDLE;
	if (r == 0) {
		registry_remove_locked(sb);
	} else {
		cell_err_wrap(err, "deleting sandbox %s: ", sb->id);
		sb->pid = 0;
		sb->starttime = 0;
		sandbox_set_state_locked(sb, SBX_FAILED, err->msg);
	}
	registry_broadcast();
	registry_unlock();
	if (r < 0) {
		struct cell_error e2;
		store_save(sb, &e2);
		return r;
	}
	log_info("sandbox %s deleted", sb->id);
	return 0;
}

void lifecycle_init_died(struct sandbox *sb, const char *why)
{
	pid_t pid;
	int pidfd;
	uint64_t st;
	registry_lock();
	bool running = sb->state == SBX_RUNNING;
	registry_unlock();
	if (!running || !take_busy(sb, SBX_RECOVERING, &pid, &pidfd, &st))
		return;
	struct cell_error err = {0};
	/* PID 1 took its pid namespace with it; whatever else sits in the cgroup goes too. */
	if (teardown(pid, pidfd, st, sb->cgroup_rel, &err) < 0)
		log_warn("sandbox %s: cleaning up after init: %s", sb->id, err.msg);
	if (pidfd >= 0)
		close(pidfd);
	registry_lock();
	sb->busy = SBX_IDLE;
	sb->pid = 0;
	sb->starttime = 0;
	sandbox_set_state_locked(sb, SBX_FAILED, why);
	registry_broadcast();
	registry_unlock();
	log_warn("sandbox %s failed: %s", sb->id, why);
	if (store_save(sb, &err) < 0)
		log_error("%s", err.msg);
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

static void adopt_running(struct sandbox *sb)
{
	struct cell_error err = {0};
	int pidfd = find_init(sb);
	const char *why = NULL;
	if (pidfd < 0) {
		why = "cell-init exited while celld was down";
	} else {
		sb->pidfd = pidfd;
		/* A paused (frozen) init cannot answer; it is adopted as Paused as it is. */
		if (sb->state != SBX_PAUSED && relay_ping(sb, ADOPT_PING_MS, &err) < 0)
			why = "cell-init did not answer after a celld restart";
	}
	if (why) {
		int fd = sb->pidfd;
		sb->pidfd = -1;
		if (teardown(sb->pid, fd, sb->starttime, sb->cgroup_rel, &err) < 0)
			log_warn("sandbox %s: cleanup: %s", sb->id, err.msg);
		if (fd >= 0)
			close(fd);
		sb->pid = 0;
		sb->starttime = 0;
		sandbox_set_state_locked(sb, SBX_FAILED, why);
		log_warn("sandbox %s: %s", sb->id, why);
	}
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
	/* Not yet published: nothing else can see sb, so no lock is needed while it is set
	 * up; the helpers that take the lock are not called on it before registry_adopt. */
	if (sb->state == SBX_RUNNING || sb->state == SBX_PAUSED)
		adopt_running(sb);
	if ((r = registry_adopt(sb, &err)) < 0) {
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
}
