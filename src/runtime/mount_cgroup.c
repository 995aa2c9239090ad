/* The sandbox's own cgroup, read-only at /sys/fs/cgroup inside.
 *
 * Runtimes size themselves from cgroup files (a JVM's heap from memory.max or
 * memory.limit_in_bytes, Node and Go from cpu.max / cpu.cfs_quota_us, nproc): without this
 * they would see the host's. The child has joined its cgroups and unshared its cgroup
 * namespace, so each cgroup filesystem mounted here is rooted at the sandbox's own cgroup
 * and shows nothing of the host's tree. Every mount is read-only (MOUNT_ATTR_RDONLY): root
 * inside must not raise its own limits, thaw itself or write release_agent (the v1 escape of
 * CVE-2022-0492; a cgroupns mount does not show the root's release_agent anyway, and a
 * read-only mount makes every file unwritable). nosuid, nodev, noexec as for the rest of
 * /sys.
 *
 * v2 host: one cgroup2 mount. Hybrid host: a tmpfs with one mount per v1 hierarchy in the
 * layout the v1 backend read at start (cpu, cpuacct, memory, pids, blkio, freezer) plus
 * the unified cgroup2, and the host's compatibility symlinks; then the tmpfs itself goes
 * read-only. Each backend's mount_inside calls one of the two. Runs in the child
 * (internal.h rules: system calls only). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cgroup_fs.h"
#include "internal.h"

#define CG_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

static const char target[] = "/sys/fs/cgroup";

static int fail(struct cell_child_err *ce, int errnum, const char *what)
{
	return cell_child_fail(ce, CELL_STEP_CGROUPFS, errnum, what, target);
}

/* A new instance of type (flags: its options) attached on dfd, or on dfd/name. */
static int mount_one(int dfd, const char *name, const char *type, const char (*flags)[16],
		     size_t n_flags, unsigned attrs, struct cell_child_err *ce)
{
	_cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(ce, errno, type);
	for (size_t i = 0; i < n_flags; i++)
		if (fsconfig(fs, FSCONFIG_SET_FLAG, flags[i], NULL, 0) < 0)
			return fail(ce, errno, flags[i]);
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fail(ce, errno, type);
	_cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
	if (mnt < 0)
		return fail(ce, errno, type);
	if (move_mount(mnt, "", dfd, name ? name : "",
		       MOVE_MOUNT_F_EMPTY_PATH | (name ? 0 : MOVE_MOUNT_T_EMPTY_PATH)) < 0)
		return fail(ce, errno, "mounting cgroup filesystem on");
	return 0;
}

/* v1 hierarchies under a tmpfs, the tmpfs read-only at the end. */
static int mount_hybrid(const struct cell_cg_layout *l, int dfd, struct cell_child_err *ce)
{
	_cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "size", "64k", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fail(ce, errno, "tmpfs");
	_cleanup_close_ int mnt =
	    fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0)
		return fail(ce, errno, "tmpfs");
	/* Attached first: kernels before 6.15 mount nothing onto a detached tree. */
	if (move_mount(mnt, "", dfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return fail(ce, errno, "mounting tmpfs on");
	for (size_t i = 0; i < l->n_mounts; i++) {
		const struct cell_cg_mount *m = &l->mounts[i];
		if (mkdirat(mnt, m->dir, 0555) < 0)
			return fail(ce, errno, m->dir);
		int r = mount_one(mnt, m->dir, m->v2 ? "cgroup2" : "cgroup",
				  (const char(*)[16])m->opts, m->n_opts, CG_ATTRS, ce);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < l->n_links; i++)
		if (symlinkat(l->links[i].target, mnt, l->links[i].name) < 0)
			return fail(ce, errno, l->links[i].name);
	if (mount_setattr(mnt, "", AT_EMPTY_PATH,
			  &(struct mount_attr){.attr_set = MOUNT_ATTR_RDONLY},
			  sizeof(struct mount_attr)) < 0)
		return fail(ce, errno, "making the tmpfs read-only");
	return 0;
}

/* /sys is the sandbox's fresh sysfs (read-only): fs/cgroup is its empty mountpoint. */
static int open_target(int rootfd, struct cell_child_err *ce)
{
	int dfd = cell_open_in_root(rootfd, target, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, 1);
	return dfd < 0 ? fail(ce, dfd, "opening") : dfd;
}

int cell_child_mount_cgroup2(int rootfd, struct cell_child_err *ce)
{
	_cleanup_close_ int dfd = open_target(rootfd, ce);
	return dfd < 0 ? dfd : mount_one(dfd, NULL, "cgroup2", NULL, 0, CG_ATTRS, ce);
}

int cell_child_mount_cgroup_hybrid(const struct cell_cg_layout *layout, int rootfd,
				   struct cell_child_err *ce)
{
	_cleanup_close_ int dfd = open_target(rootfd, ce);
	return dfd < 0 ? dfd : mount_hybrid(layout, dfd, ce);
}
