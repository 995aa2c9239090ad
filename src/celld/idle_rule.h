/* idle_rule.c: what the timers do with a sandbox on one look, and what counts as its use.
 *
 * A sandbox is in use while a client is using it: an API call on it, a keepalive or a
 * renewal (each moves its last activity), and for as long as they last an open port-proxy
 * connection or tunnel, an attached terminal, a file transfer, a watch, or a foreground
 * command whose client still reads its stream. Nothing that runs inside counts by itself:
 * the entrypoint, background commands, daemons, a foreground command whose client went
 * away. Pausing freezes them with their memory, the next use thaws them; a stop ends them
 * and the next start runs the entrypoint again. */
#pragma once

#include <stdint.h>
#include <time.h>

#include "sandbox.h"

/* What a client holds open in a sandbox now (the sandbox's counters). */
struct idle_use {
	unsigned proxy_conns; /* port-proxy connections and TCP tunnels */
	unsigned streams;     /* sandbox_stream_begin: terminals, transfers, watches, commands */
};

/* One look at a sandbox that no operation holds. */
struct idle_view {
	enum sbx_state state;
	time_t since;	   /* in this state since, or last used since, whichever is later */
	time_t expires_at; /* 0: none */
	struct sbx_timers timers;
	struct idle_use use;
};

enum idle_step {
	IDLE_NOTHING, /* leave it */
	IDLE_IN_USE,  /* a client holds it: its last activity is now */
	IDLE_EXPIRE,  /* past its expiry: delete it (stop it with cell.onTimeout stop) */
	IDLE_PAUSE,   /* Running, unused for idleTimeout */
	IDLE_STOP,    /* Paused for stopAfter */
	IDLE_RECLAIM, /* Stopped or Failed for reclaimAfter: delete it, disk and all */
};

/* Whether a client holds the sandbox now. */
bool idle_rule_in_use(const struct idle_use *use);
/* The step for v at now. */
enum idle_step idle_rule_next(const struct idle_view *v, time_t now);
