/* usage.c: what a sandbox uses, measured from the host. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

struct sandbox;
struct cell_quota_usage;

/* The writable layer's quota and use (include/cell/quota.h), measured through the running
 * sandbox when its init is still the recorded one; false when unknown. */
bool usage_disk(struct sandbox *sb, struct cell_quota_usage *du);
/* The "usage" object of GET /v1/sandboxes/{id} and inspect: activeSeconds (time Running,
 * the billable figure) and lastActivityAt always, the cgroup's counters when it has one;
 * NULL only when out of memory. disk: from usage_disk, or NULL when it gave nothing. */
json_t *usage_json(struct sandbox *sb, const struct cell_quota_usage *disk);
