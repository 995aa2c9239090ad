/* The sandbox's root overlay, built by the parent (host root) as a detached mount.
 *
 * Layers: the image's lower dirs (one for an image cell built, one per layer for an image of
 * the layer store, top first), each idmapped read-only to the sandbox's range (one image
 * serves every sandbox and stays owned by host root on disk), and upper/ + work/ in the
 * layer dir (the sandbox dir, a project-quota dir, or the root of a quota filesystem's
 * detached mount).
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

/* The idmapped, nodev clone of dir, detached; read-only when asked. */
static int idmapped_tree(const char *dir, int userns_fd, bool read_only, struct cell_error *err)
{
	_cleanup_close_ int tree = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return cell_err(err, errno, "cloning %s", dir);
	struct mount_attr attr = {
	    .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
	    .userns_fd = (uint64_t)userns_fd,
	};
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return cell_err(err, errno, "idmapping %s", dir);
	return move_fd(tree);
}

/* The idmapped, read-only, nodev clone of the image, detached. */
static int image_tree(const char *image_rootfs, int userns_fd, struct cell_error *err)
{
	return idmapped_tree(image_rootfs, userns_fd, true, err);
}

int cell_mount_dir_tree_fd(const char *dir, int userns_fd, bool read_only, struct cell_error *err)
{
	return idmapped_tree(dir, userns_fd, read_only, err);
}

/* Create the overlay from O_PATH fds of its lower dirs (n, top first), upper and work.
 * Layers are named through /proc/self/fd: the strings are what the sandbox reads in its
 * mountinfo, and they should not tell it where the host keeps its state. *create_errno
 * tells a refused create apart. */
static int overlay_from_fds(const int *lowers, size_t n, int upper, int work, const char *what,
			    int *create_errno, struct cell_error *err)
{
	*create_errno = 0;
	_cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return cell_err(err, errno, "fsopen overlay for %s", what);
	char lowerdir[CELL_IMAGE_LAYERS_MAX * 24 + 1] = "";
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(lowerdir);
		snprintf(lowerdir + len, sizeof(lowerdir) - len, "%s/proc/self/fd/%d", i ? ":" : "",
			 lowers[i]);
	}
	char upperdir[32], workdir[32];
	snprintf(upperdir, sizeof(upperdir), "/proc/self/fd/%d", upper);
	snprintf(workdir, sizeof(workdir), "/proc/self/fd/%d", work);
	const char *const keys[] = {"lowerdir", "upperdir", "workdir"};
	const char *const vals[] = {lowerdir, upperdir, workdir};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(keys); i++)
		if (fsconfig(fs, FSCONFIG_SET_STRING, keys[i], vals[i], 0) < 0)
			return fs_fail(err, fs, errno, "overlay: setting", keys[i]);
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
	const int *trees;
	size_t n;
	const char *layer_dir, *upper_name;
};

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int private_overlay(int scratch, void *arg, struct cell_error *err)
{
	struct private_overlay *job = arg;
	int lowers[CELL_IMAGE_LAYERS_MAX];
	size_t opened = 0;
	int r = 0;
	for (; r >= 0 && opened < job->n; opened++) {
		char name[16];
		snprintf(name, sizeof(name), "lower%zu", opened);
		r = cell_private_attach(job->trees[opened], scratch, name);
		if (r < 0) {
			r = cell_err(err, -r, "attaching the image for the overlay");
			break;
		}
		lowers[opened] = r = open_layer(scratch, name, "scratch", err);
		if (r < 0)
			break;
	}
	if (r < 0) {
		close_all(lowers, opened);
		return r;
	}
	/* A quota filesystem's detached mount is attached too; a plain directory of the
	 * host's tree is already in this copy of its namespace. */
	_cleanup_close_ int layer = open(job->layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (layer < 0)
		r = cell_err(err, errno, "opening layer dir %s", job->layer_dir);
	if (r >= 0) {
		r = cell_private_attach(layer, scratch, "layers");
		if (r < 0 && r != -EINVAL)
			r = cell_err(err, -r, "attaching layer dir %s", job->layer_dir);
		else if (r == 0) {
			close(layer);
			layer = r = open_layer(scratch, "layers", "scratch", err);
		} else {
			r = 0;
		}
	}
	int upper = -1, work = -1;
	if (r >= 0)
		r = upper = open_layer(layer, job->upper_name, job->layer_dir, err);
	if (r >= 0)
		r = work = open_layer(layer, "work", job->layer_dir, err);
	int create_errno;
	if (r >= 0)
		r = overlay_from_fds(lowers, job->n, upper, work, job->layer_dir, &create_errno,
				     err);
	if (upper >= 0)
		close(upper);
	if (work >= 0)
		close(work);
	close_all(lowers, job->n);
	return r;
}

static int overlay_in_private_ns(const int *trees, size_t n, const char *layer_dir,
				 const char *upper_name, const char *scratch,
				 struct cell_error *err)
{
	struct private_overlay job = {
	    .trees = trees, .n = n, .layer_dir = layer_dir, .upper_name = upper_name};
	return cell_in_private_mount_ns(scratch, private_overlay, &job, err);
}

/* ---- entry ---- */

static bool detached_refused; /* learned once: this kernel wants attached layers */

/* Each lower dir's idmapped tree into trees (n of them); -errno with err, none left open. */
static int image_trees(const char *const *lowers, size_t n, int userns_fd, int *trees,
		       struct cell_error *err)
{
	for (size_t i = 0; i < n; i++) {
		trees[i] = image_tree(lowers[i], userns_fd, err);
		if (trees[i] < 0) {
			int r = trees[i];
			close_all(trees, i);
			return r;
		}
	}
	return 0;
}

int cell_mount_overlay_fd(const char *const *lowers, size_t n, const char *layer_dir,
			  const char *upper_name, const char *scratch, int userns_fd,
			  struct cell_error *err)
{
	if (!upper_name)
		upper_name = "upper";
	if (n == 0 || n > CELL_IMAGE_LAYERS_MAX)
		return cell_err(err, EINVAL, "an image of %zu layers (1 to %d)", n,
				CELL_IMAGE_LAYERS_MAX);
	int trees[CELL_IMAGE_LAYERS_MAX];
	int r = image_trees(lowers, n, userns_fd, trees, err);
	if (r < 0)
		return r;
	if (__atomic_load_n(&detached_refused, __ATOMIC_RELAXED)) {
		r = overlay_in_private_ns(trees, n, layer_dir, upper_name, scratch, err);
		close_all(trees, n);
		return r;
	}
	int layer = open(layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC), upper = -1, work = -1;
	if (layer < 0)
		r = cell_err(err, errno, "opening layer dir %s", layer_dir);
	if (r >= 0)
		r = upper = open_layer(layer, upper_name, layer_dir, err);
	if (r >= 0)
		r = work = open_layer(layer, "work", layer_dir, err);
	int create_errno = 0;
	if (r >= 0)
		r = overlay_from_fds(trees, n, upper, work, layer_dir, &create_errno, err);
	int opened[] = {layer, upper, work};
	close_all(opened, CELL_ARRAY_SIZE(opened));
	if (r < 0 && create_errno == EINVAL) {
		r = overlay_in_private_ns(trees, n, layer_dir, upper_name, scratch, err);
		if (r >= 0)
			__atomic_store_n(&detached_refused, true, __ATOMIC_RELAXED);
	}
	close_all(trees, n);
	return r;
}
