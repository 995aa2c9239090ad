/* Work that needs a detached mount attached, done where nobody else sees it.
 *
 * Kernels before 6.15 refuse some uses of a mount that is not in the caller's mount
 * namespace: overlayfs takes no detached layer ("failed to clone lowerpath"), and
 * open_tree(OPEN_TREE_CLONE) copies no subtree of a detached mount. Such work runs on a
 * short-lived thread in a private copy of the mount namespace, on a scratch tmpfs that
 * only it sees: it attaches what it needs there, makes its (detached) result, and exits,
 * and its namespace, with every attachment, goes with it. Nothing is attached in the
 * host's mount namespace. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "internal.h"

struct private_job {
	const char *scratch;
	cell_private_fn fn;
	void *arg;
	int result; /* fn's */
	struct cell_error err;
};

static int private_run(struct private_job *job)
{
	struct cell_error *err = &job->err;
	/* A copy of the host's mount table that nothing propagates out of. */
	if (unshare(CLONE_NEWNS) < 0)
		return cell_err(err, errno, "private mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return cell_err(err, errno, "making the private mount namespace private");
	_cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return cell_err(err, errno, "scratch tmpfs");
	_cleanup_close_ int tmp = fsmount(fs, FSMOUNT_CLOEXEC, 0);
	if (tmp < 0)
		return cell_err(err, errno, "scratch tmpfs");
	if (move_mount(tmp, "", AT_FDCWD, job->scratch, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return cell_err(err, errno, "attaching the scratch tmpfs on %s", job->scratch);
	_cleanup_close_ int scratch = open(job->scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (scratch < 0)
		return cell_err(err, errno, "opening %s", job->scratch);
	return job->fn(scratch, job->arg, err);
}

static void *private_thread(void *arg)
{
	struct private_job *job = arg;
	job->result = private_run(job);
	return NULL; /* the thread's mount namespace, and every attachment, ends here */
}

int cell_in_private_mount_ns(const char *scratch, cell_private_fn fn, void *arg,
			     struct cell_error *err)
{
	struct private_job job = {.scratch = scratch, .fn = fn, .arg = arg};
	pthread_t th;
	int r = pthread_create(&th, NULL, private_thread, &job);
	if (r != 0)
		return cell_err(err, r, "thread for a private mount namespace");
	pthread_join(th, NULL);
	if (job.result < 0 && err)
		*err = job.err;
	return job.result;
}

int cell_private_attach(int fd, int scratch, const char *name)
{
	if (mkdirat(scratch, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	return move_mount(fd, "", scratch, name, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
}
