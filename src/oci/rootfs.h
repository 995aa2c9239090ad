/* rootfs.c: what the engine's root directory is. A plain directory is bound idmapped; an
 * overlay (containerd's and dockerd's snapshotters mount one there) cannot be idmapped
 * (the kernel refuses MOUNT_ATTR_IDMAP on overlayfs), so its layers are read from the
 * mount's options and the runtime builds the container's overlay again from them: lower
 * dirs idmapped, the snapshot's upper and work dirs handed to the container's range. */
#pragma once

#include <stddef.h>

#include "cell/error.h"
#include "cell/runtime.h"

struct oci_rootfs {
	bool overlay;
	char *lowers[CELL_IMAGE_LAYERS_MAX]; /* top first, as lowerdir= lists them */
	size_t n_lowers;
	char *layer_dir;  /* the upper dir's parent, which holds work/ too */
	char *upper_name; /* the upper dir's name in it */
};

/* Look root (absolute) up in /proc/self/mountinfo: 0 with out filled (overlay false for
 * anything but an overlay mounted right there), or -errno naming what cell cannot use
 * (an overlay without an upper dir, a work dir beside another). */
int oci_rootfs_read(const char *root, struct oci_rootfs *out, struct cell_error *err);
void oci_rootfs_clear(struct oci_rootfs *r);
