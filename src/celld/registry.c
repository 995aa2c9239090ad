/* The in-memory table of sandboxes: one mutex, one condition variable (signalled when an
 * entry stops being busy), session-key dedupe, and each entry's host-wide uid range
 * reservation (uidrange.c), held from claim or adoption until the entry is removed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "celld.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct sandbox **table;
static size_t n_table, cap_table;
static uint64_t next_serial = 1;

void registry_lock(void)
{
	pthread_mutex_lock(&reg_lock);
}

void registry_unlock(void)
{
	pthread_mutex_unlock(&reg_lock);
}

void registry_wait(void)
{
	pthread_cond_wait(&reg_cond, &reg_lock);
}

void registry_broadcast(void)
{
	pthread_cond_broadcast(&reg_cond);
}

uint32_t registry_uid_base(int slot)
{
	return CELLD_UID_FIRST + (uint32_t)slot * CELL_UID_RANGE;
}

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
	sb->metadata = json_object();
	if (!sb->cmds || !sb->metadata) {
		cmd_table_free(sb->cmds);
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
	sb->created_at = sb->transition_at = time(NULL);
	return sb;
}

void sandbox_ref(struct sandbox *sb)
{
	__atomic_add_fetch(&sb->refs, 1, __ATOMIC_RELAXED);
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
	cmd_table_free(sb->cmds);
	pthread_mutex_destroy(&sb->store_lock);
	pthread_mutex_destroy(&sb->meta_lock);
	free(sb->image);
	free(sb->session_key);
	free(sb->reason);
	free(sb->dir);
	free(sb);
}

static const char *const state_names[] = {
    [SBX_PENDING] = "Pending", [SBX_RUNNING] = "Running", [SBX_PAUSED] = "Paused",
    [SBX_STOPPED] = "Stopped", [SBX_FAILED] = "Failed",
};

const char *sandbox_state_name(enum sbx_state state)
{
	return state_names[state];
}

int sandbox_state_parse(const char *name, enum sbx_state *out)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(state_names); i++) {
		if (name && !strcasecmp(name, state_names[i])) {
			*out = (enum sbx_state)i;
			return 0;
		}
	}
	return -EINVAL;
}

void sandbox_set_state_locked(struct sandbox *sb, enum sbx_state state, const char *reason)
{
	sb->state = state;
	sb->transition_at = time(NULL);
	free(sb->reason);
	sb->reason = reason ? strdup(reason) : NULL;
}

static struct sandbox *find_locked(const char *id)
{
	for (size_t i = 0; i < n_table; i++)
		if (!strcmp(table[i]->id, id))
			return table[i];
	return NULL;
}

struct sandbox *registry_find_serial_locked(uint64_t serial)
{
	for (size_t i = 0; i < n_table; i++)
		if (table[i]->serial == serial)
			return table[i];
	return NULL;
}

struct sandbox *registry_get(const char *id)
{
	registry_lock();
	struct sandbox *sb = find_locked(id);
	if (sb)
		sandbox_ref(sb);
	registry_unlock();
	return sb;
}

size_t registry_snapshot(struct sandbox ***out)
{
	registry_lock();
	struct sandbox **v = calloc(n_table ? n_table : 1, sizeof(*v));
	size_t n = 0;
	if (v) {
		for (; n < n_table; n++) {
			v[n] = table[n];
			sandbox_ref(v[n]);
		}
	}
	registry_unlock();
	*out = v;
	return n;
}

void registry_put_all(struct sandbox **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_unref(v[i]);
	free(v);
}

size_t registry_count(void)
{
	registry_lock();
	size_t n = n_table;
	registry_unlock();
	return n;
}

static int publish_locked(struct sandbox *sb)
{
	if (n_table == cap_table) {
		size_t cap = cap_table ? cap_table * 2 : 64;
		struct sandbox **nt = realloc(table, cap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		table = nt;
		cap_table = cap;
	}
	sb->serial = next_serial++;
	sb->in_table = true;
	sandbox_ref(sb); /* the table's reference */
	table[n_table++] = sb;
	return 0;
}

/* An entry with the same id is there: -EEXIST, or with a session key 1 and *existing once it
 * is no longer being created or deleted — only when it was created with that same key: the
 * id is 64 bits of the key's hash, and two keys that share them (or a random id that equals
 * one) must never hand one session another's sandbox (-EADDRINUSE). -EAGAIN when there is
 * none (registry lock held). */
static int find_existing_locked(const char *id, const char *session_key, struct sandbox **existing)
{
	struct sandbox *cur;
	while ((cur = find_locked(id))) {
		if (!session_key)
			return -EEXIST;
		if (!cur->session_key || strcmp(cur->session_key, session_key))
			return -EADDRINUSE;
		/* A racing create with the same session key: wait for it to finish, then
		 * answer with its sandbox (or create afresh if it failed and vanished). */
		if (cur->busy == SBX_CREATING || cur->busy == SBX_DELETING) {
			registry_wait();
			continue;
		}
		sandbox_ref(cur);
		*existing = cur;
		return 1;
	}
	return -EAGAIN;
}

int registry_claim(struct sandbox *sb, struct sandbox **existing, struct cell_error *err)
{
	*existing = NULL;
	int slot = -1;
	for (;;) {
		registry_lock();
		int r = find_existing_locked(sb->id, sb->session_key, existing);
		if (r == -EAGAIN && slot >= 0) {
			sb->slot = slot;
			sb->uid_base = registry_uid_base(slot);
			sb->busy = SBX_CREATING;
			r = publish_locked(sb);
			registry_unlock();
			if (r < 0) {
				admission_put(sb->owner, ADM_SANDBOXES);
				uidrange_release(sb->id, slot);
				sb->slot = -1;
			}
			return r;
		}
		registry_unlock();
		if (r != -EAGAIN) {
			/* Someone else published the id while we reserved (a create-or-resume
			 * that finds its sandbox is not a new one: not counted). */
			if (slot >= 0) {
				admission_put(sb->owner, ADM_SANDBOXES);
				uidrange_release(sb->id, slot);
			}
			return r;
		}
		/* A new sandbox: counted against its owner's quota before a uid range is
		 * reserved for it, so a create over the quota costs nothing. */
		if ((r = admission_take(sb->owner, ADM_SANDBOXES, false, err)) < 0)
			return r;
		/* Reserved with the registry lock released: it may wait on another celld. */
		struct cell_error rerr = {0};
		r = uidrange_reserve(sb->id, &slot, &rerr);
		if (r < 0) {
			admission_put(sb->owner, ADM_SANDBOXES);
			if (r != -ENOSPC)
				log_error("sandbox %s: reserving a uid range: %s", sb->id,
					  rerr.msg);
			return r;
		}
	}
}

/* The range could not be re-reserved: the sandbox must not run in a range that someone
 * else may hold, so its processes go and it stays listed as Failed (its files remain until
 * it is deleted). sb is not yet published. */
static void fail_unreserved(struct sandbox *sb, const char *why)
{
	struct cell_error err = {0};
	if (sb->pid > 0 || sb->pidfd >= 0 || sb->state == SBX_RUNNING || sb->state == SBX_PAUSED) {
		if (cell_teardown(sb->pid, sb->pidfd, sb->starttime, celld.cgroup, sb->cgroup_rel,
				  &err) < 0)
			log_error("sandbox %s: stopping it: %s", sb->id, err.msg);
	}
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sb->pidfd = -1;
	sb->pid = 0;
	sb->starttime = 0;
	char reason[CELL_ERROR_MSG_MAX + 64];
	snprintf(reason, sizeof(reason), "uid range not reserved: %s", why);
	registry_lock();
	sandbox_set_state_locked(sb, SBX_FAILED, reason);
	registry_unlock();
}

int registry_adopt(struct sandbox *sb, struct cell_error *err)
{
	if (sb->slot < 0 || (unsigned)sb->slot >= CELLD_SLOTS)
		return cell_err(err, EINVAL, "uid slot %d of sandbox %s is invalid", sb->slot,
				sb->id);
	registry_lock();
	bool known = find_locked(sb->id) != NULL;
	registry_unlock();
	if (known)
		return cell_err(err, EEXIST, "sandbox %s is already known", sb->id);
	struct cell_error rerr = {0};
	int ar = uidrange_adopt(sb->id, sb->slot, &rerr);
	if (ar == -EALREADY)
		return celld_fail(err, EALREADY, "%s", rerr.msg);
	if (ar < 0) {
		log_error("sandbox %s: %s; marking it Failed rather than sharing the range", sb->id,
			  rerr.msg);
		fail_unreserved(sb, rerr.msg);
	}
	registry_lock();
	int r = find_locked(sb->id) ? -EEXIST : publish_locked(sb);
	if (r == 0) /* it exists already: counted whatever the quota */
		admission_take(sb->owner, ADM_SANDBOXES, true, NULL);
	registry_unlock();
	if (r < 0) {
		uidrange_release(sb->id, sb->slot);
		return cell_err(err, -r, "adopting %s", sb->id);
	}
	return 0;
}

void registry_remove_locked(struct sandbox *sb)
{
	for (size_t i = 0; i < n_table; i++) {
		if (table[i] != sb)
			continue;
		memmove(table + i, table + i + 1, (n_table - i - 1) * sizeof(*table));
		n_table--;
		/* Its state dir is gone: the range is free for any celld again. */
		uidrange_release(sb->id, sb->slot);
		admission_put(sb->owner, ADM_SANDBOXES);
		sb->in_table = false;
		sandbox_unref(sb);
		return;
	}
}
