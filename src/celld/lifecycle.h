/* lifecycle.c: every transition of a sandbox (create, start, delete, pause, resume, adopt,
 * init died) and every change of its record (renew, metadata), over the runtime, the
 * registry, uid ranges, admission and state.json. Each runs between sandbox_begin and
 * sandbox_end (sandbox.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/runtime.h"
#include "create_spec.h"
#include "sandbox.h"

struct adm_principal;
struct field_caps;

/* Create (or, with a session key, find) a sandbox. *created tells which. The new sandbox
 * is recorded first and then started from its record (as lifecycle_resume starts a Failed
 * one). */
int lifecycle_create(const struct create_spec *spec, struct sandbox **out, bool *created,
		     struct cell_error *err);
/* Tear down and remove everything; -ENOENT when it was already gone. */
int lifecycle_delete(struct sandbox *sb, struct cell_error *err);
/* Re-adopt every sandbox dir left by an earlier run (a Failed one stays Failed). */
void lifecycle_adopt_all(void);
/* Init of a running sandbox died: mark it Failed, clean its processes and cgroup (its
 * disk is kept: lifecycle_resume starts it again). The watcher's callback. */
void lifecycle_init_died(struct sandbox *sb, const char *why);
/* A command started to delete its sandbox when it ends (run -d --rm) ended: the sandbox
 * of that serial is deleted, unless it is gone already (commands.c calls this back). */
void lifecycle_delete_after_command(uint64_t serial);

/* Pause (freeze every process, memory kept): 0; -EALREADY (already Paused), -EBUSY (not
 * Running, or being deleted), -ENOENT (gone), or another -errno (the freezer failed; err
 * says why). */
int lifecycle_pause(struct sandbox *sb, struct cell_error *err);
/* Resume: a Paused sandbox is thawed; a Stopped one, or a Failed one (its init died), is
 * started again on its kept disk from its record. -EALREADY (Running), -EBUSY (none of
 * these, or being deleted), -ENOENT, or another -errno (thawing or starting failed: a
 * failed start leaves it Failed with the reason). */
int lifecycle_resume(struct sandbox *sb, struct cell_error *err);
/* Resume sb when it is Paused or Stopped (exec, files, ping and create-or-resume use it
 * first); 0 when it is Running (or Failed: only an explicit resume starts that again). */
int lifecycle_wake(struct sandbox *sb, struct cell_error *err);

/* What a client's use of a sandbox found (lifecycle_use). */
enum sbx_use {
	SBX_USE_READY,	     /* Running, no operation on it: go on */
	SBX_USE_ASLEEP,	     /* paused or stopped, and woken only when a client asks */
	SBX_USE_BUSY,	     /* an operation holds it (view.state: its state) */
	SBX_USE_NOT_RUNNING, /* Failed, Pending: view.state and view.reason say which */
};
struct sbx_use_view {
	enum sbx_state state;
	char reason[256];
};
/* A client's use of sb, the one rule under every API: activity for its idle timer, and a
 * paused or stopped sandbox started first. by_traffic: the use is traffic that reaches the
 * sandbox (its agent's calls, its ports) rather than a call of the control API, so a
 * sandbox that resumes only when asked (sandbox.h, manual_resume) is left asleep and not
 * touched. 0 with *use and *view, or -errno with err when waking it failed (a race with a
 * pause, a stop or a delete is no failure: it answers as what it found). */
int lifecycle_use(struct sandbox *sb, bool by_traffic, enum sbx_use *use, struct sbx_use_view *view,
		  struct cell_error *err);
/* sb is paused or stopped and resumes only when a client asks (sandbox.h). */
bool lifecycle_asleep(struct sandbox *sb);
/* Stop: every process ended, memory and cgroup freed, the network's rules and resolver
 * socket removed; the disk, uid range, policy and record kept. A running sandbox's
 * processes get SIGTERM and up to grace_s seconds to end (0: killed at once; a paused one
 * always is), the sandbox busy stopping meanwhile; what is left is killed. why is recorded
 * as the reason ("on request", "idle"). -EALREADY (Stopped), -EBUSY (not Running or
 * Paused, or being deleted), -ENOENT, or another -errno (the teardown failed: it is
 * Failed). */
#define LIFECYCLE_STOP_GRACE_MAX 300 /* s: a stop's request holds its connection that long */
int lifecycle_stop(struct sandbox *sb, unsigned grace_s, const char *why, struct cell_error *err);

/* A new expiry (in the future, checked by the caller; or 0: none) recorded: 0, or -EBUSY
 * when sb is being changed or gone, or the store's -errno (then nothing changed). */
int lifecycle_renew(struct sandbox *sb, time_t expires_at, struct cell_error *err);
/* A JSON merge patch (null deletes a key) applied to sb's metadata, kept within caps, and
 * recorded: 0, -EINVAL with err naming the field, or the store's -errno (then nothing
 * changed). Patches of one sandbox run one at a time. */
int lifecycle_patch_metadata(struct sandbox *sb, json_t *patch, const struct field_caps *caps,
			     struct cell_error *err);
/* The expiry of a sandbox whose cell.onTimeout is "stop": a running or paused one stops
 * (a later use starts it again), and its expiry is cleared, spent. */
int lifecycle_expire_stop(struct sandbox *sb, struct cell_error *err);
