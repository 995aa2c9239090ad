/* The runtime keeps each sandbox's root overlay mount open for as long as the sandbox runs,
 * and lets go of it off the caller's path once the sandbox is dead.
 *
 * Why: when the last reference to an overlay goes, the kernel shuts the filesystem down
 * and syncs its upper filesystem first (all of it: the host filesystem holding the state
 * dir, whatever else is dirty on it). Were the sandbox's mount namespace the last holder,
 * that sync would run inside its PID 1's exit, and a delete waits for that exit: a delete
 * would take as long as flushing the host's dirty data. With the runtime holding a
 * reference, PID 1 exits at once, and the final release (with its sync) happens on a
 * closer thread shortly after the delete has answered. Nothing is lost by deferring it:
 * the sandbox's files are being removed anyway.
 *
 * Entries are keyed by the host pid of the sandbox's PID 1, which cannot be reused while
 * the entry exists: the pid is celld's unreaped child until cell_teardown reaps it, and
 * cell_teardown drops the entry first. Even a mismatch could only cost a deferral, never a
 * mount a live sandbox needs: its own mount namespace holds that. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct held {
	struct held *next;
	pid_t pid;
	int fd;
	struct timespec due; /* when the closer may let go of it */
};

/* A released mount is closed this long after its sandbox died: the sync that comes with
 * the close would otherwise contend for the filesystem's journal with the delete that is
 * still removing the sandbox's directory. */
#define CLOSE_DELAY_NS (20 * 1000 * 1000)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static struct held *table;				   /* mounts of live sandboxes */
static struct held *to_close, **to_close_tail = &to_close; /* oldest first */
static bool closer_running;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;

/* The due times are CLOCK_MONOTONIC: a wall-clock step must not hold a mount for hours. */
static void wake_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
}

static bool due(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *closer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		if (!to_close) {
			pthread_cond_wait(&wake, &lock);
			continue;
		}
		if (!due(&to_close->due)) {
			pthread_cond_timedwait(&wake, &lock, &to_close->due);
			continue;
		}
		struct held *h = to_close;
		to_close = h->next;
		if (!to_close)
			to_close_tail = &to_close;
		pthread_mutex_unlock(&lock);
		close(h->fd); /* the filesystem's shutdown and sync happen here */
		free(h);
		pthread_mutex_lock(&lock);
	}
	return NULL;
}

/* Lock held. False when no closer thread could be started. */
static bool closer_start_locked(void)
{
	if (closer_running)
		return true;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	/* celld's signal handling stays with its main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_once(&wake_once, wake_init);
	pthread_t th;
	closer_running = pthread_create(&th, &attr, closer_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return closer_running;
}

void cell_mount_hold(pid_t pid, int fd)
{
	struct held *h = malloc(sizeof(*h));
	if (!h) {
		close(fd); /* only the deferral is lost */
		return;
	}
	h->pid = pid;
	h->fd = fd;
	pthread_mutex_lock(&lock);
	/* A stale entry for this pid cannot exist (see above), but never keep two. */
	for (struct held **p = &table; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			struct held *old = *p;
			*p = old->next;
			close(old->fd);
			free(old);
			break;
		}
	}
	h->next = table;
	table = h;
	pthread_mutex_unlock(&lock);
}

void cell_mount_release(pid_t pid)
{
	if (pid <= 0)
		return;
	pthread_mutex_lock(&lock);
	struct held *h = NULL;
	for (struct held **p = &table; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			h = *p;
			*p = h->next;
			break;
		}
	}
	if (h && closer_start_locked()) {
		clock_gettime(CLOCK_MONOTONIC, &h->due);
		h->due.tv_nsec += CLOSE_DELAY_NS;
		if (h->due.tv_nsec >= 1000000000) {
			h->due.tv_sec++;
			h->due.tv_nsec -= 1000000000;
		}
		h->next = NULL;
		*to_close_tail = h;
		to_close_tail = &h->next;
		pthread_cond_signal(&wake);
		h = NULL;
	}
	pthread_mutex_unlock(&lock);
	if (h) { /* no closer thread: release it here, slowly but surely */
		close(h->fd);
		free(h);
	}
}
