/* A boot id of the sandbox's own: /proc/sys/kernel/random/boot_id is the host kernel's,
 * the same in every sandbox and across a sandbox's restarts. Programs read it to tell a
 * reboot (journald, E2B's clients after a filesystem-only pause), and it names the host's
 * boot to whoever reads it. Each start of a sandbox gets a fresh random one instead, bound
 * read-only over the kernel's file: a pause (frozen) keeps it, a stop and start changes
 * it. The file is made on the sandbox's /dev tmpfs and unlinked once bound, so nothing of
 * it shows but the bound file. Runs after the masks (masks.c says why the sandbox cannot
 * umount it). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_TMP  "/dev/.cell-boot-id"

/* A random version 4 UUID as the kernel prints it: 36 characters and a newline. */
static int random_uuid(char out[37])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	size_t o = 0;
	for (size_t i = 0; i < sizeof(b); i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 0xf];
	}
	out[o] = '\n';
	return 0;
}

/* The new id in a read-only file of /dev, bound over target; the file unlinked after. */
static int bind_boot_id(int rootfd, int target, struct cell_child_err *ce)
{
	char id[37];
	if (random_uuid(id) < 0)
		return cell_child_fail(ce, CELL_STEP_BOOT_ID, EIO, "getrandom for", BOOT_ID_PATH);
	_cleanup_close_ int fd = openat(rootfd, BOOT_ID_TMP + 1,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return cell_child_fail(ce, CELL_STEP_BOOT_ID, errno, "creating", BOOT_ID_TMP);
	int r = cell_write_all(fd, id, sizeof(id));
	_cleanup_close_ int tree =
	    r < 0 ? -1 : open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					      MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
	if (r == 0 &&
	    (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ||
	     move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
		 0))
		r = -errno;
	unlinkat(rootfd, BOOT_ID_TMP + 1, 0);
	if (r < 0)
		return cell_child_fail(ce, CELL_STEP_BOOT_ID, r, "binding a boot id over",
				       BOOT_ID_PATH);
	return 0;
}

int cell_child_boot_id(struct cell_child_err *ce)
{
	_cleanup_close_ int rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return cell_child_fail(ce, CELL_STEP_BOOT_ID, errno, "opening", "/");
	/* A kernel without the file (no CONFIG_PROC_SYSCTL) has no id to replace. */
	_cleanup_close_ int target = cell_open_in_root(rootfd, BOOT_ID_PATH, O_PATH, 0, 1);
	if (target == -ENOENT)
		return 0;
	if (target < 0)
		return cell_child_fail(ce, CELL_STEP_BOOT_ID, target, "opening", BOOT_ID_PATH);
	return bind_boot_id(rootfd, target, ce);
}
