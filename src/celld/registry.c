/* The in-memory table of sandboxes: one mutex (also over every entry's mutable members),
 * one condition variable (signalled when an entry's operation ends). Only O(1) work runs
 * under the lock; what the table holds is decided above it (lifecycle.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"
#include "sandbox.h"
#include "timefmt.h"

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

bool registry_lock_within(int ms)
{
	struct timespec at;
	celld_deadline(ms, &at);
	return pthread_mutex_timedlock(&reg_lock, &at) == 0;
}

void registry_wait(void)
{
	pthread_cond_wait(&reg_cond, &reg_lock);
}

void registry_broadcast(void)
{
	pthread_cond_broadcast(&reg_cond);
}

struct sandbox *registry_find_locked(const char *id)
{
	for (size_t i = 0; i < n_table; i++)
		if (!strcmp(table[i]->id, id))
			return table[i];
	return NULL;
}

struct sandbox *registry_find_name_locked(const char *name)
{
	for (size_t i = 0; i < n_table; i++)
		if (table[i]->name && !strcmp(table[i]->name, name))
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
	struct sandbox *sb = registry_find_locked(id);
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

void registry_count_states(size_t *counts, size_t n)
{
	for (size_t s = 0; s < n; s++)
		counts[s] = 0;
	registry_lock();
	for (size_t i = 0; i < n_table; i++)
		if ((size_t)table[i]->state < n)
			counts[table[i]->state]++;
	registry_unlock();
}

size_t registry_count(void)
{
	registry_lock();
	size_t n = n_table;
	registry_unlock();
	return n;
}

int registry_publish_locked(struct sandbox *sb)
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

bool registry_remove_locked(struct sandbox *sb)
{
	for (size_t i = 0; i < n_table; i++) {
		if (table[i] != sb)
			continue;
		memmove(table + i, table + i + 1, (n_table - i - 1) * sizeof(*table));
		n_table--;
		sb->in_table = false;
		return true;
	}
	return false;
}
