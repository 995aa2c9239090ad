/* timer_policy.c: the idle timers' policy (policies/lifecycle/default.json: defaults and
 * caps of cell.idleTimeout, cell.stopAfter, cell.reclaimAfter, cell.onTimeout) and a
 * create's choice of them, checked against it. */
#pragma once

#include <jansson.h>

#include "cell/error.h"
#include "sandbox.h"

/* Load the policy; a missing file means the built-in defaults (logged). */
int timer_policy_load(struct cell_error *err);
/* The timers of a create: the policy's defaults, overridden by the extensions (a map of
 * strings; NULL for none) that name them. -EINVAL with err naming the field. */
int timer_policy_resolve(json_t *extensions, struct sbx_timers *out, struct cell_error *err);
/* {"idleTimeout", "stopAfter", "reclaimAfter", "onTimeout"} of t (inspect's "timers"). */
json_t *timer_policy_json(const struct sbx_timers *t);
