/* What a sandbox uses, measured from the host (its cgroup's counters, its writable layer's
 * quota), never from inside the sandbox (whose answers would be hostile input). */
#include <time.h>

#include <jansson.h>

#include "cell/quota.h"
#include "config.h"
#include "registry.h"
#include "sandbox.h"
#include "timefmt.h"
#include "usage.h"

bool usage_disk(struct sandbox *sb, struct cell_quota_usage *du)
{
	registry_lock();
	pid_t pid = sb->pid;
	uint64_t st = sb->starttime;
	registry_unlock();
	return cell_quota_usage_at(sb->dirfd, pid, st, du, NULL) == 0;
}

json_t *usage_json(struct sandbox *sb, const struct cell_quota_usage *disk)
{
	time_t now = time(NULL);
	registry_lock();
	int64_t active = sandbox_active_seconds_locked(sb, now);
	registry_unlock();
	/* The billable time (Running, every spell together) and the last use, also for a
	 * sandbox with no cgroup (Stopped). */
	json_t *o = json_pack("{s:I, s:o}", "activeSeconds", (json_int_t)active, "lastActivityAt",
			      celld_time_json((time_t)sandbox_active_at(sb)));
	struct cell_cgroup_usage u;
	if (o && celld.cgroup->usage && celld.cgroup->usage(sb->cgroup_rel, &u, NULL) == 0) {
		json_t *cg = json_pack(
		    "{s:f, s:I, s:I, s:I, s:I, s:I}", "cpuSeconds", (double)u.cpu_usec / 1e6,
		    "memoryBytes", (json_int_t)u.memory_current, "memoryPeakBytes",
		    (json_int_t)u.memory_peak, "socketMemoryBytes", (json_int_t)u.socket_current,
		    "pids", (json_int_t)u.pids_current, "oomKills", (json_int_t)u.oom_kills);
		json_object_update(o, cg);
		json_decref(cg);
	}
	if (o && disk)
		json_object_set_new(o, "diskUsedBytes", json_integer((json_int_t)disk->used_bytes));
	return o;
}
