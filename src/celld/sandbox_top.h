/* sandbox_top.c: the processes of a sandbox (GET /v1/sandboxes/{id}/top), read from the
 * host's /proc for the pids of the sandbox's cgroup. */
#pragma once

#include <jansson.h>

#include "cell/error.h"

struct sandbox;

/* At most this many processes are listed; "truncated" says when there were more. */
#define SANDBOX_TOP_MAX 4096

/* {"processes": [{pid, uid, state, cpuUsec, rssBytes, startedAt, command}], "truncated"}:
 * pid and uid as the sandbox sees them (its pid namespace, its user namespace; -1 when
 * unmapped), state /proc's letter, startedAt Unix ms, command its command line (its name in
 * brackets when empty) with every byte outside printable ASCII, and the backslash, written
 * as \xNN. A process that ends while it is read is left out. 0, or -errno with err filled
 * (-ENOENT: no cgroup, the sandbox is not running). */
int sandbox_top_json(struct sandbox *sb, json_t **out, struct cell_error *err);
