/* Capabilities and no_new_privs of the sandbox (owner: hardening). */
#include "internal.h"

int cell_child_drop_privileges(struct cell_child_err *ce)
{
	(void)ce;
	return 0; /* HARDENING-TODO */
}
