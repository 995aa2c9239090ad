/* watch.c: the init watcher, every running sandbox's init pidfd in one epoll set. */
#pragma once

#include "cell/error.h"

struct sandbox;

/* Called on the watcher's thread, registry lock released, with a reference to a sandbox
 * whose init died (no longer watched) and a text saying how. */
typedef void (*watch_died_fn)(struct sandbox *sb, const char *why);

int watch_start(watch_died_fn died, struct cell_error *err);
/* Registry lock held. */
void watch_add_locked(struct sandbox *sb);
void watch_remove_locked(struct sandbox *sb);
