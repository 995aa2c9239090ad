/* A sandbox's polling watchers (file_watchers.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "file_watchers.h"

struct file_watchers {
	pthread_mutex_t lock;
	struct file_watcher *list;
	unsigned n;
};

static unsigned watchers_all; /* atomic: every table's watchers together */

static void watcher_free(struct file_watcher *w)
{
	close(w->fd);
	free(w);
	__atomic_sub_fetch(&watchers_all, 1, __ATOMIC_RELAXED);
}

struct file_watchers *file_watchers_new(void)
{
	struct file_watchers *t = calloc(1, sizeof(*t));
	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void file_watchers_free(struct file_watchers *t)
{
	if (!t)
		return;
	while (t->list) {
		struct file_watcher *w = t->list;
		t->list = w->next;
		watcher_free(w);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* A place among every sandbox's watchers: false when celld holds FILE_WATCHERS_MAX. */
static bool reserve(void)
{
	if (__atomic_add_fetch(&watchers_all, 1, __ATOMIC_RELAXED) <= FILE_WATCHERS_MAX)
		return true;
	__atomic_sub_fetch(&watchers_all, 1, __ATOMIC_RELAXED);
	return false;
}

int file_watchers_add(struct file_watchers *t, int fd, const char *path, bool include_entry,
		      char id[FILE_WATCHER_ID_LEN + 1])
{
	struct file_watcher *w = calloc(1, sizeof(*w));
	uint8_t rnd[FILE_WATCHER_ID_LEN / 2];
	if (!w || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		free(w);
		close(fd);
		return -ENOMEM;
	}
	if (!reserve()) {
		free(w);
		close(fd);
		return -ENOSPC;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(w->id + 2 * i, 3, "%02x", rnd[i]);
	w->fd = fd;
	w->include_entry = include_entry;
	snprintf(w->path, sizeof(w->path), "%s", path);
	pthread_mutex_lock(&t->lock);
	bool room = t->n < FILE_WATCHERS_PER_SBX;
	if (room) {
		w->next = t->list;
		t->list = w;
		t->n++;
	}
	pthread_mutex_unlock(&t->lock);
	if (!room) {
		watcher_free(w);
		return -ENOSPC;
	}
	memcpy(id, w->id, sizeof(w->id));
	return 0;
}

struct file_watcher *file_watchers_take(struct file_watchers *t, const char *id)
{
	pthread_mutex_lock(&t->lock);
	struct file_watcher *w = t->list;
	while (w && strcmp(w->id, id))
		w = w->next;
	if (w && w->busy)
		w = NULL;
	if (w)
		w->busy = true;
	pthread_mutex_unlock(&t->lock);
	return w;
}

void file_watchers_put(struct file_watchers *t, struct file_watcher *w, bool keep)
{
	pthread_mutex_lock(&t->lock);
	w->busy = false;
	if (!keep)
		for (struct file_watcher **p = &t->list; *p; p = &(*p)->next)
			if (*p == w) {
				*p = w->next;
				t->n--;
				break;
			}
	pthread_mutex_unlock(&t->lock);
	if (!keep)
		watcher_free(w);
}
