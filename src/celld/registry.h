/* registry.c: the table of sandboxes, and the lock over it and over every entry's mutable
 * members (sandbox.h), with one condition variable (signalled whenever an entry's
 * operation ends). A leaf: it never calls up into lifecycle, admission or uid ranges. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox;

void registry_lock(void);
void registry_unlock(void);
/* The lock, unless it is not free within ms (false: not taken; a stuck holder). */
bool registry_lock_within(int ms);
/* Wait on the registry condition (registry lock held). */
void registry_wait(void);
void registry_broadcast(void);

/* A new reference, or NULL. */
struct sandbox *registry_get(const char *id);
/* No reference taken: the registry lock must be held while it is used. */
struct sandbox *registry_find_locked(const char *id);
struct sandbox *registry_find_serial_locked(uint64_t serial);
/* The entry named name (cell.name), whoever owns it; no reference taken. */
struct sandbox *registry_find_name_locked(const char *name);
/* Referenced copy of every entry, oldest first; free with sandbox_unref_all. */
size_t registry_snapshot(struct sandbox ***out);
size_t registry_count(void);
/* How many entries are in each state: counts[state] for state < n (enum sbx_state). */
void registry_count_states(size_t *counts, size_t n);

/* Add sb (its id not in the table: check with registry_find_locked first) with a new
 * serial; the table takes a reference. 0 or -ENOMEM. */
int registry_publish_locked(struct sandbox *sb);
/* Take sb out of the table. The table's reference passes to the caller, who drops it
 * (sandbox_unref) once the lock is released. false when sb was not in the table. */
bool registry_remove_locked(struct sandbox *sb);
