/* The sandbox's cgroup, read-only inside (owner: quotas). */
#include "internal.h"

int cell_child_mount_cgroup(const struct cell_cgroup_ops *cg, int rootfd, struct cell_child_err *ce)
{
	(void)cg;
	(void)rootfd;
	(void)ce;
	return 0; /* QUOTA-TODO */
}
