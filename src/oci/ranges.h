/* ranges.c: a host uid/gid range for each container (the user namespace cell-oci always
 * makes), reserved host-wide as a file /run/cell/oci-uid-ranges/<slot> naming the
 * container's directory (<root>/<id>), whichever engine's --root it is in. celld's
 * sandboxes take their ranges from 0x40000000 on; cell-oci's come from CELL_OCI_UID_FIRST
 * on, so the two never meet. A reservation whose container directory is gone is stale and
 * taken again. */
#pragma once

#include <stdint.h>

#include "cell/error.h"

#define CELL_OCI_UID_FIRST  0x80000000u
#define CELL_OCI_SLOTS	    32767u
#define CELL_OCI_RANGES_DIR "/run/cell/oci-uid-ranges"

/* Reserve a range for the container at root/id (root absolute): its first host id, or
 * -errno. */
int64_t oci_range_reserve(const char *root, const char *id, struct cell_error *err);
/* Give it back (nothing when uid_base is not one of cell-oci's). */
void oci_range_release(uint32_t uid_base);
