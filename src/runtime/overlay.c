/* The sandbox's root overlay, built by the parent (host root) as a detached mount.
 *
 * Layers: the image, idmapped read-only to the sandbox's range (one image serves every
 * sandbox and stays owned by host root on disk), and upper/ + work/ in the layer dir (the
 * sandbox dir, a project-quota dir, or the root of a quota filesystem's detached mount).
 *
 * Overlayfs before 6.15 refuses layers on a mount that is not in the caller's mount
 * namespace ("failed to clone lowerpath"), and the idmapped image and a quota filesystem
 * are detached mounts. On such a kernel the overlay is created in a private copy of the
 * mount namespace (private_ns.c), which takes private clones of its layers there. Nothing
 * is attached in the host's mount namespace either way. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "internal.h"

/* The kernel explains most fsconfig failures in the fs context's log. */
static int fs_fail(struct cell_error *err, int fs, int errnum, const char *what, const char *path)
{
	char log[256];
	ssize_t n = fs >= 0 ? read(fs, log, sizeof(log) - 1) : -1;
	if (n > 2) {
		log[n] = '\0';
		log[strcspn(log, "\n")] = '\0';
		return cell_err(err, errnum, "%s %s (%s)", what, path, log + 2);
	}
	return cell_err(err, errnum, "%s %s", what, path);
}

/* The idmapped, read-only, nodev clone of the image, detached. */
static int image_tree(const char *image_rootfs, int userns_fd, struct cell_error *err)
{
	_cleanup_close_ int tree =
	    open_tree(AT_FDCWD, image_rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return cell_err(err, errno, "cloning image %s", image_rootfs);
	struct mount_attr attr = {
	    .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
	    .userns_fd = (uint64_t)userns_fd,
	};
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return cell_err(err, errno, "idmapping image %s", image_rootfs);
	return move_fd(tree);
}

/* Create the overlay from O_PATH fds of its three layers. Layers are named through
 * /proc/self/fd: the strings are what the sandbox reads in its mountinfo, and they should
 * not tell it where the host keeps its state. *create_errno tells a refused create apart. */
static int overlay_from_fds(int lower, int upper, int work, const char *what, int *create_errno,
			    struct cell_error *err)
{
	*create_errno = 0;
	_cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return cell_err(err, errno, "fsopen overlay for %s", what);
	const char *const keys[] = {"lowerdir", "upperdir", "workdir"};
	const int fds[] = {lower, upper, work};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(keys); i++) {
		char val[64];
		snprintf(val, sizeof(val), "/proc/self/fd/%d", fds[i]);
		if (fsconfig(fs, FSCONFIG_SET_STRING, keys[i], val, 0) < 0)
			return fs_fail(err, fs, errno, "overlay: setting", keys[i]);
	}
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		*create_errno = errno;
		return fs_fail(err, fs, errno, "creating the overlay on", what);
	}
	/* Device nodes in the image or planted in upper must never open host devices. */
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return cell_err(err, errno, "fsmount of the overlay on %s", what);
	return mnt;
}

static int open_layer(int dirfd, const char *name, const char *what, struct cell_error *err)
{
	int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? cell_err(err, errno, "opening %s/%s", what, name) : fd;
}

/* ---- the private-namespace way (kernels before 6.15) ---- */

struct private_overlay {
	int tree;
	const char *layer_dir;
};

static int private_overlay(int scratch, void *arg, struct cell_error *err)
{
	struct private_overlay *job = arg;
	int r = cell_private_attach(job->tree, scratch, "lower");
	if (r < 0)
		return cell_err(err, -r, "attaching the image for the overlay");
	_cleanup_close_ int lower = open_layer(scratch, "lower", "scratch", err);
	if (lower < 0)
		return lower;
	/* A quota filesystem's detached mount is attached too; a plain directory of the
	 * host's tree is already in this copy of its namespace. */
	_cleanup_close_ int layer = open(job->layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (layer < 0)
		return cell_err(err, errno, "opening layer dir %s", job->layer_dir);
	r = cell_private_attach(layer, scratch, "layers");
	if (r < 0 && r != -EINVAL)
		return cell_err(err, -r, "attaching layer dir %s", job->layer_dir);
	if (r == 0) {
		close(layer);
		layer = open_layer(scratch, "layers", "scratch", err);
		if (layer < 0)
			return layer;
	}
	_cleanup_close_ int upper = open_layer(layer, "upper", job->layer_dir, err);
	if (upper < 0)
		return upper;
	_cleanup_close_ int work = open_layer(layer, "work", job->layer_dir, err);
	if (work < 0)
		return work;
	int create_errno;
	return overlay_from_fds(lower, upper, work, job->layer_dir, &create_errno, err);
}

static int overlay_in_private_ns(int tree, const char *layer_dir, const char *scratch,
				 struct cell_error *err)
{
	struct private_overlay job = {.tree = tree, .layer_dir = layer_dir};
	return cell_in_private_mount_ns(scratch, private_overlay, &job, err);
}

/* ---- entry ---- */

static bool detached_refused; /* learned once: this kernel wants attached layers */

int cell_mount_overlay_fd(const char *image_rootfs, const char *layer_dir, const char *scratch,
			  int userns_fd, struct cell_error *err)
{
	_cleanup_close_ int tree = image_tree(image_rootfs, userns_fd, err);
	if (tree < 0)
		return tree;
	if (__atomic_load_n(&detached_refused, __ATOMIC_RELAXED))
		return overlay_in_private_ns(tree, layer_dir, scratch, err);
	_cleanup_close_ int layer = open(layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (layer < 0)
		return cell_err(err, errno, "opening layer dir %s", layer_dir);
	_cleanup_close_ int upper = open_layer(layer, "upper", layer_dir, err);
	if (upper < 0)
		return upper;
	_cleanup_close_ int work = open_layer(layer, "work", layer_dir, err);
	if (work < 0)
		return work;
	int create_errno;
	int mnt = overlay_from_fds(tree, upper, work, layer_dir, &create_errno, err);
	if (mnt >= 0 || create_errno != EINVAL)
		return mnt;
	int r = overlay_in_private_ns(tree, layer_dir, scratch, err);
	if (r >= 0)
		__atomic_store_n(&detached_refused, true, __ATOMIC_RELAXED);
	return r;
}
