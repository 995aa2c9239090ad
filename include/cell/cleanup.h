/* Scope-bound cleanup helpers (GCC/Clang `cleanup` attribute).
 *
 * fds start at -1; ownership moves out of a scope with steal_ptr()/move_fd(). */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cell_freep(void *p)
{
	free(*(void **)p);
}

static inline void cell_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
	*fd = -1;
}

static inline void cell_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
	*f = NULL;
}

static inline void cell_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
	*d = NULL;
}

#define _cleanup_free_	   __attribute__((cleanup(cell_freep)))
#define _cleanup_close_	   __attribute__((cleanup(cell_closep)))
#define _cleanup_fclose_   __attribute__((cleanup(cell_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(cell_closedirp)))

#define steal_ptr(p)                                                                               \
	({                                                                                         \
		__typeof__(p) _stolen = (p);                                                       \
		(p) = NULL;                                                                        \
		_stolen;                                                                           \
	})

#define move_fd(fd)                                                                                \
	({                                                                                         \
		int _moved = (fd);                                                                 \
		(fd) = -1;                                                                         \
		_moved;                                                                            \
	})

#define CELL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
