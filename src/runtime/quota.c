/* Disk quota on a sandbox's writable layer: which way (project quota or loop image), the
 * project-quota way itself, release and usage. See include/cell/quota.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/quota.h"
#include "cell/runtime.h"
#include "internal.h"

#define LAYERS_NAME "layers"
#define IMAGE_NAME  "disk.img"

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

const char *cell_quota_kind_name(enum cell_quota_kind kind)
{
	switch (kind) {
	case CELL_QUOTA_PROJECT:
		return "project";
	case CELL_QUOTA_LOOP:
		return "loop";
	default:
		return "none";
	}
}

/* quotactl on the filesystem of fd (a real fd: quotactl_fd refuses O_PATH). */
static int quotactl_on(int fd, int cmd, uint32_t id, void *addr)
{
	return syscall(SYS_quotactl_fd, fd, QCMD(cmd, PRJQUOTA), id, addr) < 0 ? -errno : 0;
}

/* Does the filesystem of fd account and enforce project quotas? */
static bool project_enforced(int fd)
{
	struct fs_quota_statv sv;
	memset(&sv, 0, sizeof(sv));
	sv.qs_version = FS_QSTATV_VERSION1;
	return quotactl_on(fd, Q_XGETQSTATV, 0, &sv) == 0 &&
	       (sv.qs_flags & (FS_QUOTA_PDQ_ACCT | FS_QUOTA_PDQ_ENFD)) ==
		   (FS_QUOTA_PDQ_ACCT | FS_QUOTA_PDQ_ENFD);
}

static int set_limit(int fd, uint32_t id, uint64_t bytes)
{
	struct if_dqblk q;
	memset(&q, 0, sizeof(q));
	q.dqb_bhardlimit = (bytes + QIF_DQBLKSIZE - 1) / QIF_DQBLKSIZE; /* 0: no limit */
	q.dqb_valid = QIF_BLIMITS;
	return quotactl_on(fd, Q_SETQUOTA, id, &q);
}

/* <dir>/layers with the project id (inherited by everything made in it) and its limit. */
static int project_prepare(int dirfd, const struct cell_quota_req *req, struct cell_quota *q,
			   struct cell_error *err)
{
	if (mkdirat(dirfd, LAYERS_NAME, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s/" LAYERS_NAME, req->dir);
	_cleanup_close_ int fd =
	    openat(dirfd, LAYERS_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/" LAYERS_NAME, req->dir);
	struct fsxattr fa;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
		return cell_err(err, errno, "reading attributes of %s/" LAYERS_NAME, req->dir);
	fa.fsx_projid = req->project_id;
	fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0)
		return cell_err(err, errno, "setting project id %" PRIu32 " on %s/" LAYERS_NAME,
				req->project_id, req->dir);
	int r = set_limit(fd, req->project_id, req->bytes);
	if (r < 0)
		return cell_err(err, -r, "setting the quota of project %" PRIu32, req->project_id);
	q->kind = CELL_QUOTA_PROJECT;
	snprintf(q->layer_dir, sizeof(q->layer_dir), "%s/" LAYERS_NAME, req->dir);
	return 0;
}

static int loop_prepare(int dirfd, const struct cell_quota_req *req, struct cell_quota *q,
			struct cell_error *err)
{
	_cleanup_close_ int mnt = cell_loop_mount_image(dirfd, req->dir, req->templates_dir,
							req->bytes, req->shared, err);
	if (mnt < 0)
		return mnt;
	/* Detached: the runtime's overlay (overlay.c) takes the layer from this fd, on every
	 * kernel, without attaching anything in the host's mount namespace. */
	q->kind = CELL_QUOTA_LOOP;
	snprintf(q->layer_dir, sizeof(q->layer_dir), "/proc/self/fd/%d", mnt);
	q->mount_fd = move_fd(mnt);
	return 0;
}

int cell_quota_prepare(const struct cell_quota_req *req, struct cell_quota *q,
		       struct cell_error *err)
{
	q->kind = CELL_QUOTA_NONE;
	q->mount_fd = -1;
	q->layer_dir[0] = '\0';
	if (!req->dir || req->dir[0] != '/')
		return cell_err(err, EINVAL, "quota: sandbox dir must be an absolute path");
	if (strlen(req->dir) + sizeof("/" LAYERS_NAME) > sizeof(q->layer_dir))
		return cell_err(err, ENAMETOOLONG, "quota: sandbox dir %s", req->dir);
	if (!req->bytes)
		return 0;
	_cleanup_close_ int dirfd = open(req->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return cell_err(err, errno, "opening %s", req->dir);
	/* A sandbox started before keeps its way (its files are in it). */
	struct stat st;
	bool has_image = fstatat(dirfd, IMAGE_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
	bool has_layers = fstatat(dirfd, LAYERS_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!has_image && (has_layers || project_enforced(dirfd)))
		return project_prepare(dirfd, req, q, err);
	return loop_prepare(dirfd, req, q, err);
}

void cell_quota_close(struct cell_quota *q)
{
	if (q->mount_fd >= 0)
		close(q->mount_fd);
	q->mount_fd = -1;
}

int cell_quota_release(const char *dir, struct cell_error *err)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/" LAYERS_NAME, dir) >= (int)sizeof(path))
		return cell_err(err, ENAMETOOLONG, "quota: sandbox dir %s", dir);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR
			   ? 0
			   : cell_err(err, errno, "opening %s", path);
	struct fsxattr fa;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0 || !(fa.fsx_xflags & FS_XFLAG_PROJINHERIT) ||
	    !fa.fsx_projid)
		return 0;
	/* The id is the sandbox's uid_base: the next sandbox on that slot sets its own
	 * limit, but an id without a sandbox should not keep one. */
	int r = set_limit(fd, fa.fsx_projid, 0);
	if (r < 0 && r != -ESRCH && r != -ENOSYS && r != -ENOTSUP)
		return cell_err(err, -r, "clearing the quota of project %" PRIu32 " (%s)",
				fa.fsx_projid, path);
	return 0;
}

/* ---- usage ---- */

static int project_usage(int fd, struct cell_quota_usage *out, struct cell_error *err)
{
	struct fsxattr fa;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
		return cell_err(err, errno, "reading the project id of the layers");
	struct if_dqblk q;
	memset(&q, 0, sizeof(q));
	int r = quotactl_on(fd, Q_GETQUOTA, fa.fsx_projid, &q);
	if (r < 0)
		return cell_err(err, -r, "reading the quota of project %" PRIu32, fa.fsx_projid);
	out->kind = CELL_QUOTA_PROJECT;
	out->limit_bytes = q.dqb_bhardlimit * QIF_DQBLKSIZE;
	out->used_bytes = q.dqb_curspace;
	out->avail_bytes =
	    out->limit_bytes > out->used_bytes ? out->limit_bytes - out->used_bytes : 0;
	return 0;
}

static void statfs_usage(const struct statfs *sf, struct cell_quota_usage *out)
{
	uint64_t bs = (uint64_t)sf->f_bsize;
	out->used_bytes = (uint64_t)(sf->f_blocks - sf->f_bfree) * bs;
	out->avail_bytes = (uint64_t)sf->f_bavail * bs;
}

/* The live filesystem of a running sandbox, through its init's root (the overlay, whose
 * statfs is its upper filesystem's). false when init is not that process any more. */
static bool live_statfs(pid_t pid, uint64_t starttime, struct statfs *sf)
{
	char root[64];
	if (pid <= 0 || !starttime)
		return false;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	return statfs(root, sf) == 0 && sf->f_type == OVERLAYFS_SUPER_MAGIC &&
	       cell_proc_starttime(pid) == starttime; /* checked after: a recycled pid lies */
}

int cell_quota_usage(const char *dir, pid_t pid, uint64_t starttime, struct cell_quota_usage *out,
		     struct cell_error *err)
{
	_cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		memset(out, 0, sizeof(*out));
		return cell_err(err, errno, "opening %s", dir);
	}
	int r = cell_quota_usage_at(dirfd, pid, starttime, out, err);
	if (r < 0 && err)
		cell_err_wrap(err, "%s: ", dir);
	return r;
}

int cell_quota_usage_at(int dirfd, pid_t pid, uint64_t starttime, struct cell_quota_usage *out,
			struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	struct stat st;
	struct statfs sf;
	if (fstatat(dirfd, IMAGE_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		out->kind = CELL_QUOTA_LOOP;
		out->limit_bytes = (uint64_t)st.st_size;
		/* Measured through the running sandbox, else by the image's blocks. */
		if (live_statfs(pid, starttime, &sf)) {
			statfs_usage(&sf, out);
		} else {
			out->used_bytes = (uint64_t)st.st_blocks * 512;
		}
		return 0;
	}
	_cleanup_close_ int layers =
	    openat(dirfd, LAYERS_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layers >= 0)
		return project_usage(layers, out, err);
	if (errno != ENOENT)
		return cell_err(err, errno, "opening " LAYERS_NAME);
	return 0; /* no quota */
}
