/* The sandboxes a list shows (sandbox_select.h). */
#include "sandbox_select.h"

#include <errno.h>
#include <stdlib.h>

#include "registry.h"

static int by_creation_desc(const void *a, const void *b)
{
	return sandbox_cmp_created(b, a);
}

int sandbox_select(sandbox_match_locked *match, void *cls, bool desc, size_t skip, size_t limit,
		   struct sandbox_page *page)
{
	*page = (struct sandbox_page){0};
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	if (!v)
		return -ENOMEM;
	qsort(v, n, sizeof(*v), desc ? by_creation_desc : sandbox_cmp_created);
	registry_lock();
	for (size_t i = 0; i < n; i++) {
		if (!match(v[i], cls))
			continue;
		if (page->total >= skip && page->n < limit) {
			/* The page, in order, at the front of v: its references move with it. */
			struct sandbox *t = v[page->n];
			v[page->n++] = v[i];
			v[i] = t;
		}
		page->total++;
	}
	registry_unlock();
	for (size_t i = page->n; i < n; i++)
		sandbox_unref(v[i]);
	page->v = v;
	return 0;
}

void sandbox_page_free(struct sandbox_page *page)
{
	sandbox_unref_all(page->v, page->n);
	*page = (struct sandbox_page){0};
}
