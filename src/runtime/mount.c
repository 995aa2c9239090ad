/* The sandbox's filesystem tree.
 *
 * The parent (host root) builds the detached mounts that need host privilege: the
 * image, idmapped read-only to the sandbox's range, under an overlay whose upper dir holds
 * the sandbox's changes; and the idmapped volumes. The child attaches them in its own mount
 * namespace and adds the kernel filesystems (the overlay itself: overlay.c). Nothing is
 * ever attached in the host's mount namespace.
 *
 * The child-side functions (cell_child_*) follow the rules in internal.h: system calls
 * only, no allocation. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

/* ---- parent side ---------------------------------------------------------------------- */

int cell_mount_check_dest(const char *dest, struct cell_error *err)
{
	if (!dest || dest[0] != '/')
		return cell_err(err, EINVAL, "volume dest '%s' is not an absolute path",
				dest ? dest : "");
	if (strlen(dest) >= PATH_MAX / 2)
		return cell_err(err, ENAMETOOLONG, "volume dest '%.64s...'", dest);
	size_t components = 0;
	for (const char *c = dest; *c;) {
		c += strspn(c, "/");
		size_t len = strcspn(c, "/");
		if (!len)
			break;
		if ((len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
			return cell_err(err, EINVAL, "volume dest '%s' has a '.' or '..' component",
					dest);
		/* proc, sys and dev are cell's own: a volume over them could hide the masks and
		 * read-only mounts that protect the host. */
		if (components++ == 0 &&
		    ((len == 4 && !strncmp(c, "proc", 4)) || (len == 3 && !strncmp(c, "sys", 3)) ||
		     (len == 3 && !strncmp(c, "dev", 3))))
			return cell_err(err, EINVAL,
					"volume dest '%s' is under /proc, /sys or /dev", dest);
		c += len;
	}
	if (!components)
		return cell_err(err, EINVAL, "volume dest '%s' is the sandbox's root", dest);
	return 0;
}

/* The OWNER map: the host owner's ids are the sandbox's root, every other sandbox id is in
 * the sandbox's own range, and nothing else is mapped. Lines are "on-disk id, the id it is
 * to the kernel (the sandbox's view), count". */
static int owner_userns(const struct cell_volume *vol, uint32_t uid_base, struct cell_error *err)
{
	char uid_map[96], gid_map[96];
	snprintf(uid_map, sizeof(uid_map), "%u %u 1\n%u %u %u\n", vol->owner_uid, uid_base,
		 uid_base + 1, uid_base + 1, CELL_UID_RANGE - 1);
	if (vol->map_gid)
		snprintf(gid_map, sizeof(gid_map), "%u %u 1\n%u %u %u\n", vol->owner_gid, uid_base,
			 uid_base + 1, uid_base + 1, CELL_UID_RANGE - 1);
	else
		snprintf(gid_map, sizeof(gid_map), "%u %u %u\n", uid_base, uid_base,
			 CELL_UID_RANGE);
	return cell_userns_make(uid_map, gid_map, err);
}

/* The STORE map: the volume's ids on disk from store_base are the sandbox's own. */
static int store_userns(const struct cell_volume *vol, uint32_t uid_base, struct cell_error *err)
{
	char map[64];
	snprintf(map, sizeof(map), "%u %u %u\n", vol->store_base, uid_base, CELL_UID_RANGE);
	return cell_userns_make(map, map, err);
}

/* The host path is opened without following any symlink on the way (celld resolved it when
 * the sandbox was created; a symlink swapped in since must not redirect the mount). */
static int open_volume_tree(const char *host, struct cell_error *err)
{
	_cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return cell_err(err, errno, "opening /");
	_cleanup_close_ int fd = cell_open_in_root(root, host, O_PATH, 0, 1);
	if (fd < 0)
		return cell_err(err, -fd, "volume %s (a symlink on the way is refused)", host);
	int tree = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	return tree < 0 ? cell_err(err, errno, "volume %s", host) : tree;
}

/* <root>/<sub>: beneath root, no symlink (a sandbox made the volume's tree), no mount
 * crossed. */
static int open_beneath(int root, const char *sub, struct cell_error *err)
{
	struct open_how how = {
	    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, root, sub, &how, sizeof(how));
	if (fd < 0)
		return cell_err(err, errno,
				"volume directory '%s' (a symlink on the way is "
				"refused)",
				sub);
	return fd;
}

/* A detached copy of <root>/<sub>. *refused: the kernel copies no subtree of a detached
 * mount (before 6.15). */
static int clone_beneath(int root, const char *sub, bool *refused, struct cell_error *err)
{
	_cleanup_close_ int fd = open_beneath(root, sub, err);
	if (fd < 0)
		return fd;
	int tree = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree >= 0)
		return tree;
	*refused = errno == EINVAL;
	return cell_err(err, errno, "copying volume directory '%s'", sub);
}

struct private_clone {
	int root;
	const char *sub;
};

/* In a private namespace: the volume's detached filesystem attached first, so that a
 * subtree of it can be copied. */
static int private_clone(int scratch, void *arg, struct cell_error *err)
{
	struct private_clone *job = arg;
	int r = cell_private_attach(job->root, scratch, "volume");
	if (r < 0 && r != -EINVAL)
		return cell_err(err, -r, "attaching a named volume");
	_cleanup_close_ int root = -1;
	if (r == 0 && (root = openat(scratch, "volume", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return cell_err(err, errno, "opening the attached named volume");
	bool refused = false;
	return clone_beneath(root >= 0 ? root : job->root, job->sub, &refused, err);
}

/* A named volume's directory as a detached copy: directly, or in a private namespace when
 * the kernel refuses to copy from a detached mount. */
static int named_volume_tree(const struct cell_volume *vol, const char *scratch,
			     struct cell_error *err)
{
	const char *sub = vol->sub_path && vol->sub_path[0] ? vol->sub_path : ".";
	bool refused = false;
	int tree = clone_beneath(vol->source_fd, sub, &refused, err);
	if (tree >= 0 || !refused)
		return tree;
	struct private_clone job = {.root = vol->source_fd, .sub = sub};
	return cell_in_private_mount_ns(scratch, private_clone, &job, err);
}

int cell_mount_volume_fd(const struct cell_volume *vol, uint32_t uid_base, int sandbox_userns,
			 const char *scratch, struct cell_error *err)
{
	const char *what = vol->host ? vol->host : vol->dest;
	if (vol->map == CELL_VOLUME_MAP_OWNER &&
	    (vol->owner_uid == 0 || (vol->map_gid && vol->owner_gid == 0)))
		return cell_err(err, EPERM, "volume %s: the sandbox's root may not be host root",
				what);
	if (vol->map == CELL_VOLUME_MAP_STORE && vol->store_base == 0)
		return cell_err(err, EPERM, "volume %s: the sandbox's root may not be host root",
				what);
	_cleanup_close_ int tree =
	    vol->host ? open_volume_tree(vol->host, err) : named_volume_tree(vol, scratch, err);
	if (tree < 0)
		return tree;
	_cleanup_close_ int made = -1;
	int userns = -1;
	if (vol->map == CELL_VOLUME_MAP_IDENTITY) {
		userns = sandbox_userns;
	} else if (vol->map == CELL_VOLUME_MAP_OWNER || vol->map == CELL_VOLUME_MAP_STORE) {
		made = vol->map == CELL_VOLUME_MAP_OWNER ? owner_userns(vol, uid_base, err)
							 : store_userns(vol, uid_base, err);
		if (made < 0)
			return made;
		userns = made;
	}
	/* nosuid and nodev inside whatever the map: no set-id or device node on the volume
	 * ever acts for the sandbox. */
	struct mount_attr attr = {
	    .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			(vol->read_only ? MOUNT_ATTR_RDONLY : 0) |
			(userns >= 0 ? MOUNT_ATTR_IDMAP : 0),
	    .userns_fd = userns >= 0 ? (uint64_t)userns : 0,
	};
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return cell_err(err, errno, "mounting volume %s", what);
	return move_fd(tree);
}

/* ---- child side ----------------------------------------------------------------------- */

static const char *const devnodes[CELL_N_DEVNODES] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
};

static const struct {
	const char *name, *target;
} dev_links[] = {
    {"ptmx", "pts/ptmx"},	   {"fd", "/proc/self/fd"},	  {"stdin", "/proc/self/fd/0"},
    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
};

struct fs_opt {
	const char *key, *value; /* value NULL: a flag */
};

static const struct fs_opt no_opts[] = {{NULL, NULL}};
static const struct fs_opt dev_opts[] = {{"mode", "0755"}, {"size", "64k"}, {NULL, NULL}};
/* Every devpts instance but the host's draws on one pool (kernel.pty.max less the host's
 * reserve, 3072 as shipped): max= bounds what one sandbox takes of it, so that a sandbox
 * opening terminals until refused leaves the others theirs. */
#define PTY_MAX "256"
static const struct fs_opt pts_opts[] = {
    {"newinstance", NULL}, {"ptmxmode", "0666"}, {"mode", "0620"}, {"max", PTY_MAX}, {NULL, NULL}};

int cell_child_mount_prepare(struct cell_mount_plan *plan, struct cell_child_err *ce)
{
	/* Nothing the sandbox mounts may propagate back to the host (or the reverse). */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return cell_child_fail(ce, CELL_STEP_PRIVATE, errno, "making mounts private", "/");
	/* Host device nodes are reached through their host paths: take them now. */
	for (int i = 0; i < CELL_N_DEVNODES; i++) {
		int fd = open_tree(AT_FDCWD, devnodes[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0)
			return cell_child_fail(ce, CELL_STEP_DEVNODES, errno, "cloning host",
					       devnodes[i]);
		/* Read-only binds: the device still reads and writes (a device node's I/O
		 * is not a write to its filesystem), but the node itself, the host's
		 * /dev/null, can no longer have its times changed from inside. */
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC |
						      MOUNT_ATTR_RDONLY};
		if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
			return cell_child_fail(ce, CELL_STEP_DEVNODES, errno, "restricting",
					       devnodes[i]);
		plan->devnode_fds[i] = fd;
	}
	/* A container of cell-oci may join a network namespace of another user namespace (a
	 * pod's): the kernel then refuses it a fresh sysfs. Taken now, while the host's /sys
	 * is at its path, and bound read-only in its place if that happens (as runc does). */
	plan->host_sys_fd = -1;
	if (plan->oci)
		plan->host_sys_fd =
		    open_tree(AT_FDCWD, "/sys", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	_cleanup_close_ int target =
	    open(plan->rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0)
		return cell_child_fail(ce, CELL_STEP_ROOTFS, errno, "opening", plan->rootfs);
	if (move_mount(plan->overlay_fd, "", target, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return cell_child_fail(ce, CELL_STEP_ROOTFS, errno, "attaching the overlay on",
				       plan->rootfs);
	/* Reopened by path: the new fd is the overlay's root, not the dir beneath it. */
	int root = open(plan->rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return cell_child_fail(ce, CELL_STEP_ROOTFS, errno, "opening", plan->rootfs);
	return root;
}

/* Open (creating when asked) the directory `path` inside the new root, one component at a
 * time, refusing every symlink. The upper dir is the sandbox's own content and survives a
 * restart: a symlink planted at /tmp or at a volume's dest must not redirect a mount onto a
 * host path (the race class of CVE-2021-30465). Returns an O_PATH fd or -errno. */
static int open_dir(int rootfd, const char *path, bool create)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	for (char *c = buf; *c;) {
		c += strspn(c, "/");
		if (!*c)
			break;
		char *end = c + strcspn(c, "/");
		char saved = *end;
		*end = '\0';
		int next = cell_open_in_root(cur, c, O_PATH | O_DIRECTORY, 0, 1);
		if (next == -ENOENT && create) {
			if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST) {
				next = -errno;
			} else {
				next = cell_open_in_root(cur, c, O_PATH | O_DIRECTORY, 0, 1);
			}
		}
		close(cur);
		if (next < 0)
			return next;
		cur = next;
		*end = saved;
		c = end;
	}
	return cur;
}

/* Same for a file to bind-mount over (device nodes, single-file volumes). */
static int open_file(int rootfd, const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	if (!slash || dlen >= sizeof(dir) || !slash[1])
		return -EINVAL;
	memcpy(dir, path, dlen);
	dir[dlen] = '\0';
	_cleanup_close_ int dfd = open_dir(rootfd, dlen ? dir : "/", true);
	if (dfd < 0)
		return dfd;
	int fd = cell_open_in_root(dfd, slash + 1, O_PATH, 0, 1);
	if (fd != -ENOENT)
		return fd;
	int made =
	    openat(dfd, slash + 1, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (made < 0 && errno != EEXIST)
		return -errno;
	if (made >= 0)
		close(made);
	return cell_open_in_root(dfd, slash + 1, O_PATH, 0, 1);
}

static int attach(int mnt, int target)
{
	return move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

/* A new filesystem instance mounted on `target` inside the new root. */
static int mount_fs(int rootfd, const char *target, const char *type, const struct fs_opt *opts,
		    unsigned int attrs, int step, struct cell_child_err *ce)
{
	_cleanup_close_ int dfd = open_dir(rootfd, target, true);
	if (dfd < 0)
		return cell_child_fail(ce, step, dfd, "opening mountpoint", target);
	_cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return cell_child_fail(ce, step, errno, type, target);
	for (; opts->key; opts++)
		if (fsconfig(fs, opts->value ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, opts->key,
			     opts->value, 0) < 0)
			return cell_child_fail(ce, step, errno, opts->key, target);
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return cell_child_fail(ce, step, errno, type, target);
	_cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
	if (mnt < 0)
		return cell_child_fail(ce, step, errno, type, target);
	if (attach(mnt, dfd) < 0)
		return cell_child_fail(ce, step, errno, "mounting on", target);
	return 0;
}

static int populate_dev(const struct cell_mount_plan *plan, int rootfd, struct cell_child_err *ce)
{
	int r =
	    mount_fs(rootfd, "/dev", "tmpfs", dev_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, CELL_STEP_DEV, ce);
	if (r < 0)
		return r;
	for (int i = 0; i < CELL_N_DEVNODES; i++) {
		_cleanup_close_ int target = open_file(rootfd, devnodes[i]);
		if (target < 0)
			return cell_child_fail(ce, CELL_STEP_DEV, target, "creating", devnodes[i]);
		if (attach(plan->devnode_fds[i], target) < 0)
			return cell_child_fail(ce, CELL_STEP_DEV, errno, "bind-mounting",
					       devnodes[i]);
	}
	/* devpts keeps device semantics (pty slaves), hence no nodev. */
	r = mount_fs(rootfd, "/dev/pts", "devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
		     CELL_STEP_DEVPTS, ce);
	if (r < 0)
		return r;
	_cleanup_close_ int dev = open_dir(rootfd, "/dev", false);
	if (dev < 0)
		return cell_child_fail(ce, CELL_STEP_DEV, dev, "opening", "/dev");
	for (size_t i = 0; i < CELL_ARRAY_SIZE(dev_links); i++)
		if (symlinkat(dev_links[i].target, dev, dev_links[i].name) < 0)
			return cell_child_fail(ce, CELL_STEP_DEV, errno, "symlink in /dev",
					       dev_links[i].name);
	const struct fs_opt shm_opts[] = {{"mode", "1777"},
					  {plan->tmpfs_size[0] ? "size" : NULL, plan->tmpfs_size},
					  {NULL, NULL}};
	r = mount_fs(rootfd, "/dev/shm", "tmpfs", shm_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, CELL_STEP_SHM, ce);
	if (r < 0 || !plan->oci)
		return r;
	/* An OCI container gets POSIX message queues, as engines' specs ask; an IPC
	 * namespace joined from the host's cannot be mounted from ours, and goes without. */
	struct cell_child_err mq;
	memset(&mq, 0, sizeof(mq));
	r = mount_fs(rootfd, "/dev/mqueue", "mqueue", no_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, CELL_STEP_SHM, &mq);
	if (r < 0 && mq.errno_value != EPERM)
		return cell_child_fail(ce, mq.step, mq.errno_value, mq.what, NULL);
	return 0;
}

static int mount_tmpfs(const struct cell_mount_plan *plan, int rootfd, struct cell_child_err *ce)
{
	for (size_t i = 0; i < plan->n_tmpfs; i++) {
		const struct cell_tmpfs *t = &plan->tmpfs[i];
		struct fs_opt opts[3];
		size_t n = 0;
		if (t->mode[0])
			opts[n++] = (struct fs_opt){"mode", t->mode};
		if (t->size[0])
			opts[n++] = (struct fs_opt){"size", t->size};
		opts[n] = (struct fs_opt){NULL, NULL};
		int r = mount_fs(rootfd, t->dest, "tmpfs", opts,
				 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				     (t->noexec ? MOUNT_ATTR_NOEXEC : 0) |
				     (t->read_only ? MOUNT_ATTR_RDONLY : 0),
				 CELL_STEP_TMP, ce);
		if (r < 0)
			return r;
	}
	return 0;
}

static int mount_volumes(const struct cell_mount_plan *plan, int rootfd, struct cell_child_err *ce)
{
	for (size_t i = 0; i < plan->n_volumes; i++) {
		const char *dest = plan->volumes[i].dest;
		struct stat st;
		if (fstat(plan->volume_fds[i], &st) < 0)
			return cell_child_fail(ce, CELL_STEP_VOLUME, errno, "stat of volume", dest);
		_cleanup_close_ int target =
		    S_ISDIR(st.st_mode) ? open_dir(rootfd, dest, true) : open_file(rootfd, dest);
		if (target < 0)
			return cell_child_fail(ce, CELL_STEP_VOLUME, target, "volume dest", dest);
		if (attach(plan->volume_fds[i], target) < 0)
			return cell_child_fail(ce, CELL_STEP_VOLUME, errno, "mounting volume on",
					       dest);
	}
	return 0;
}

/* The host's /sys, read-only, where a fresh sysfs was refused (a joined network). */
static int bind_host_sys(const struct cell_mount_plan *plan, int rootfd, struct cell_child_err *ce)
{
	memset(ce, 0, sizeof(*ce));
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					      MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
	if (mount_setattr(plan->host_sys_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
			  sizeof(attr)) < 0)
		return cell_child_fail(ce, CELL_STEP_SYS, errno, "read-only host", "/sys");
	_cleanup_close_ int dfd = open_dir(rootfd, "/sys", true);
	if (dfd < 0)
		return cell_child_fail(ce, CELL_STEP_SYS, dfd, "opening mountpoint", "/sys");
	if (attach(plan->host_sys_fd, dfd) < 0)
		return cell_child_fail(ce, CELL_STEP_SYS, errno, "binding the host's", "/sys");
	return 0;
}

int cell_child_mount_populate(const struct cell_mount_plan *plan, int rootfd,
			      struct cell_child_err *ce)
{
	int r =
	    mount_fs(rootfd, "/proc", "proc", no_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, CELL_STEP_PROC, ce);
	if (r < 0)
		return r;
	/* sysfs shows the sandbox's own network namespace; read-only all the same. */
	r = mount_fs(rootfd, "/sys", "sysfs", no_opts,
		     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
		     CELL_STEP_SYS, ce);
	if (r == -EPERM && plan->oci && plan->host_sys_fd >= 0)
		r = bind_host_sys(plan, rootfd, ce);
	if (r < 0)
		return r;
	r = populate_dev(plan, rootfd, ce);
	if (r == 0 && plan->oci)
		r = mount_tmpfs(plan, rootfd, ce);
	if (r < 0 || plan->oci)
		return r < 0 ? r : mount_volumes(plan, rootfd, ce);
	const struct fs_opt tmp_opts[] = {{"mode", "1777"},
					  {plan->tmpfs_size[0] ? "size" : NULL, plan->tmpfs_size},
					  {NULL, NULL}};
	r = mount_fs(rootfd, "/tmp", "tmpfs", tmp_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
		     CELL_STEP_TMP, ce);
	if (r < 0)
		return r;
	_cleanup_close_ int ws = open_dir(rootfd, "/workspace", true);
	if (ws < 0)
		return cell_child_fail(ce, CELL_STEP_WORKSPACE, ws, "creating", "/workspace");
	return mount_volumes(plan, rootfd, ce);
}

int cell_child_pivot_root(int rootfd, struct cell_child_err *ce)
{
	/* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves
	 * the host's tree unreachable from the sandbox. */
	if (fchdir(rootfd) < 0)
		return cell_child_fail(ce, CELL_STEP_PIVOT, errno, "entering the new root", NULL);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return cell_child_fail(ce, CELL_STEP_PIVOT, errno, "pivot_root", NULL);
	if (umount2(".", MNT_DETACH) < 0)
		return cell_child_fail(ce, CELL_STEP_PIVOT, errno, "detaching the old root", NULL);
	if (chdir("/") < 0)
		return cell_child_fail(ce, CELL_STEP_PIVOT, errno, "chdir", "/");
	return 0;
}
