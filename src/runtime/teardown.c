/* Ending a sandbox: its PID 1, then whatever is left in its cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/runtime.h"
#include "internal.h"

#define EXIT_WAIT_MS 10000

uint64_t cell_proc_starttime(pid_t pid)
{
	char path[64];
	_cleanup_free_ char *stat = NULL;
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &stat, NULL, NULL) < 0)
		return 0;
	/* comm (field 2) may hold spaces and parentheses: count fields after the last ')'. */
	char *p = strrchr(stat, ')');
	if (!p)
		return 0;
	for (int field = 2; field < 22; field++) { /* p: the space before field+1 */
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p + 1, &end, 10);
	return errno || end == p + 1 ? 0 : v;
}

/* Without the pidfd from spawn (celld restarted), take one on pid and only keep it when the
 * process behind it has the recorded starttime: a recycled pid is never signalled. Opening
 * the pidfd first pins the process; if it died and pid was reused between the two steps,
 * the starttime differs and we let it be. Returns a pidfd, -ESRCH when ours is gone. */
static int pidfd_for(pid_t pid, uint64_t starttime, struct cell_error *err)
{
	if (pid <= 0 || starttime == 0)
		return -ESRCH;
	_cleanup_close_ int fd = pidfd_open(pid, 0);
	if (fd < 0)
		return errno == ESRCH ? -ESRCH : cell_err(err, errno, "pidfd_open(%d)", (int)pid);
	if (cell_proc_starttime(pid) != starttime)
		return -ESRCH;
	return move_fd(fd);
}

/* Wait up to ms for the process behind pidfd to exit: 0 when it did, -ETIMEDOUT. */
static int wait_exit(int pidfd, pid_t pid, long ms, struct cell_error *err)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = ms - ((now.tv_sec - start.tv_sec) * 1000 +
				  (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0)
			return cell_err(err, ETIMEDOUT, "waiting for sandbox init (pid %d) to exit",
					(int)pid);
		struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
		int r = poll(&pfd, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return cell_err(err, errno, "waiting for sandbox init (pid %d)", (int)pid);
	}
}

static int kill_and_wait(int pidfd, pid_t pid, struct cell_error *err)
{
	/* Killing PID 1 of the sandbox's pid namespace takes every process in it along. */
	if (pidfd_send_signal(pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		return cell_err(err, errno, "killing sandbox init (pid %d)", (int)pid);
	int r = wait_exit(pidfd, pid, EXIT_WAIT_MS, err);
	if (r < 0)
		return r;
	/* Dead, not yet reaped: as our unreaped child its pid names nothing else, so the
	 * rootfs held for that pid is this sandbox's. */
	cell_mount_release(pid);
	/* Reap it when it is our child; after a celld restart it is not (ECHILD), and its new
	 * parent reaps it. */
	siginfo_t si;
	if (waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG) < 0 && errno != ECHILD)
		return cell_err(err, errno, "reaping sandbox init (pid %d)", (int)pid);
	return 0;
}

int cell_terminate(pid_t pid, int pidfd, uint64_t starttime, long grace_ms, struct cell_error *err)
{
	_cleanup_close_ int own = -1;
	if (pidfd < 0) {
		own = pidfd_for(pid, starttime, err);
		if (own < 0)
			return own;
		pidfd = own;
	}
	/* From outside its pid namespace, so cell-init knows the request is the host's: no
	 * process of the sandbox can send a signal that arrives so. */
	if (pidfd_send_signal(pidfd, SIGTERM, NULL, 0) < 0)
		return errno == ESRCH
			   ? 0
			   : cell_err(err, errno, "asking sandbox init (pid %d) to end", (int)pid);
	return wait_exit(pidfd, pid, grace_ms, err);
}

int cell_teardown(pid_t pid, int pidfd, uint64_t starttime, const struct cell_cgroup_ops *cg,
		  const char *cgroup_rel, struct cell_error *err)
{
	_cleanup_close_ int own = -1;
	if (pidfd < 0) {
		own = pidfd_for(pid, starttime, err);
		if (own < 0 && own != -ESRCH)
			return own;
		pidfd = own;
	}
	if (pidfd >= 0) {
		int r = kill_and_wait(pidfd, pid, err);
		if (r < 0)
			return r;
	}
	if (!cg || !cgroup_rel)
		return 0;
	/* Anything that got out of the pid namespace's reach (nothing should) dies here. */
	int r = cg->kill_all(cgroup_rel, err);
	if (r < 0)
		return cell_err_wrap(err, "sandbox cgroup: ");
	r = cg->destroy(cgroup_rel, err);
	if (r < 0)
		return cell_err_wrap(err, "sandbox cgroup: ");
	return 0;
}
