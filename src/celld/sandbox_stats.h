/* sandbox_stats.c: what a sandbox uses right now, as raw counters a client turns into
 * rates (GET /v1/stats): its cgroup's CPU time, memory and pids, its writable layer's use,
 * its interface's bytes, each beside its limit, and the time they were read. */
#pragma once

#include <jansson.h>

struct sandbox;

/* The stats object of sb: id, name, state and timestamp (Unix ms) always; the cgroup's
 * counters (cpuUsageUsec, memoryBytes, memoryLimitBytes, pidsCurrent, pidsLimit) when it
 * has a cgroup (Running, Paused); diskUsedBytes and diskLimitBytes when its layer is
 * measurable; networkRxBytes and networkTxBytes when it has an interface. A limit of 0 is
 * none. Every file is read with no lock held. NULL only when out of memory. */
json_t *sandbox_stats_json(struct sandbox *sb);
