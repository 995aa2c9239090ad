/* The sandbox's user namespace: uid/gid maps and a handle on it for idmapped mounts; and
 * user namespaces made only to idmap a volume. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sched.h>
#include <linux/securebits.h>

#include "cell/cleanup.h"

#include "cell/fsutil.h"
#include "internal.h"

/* Maps ids 0..65535 inside to uid_base.. on the host, for uids and gids alike. Written by
 * the parent (host root) while the child waits: only a privileged writer may map a range
 * other than its own uid. Host root (0) is never in the range: the caller checked
 * uid_base >= CELL_UID_RANGE. The pid is our unreaped child, so /proc/<pid> is stable. */
int cell_userns_write_maps(pid_t pid, uint32_t uid_base, struct cell_error *err)
{
	static const char *const maps[] = {"uid_map", "gid_map"};
	char line[64];
	snprintf(line, sizeof(line), "0 %u %u\n", uid_base, CELL_UID_RANGE);
	for (size_t i = 0; i < 2; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, maps[i]);
		int r = cell_write_string(path, line, err);
		if (r < 0)
			return cell_err_wrap(err, "writing the %s: ", maps[i]);
	}
	return 0;
}

/* The kernel charges what a user namespace's processes hold of its per-user pools
 * (inotify instances and watches, pending signals and POSIX timers, mqueue bytes, user
 * namespaces) at each level up to the host, and at the host's level to the namespace's
 * owner: the creator's effective uid. Made by celld as root, every sandbox would draw on
 * host root's share, and one could starve the rest and root's own services. So the thread
 * that clones a sandbox acts as its first host uid for that call: the namespace's owner is
 * then the sandbox's own uid, and each sandbox draws on a share of its own.
 *
 * Only the calling thread changes (raw system calls: glibc's wrappers would change every
 * thread of celld). SECBIT_NO_SETUID_FIXUP keeps its capabilities through the change, and
 * its fsuid stays 0 so that the child still reaches celld's 0700 directories before it
 * becomes the sandbox's root; the child restores the securebits (cell_userns_owner_reset)
 * before it runs anything. A change of euid makes the process non-dumpable; it is made
 * dumpable again as it was when celld started. */
static int dumpable_at_start = -1;
static pthread_once_t dumpable_once = PTHREAD_ONCE_INIT;

static void read_dumpable(void)
{
	dumpable_at_start = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

int cell_userns_owner_begin(uint32_t owner, int *securebits, struct cell_error *err)
{
	pthread_once(&dumpable_once, read_dumpable);
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (bits < 0)
		return cell_err(err, errno, "reading the securebits");
	if (prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
		return cell_err(err, errno, "keeping capabilities across a uid change");
	if (syscall(SYS_setresuid, -1, owner, -1) < 0) {
		int e = errno;
		prctl(PR_SET_SECUREBITS, bits, 0, 0, 0);
		return cell_err(err, e, "acting as uid %u to own the user namespace", owner);
	}
	syscall(SYS_setfsuid, 0);
	*securebits = bits;
	return 0;
}

void cell_userns_owner_end(int securebits)
{
	/* The real and saved uids are still 0: going back cannot fail. */
	syscall(SYS_setresuid, -1, 0, -1);
	prctl(PR_SET_SECUREBITS, securebits, 0, 0, 0);
	if (dumpable_at_start > 0)
		prctl(PR_SET_DUMPABLE, dumpable_at_start, 0, 0, 0);
}

int cell_userns_owner_reset(int securebits)
{
	return prctl(PR_SET_SECUREBITS, securebits, 0, 0, 0) < 0 ? -errno : 0;
}

int cell_userns_open(pid_t pid, struct cell_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	return fd;
}

/* The child's whole life: wait for EOF on the pipe (the parent is done with it, or died),
 * then exit. It runs in a copy of a multi-threaded process: system calls only. */
static _Noreturn void holder_main(int rfd)
{
	char c;
	while (syscall(SYS_read, rfd, &c, 1) < 0 && errno == EINTR)
		;
	syscall(SYS_exit_group, 0);
	__builtin_unreachable();
}

static int write_map(pid_t pid, const char *file, const char *map, struct cell_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int r = cell_write_string(path, map, err);
	return r < 0 ? cell_err_wrap(err, "writing the %s of a volume's id map: ", file) : 0;
}

/* A user namespace exists only while a process (or an fd) holds it: a child is made in a new
 * one, its maps are written, an fd of it is taken, and the child is let go. */
int cell_userns_make(const char *uid_map, const char *gid_map, struct cell_error *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return cell_err(err, errno, "pipe for a volume's id map");
	int pidfd = -1;
	struct clone_args args = {
	    .flags = CLONE_NEWUSER | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd,
	    .exit_signal = SIGCHLD,
	};
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0) {
		close(p[1]);
		holder_main(p[0]);
	}
	int clone_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return cell_err(err, clone_errno, "a user namespace for a volume's id map");
	}
	int r = write_map((pid_t)pid, "uid_map", uid_map, err);
	if (r == 0)
		r = write_map((pid_t)pid, "gid_map", gid_map, err);
	int fd = r == 0 ? cell_userns_open((pid_t)pid, err) : r;
	close(p[1]); /* the child exits */
	siginfo_t si;
	while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	close(pidfd);
	return fd;
}
