/* The init watcher: every running sandbox's init pidfd in one epoll set, watched by one
 * small thread; readable means init died, and the callback given at start (lifecycle's)
 * is told. The watcher knows nothing above the registry. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/thread.h"
#include "registry.h"
#include "sandbox.h"
#include "watch.h"

static int epfd = -1;
static watch_died_fn on_died;

void watch_add_locked(struct sandbox *sb)
{
	if (sb->watched || sb->pidfd < 0 || sb->state != SBX_RUNNING || epfd < 0)
		return;
	/* The entry's serial, not a pointer: an event that outlives its entry finds nothing. */
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = sb->serial};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, sb->pidfd, &ev) == 0)
		sb->watched = true;
	else
		log_error("watching init of sandbox %s: %s", sb->id, strerror(errno));
}

void watch_remove_locked(struct sandbox *sb)
{
	if (!sb->watched)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, sb->pidfd, NULL);
	sb->watched = false;
}

/* How init ended, without reaping it (the teardown that follows does). Only works for our
 * own children; an adopted init's parent is someone else. */
static void describe_exit(int pidfd, char *buf, size_t size)
{
	siginfo_t si = {0};
	if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
		if (si.si_code == CLD_EXITED)
			snprintf(buf, size, "cell-init exited with status %d", si.si_status);
		else
			snprintf(buf, size, "cell-init was killed by signal %d", si.si_status);
		return;
	}
	snprintf(buf, size, "cell-init exited");
}

static void *watcher(void *arg)
{
	(void)arg;
	struct epoll_event evs[32];
	for (;;) {
		int n = epoll_wait(epfd, evs, CELL_ARRAY_SIZE(evs), -1);
		if (n < 0) {
			if (errno != EINTR)
				log_error("init watcher: %s", strerror(errno));
			continue;
		}
		for (int i = 0; i < n; i++) {
			registry_lock();
			struct sandbox *sb = registry_find_serial_locked(evs[i].data.u64);
			int pidfd = -1;
			if (sb && sb->watched && sandbox_idle_locked(sb)) {
				sandbox_ref(sb);
				watch_remove_locked(sb);
				pidfd = sb->pidfd;
			} else {
				sb = NULL;
			}
			char why[128];
			if (sb)
				describe_exit(pidfd, why, sizeof(why));
			registry_unlock();
			if (!sb)
				continue;
			on_died(sb, why);
			sandbox_unref(sb);
		}
	}
	return NULL;
}

int watch_start(watch_died_fn died, struct cell_error *err)
{
	on_died = died;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return cell_err(err, errno, "epoll_create1");
	int r = cell_thread_detached(watcher, NULL);
	return r < 0 ? cell_err(err, r, "starting the init watcher") : 0;
}
