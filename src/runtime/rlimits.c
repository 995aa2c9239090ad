/* Resource limits of the sandbox's processes, set in the child before cell-init starts and
 * inherited by every command (policies/resources/: no core dumps by default). */
#include <errno.h>
#include <sys/resource.h>

#include "internal.h"

int cell_child_set_rlimits(const struct cell_rlimit *rl, size_t n, struct cell_child_err *ce)
{
	for (size_t i = 0; i < n; i++) {
		struct rlimit lim = {.rlim_cur = rl[i].soft, .rlim_max = rl[i].hard};
		if (setrlimit(rl[i].resource, &lim) < 0)
			return cell_child_fail(ce, CELL_STEP_RLIMITS, errno, "setrlimit", NULL);
	}
	return 0;
}
