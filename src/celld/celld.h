/* celld internals: one section per file of src/celld/.
 *
 * Threads: libmicrohttpd runs one thread per client connection (a handler may block on a
 * sandbox's relay socket), plus the init watcher, the expiry reaper and one small thread per
 * background command. Shared state lives in the registry (one mutex, one condition
 * variable); long work (spawn, teardown, relay I/O) never runs under that mutex. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cell/cgroup.h"
#include "cell/error.h"
#include "cell/id.h"
#include "cell/proto.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"

struct sandbox;
struct cell_quota_usage;

/* Sections that moved to a header of their own. */
/* Sections that moved to a header of their own. */
#include "admission.h"
#include "api.h"
#include "auth.h"
#include "commands.h"
#include "config.h"
#include "errors.h"
#include "fields.h"
#include "gate.h"
#include "head.h"
#include "http.h"
#include "images.h"
#include "lifecycle.h"
#include "limits.h"
#include "multipart.h"
#include "registry.h"
#include "relay.h"
#include "router.h"
#include "sandbox.h"
#include "seccomp_log.h"
#include "seccomp_policy.h"
#include "server.h"
#include "sse.h"
#include "store.h"
#include "timefmt.h"
#include "timers.h"
#include "transport.h"
#include "uidrange.h"
#include "url.h"
#include "volumes.h"
#include "watch.h"
