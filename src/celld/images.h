/* images.c: local images, <images>/<name>/rootfs */
#pragma once

#include <stddef.h>

#include "cell/error.h"

/* uri names a local image; writes <images>/<name>/rootfs into buf. -ENOENT (not there)
 * or -EINVAL (not a valid name), with err naming image.uri. */
int image_resolve(const char *uri, char *buf, size_t size, struct cell_error *err);
