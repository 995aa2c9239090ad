/* Deferred frees of cell-init: objects that own watches are freed only after the current
 * batch of epoll events has been dispatched, so an event for an object that died earlier
 * in the same batch finds the watch inactive instead of freed memory. */
#pragma once

#include <stdbool.h>

struct init_deferred {
	struct init_deferred *next;
	void *obj; /* free()d after the current event batch */
};

/* Free obj (which holds d) at the end of the current batch. */
void init_defer_free(struct init_deferred *d, void *obj);
/* Free everything deferred; true when there was something. */
bool init_defer_reap(void);
