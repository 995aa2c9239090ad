/* What every step of the cloned child shares: recording a failure, and reporting it to the
 * parent before the child ends. The steps themselves live in their own files (mount.c,
 * masks.c, mount_cgroup.c, rlimits.c, caps.c, seccomp.c) and spawn.c runs them in order;
 * this file is below all of them. Child rules (internal.h): system calls only. */
#include <errno.h>
#include <unistd.h>

#include "internal.h"

static void append(char *dst, size_t size, size_t *len, const char *s)
{
	while (*s && *len + 1 < size)
		dst[(*len)++] = *s++;
	dst[*len] = '\0';
}

int cell_child_fail(struct cell_child_err *ce, int step, int errnum, const char *what,
		    const char *path)
{
	size_t len = 0;
	if (errnum < 0)
		errnum = -errnum;
	ce->step = step;
	ce->errno_value = errnum ? errnum : EIO;
	append(ce->what, sizeof(ce->what), &len, what);
	if (path) {
		append(ce->what, sizeof(ce->what), &len, " ");
		append(ce->what, sizeof(ce->what), &len, path);
	}
	return -ce->errno_value;
}

void cell_child_exit(int sync_fd, const struct cell_child_err *ce)
{
	const char *p = (const char *)ce;
	for (size_t left = sizeof(*ce); left;) {
		ssize_t n = write(sync_fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		p += n;
		left -= n;
	}
	_exit(1);
}
