/* sandbox_select.c: the sandboxes a list shows, chosen once for every API. A front says
 * which match (its filters, its client's tenancy, a page token) and how many it wants
 * after how many; the order (creation, oldest or newest first), the look at each entry
 * under the registry lock and the references are here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sandbox.h"

/* Whether sb belongs in the list: called with the registry lock held (sb's mutable members
 * are current), doing O(1) work. */
typedef bool sandbox_match_locked(const struct sandbox *sb, void *cls);

struct sandbox_page {
	struct sandbox **v; /* the page, in order, each referenced (sandbox_page_free) */
	size_t n;
	size_t total; /* every sandbox that matched */
};

/* The matches in creation order (desc: newest first), the page of at most limit after the
 * first skip of them. 0, or -ENOMEM. */
int sandbox_select(sandbox_match_locked *match, void *cls, bool desc, size_t skip, size_t limit,
		   struct sandbox_page *page);
void sandbox_page_free(struct sandbox_page *page);
