/* Timers, above lifecycle: the expiry reaper deletes a sandbox once its expiresAt passed
 * (checked every REAP_INTERVAL_S). The idle timers (pause, stop, reclaim) join it here. */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "cell/log.h"
#include "cell/thread.h"
#include "lifecycle.h"
#include "registry.h"
#include "sandbox.h"
#include "timers.h"

#define REAP_INTERVAL_S 2

static void reap_expired(void)
{
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	time_t now = time(NULL);
	for (size_t i = 0; i < n; i++) {
		if (!lifecycle_expired(v[i], now))
			continue;
		struct cell_error err = {0};
		log_info("sandbox %s expired", v[i]->id);
		if (lifecycle_delete(v[i], &err) < 0 && err.code != ENOENT)
			log_error("%s", err.msg);
	}
	sandbox_unref_all(v, n);
}

static void *reaper(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {REAP_INTERVAL_S, 0};
		nanosleep(&ts, NULL);
		reap_expired();
	}
	return NULL;
}

int timers_start(struct cell_error *err)
{
	int r = cell_thread_detached(reaper, NULL);
	return r < 0 ? cell_err(err, r, "starting the expiry reaper") : 0;
}
