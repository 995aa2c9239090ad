/* cell-init's event loop: one epoll set, one `struct init_watch` per fd waited on.
 *
 * cell-init serves everything from one thread, which never waits on anything a process in
 * the sandbox controls; a second thread only clones commands (exec.c). Every fd it waits on
 * (listening socket, connections, command pipes, the signalfd, timerfds) is non-blocking and
 * registered here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define init_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct init_watch {
	void (*fn)(struct init_watch *w, uint32_t events);
	int fd;
	bool active; /* registered in epoll; events for inactive watches are dropped */
};

/* Create the epoll set; -errno. */
int init_watch_setup(void);
int init_watch_add(struct init_watch *w, uint32_t events);
int init_watch_mod(struct init_watch *w, uint32_t events);
void init_watch_del(struct init_watch *w);
/* Delete and close w's fd (fd -1 afterwards); nothing when it is closed already. */
void init_watch_close(struct init_watch *w);
/* Watch an open, inactive w for EPOLLIN again (output resumed after a pause). */
void init_watch_resume(struct init_watch *w);
/* Wait for one batch of events and call each active watch's fn; -errno when epoll_wait
 * failed (EINTR is not a failure: it returns 0). */
int init_watch_dispatch(void);
/* Read up to a chunk of what the non-blocking fd holds and drop it (output nobody takes any
 * more): the bytes read, 0 at end of file, -errno (-EAGAIN when empty). */
long init_read_discard(int fd);
