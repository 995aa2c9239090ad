/* Timers, above lifecycle, one thread that looks at every sandbox every TICK_S seconds:
 *
 * - expiry: past its expiresAt a sandbox is deleted, or stopped (cell.onTimeout: stop);
 * - idle: Running with no activity for idleTimeout → paused. Activity is an API call that
 *   uses it (api_running_sandbox), a keepalive or a renewal; a command still running, an
 *   open port-proxy connection, an attached terminal or a file transfer count as activity
 *   while they last;
 * - Paused for stopAfter → stopped (memory freed, disk kept);
 * - Stopped (or Failed) for reclaimAfter → deleted, disk and all.
 *
 * Each step is the lifecycle's own operation, so a client acting at the same moment
 * either wins (the sandbox is busy, or no longer idle, and the timer leaves it alone this
 * round) or finds the new state. The last activity reaches state.json lazily (at most
 * ACTIVITY_SAVE_S behind) so that timers survive a restart without a write per request. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "cell/log.h"
#include "cell/thread.h"
#include "commands.h"
#include "lifecycle.h"
#include "registry.h"
#include "sandbox.h"
#include "store.h"
#include "timers.h"

#define TICK_S		2
#define ACTIVITY_SAVE_S 10

/* What the timers see of a sandbox, read under the registry lock. */
struct timer_view {
	bool idle; /* in the table, no operation running */
	enum sbx_state state;
	time_t since; /* in this state since, or active since, whichever is later */
	time_t expires_at;
	struct sbx_timers timers;
};

static struct timer_view view_of(struct sandbox *sb)
{
	struct timer_view v;
	registry_lock();
	v.idle = sandbox_idle_locked(sb);
	v.state = sb->state;
	v.since = sb->transition_at;
	v.expires_at = sb->expires_at;
	v.timers = sb->timers;
	registry_unlock();
	time_t active = (time_t)sandbox_active_at(sb);
	if (active > v.since)
		v.since = active;
	return v;
}

/* Work that lasts (a command, a proxied connection, a terminal, a file transfer) is activity
 * while it does. */
static bool busy_inside(struct sandbox *sb)
{
	return __atomic_load_n(&sb->proxy_conns, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&sb->streams, __ATOMIC_RELAXED) || cmd_table_running(sb->cmds);
}

static void act(struct sandbox *sb, const char *what, int r, const struct cell_error *err)
{
	if (r < 0 && r != -ENOENT && r != -EBUSY && r != -EALREADY)
		log_error("sandbox %s: %s: %s", sb->id, what, err->msg);
}

static void expire(struct sandbox *sb, const struct timer_view *v)
{
	struct cell_error err = {0};
	if (v->timers.on_timeout == SBX_TIMEOUT_STOP) {
		log_info("sandbox %s expired: stopping it (cell.onTimeout: stop)", sb->id);
		act(sb, "stopping at its timeout", lifecycle_expire_stop(sb, &err), &err);
		return;
	}
	log_info("sandbox %s expired", sb->id);
	act(sb, "deleting at its timeout", lifecycle_delete(sb, &err), &err);
}

static void idle_step(struct sandbox *sb, const struct timer_view *v, time_t now)
{
	struct cell_error err = {0};
	int64_t quiet = (int64_t)(now - v->since);
	char why[96];
	switch (v->state) {
	case SBX_RUNNING:
		if (busy_inside(sb)) {
			sandbox_touch(sb);
			return;
		}
		if (!v->timers.idle_timeout || quiet < v->timers.idle_timeout)
			return;
		log_info("sandbox %s: idle for %" PRId64 " s, pausing it", sb->id, quiet);
		act(sb, "pausing it when idle", lifecycle_pause(sb, &err), &err);
		return;
	case SBX_PAUSED:
		if (!v->timers.stop_after || quiet < v->timers.stop_after)
			return;
		snprintf(why, sizeof(why), "paused and unused for %" PRId64 " s", quiet);
		act(sb, "stopping it when idle", lifecycle_stop(sb, why, &err), &err);
		return;
	case SBX_STOPPED:
	case SBX_FAILED:
		if (!v->timers.reclaim_after || quiet < v->timers.reclaim_after)
			return;
		log_info("sandbox %s: %s and unused for %" PRId64 " s, deleting it", sb->id,
			 sandbox_state_name(v->state), quiet);
		act(sb, "deleting it when unused", lifecycle_delete(sb, &err), &err);
		return;
	default:
		return;
	}
}

/* The last activity, into state.json when it moved on enough since the last save. */
static void save_activity(struct sandbox *sb)
{
	int64_t at = sandbox_active_at(sb);
	if (at - __atomic_load_n(&sb->active_at_saved, __ATOMIC_RELAXED) < ACTIVITY_SAVE_S)
		return;
	struct cell_error err = {0};
	if (store_save_sync(sb, STORE_UNSYNCED, &err) < 0)
		log_warn("sandbox %s: recording its last activity: %s", sb->id, err.msg);
}

static void tick(void)
{
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	time_t now = time(NULL);
	for (size_t i = 0; i < n; i++) {
		struct timer_view tv = view_of(v[i]);
		if (!tv.idle)
			continue;
		if (tv.expires_at && now >= tv.expires_at)
			expire(v[i], &tv);
		else
			idle_step(v[i], &tv, now);
		save_activity(v[i]);
	}
	sandbox_unref_all(v, n);
}

static void *timer_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {TICK_S, 0};
		nanosleep(&ts, NULL);
		tick();
	}
	return NULL;
}

int timers_start(struct cell_error *err)
{
	int r = cell_thread_detached(timer_thread, NULL);
	return r < 0 ? cell_err(err, r, "starting the timers") : 0;
}
