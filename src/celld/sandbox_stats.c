/* A sandbox's counters for GET /v1/stats, each read from what the kernel keeps (the
 * cgroup's files through the backend's ops, the layer's quota or filesystem, the veth's
 * counters over rtnetlink in celld's own namespace), never from inside the sandbox. The registry
 * lock is taken only to copy a few members; the files are read after it is released, so a stats
 * request over a thousand sandboxes never holds up the registry. */
#include <stdint.h>

#include "cell/quota.h"
#include "config.h"
#include "network.h"
#include "registry.h"
#include "sandbox.h"
#include "sandbox_stats.h"
#include "timefmt.h"
#include "usage.h"

static void set_u64(json_t *o, const char *key, uint64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v)));
}

static void add_cgroup(json_t *o, const struct sandbox *sb)
{
	struct cell_cgroup_usage u;
	if (!celld.cgroup->counters || celld.cgroup->counters(sb->cgroup_rel, &u, NULL) < 0)
		return; /* no cgroup: Stopped, Failed, or not made yet */
	set_u64(o, "cpuUsageUsec", u.cpu_usec);
	set_u64(o, "memoryBytes", u.memory_current);
	set_u64(o, "memoryLimitBytes", sb->limits.memory_bytes);
	set_u64(o, "pidsCurrent", u.pids_current);
	set_u64(o, "pidsLimit", sb->limits.pids);
}

static void add_disk(json_t *o, struct sandbox *sb)
{
	struct cell_quota_usage du;
	if (!usage_disk(sb, &du))
		return;
	set_u64(o, "diskUsedBytes", du.used_bytes);
	set_u64(o, "diskLimitBytes", du.limit_bytes);
}

static void add_network(json_t *o, struct sandbox *sb)
{
	uint64_t rx, tx;
	if (network_bytes(sb, &rx, &tx) < 0)
		return;
	set_u64(o, "networkRxBytes", rx);
	set_u64(o, "networkTxBytes", tx);
}

json_t *sandbox_stats_json(struct sandbox *sb)
{
	registry_lock();
	enum sbx_state state = sb->state;
	registry_unlock();
	json_t *o = json_pack("{s:s, s:s*, s:s, s:I}", "id", sb->id, "name", sb->name, "state",
			      sandbox_state_name(state), "timestamp", (json_int_t)celld_now_ms());
	if (!o)
		return NULL;
	add_cgroup(o, sb);
	add_disk(o, sb);
	add_network(o, sb);
	return o;
}
