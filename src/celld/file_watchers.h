/* file_watchers.c: a sandbox's polling watchers (E2B's CreateWatcher, GetWatcherEvents,
 * RemoveWatcher): each an open watch conversation with cell-init kept between calls, named
 * by a random id. The table hangs on the sandbox object (sb->watchers) and is freed with it,
 * so a sandbox's watchers go with it and nothing has to look for the sandboxes that left.
 * Calls nobody above it. */
#pragma once

#include <limits.h>
#include <stdbool.h>

#define FILE_WATCHERS_MAX     256 /* polling watchers, every sandbox together */
#define FILE_WATCHERS_PER_SBX 16  /* polling watchers of one sandbox */
#define FILE_WATCHER_ID_LEN   32

struct file_watcher {
	struct file_watcher *next;
	char id[FILE_WATCHER_ID_LEN + 1];
	int fd;	   /* the watch conversation */
	bool busy; /* taken by a call draining it */
	bool include_entry;
	char path[PATH_MAX]; /* the watched directory */
};

struct file_watchers;

/* An empty table; NULL when out of memory. */
struct file_watchers *file_watchers_new(void);
/* Every watcher's watch closed (cell-init ends them), the table freed. */
void file_watchers_free(struct file_watchers *t);
/* A watcher of the watch fd (taken in every case: closed on failure) of path: 0 with its id
 * in id, -ENOSPC when the sandbox or celld holds as many as it may, -errno otherwise. */
int file_watchers_add(struct file_watchers *t, int fd, const char *path, bool include_entry,
		      char id[FILE_WATCHER_ID_LEN + 1]);
/* The watcher id names, taken out of others' use (busy) until put back; NULL when there is
 * none or another call holds it. */
struct file_watcher *file_watchers_take(struct file_watchers *t, const char *id);
/* Give w back (keep) or drop it from the table, its watch closed. */
void file_watchers_put(struct file_watchers *t, struct file_watcher *w, bool keep);
