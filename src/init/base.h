/* What every operation of cell-init stands on: the root it resolves client paths beneath,
 * the stdin of every command, the fd limit commands get back. Set once at start. */
#pragma once

#include <sys/resource.h>

struct init_base {
	int rootfd;		   /* open("/", O_PATH): every client path resolves beneath it */
	int devnull_fd;		   /* stdin of every command */
	struct rlimit nofile_orig; /* RLIMIT_NOFILE restored in commands */
};

extern struct init_base init_base;

/* Open fds 0-2 when missing, raise RLIMIT_NOFILE (remembering the original) and open the
 * root and the null device; -errno. */
int init_base_setup(void);
