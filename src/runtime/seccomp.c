/* seccomp (owner: seccomp). */
#include "internal.h"

int cell_child_apply_seccomp(const struct cell_seccomp_prog *prog, int notify_sock,
			     struct cell_child_err *ce)
{
	(void)prog;
	(void)notify_sock;
	(void)ce;
	return 0; /* SECCOMP-TODO */
}
