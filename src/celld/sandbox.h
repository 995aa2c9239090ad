/* sandbox.c: the sandbox object, its states, which state may follow which, and the one
 * choke point every state change passes (sandbox_begin / sandbox_end).
 *
 * Locking: a sandbox's mutable members (below "Under the registry lock") are read and
 * written under the registry lock (registry.h); sandbox_begin and sandbox_end take it
 * themselves. */
#pragma once

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/id.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"

/* What a client sees. Stopped: no process, no memory, no cgroup; the writable layer, the
 * uid range, the network policy and the record are kept, and a start (resume, or any use)
 * cold-starts it on that disk. */
enum sbx_state { SBX_PENDING, SBX_RUNNING, SBX_PAUSED, SBX_STOPPED, SBX_FAILED };

/* The operation a sandbox is busy with: one at a time, SBX_IDLE for none. Long work
 * (spawn, teardown, freezing) runs with it set and the registry lock released. */
enum sbx_op {
	SBX_IDLE,
	SBX_CREATING,	/* lifecycle_create: Pending → Running (Failed when undo fails) */
	SBX_ADOPTING,	/* lifecycle_adopt_all, before publishing: recorded → Failed */
	SBX_DELETING,	/* lifecycle_delete: any → removed (Failed when teardown fails) */
	SBX_PAUSING,	/* lifecycle_pause: Running → Paused */
	SBX_RESUMING,	/* lifecycle_resume: Paused → Running (thaw) */
	SBX_STARTING,	/* lifecycle_resume of a Failed or Stopped one: → Running (cold start) */
	SBX_RECOVERING, /* lifecycle_init_died: Running → Failed */
	SBX_STOPPING,	/* lifecycle_stop: Running or Paused → Stopped */
	SBX_SNAPSHOTTING, /* snapshot_take: Running, Paused or Stopped, unchanged (a copy) */
	SBX_PROVISIONING, /* a create-or-resume with new provisioning: Running, unchanged */
	SBX_OPS
};

struct adm_principal;
struct cmd_table;
struct file_watchers;
struct proc_table;

/* What a sandbox's expiry does (cell.onTimeout). */
enum sbx_on_timeout { SBX_TIMEOUT_DELETE, SBX_TIMEOUT_STOP };

/* The idle timers of a sandbox, in seconds (0: never): Running without activity that long
 * → paused; Paused that long → stopped; Stopped (or Failed) that long → deleted. */
struct sbx_timers {
	int64_t idle_timeout, stop_after, reclaim_after;
	enum sbx_on_timeout on_timeout;
};

struct sandbox {
	/* Fixed once the entry is published. */
	char id[CELL_ID_MAX + 1];
	char *dir;	      /* <state>/sandboxes/<id> */
	int dirfd;	      /* O_PATH of dir, for state.json and init.sock */
	char cgroup_rel[100]; /* <prefix>/<id> */
	uint64_t serial;      /* unique per entry in this process, for the watcher */
	char *image;
	char *rootfs;	   /* the image resolved: <images>/<image>/rootfs */
	char *session_key; /* NULL unless created with cell.sessionKey */
	char *snapshot_id; /* the snapshot it was made from (snapshotId), or NULL */
	char *name;	   /* extensions cell.name: unique among the host's sandboxes; or NULL */
	/* An image of the layer store (image_store.h): its digest and lower dirs, top first;
	 * NULL for an image cell built (rootfs alone). Its WorkingDir and User: its commands'
	 * defaults (NULL: /workspace and root). */
	char *image_digest;
	json_t *image_layers;
	char *image_workdir, *image_user;
	struct adm_principal *owner; /* who created it (NULL: the Unix socket) */
	json_t *env, *entrypoint, *resource_limits, *volumes;
	time_t created_at;
	int64_t created_ms; /* the same in milliseconds: orders sandboxes made in one second */
	/* Name of the profile in policies/seccomp/ ("" for a sandbox recorded before
	 * profiles existed); an array, so the entry owns no extra allocation. */
	char seccomp_profile[CELL_SECCOMP_NAME_MAX + 1];
	bool seccomp_log; /* denied calls are logged (user-notification listener) */
	bool sudo;	  /* set-user-ID programs work (no no_new_privs): extensions["cell.sudo"] */
	/* Woken only when a client asks: traffic that reaches it through the E2B listener (its
	 * agent's calls, its ports) does not wake it when paused or stopped; a resume or
	 * connect, and the OpenSandbox API, do. E2B's autoResume {"enabled": false} asks for
	 * it. */
	bool manual_resume;
	/* Its ports (not the agent's) are reached without a credential. E2B's
	 * network.allowPublicTraffic asks for it. */
	bool public_ports;
	/* The host's code-interpreter service is bound read-only at /opt/code-interpreter
	 * (interp_service.h): its image lacks one. */
	bool interpreter_bind;
	struct cell_limits limits; /* resourceLimits as enforced (policy defaults filled in) */
	struct sbx_timers timers;  /* as recorded (policy defaults filled in at create) */
	int slot;
	uint32_t uid_base;
	pthread_mutex_t store_lock; /* serialises state.json writes */
	pthread_mutex_t meta_lock;  /* serialises metadata patches (read, merge, swap, save) */
	struct cmd_table *cmds;
	struct file_watchers *watchers; /* E2B's polling watchers (file_watchers.h) */
	/* What its started processes were given, its bash sessions: proc_table.h. */
	struct proc_table *procs;

	int refs;	      /* atomic */
	unsigned proxy_conns; /* atomic: the port proxy's open connections (api_proxy.c) */
	unsigned streams;     /* atomic: live conversations (sandbox_stream_begin) */
	/* atomic: the last activity (an API call that uses it, a keepalive), Unix seconds; and
	 * the one state.json last holds (written lazily by the timers, at most every few
	 * seconds, and with every other save). */
	int64_t active_at, active_at_saved;

	/* Under the registry lock. Only O(1) work happens under it: the json members of an
	 * entry are immutable once published (metadata is replaced whole), so readers take a
	 * reference and copy or serialise it after the lock is released. */
	bool in_table;
	enum sbx_state state; /* written by sandbox_end only */
	enum sbx_op busy;     /* written by sandbox_begin and sandbox_end only */
	json_t *metadata;
	/* The network (network.c): {"mode": "public", "policy": NetworkPolicy?}; NULL: none
	 * (a record from before networking). Replaced whole, like metadata. */
	json_t *network;
	/* Provisioning (provision.c): what each start runs ({"startupScript"?,
	 * "startupTimeout", "packages"?, "skills"?}; NULL: nothing), fixed at the create; and
	 * the outcome of the last run (NULL: none yet), replaced whole, like metadata. */
	json_t *provision, *provision_result;
	time_t expires_at; /* 0: never */
	time_t transition_at;
	int64_t running_seconds; /* time spent Running before the current Running spell */
	char *reason;		 /* why Failed */
	pid_t pid;		 /* host pid of cell-init, 0 when none */
	int pidfd;		 /* -1 when none */
	uint64_t starttime;
	bool watched; /* pidfd registered with the watcher */
};

/* A new, unpublished entry (one reference, Pending, no slot yet). */
struct sandbox *sandbox_new(const char *id);
/* Inline so that the registry, below this module, can take references too. */
static inline void sandbox_ref(struct sandbox *sb)
{
	__atomic_add_fetch(&sb->refs, 1, __ATOMIC_RELAXED);
}
void sandbox_unref(struct sandbox *sb);
/* qsort order of struct sandbox * entries: oldest first, by creation to the millisecond,
 * then id (an order that holds across the pages of a list). */
int sandbox_cmp_created(const void *a, const void *b);
/* Drop the references of a registry_snapshot and free the array. */
void sandbox_unref_all(struct sandbox **v, size_t n);

/* A state's name as clients and records know it ("Running"), and back (any case; -EINVAL
 * for no state). Inline, with the names, so that the record's codec needs no object. */
static const char *const sandbox_state_names[] = {
    [SBX_PENDING] = "Pending", [SBX_RUNNING] = "Running", [SBX_PAUSED] = "Paused",
    [SBX_STOPPED] = "Stopped", [SBX_FAILED] = "Failed",
};

static inline const char *sandbox_state_name(enum sbx_state state)
{
	return sandbox_state_names[state];
}

static inline int sandbox_state_parse(const char *name, enum sbx_state *out)
{
	for (size_t i = 0; i < sizeof(sandbox_state_names) / sizeof(sandbox_state_names[0]); i++) {
		if (name && !strcasecmp(name, sandbox_state_names[i])) {
			*out = (enum sbx_state)i;
			return 0;
		}
	}
	return -EINVAL;
}
const char *sandbox_op_name(enum sbx_op op);
/* The transition table: may `to` follow `from`? (A state always may follow itself.) */
bool sandbox_may_follow(enum sbx_state from, enum sbx_state to);

/* Begin op on sb: waits while another operation runs on it (except a delete, which
 * refuses at once: -EBUSY "being deleted"), then checks that op may start from sb's state
 * and marks sb busy with it. -ENOENT (left the table; CREATING and ADOPTING begin on an
 * unpublished entry), -EALREADY (already in the state op leads to: pause of a Paused one,
 * resume of a Running one), -EBUSY (a state op cannot start from), each with err. */
int sandbox_begin(struct sandbox *sb, enum sbx_op op, struct cell_error *err);
/* End op: sb becomes state (reason for Failed; NULL keeps the reason when the state
 * stays), transition_at is stamped when anything changed, busy is cleared and waiters
 * are woken. Passing sb's current state ends op without a transition. */
void sandbox_end(struct sandbox *sb, enum sbx_op op, enum sbx_state state, const char *reason);
/* The registry lock held: is sb in the table with no operation running (a renewal, the
 * expiry reaper and the watcher act only then)? */
bool sandbox_idle_locked(const struct sandbox *sb);
/* The registry lock held: is sb busy with an operation that ends in its removal or its
 * first Running (a create-or-resume waits for those)? */
bool sandbox_settling_locked(const struct sandbox *sb);
/* The registry lock held: seconds sb has been Running, all spells together (the billable
 * figure, usage.activeSeconds). */
int64_t sandbox_active_seconds_locked(const struct sandbox *sb, time_t now);
/* Something used sb now: its idle timer starts again. Lock-free. */
static inline void sandbox_touch(struct sandbox *sb)
{
	__atomic_store_n(&sb->active_at, (int64_t)time(NULL), __ATOMIC_RELAXED);
}
/* A live conversation with sb begins (an attached terminal, a file streaming in or out):
 * activity for as long as it lasts, however quiet. Ended by sandbox_stream_end, which
 * counts as activity itself (idle from then on). Lock-free. */
static inline void sandbox_stream_begin(struct sandbox *sb)
{
	__atomic_add_fetch(&sb->streams, 1, __ATOMIC_RELAXED);
}
static inline void sandbox_stream_end(struct sandbox *sb)
{
	__atomic_sub_fetch(&sb->streams, 1, __ATOMIC_RELAXED);
	sandbox_touch(sb);
}
static inline int64_t sandbox_active_at(const struct sandbox *sb)
{
	return __atomic_load_n(&sb->active_at, __ATOMIC_RELAXED);
}
