/* image_lookup.c: whether a path shows in an image's merged view, read from its lower dirs
 * as overlayfs would merge them */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "cell/error.h"

/* Whether rel (relative, '/'-separated, no '.' or '..') shows in the image whose lower
 * dirs are layers (paths, top first), or rootfs alone when layers is NULL or empty: 1 when
 * an entry is there (or a symlink stands on the way to it, which is left to the image), 0
 * when no layer has it or a whiteout, a file or an opaque directory above hides it.
 * Read fd-relative, one component at a time, never following a link. -errno with err
 * naming the layer when one cannot be read. */
int image_lookup(json_t *layers, const char *rootfs, const char *rel, struct cell_error *err);
/* Whether the directory fd is opaque in overlayfs' format (trusted.overlay.opaque "y"): the
 * layers below it show nothing of it. */
bool layer_dir_opaque(int fd);
