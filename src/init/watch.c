/* cell-init's event loop: the epoll set and dispatch of one batch of events. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "watch.h"

static int epfd = -1;

int init_watch_setup(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	return epfd < 0 ? -errno : 0;
}

int init_watch_add(struct init_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0) {
		int e = errno;
		log_error("epoll add fd %d: %s", w->fd, strerror(e));
		return -e;
	}
	w->active = true;
	return 0;
}

int init_watch_mod(struct init_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0) {
		int e = errno;
		log_error("epoll mod fd %d: %s", w->fd, strerror(e));
		return -e;
	}
	return 0;
}

void init_watch_del(struct init_watch *w)
{
	if (!w->active)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->active = false;
}

int init_watch_dispatch(void)
{
	struct epoll_event evs[64];
	int n = epoll_wait(epfd, evs, (int)CELL_ARRAY_SIZE(evs), -1);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct init_watch *w = evs[i].data.ptr;
		if (w->active)
			w->fn(w, evs[i].events);
	}
	return 0;
}

long init_read_discard(int fd)
{
	static char scratch[CELL_FRAME_CHUNK];
	ssize_t n;
	do
		n = read(fd, scratch, sizeof(scratch));
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

void init_watch_close(struct init_watch *w)
{
	if (w->fd < 0)
		return;
	init_watch_del(w);
	close(w->fd);
	w->fd = -1;
}

void init_watch_resume(struct init_watch *w)
{
	if (w->fd >= 0 && !w->active)
		init_watch_add(w, EPOLLIN);
}
