/* Pause and resume: every process of a sandbox frozen through its cgroup (cgroup.freeze on
 * v2, the v1 freezer), its memory kept; the state Paused is persisted, so a restarted celld
 * adopts the sandbox as Paused (a frozen init cannot answer a ping, and need not). */
#include <errno.h>
#include <stdio.h>

#include "cell/log.h"
#include "celld.h"

/* Take sb for a freeze change: it must be `from` and idle. */
static int take(struct sandbox *sb, enum sbx_state from, enum sbx_state to, struct cell_error *err)
{
	registry_lock();
	while (sb->in_table && sb->busy != SBX_IDLE)
		registry_wait();
	int r = 0;
	if (!sb->in_table)
		r = celld_fail(err, ENOENT, "sandbox %s not found", sb->id);
	else if (sb->state == to)
		r = celld_fail(err, EALREADY, "sandbox %s is already %s", sb->id,
			       sandbox_state_name(to));
	else if (sb->state != from)
		r = celld_fail(err, EBUSY, "sandbox %s is %s, not %s", sb->id,
			       sandbox_state_name(sb->state), sandbox_state_name(from));
	else
		sb->busy = SBX_FREEZING;
	registry_unlock();
	return r;
}

static int change(struct sandbox *sb, bool freeze, struct cell_error *err)
{
	enum sbx_state from = freeze ? SBX_RUNNING : SBX_PAUSED;
	enum sbx_state to = freeze ? SBX_PAUSED : SBX_RUNNING;
	int r = take(sb, from, to, err);
	if (r < 0)
		return r;
	if (!celld.cgroup->freeze)
		r = celld_fail(err, ENOTSUP, "the %s cgroup backend cannot freeze",
			       celld.cgroup->name);
	else
		r = celld.cgroup->freeze(sb->cgroup_rel, freeze, err);
	registry_lock();
	sb->busy = SBX_IDLE;
	if (r == 0)
		sandbox_set_state_locked(sb, to, NULL);
	registry_broadcast();
	registry_unlock();
	if (r < 0)
		return cell_err_wrap(err, "%s sandbox %s: ", freeze ? "pausing" : "resuming",
				     sb->id);
	struct cell_error serr = {0};
	/* Not synced to disk (a sync would be most of a pause's cost): a killed celld's
	 * successor still reads it from the page cache, and a power loss ends the sandbox's
	 * processes anyway, frozen or not. A failed write only means a restart would see the
	 * previous state (then resume or pause finds out). */
	if (store_save_sync(sb, STORE_UNSYNCED, &serr) < 0)
		log_error("%s", serr.msg);
	log_info("sandbox %s %s", sb->id, freeze ? "paused" : "resumed");
	return 0;
}

int lifecycle_pause(struct sandbox *sb, struct cell_error *err)
{
	return change(sb, true, err);
}

int lifecycle_resume(struct sandbox *sb, struct cell_error *err)
{
	return change(sb, false, err);
}

int lifecycle_resume_if_paused(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	bool paused = sb->state == SBX_PAUSED || sb->busy == SBX_FREEZING;
	registry_unlock();
	if (!paused)
		return 0;
	int r = lifecycle_resume(sb, err);
	/* Someone else resumed it meanwhile, or it was being paused and is now Paused (then
	 * take() waited and the resume went through). */
	return r == -EALREADY ? 0 : r;
}
