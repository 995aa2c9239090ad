/* The in-memory table of sandboxes: one mutex, one condition variable (signalled when an
 * entry stops being busy), uid slot allocation and session-key dedupe. */
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
/* A slot is in use while its sandbox's state dir exists (CONTRACT: uid ranges). */
static uint64_t slot_used[CELLD_SLOTS / 64];
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
	snprintf(sb->cgroup_rel, sizeof(sb->cgroup_rel), "%s/%s", celld.cgroup_prefix, id);
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

static bool slot_taken(int slot)
{
	return slot_used[slot / 64] >> (slot % 64) & 1;
}

static void slot_set(int slot, bool used)
{
	if (used)
		slot_used[slot / 64] |= 1ull << (slot % 64);
	else
		slot_used[slot / 64] &= ~(1ull << (slot % 64));
}

static int lowest_free_slot(void)
{
	for (unsigned w = 0; w < CELLD_SLOTS / 64; w++)
		if (~slot_used[w])
			return (int)(w * 64 + __builtin_ctzll(~slot_used[w]));
	return -1;
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
	slot_set(sb->slot, true);
	sb->serial = next_serial++;
	sb->in_table = true;
	sandbox_ref(sb); /* the table's reference */
	table[n_table++] = sb;
	return 0;
}

int registry_claim(struct sandbox *sb, bool dedupe, struct sandbox **existing)
{
	*existing = NULL;
	registry_lock();
	struct sandbox *cur;
	while ((cur = find_locked(sb->id))) {
		if (!dedupe) {
			registry_unlock();
			return -EEXIST;
		}
		/* A racing create with the same session key: wait for it to finish, then
		 * answer with its sandbox (or create afresh if it failed and vanished). */
		if (cur->busy == SBX_CREATING || cur->busy == SBX_DELETING) {
			registry_wait();
			continue;
		}
		sandbox_ref(cur);
		*existing = cur;
		registry_unlock();
		return 1;
	}
	int slot = lowest_free_slot();
	if (slot < 0) {
		registry_unlock();
		return -ENOSPC;
	}
	sb->slot = slot;
	sb->uid_base = registry_uid_base(slot);
	sb->busy = SBX_CREATING;
	int r = publish_locked(sb);
	registry_unlock();
	return r;
}

int registry_adopt(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	int r = 0;
	if (sb->slot < 0 || (unsigned)sb->slot >= CELLD_SLOTS || slot_taken(sb->slot))
		r = cell_err(err, EEXIST, "uid slot %d of sandbox %s is invalid or in use",
			     sb->slot, sb->id);
	else if (find_locked(sb->id))
		r = cell_err(err, EEXIST, "sandbox %s is already known", sb->id);
	else if ((r = publish_locked(sb)) < 0)
		cell_err(err, -r, "adopting %s", sb->id);
	registry_unlock();
	return r;
}

void registry_remove_locked(struct sandbox *sb)
{
	for (size_t i = 0; i < n_table; i++) {
		if (table[i] != sb)
			continue;
		memmove(table + i, table + i + 1, (n_table - i - 1) * sizeof(*table));
		n_table--;
		slot_set(sb->slot, false);
		sb->in_table = false;
		sandbox_unref(sb);
		return;
	}
}
