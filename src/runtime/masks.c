/* Masked and read-only /proc and /sys paths (owner: hardening). */
#include "internal.h"

int cell_child_mask_paths(struct cell_child_err *ce)
{
	(void)ce;
	return 0; /* HARDENING-TODO */
}
