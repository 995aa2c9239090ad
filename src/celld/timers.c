/* Timers, above lifecycle, one thread that looks at every sandbox every TICK_S seconds and
 * does what the idle rule (idle_rule.c, which also says what counts as use) decides:
 *
 * - expiry: past its expiresAt a sandbox is deleted, or stopped (cell.onTimeout: stop);
 * - idle: Running and unused for idleTimeout → paused. Use is an API call on it
 *   (api_running_sandbox), a keepalive or a renewal, and while they last a client's open
 *   port-proxy connection or tunnel, attached terminal, file transfer, watch or foreground
 *   command stream; what runs inside by itself (the entrypoint, background commands) is not;
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
#include "idle_rule.h"
#include "lifecycle.h"
#include "registry.h"
#include "sandbox.h"
#include "store.h"
#include "timefmt.h"
#include "timers.h"

#define TICK_S		2
#define ACTIVITY_SAVE_S 10

/* What the timers see of a sandbox; false when an operation holds it. */
static bool view_of(struct sandbox *sb, struct idle_view *v)
{
	registry_lock();
	bool idle = sandbox_idle_locked(sb);
	v->state = sb->state;
	v->since = sb->transition_at;
	v->expires_at = sb->expires_at;
	v->timers = sb->timers;
	registry_unlock();
	time_t active = (time_t)sandbox_active_at(sb);
	if (active > v->since)
		v->since = active;
	v->use.proxy_conns = __atomic_load_n(&sb->proxy_conns, __ATOMIC_RELAXED);
	v->use.streams = __atomic_load_n(&sb->streams, __ATOMIC_RELAXED);
	return idle;
}

static void act(struct sandbox *sb, const char *what, int r, const struct cell_error *err)
{
	if (r < 0 && r != -ENOENT && r != -EBUSY && r != -EALREADY)
		log_error("sandbox %s: %s: %s", sb->id, what, err->msg);
}

static void expire(struct sandbox *sb, const struct idle_view *v)
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

static void step(struct sandbox *sb, const struct idle_view *v, time_t now)
{
	struct cell_error err = {0};
	int64_t quiet = (int64_t)(now - v->since);
	char why[96];
	switch (idle_rule_next(v, now)) {
	case IDLE_NOTHING:
		return;
	case IDLE_IN_USE:
		sandbox_touch(sb);
		return;
	case IDLE_EXPIRE:
		expire(sb, v);
		return;
	case IDLE_PAUSE:
		log_info("sandbox %s: idle for %" PRId64 " s, pausing it", sb->id, quiet);
		act(sb, "pausing it when idle", lifecycle_pause(sb, &err), &err);
		return;
	case IDLE_STOP:
		snprintf(why, sizeof(why), "paused and unused for %" PRId64 " s", quiet);
		act(sb, "stopping it when idle", lifecycle_stop(sb, 0, why, &err), &err);
		return;
	case IDLE_RECLAIM:
		log_info("sandbox %s: %s and unused for %" PRId64 " s, deleting it", sb->id,
			 sandbox_state_name(v->state), quiet);
		act(sb, "deleting it when unused", lifecycle_delete(sb, &err), &err);
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

static int64_t beat_ms = -1; /* celld_now_ms() of the thread's last sign of life */

static void beat(void)
{
	__atomic_store_n(&beat_ms, celld_now_ms(), __ATOMIC_RELAXED);
}

int64_t timers_beat_age_ms(void)
{
	int64_t at = __atomic_load_n(&beat_ms, __ATOMIC_RELAXED);
	return at < 0 ? -1 : celld_now_ms() - at;
}

static void tick(void)
{
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	time_t now = time(NULL);
	for (size_t i = 0; i < n; i++) {
		struct idle_view iv;
		if (!view_of(v[i], &iv))
			continue;
		step(v[i], &iv, now);
		save_activity(v[i]);
		beat();
	}
	sandbox_unref_all(v, n);
}

static void *timer_thread(void *arg)
{
	(void)arg;
	for (;;) {
		beat();
		struct timespec ts = {TICK_S, 0};
		nanosleep(&ts, NULL);
		beat();
		tick();
	}
	return NULL;
}

int timers_start(struct cell_error *err)
{
	int r = cell_thread_detached(timer_thread, NULL);
	return r < 0 ? cell_err(err, r, "starting the timers") : 0;
}
