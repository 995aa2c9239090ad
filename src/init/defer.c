/* Deferred frees of cell-init (see defer.h). */
#include <stdlib.h>

#include "defer.h"

static struct init_deferred *graveyard;

void init_defer_free(struct init_deferred *d, void *obj)
{
	d->obj = obj;
	d->next = graveyard;
	graveyard = d;
}

bool init_defer_reap(void)
{
	bool any = graveyard != NULL;
	while (graveyard) {
		struct init_deferred *d = graveyard;
		graveyard = d->next;
		free(d->obj); /* d lives inside obj */
	}
	return any;
}
