/* The sandbox object: its lifetime (references), its states and the transition table, and
 * the one choke point every state change passes. An operation (create, delete, pause,
 * resume, start, recovery after init died, adoption) begins with sandbox_begin, which
 * waits for the operation before it, checks that it may start from the sandbox's state
 * and marks the sandbox busy; it ends with sandbox_end, the only writer of a sandbox's
 * state, which checks the transition against the table, stamps it and wakes the waiters.
 * Lifecycle (lifecycle.c) drives the operations; nothing else changes a state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "audit.h"
#include "commands.h"
#include "events.h"
#include "file_watchers.h"
#include "proc_table.h"
#include "config.h"
#include "registry.h"
#include "sandbox.h"

#define BIT(s) (1u << (s))
#define ANY_STATE                                                                                  \
	(BIT(SBX_PENDING) | BIT(SBX_RUNNING) | BIT(SBX_PAUSED) | BIT(SBX_STOPPED) | BIT(SBX_FAILED))

/* Which state may follow which (besides itself). */
static const unsigned next_states[] = {
    [SBX_PENDING] = BIT(SBX_RUNNING) | BIT(SBX_FAILED), /* create done / undo failed */
    /* pause, stop / init died, delete or stop failed */
    [SBX_RUNNING] = BIT(SBX_PAUSED) | BIT(SBX_STOPPED) | BIT(SBX_FAILED),
    /* resume, stop / delete or stop failed, adoption */
    [SBX_PAUSED] = BIT(SBX_RUNNING) | BIT(SBX_STOPPED) | BIT(SBX_FAILED),
    /* a cold start on its kept disk / delete failed, a start failed */
    [SBX_STOPPED] = BIT(SBX_RUNNING) | BIT(SBX_FAILED),
    [SBX_FAILED] = BIT(SBX_RUNNING), /* resume: a cold start on its kept disk */
};

/* Which operation may begin from which state. `already`: the state the operation leads
 * to, answered -EALREADY rather than -EBUSY (a pause of a Paused sandbox). */
struct op_rule {
	const char *name;
	unsigned from;
	const char *from_text;
	int already;	  /* an enum sbx_state, or -1 */
	bool unpublished; /* begins on an entry not yet in the registry */
};

static const struct op_rule op_rules[SBX_OPS] = {
    [SBX_IDLE] = {"idle", 0, "", -1, false},
    [SBX_CREATING] = {"creating", BIT(SBX_PENDING), "Pending", -1, true},
    [SBX_ADOPTING] = {"adopting", ANY_STATE, "", -1, true},
    [SBX_DELETING] = {"deleting", ANY_STATE, "", -1, false},
    [SBX_PAUSING] = {"pausing", BIT(SBX_RUNNING), "Running", SBX_PAUSED, false},
    [SBX_RESUMING] = {"resuming", BIT(SBX_PAUSED), "Paused", SBX_RUNNING, false},
    [SBX_STARTING] = {"starting", BIT(SBX_FAILED) | BIT(SBX_STOPPED), "Failed or Stopped",
		      SBX_RUNNING, false},
    [SBX_RECOVERING] = {"recovering", BIT(SBX_RUNNING), "Running", -1, false},
    [SBX_STOPPING] = {"stopping", BIT(SBX_RUNNING) | BIT(SBX_PAUSED), "Running or Paused",
		      SBX_STOPPED, false},
    [SBX_SNAPSHOTTING] = {"snapshotting", BIT(SBX_RUNNING) | BIT(SBX_PAUSED) | BIT(SBX_STOPPED),
			  "Running, Paused or Stopped", -1, false},
    [SBX_PROVISIONING] = {"provisioning", BIT(SBX_RUNNING), "Running", -1, false},
};

struct sandbox *sandbox_new(const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	if (cell_cgroup_name(celld.state_dir, id, sb->cgroup_rel, sizeof(sb->cgroup_rel)) < 0) {
		free(sb);
		return NULL;
	}
	if (asprintf(&sb->dir, "%s/sandboxes/%s", celld.state_dir, id) < 0) {
		free(sb);
		return NULL;
	}
	sb->cmds = cmd_table_new();
	sb->watchers = file_watchers_new();
	sb->procs = proc_table_new();
	sb->metadata = json_object();
	if (!sb->cmds || !sb->watchers || !sb->procs || !sb->metadata) {
		cmd_table_free(sb->cmds);
		file_watchers_free(sb->watchers);
		proc_table_free(sb->procs);
		json_decref(sb->metadata);
		free(sb->dir);
		free(sb);
		return NULL;
	}
	pthread_mutex_init(&sb->store_lock, NULL);
	pthread_mutex_init(&sb->meta_lock, NULL);
	sb->refs = 1;
	sb->dirfd = -1;
	sb->pidfd = -1;
	sb->slot = -1;
	sb->state = SBX_PENDING;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	sb->created_at = sb->transition_at = now.tv_sec;
	sb->created_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	sb->active_at = sb->active_at_saved = (int64_t)sb->created_at;
	return sb;
}

void sandbox_unref(struct sandbox *sb)
{
	if (!sb || __atomic_sub_fetch(&sb->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (sb->dirfd >= 0)
		close(sb->dirfd);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	json_decref(sb->metadata);
	json_decref(sb->env);
	json_decref(sb->entrypoint);
	json_decref(sb->resource_limits);
	json_decref(sb->volumes);
	json_decref(sb->network);
	json_decref(sb->provision);
	json_decref(sb->provision_result);
	cmd_table_free(sb->cmds);
	file_watchers_free(sb->watchers);
	proc_table_free(sb->procs);
	pthread_mutex_destroy(&sb->store_lock);
	pthread_mutex_destroy(&sb->meta_lock);
	free(sb->image);
	free(sb->rootfs);
	free(sb->session_key);
	free(sb->snapshot_id);
	free(sb->name);
	free(sb->image_digest);
	json_decref(sb->image_layers);
	free(sb->image_workdir);
	free(sb->image_user);
	free(sb->reason);
	free(sb->dir);
	free(sb);
}

void sandbox_unref_all(struct sandbox **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_unref(v[i]);
	free(v);
}

const char *sandbox_op_name(enum sbx_op op)
{
	return op < SBX_OPS ? op_rules[op].name : "?";
}

bool sandbox_may_follow(enum sbx_state from, enum sbx_state to)
{
	return from == to || (next_states[from] & BIT(to));
}

bool sandbox_idle_locked(const struct sandbox *sb)
{
	return sb->in_table && sb->busy == SBX_IDLE;
}

bool sandbox_settling_locked(const struct sandbox *sb)
{
	return sb->busy == SBX_CREATING || sb->busy == SBX_DELETING;
}

int64_t sandbox_active_seconds_locked(const struct sandbox *sb, time_t now)
{
	int64_t spell = sb->state == SBX_RUNNING && now > sb->transition_at
			    ? (int64_t)(now - sb->transition_at)
			    : 0;
	return sb->running_seconds + spell;
}

/* Registry lock held. */
static int begin_locked(struct sandbox *sb, enum sbx_op op, struct cell_error *err)
{
	const struct op_rule *rule = &op_rules[op];
	for (;;) {
		if (!sb->in_table && !rule->unpublished)
			return cell_err(err, 0, "sandbox %s not found", sb->id), -ENOENT;
		if (sb->busy == SBX_IDLE)
			break;
		/* Nothing is left to act on once a delete runs; answering at once (409) beats
		 * waiting for it and answering 404. A second delete waits (and finds it gone). */
		if (sb->busy == SBX_DELETING && op != SBX_DELETING)
			return cell_err(err, 0, "sandbox %s is being deleted", sb->id), -EBUSY;
		registry_wait();
	}
	if (!(rule->from & BIT(sb->state))) {
		if (rule->already >= 0 && sb->state == (enum sbx_state)rule->already)
			return cell_err(err, 0, "sandbox %s is already %s", sb->id,
					sandbox_state_names[sb->state]),
			       -EALREADY;
		return cell_err(err, 0, "sandbox %s is %s, not %s", sb->id,
				sandbox_state_names[sb->state], rule->from_text),
		       -EBUSY;
	}
	sb->busy = op;
	return 0;
}

int sandbox_begin(struct sandbox *sb, enum sbx_op op, struct cell_error *err)
{
	if (op <= SBX_IDLE || op >= SBX_OPS)
		return cell_err(err, EINVAL, "sandbox %s: no such operation %d", sb->id, (int)op);
	registry_lock();
	int r = begin_locked(sb, op, err);
	registry_unlock();
	if (r < 0 && err) /* messages of a refused begin carry no errno text */
		err->code = -r;
	return r;
}

/* What an operation's end is called in the audit log and the events. */
static const char *op_action(enum sbx_op op)
{
	switch (op) {
	case SBX_CREATING:
		return "create";
	case SBX_ADOPTING:
		return "adopt";
	case SBX_DELETING:
		return "delete";
	case SBX_PAUSING:
		return "pause";
	case SBX_RESUMING:
		return "resume";
	case SBX_STARTING:
		return "start";
	case SBX_RECOVERING:
		return "init-died";
	case SBX_STOPPING:
		return "stop";
	case SBX_SNAPSHOTTING:
		return "snapshot";
	case SBX_PROVISIONING:
		return "provision";
	default:
		return sandbox_op_name(op);
	}
}

/* The audit log's record and the sandbox's event for the end of op (outside every lock):
 * from → to, or its removal (gone). */
static void note_end(struct sandbox *sb, enum sbx_op op, enum sbx_state from, enum sbx_state to,
		     const char *reason, bool gone)
{
	const char *action = op_action(op);
	json_t *d = json_pack("{s:s, s:s, s:s*}", "from", sandbox_state_names[from], "to",
			      gone ? "Deleted" : sandbox_state_names[to], "reason", reason);
	if (d && op == SBX_CREATING)
		json_object_set_new(d, "image", json_string(sb->image));
	if (gone) {
		audit_log(sb->id, action, d);
		events_forget(sb->id);
		return;
	}
	/* An OOM kill shows before the transition it may have caused. */
	if (to == SBX_RUNNING || to == SBX_PAUSED || to == SBX_FAILED)
		events_check_oom(sb->id, sb->cgroup_rel);
	json_t *e =
	    json_pack("{s:s, s:s, s:s, s:s*}", "op", action, "from", sandbox_state_names[from],
		      "to", sandbox_state_names[to], "reason", reason);
	audit_log(sb->id, action, d);
	if (from != to || op == SBX_CREATING)
		events_emit(sb->id, "state", e);
	else
		json_decref(e);
}

void sandbox_end(struct sandbox *sb, enum sbx_op op, enum sbx_state state, const char *reason)
{
	char *why = reason ? strdup(reason) : NULL;
	char *said = reason ? strdup(reason) : NULL;
	registry_lock();
	enum sbx_state from = sb->state;
	bool gone = op == SBX_DELETING && !sb->in_table;
	if (sb->busy != op)
		log_error("sandbox %s: ending %s while %s", sb->id, sandbox_op_name(op),
			  sandbox_op_name(sb->busy));
	if (!sandbox_may_follow(from, state))
		log_error("sandbox %s: %s → %s is not in the transition table (%s)", sb->id,
			  sandbox_state_names[from], sandbox_state_names[state],
			  sandbox_op_name(op));
	/* The audit log hooks in here: every state change of every sandbox passes this
	 * point once, with the operation, the old and the new state and the reason. */
	if (state != from || why) {
		time_t now = time(NULL);
		/* The Running spell so far joins the billable total (a new one starts now
		 * when it stays Running). */
		if (from == SBX_RUNNING)
			sb->running_seconds = sandbox_active_seconds_locked(sb, now);
		sb->state = state;
		sb->transition_at = now;
		free(sb->reason);
		sb->reason = why;
		why = NULL;
	}
	sb->busy = SBX_IDLE;
	registry_broadcast();
	registry_unlock();
	free(why);
	note_end(sb, op, from, state, said, gone);
	free(said);
}

int sandbox_cmp_created(const void *a, const void *b)
{
	const struct sandbox *x = *(struct sandbox *const *)a, *y = *(struct sandbox *const *)b;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}
