/* The loop-device way of a disk quota (include/cell/quota.h): an ext4 filesystem in a
 * sparse image file of the quota's size, attached to a loop device and mounted
 * detached.
 *
 * Formatting an image (mkfs.ext4, a process) took ~10 ms for 64 MiB and 10 GiB and ~18 ms
 * for 100 GiB on the 2-core development VM, so each size is formatted once into a template
 * kept in the state dir, and each sandbox gets a sparse copy of it: only the ~120-250 KiB
 * mkfs wrote are copied. Copy, loop device and mount together took ~1.2-1.9 ms per sandbox
 * there. The copies share the template's filesystem UUID; ext4 does not care, it is
 * mounted by device. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/layercopy.h"
#include "cell/fsutil.h"
#include "cell/quota.h"
#include "internal.h"

#define IMAGE_NAME	   "disk.img"
#define TEMPLATE_FMT	   "ext4-v1-%" PRIu64 ".img" /* v1: the mkfs options below */
#define LOOP_BLOCK_SIZE	   4096
#define LOOP_ATTEMPTS	   32 /* other processes may take the free device we were given */
#define IMAGE_LOCK_WAIT_MS 10000
#define IMAGE_LOCK_STEP_MS 20

/* -T default: 4 KiB blocks and one inode per 16 KiB at every size (mke2fs would pick 1 KiB
 * blocks and far more inodes for small images). -m 0: no blocks reserved for root (the
 * overlay writes without CAP_SYS_RESOURCE anyway). No resize inode: its reserved GDT blocks
 * would be most of the template's data. Inode tables and journal are left unwritten (holes
 * read as zeros), and the mount below never initialises them lazily, which would write
 * ~1.5% of the image's size on the host for nothing. */
static char *const mkfs_argv_tail[] = {
    "-q", "-F",
    "-T", "default",
    "-m", "0",
    "-O", "^resize_inode",
    "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
    NULL,
};

/* mkfs.ext4 on path; its stderr goes into the error message. */
static int run_mkfs(const char *path, struct cell_error *err)
{
	char *argv[CELL_ARRAY_SIZE(mkfs_argv_tail) + 2];
	argv[0] = "mkfs.ext4";
	for (size_t i = 0; mkfs_argv_tail[i]; i++)
		argv[i + 1] = mkfs_argv_tail[i];
	argv[CELL_ARRAY_SIZE(mkfs_argv_tail)] = (char *)path;
	argv[CELL_ARRAY_SIZE(mkfs_argv_tail) + 1] = NULL;
	char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return cell_err(err, errno, "pipe for mkfs.ext4");
	_cleanup_close_ int rd = pipefd[0];
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	pid_t pid;
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0)
		return cell_err(err, r, "running mkfs.ext4 (e2fsprogs) for %s", path);
	char msg[256];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(rd, msg + got, sizeof(msg) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
		if (got == sizeof(msg) - 1) { /* keep draining so mkfs never blocks on us */
			char sink[256];
			while (read(rd, sink, sizeof(sink)) > 0)
				;
			break;
		}
	}
	msg[got] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return cell_err(err, errno, "waiting for mkfs.ext4");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return cell_err(err, EIO, "mkfs.ext4 %s failed (status %d)%s%s", path,
				WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
				got ? ": " : "", msg);
	return 0;
}

/* The template of this size, formatted now when missing: returns an fd to read from. */
static int template_open(const char *dir, uint64_t bytes, struct cell_error *err)
{
	int r = cell_mkdir_p(dir, 0700, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return cell_err(err, errno, "opening %s", dir);
	char name[64];
	snprintf(name, sizeof(name), TEMPLATE_FMT, bytes);
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == bytes)
		return fd;
	if (fd >= 0)
		close(fd); /* not what we wrote (a crash while renaming cannot leave this) */
	else if (errno != ENOENT)
		return cell_err(err, errno, "opening %s/%s", dir, name);

	/* Formatted under a name of this thread's own, then renamed into place: concurrent
	 * creates of the same size each make one, and the last rename wins harmlessly. */
	char tmp[96], path[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", name, (int)syscall(SYS_gettid));
	snprintf(path, sizeof(path), "%s/%s", dir, tmp);
	_cleanup_close_ int out =
	    openat(dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return cell_err(err, errno, "creating %s", path);
	if (ftruncate(out, (off_t)bytes) < 0) {
		r = cell_err(err, errno, "sizing %s", path);
	} else {
		r = run_mkfs(path, err);
	}
	if (r == 0 && fsync(out) < 0)
		r = cell_err(err, errno, "syncing %s", path);
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = cell_err(err, errno, "renaming %s", path);
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 ? fd : cell_err(err, errno, "opening %s/%s", dir, name);
}

/* <dir>/disk.img opened read-write: the existing one, or a new copy of the template (or a
 * newly formatted image without templates). */
static int image_open(int dirfd, const char *dir, const char *templates_dir, uint64_t bytes,
		      struct cell_error *err)
{
	int fd = openat(dirfd, IMAGE_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd >= 0 ? fd : cell_err(err, errno, "opening %s/" IMAGE_NAME, dir);
	_cleanup_close_ int out =
	    openat(dirfd, IMAGE_NAME, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return cell_err(err, errno, "creating %s/" IMAGE_NAME, dir);
	int r;
	if (templates_dir) {
		_cleanup_close_ int in = template_open(templates_dir, bytes, err);
		r = in < 0 ? in
			   : cell_file_clone(in, out, NULL); /* template_open checked its size */
		if (in >= 0 && r < 0)
			cell_err(err, -r, "copying the %s template into %s/" IMAGE_NAME,
				 templates_dir, dir);
	} else {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/" IMAGE_NAME, dir);
		r = ftruncate(out, (off_t)bytes) < 0 ? cell_err(err, errno, "sizing %s", path)
						     : run_mkfs(path, err);
	}
	if (r < 0) {
		/* A later start would take a half-made image for the sandbox's disk. */
		unlinkat(dirfd, IMAGE_NAME, 0);
		return r;
	}
	return move_fd(out);
}

/* An exclusive flock on the image's open file description, which the loop device keeps for
 * as long as it uses the image: the same image is never attached (and its ext4 mounted)
 * twice at once, which would corrupt it. The device of an earlier start may still be
 * letting go (its overlay is released off the path of a delete): wait for it, bounded. */
static int image_lock(int image, const char *dir, struct cell_error *err)
{
	for (int waited = 0;; waited += IMAGE_LOCK_STEP_MS) {
		if (flock(image, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return cell_err(err, errno, "locking %s/" IMAGE_NAME, dir);
		if (waited >= IMAGE_LOCK_WAIT_MS)
			return cell_err(err, EBUSY, "%s/" IMAGE_NAME " is still in use", dir);
		struct timespec ts = {0, IMAGE_LOCK_STEP_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* Attach image to a free loop device; returns the device's fd, its path in dev. The device
 * clears itself when its last user (the mount) closes it. */
static int loop_attach_unlocked(int image, char *dev, size_t size, struct cell_error *err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return cell_err(err, errno, "opening /dev/loop-control");
	/* Direct I/O: the sandbox's data is cached once, by the filesystem in the image, not
	 * a second time as pages of the image file. */
	uint32_t flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
	for (int attempt = 0; attempt < LOOP_ATTEMPTS; attempt++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return cell_err(err, errno, "finding a free loop device");
		snprintf(dev, size, "/dev/loop%d", n);
		_cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue; /* its node is still being created */
		if (fd < 0)
			return cell_err(err, errno, "opening %s", dev);
		struct loop_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (uint32_t)image;
		cfg.block_size = LOOP_BLOCK_SIZE;
		cfg.info.lo_flags = flags;
		memcpy(cfg.info.lo_file_name, "cell-layer", sizeof("cell-layer"));
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			return move_fd(fd);
		if (errno == EINVAL && (flags & LO_FLAGS_DIRECT_IO)) {
			flags &= ~LO_FLAGS_DIRECT_IO; /* the image's filesystem has no O_DIRECT */
			attempt--;
			continue;
		}
		if (errno != EBUSY)
			return cell_err(err, errno, "attaching %s", dev);
	}
	return cell_err(err, EBUSY, "no loop device stayed free for the sandbox's layer");
}

/* LOOP_CTL_GET_FREE hands every caller the same device until one configures it: creates of
 * this process take turns (a few ms each), and the retries are for other processes. */
static int loop_attach(int image, char *dev, size_t size, struct cell_error *err)
{
	static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&attach_lock);
	int r = loop_attach_unlocked(image, dev, size, err);
	pthread_mutex_unlock(&attach_lock);
	return r;
}

static int fs_fail(int fs, int errnum, const char *what, const char *dev, struct cell_error *err)
{
	char log[256];
	ssize_t n = read(fs, log, sizeof(log) - 1);
	if (n > 2) {
		log[n] = '\0';
		log[strcspn(log, "\n")] = '\0';
		return cell_err(err, errnum, "%s %s (%s)", what, dev, log + 2);
	}
	return cell_err(err, errnum, "%s %s", what, dev);
}

static int ext4_mount(const char *dev, struct cell_error *err)
{
	_cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return cell_err(err, errno, "fsopen ext4 for %s", dev);
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0)
		return fs_fail(fs, errno, "ext4: source", dev, err);
	/* noinit_itable: see mkfs_argv_tail. discard: a file deleted in the sandbox gives its
	 * blocks back to the host (the loop device punches holes in the image). */
	static const char *const flags[] = {"noinit_itable", "discard"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(flags); i++)
		if (fsconfig(fs, FSCONFIG_SET_FLAG, flags[i], NULL, 0) < 0)
			return fs_fail(fs, errno, flags[i], dev, err);
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fs_fail(fs, errno, "mounting the sandbox's layer from", dev, err);
	/* The fs context (closed on return) would pin the filesystem too: only the mount
	 * keeps it. */
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return mnt >= 0 ? mnt : cell_err(err, errno, "fsmount of %s", dev);
}

/* The loop device that has image attached, in dev: 0, or -ENOENT when none has (any
 * more). */
static int loop_find(int image, char *dev, size_t size)
{
	struct stat st;
	if (fstat(image, &st) < 0)
		return -errno;
	_cleanup_closedir_ DIR *d = opendir("/sys/class/block");
	if (!d)
		return -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned n;
		char tail;
		if (sscanf(de->d_name, "loop%u%c", &n, &tail) != 1)
			continue;
		snprintf(dev, size, "/dev/loop%u", n);
		_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
		struct loop_info64 info;
		if (fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &info) == 0 &&
		    info.lo_device == (uint64_t)st.st_dev && info.lo_inode == (uint64_t)st.st_ino)
			return 0;
	}
	return -ENOENT;
}

/* The filesystem of an image that is attached already: mounted again from its device (the
 * kernel hands back the same superblock). -EAGAIN when the device let go meanwhile. */
static int mount_attached(int image, struct cell_error *err)
{
	char dev[32];
	if (loop_find(image, dev, sizeof(dev)) < 0)
		return -EAGAIN;
	struct cell_error e = {0};
	int mnt = ext4_mount(dev, &e);
	if (mnt >= 0)
		return mnt;
	if (mnt == -ENXIO || mnt == -ENODEV || mnt == -EINVAL || mnt == -ENOENT)
		return -EAGAIN;
	if (err)
		*err = e;
	return mnt;
}

/* An image that may be mounted already: locked and attached when free, else shared with
 * whoever has it attached. */
static int mount_shared(int image, const char *dir, struct cell_error *err)
{
	for (int waited = 0;; waited += IMAGE_LOCK_STEP_MS) {
		if (flock(image, LOCK_EX | LOCK_NB) == 0) {
			char dev[32];
			_cleanup_close_ int loop = loop_attach(image, dev, sizeof(dev), err);
			return loop < 0 ? loop : ext4_mount(dev, err);
		}
		if (errno != EWOULDBLOCK && errno != EINTR)
			return cell_err(err, errno, "locking %s/" IMAGE_NAME, dir);
		int mnt = mount_attached(image, err);
		if (mnt != -EAGAIN)
			return mnt;
		if (waited >= IMAGE_LOCK_WAIT_MS)
			return cell_err(err, EBUSY, "%s/" IMAGE_NAME " is locked but not attached",
					dir);
		struct timespec ts = {0, IMAGE_LOCK_STEP_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

int cell_loop_mount_image(int dirfd, const char *dir, const char *templates_dir, uint64_t bytes,
			  bool shared, struct cell_error *err)
{
	bytes -= bytes % LOOP_BLOCK_SIZE; /* a quota is a maximum: round down */
	if (bytes < CELL_QUOTA_LOOP_MIN)
		return cell_err(err, EINVAL, "disk quota %" PRIu64 " bytes: the least is %llu MiB",
				bytes, CELL_QUOTA_LOOP_MIN >> 20);
	_cleanup_close_ int image = image_open(dirfd, dir, templates_dir, bytes, err);
	if (image < 0)
		return image;
	if (shared)
		return mount_shared(image, dir, err);
	int r = image_lock(image, dir, err);
	if (r < 0)
		return r;
	char dev[32];
	/* Closed on return: from then on the mount is the device's only user. */
	_cleanup_close_ int loop = loop_attach(image, dev, sizeof(dev), err);
	if (loop < 0)
		return loop;
	return ext4_mount(dev, err);
}
