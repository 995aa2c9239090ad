/* A sandbox's table of started processes and bash sessions (proc_table.h). A leaf: its own
 * lock, taken with no other held and holding none. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/id.h"
#include "proc_table.h"

struct proc_entry {
	struct proc_entry *next; /* newest first */
	char sid[CELL_ID_MAX + 1];
	int pid;
	enum proc_api api;
	char *tag;	/* NULL: none */
	json_t *config; /* what it was given */
	uint64_t added; /* t->added when it came */
};

struct shell {
	char id[CELL_ID_MAX + 1];
};

struct proc_table {
	pthread_mutex_t lock;
	struct proc_entry *head;
	size_t n;
	uint64_t added; /* entries ever added: a list taken after mark saw those */
	struct shell shells[PROC_SHELLS_PER_SANDBOX];
	size_t n_shells;
};

/* The bash sessions of every sandbox together, for celld's bound. */
static unsigned shells_total;

struct proc_table *proc_table_new(void)
{
	struct proc_table *t = calloc(1, sizeof(*t));
	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

static void entry_free(struct proc_entry *e)
{
	free(e->tag);
	json_decref(e->config);
	free(e);
}

void proc_table_free(struct proc_table *t)
{
	if (!t)
		return;
	for (struct proc_entry *e = t->head, *next; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	__atomic_sub_fetch(&shells_total, (unsigned)t->n_shells, __ATOMIC_RELAXED);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

uint64_t proc_table_mark(struct proc_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t m = t->added;
	pthread_mutex_unlock(&t->lock);
	return m;
}

/* The oldest entry's link (the table is not empty). */
static struct proc_entry **oldest_locked(struct proc_table *t)
{
	struct proc_entry **pp = &t->head;
	while ((*pp)->next)
		pp = &(*pp)->next;
	return pp;
}

static void unlink_locked(struct proc_table *t, struct proc_entry **pp)
{
	struct proc_entry *e = *pp;
	*pp = e->next;
	t->n--;
	entry_free(e);
}

int proc_table_add(struct proc_table *t, const char *sid, int pid, enum proc_api api,
		   const char *tag, json_t *config)
{
	struct proc_entry *e = calloc(1, sizeof(*e));
	if (!e || !config || (tag && !(e->tag = strdup(tag)))) {
		free(e ? e->tag : NULL);
		free(e);
		json_decref(config);
		return -ENOMEM;
	}
	snprintf(e->sid, sizeof(e->sid), "%s", sid);
	e->pid = pid;
	e->api = api;
	e->config = config;
	pthread_mutex_lock(&t->lock);
	if (t->n >= PROC_TABLE_MAX)
		unlink_locked(t, oldest_locked(t));
	e->added = ++t->added;
	e->next = t->head;
	t->head = e;
	t->n++;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static bool listed(json_t *running, const char *sid)
{
	size_t i;
	json_t *s;
	json_array_foreach(running, i, s)
	{
		if (!strcmp(json_string_value(json_object_get(s, "id")) ?: "", sid))
			return true;
	}
	return false;
}

void proc_table_prune(struct proc_table *t, json_t *running, uint64_t mark)
{
	pthread_mutex_lock(&t->lock);
	for (struct proc_entry **pp = &t->head; *pp;) {
		if ((*pp)->added > mark || listed(running, (*pp)->sid))
			pp = &(*pp)->next;
		else
			unlink_locked(t, pp);
	}
	pthread_mutex_unlock(&t->lock);
}

void proc_table_remove(struct proc_table *t, const char *sid)
{
	pthread_mutex_lock(&t->lock);
	for (struct proc_entry **pp = &t->head; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->sid, sid)) {
			unlink_locked(t, pp);
			break;
		}
	pthread_mutex_unlock(&t->lock);
}

int proc_table_tag_pid(struct proc_table *t, const char *tag)
{
	int pid = -1;
	pthread_mutex_lock(&t->lock);
	for (struct proc_entry *e = t->head; e && pid < 0; e = e->next)
		if (e->tag && !strcmp(e->tag, tag))
			pid = e->pid;
	pthread_mutex_unlock(&t->lock);
	return pid;
}

bool proc_table_get(struct proc_table *t, const char *sid, struct proc_info *out)
{
	memset(out, 0, sizeof(*out));
	bool found = false;
	pthread_mutex_lock(&t->lock);
	for (struct proc_entry *e = t->head; e && !found; e = e->next) {
		if (strcmp(e->sid, sid))
			continue;
		found = true;
		out->pid = e->pid;
		out->api = e->api;
		out->has_tag = e->tag != NULL;
		snprintf(out->tag, sizeof(out->tag), "%s", e->tag ? e->tag : "");
		out->config = json_incref(e->config);
	}
	pthread_mutex_unlock(&t->lock);
	return found;
}

int proc_table_shell_add(struct proc_table *t, const char *id)
{
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	if (t->n_shells >= PROC_SHELLS_PER_SANDBOX)
		rc = -EUSERS;
	else if (__atomic_add_fetch(&shells_total, 1, __ATOMIC_RELAXED) > PROC_SHELLS_MAX) {
		__atomic_sub_fetch(&shells_total, 1, __ATOMIC_RELAXED);
		rc = -ENOSPC;
	} else {
		snprintf(t->shells[t->n_shells++].id, sizeof(t->shells[0].id), "%s", id);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void proc_table_shell_forget(struct proc_table *t, const char *id)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n_shells; i++)
		if (!strcmp(t->shells[i].id, id)) {
			t->shells[i] = t->shells[--t->n_shells];
			__atomic_sub_fetch(&shells_total, 1, __ATOMIC_RELAXED);
			break;
		}
	pthread_mutex_unlock(&t->lock);
}
