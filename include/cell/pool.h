/* The kernel's per-user pools, one unit at a time: what `cell selftest` (its helper
 * cell-escape inside a sandbox, and the host side) and it_hardening's pool_probe take to show
 * that each sandbox draws on a share of its own (man/cell-security.7). Static inline, libc
 * only: the static helpers include it as it is. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* inotify instances (max_user_instances, per owner of the user namespace), POSIX timers
 * (each a preallocated queued signal: RLIMIT_SIGPENDING's count), POSIX message queues of
 * the largest size allowed without privilege (RLIMIT_MSGQUEUE's bytes), terminals from
 * /dev/ptmx (the devpts instance's max=, the host's spare pool). */
enum pool { POOL_INOTIFY, POOL_TIMERS, POOL_MQUEUE, POOL_PTYS, POOL_N };

static const char *const pool_names[POOL_N] = {"inotify", "timers", "mqueue", "ptys"};

/* The pool named name, or POOL_N. */
static inline enum pool pool_named(const char *name)
{
	for (int p = 0; p < POOL_N; p++)
		if (!strcmp(name, pool_names[p]))
			return (enum pool)p;
	return POOL_N;
}

/* Take the i-th unit of pool p, kept until the process ends: 0 or -errno. */
static inline int pool_take(enum pool p, long i)
{
	switch (p) {
	case POOL_INOTIFY:
		return inotify_init1(IN_CLOEXEC) < 0 ? -errno : 0;
	case POOL_TIMERS: {
		timer_t t;
		struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
		return timer_create(CLOCK_MONOTONIC, &ev, &t) < 0 ? -errno : 0;
	}
	case POOL_MQUEUE: {
		char name[64];
		snprintf(name, sizeof(name), "/cell-pool.%d.%ld", (int)getpid(), i);
		struct mq_attr attr = {.mq_maxmsg = 10, .mq_msgsize = 8192};
		mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
		if (q == (mqd_t)-1)
			return -errno;
		mq_unlink(name); /* held by the descriptor alone */
		return 0;
	}
	case POOL_PTYS:
		return open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC) < 0 ? -errno : 0;
	default:
		return -EINVAL;
	}
}

/* Take units of p until refused or max are held, with the file limit raised to its hard
 * limit first (fds are not what should run out): how many, *why the errno that ended it
 * (0 when max was reached). */
static inline long pool_take_all(enum pool p, long max, int *why)
{
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	long n = 0;
	int r = 0;
	while (n < max && (r = pool_take(p, n)) == 0)
		n++;
	*why = -r;
	return n;
}

/* Take one unit of p and give it back at once: 0 or -errno (whether p has room). */
static inline int pool_try(enum pool p)
{
	switch (p) {
	case POOL_INOTIFY:
	case POOL_PTYS: {
		int fd = p == POOL_INOTIFY ? inotify_init1(IN_CLOEXEC)
					   : open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	case POOL_TIMERS: {
		timer_t t;
		struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
		if (timer_create(CLOCK_MONOTONIC, &ev, &t) < 0)
			return -errno;
		timer_delete(t);
		return 0;
	}
	case POOL_MQUEUE: {
		char name[64];
		snprintf(name, sizeof(name), "/cell-pool-try.%d", (int)getpid());
		struct mq_attr attr = {.mq_maxmsg = 1, .mq_msgsize = 16};
		mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
		if (q == (mqd_t)-1)
			return -errno;
		mq_close(q);
		mq_unlink(name);
		return 0;
	}
	default:
		return -EINVAL;
	}
}
