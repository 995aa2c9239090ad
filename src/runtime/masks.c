/* Masked and read-only /proc and /sys paths.
 *
 * Runs right after pivot_root: "/" is the sandbox's root, /proc and /sys are the fresh
 * kernel mounts of mount.c, /dev/null is the host's node bind-mounted by mount.c, and no
 * process of the sandbox has run yet. Every target is opened fd-relative without following
 * a symlink, and mounted on through that fd (the symlink-race class of CVE-2021-30465).
 *
 * Why the masks hold although the sandbox's own mounts are not locked: this mount namespace
 * was created together with the sandbox's user namespace, so the kernel does not lock what
 * the child mounts here (MNT_LOCKED is only set when a less privileged namespace copies
 * mounts), and a process with CAP_SYS_ADMIN in that user namespace could umount a mask.
 * None can have it: caps.c removes CAP_SYS_ADMIN from the bounding set before cell-init
 * starts, so no execve, file capability or setuid binary gives it back, and the seccomp
 * profile denies the mount family besides. A nested user namespace does get every
 * capability, but only over a copy of this mount namespace, in which the kernel locks each
 * mount (and the read-only flag of each mask): it cannot umount, remount read-write or
 * see beneath them, and the visibility check refuses it a fresh proc or sysfs over masked
 * ones. Re-entering this namespace needs CAP_SYS_ADMIN over the sandbox's user namespace.
 * An extra user namespace layer just to lock these mounts would cost a second id map per
 * spawn and buy nothing the bounding set does not. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

enum protect { READ_ONLY, MASK };

/* The one table; man/cell-policy.5 (CAPABILITIES AND FILESYSTEM) documents it. Read-only
 * entries come first, so a mask under a read-only tree would land on top of it. A MASK on a
 * file gets the host's /dev/null (reads are empty, writes fail: read-only bind), on a
 * directory an empty read-only tmpfs. Paths a kernel lacks are skipped. */
static const struct {
	const char *path;
	enum protect how;
} protected_paths[] = {
    /* kernel.core_pattern, kernel.modprobe, fs.binfmt_misc and the rest of the sysctls
     * (the core_pattern/binfmt_misc escape class); net.* of the sandbox's own netns too */
    {"/proc/sys", READ_ONLY},
    {"/proc/sysrq-trigger", READ_ONLY}, /* host reboot, crash, OOM kill of anything */
    {"/proc/irq", READ_ONLY},		/* smp_affinity of host interrupts */
    {"/proc/bus", READ_ONLY},		/* PCI/USB config space of host devices */
    {"/proc/fs", READ_ONLY},		/* nfsd and other filesystems' knobs */
    {"/proc/kcore", MASK},		/* the host's physical memory as an ELF core */
    {"/proc/keys", MASK},		/* keyrings (names leak across namespaces) */
    {"/proc/key-users", MASK},		/* keyring usage per host uid */
    {"/proc/timer_list", MASK},		/* host timers: pids and functions of other tasks */
    {"/proc/timer_stats", MASK},	/* older kernels: the same */
    {"/proc/sched_debug", MASK},	/* every host task's name and pid */
    {"/proc/latency_stats", MASK},	/* host latency records (and a write resets them) */
    {"/proc/interrupts", MASK},		/* per-CPU interrupt counts: a keystroke side channel */
    {"/proc/acpi", MASK},		/* ACPI tables and (old kernels) writable knobs */
    {"/proc/asound", MASK},		/* the host's sound hardware */
    {"/proc/scsi", MASK},		/* host SCSI devices (and a legacy add/remove knob) */
    {"/sys/firmware", MASK},		/* ACPI/DMI/EFI tables, EFI variables */
    {"/sys/devices/virtual/powercap", MASK}, /* RAPL energy counters (CVE-2020-8694) */
};

/* The sandbox's root, to resolve paths in; the caller closes it. */
static int open_root(struct cell_child_err *ce)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, errno, "opening", "/");
	return fd;
}

/* A bind of what src points at, as a detached mount with attrs set (RDONLY at least). */
static int clone_of(int src, unsigned int attrs)
{
	_cleanup_close_ int tree =
	    open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return -errno;
	struct mount_attr attr = {.attr_set = attrs};
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return -errno;
	return move_fd(tree);
}

static int attach_on(int mnt, int target)
{
	if (move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

#define RO_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

/* What the masks are made of, prepared once per spawn. */
struct mask_src {
	int null;   /* O_PATH of the verified /dev/null */
	int tmpfs;  /* the empty read-only tmpfs, -1 until first needed */
	bool fresh; /* tmpfs not yet attached anywhere: attach it, not a clone */
};

/* Masks are made from the runtime's own /dev/null, checked to be the null device, never
 * from whatever a path in the sandbox happens to name (the class of CVE-2025-31133, where a
 * "/dev/null" swapped for a symlink turned masking into a bind of a writable procfs file). */
static int open_null(int rootfd, struct cell_child_err *ce)
{
	int fd = cell_open_in_root(rootfd, "/dev/null", O_PATH, 0, 1);
	if (fd < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, fd, "opening", "/dev/null");
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
		close(fd);
		return cell_child_fail(ce, CELL_STEP_MASKS, EPERM,
				       "not the null device:", "/dev/null");
	}
	return fd;
}

/* One superblock for every masked directory: read-only at the superblock too, and tiny. */
static int make_tmpfs(void)
{
	_cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "1", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, RO_ATTRS);
	return mnt < 0 ? -errno : mnt;
}

/* An empty read-only directory over target. The tmpfs is attached whole the first time;
 * later targets get binds of it (a detached mount cannot be cloned on every kernel). */
static int mask_dir(struct mask_src *src, int target)
{
	if (src->tmpfs < 0) {
		src->tmpfs = make_tmpfs();
		if (src->tmpfs < 0)
			return src->tmpfs;
		src->fresh = true;
	}
	if (src->fresh) {
		int r = attach_on(src->tmpfs, target);
		if (r == 0)
			src->fresh = false;
		return r;
	}
	_cleanup_close_ int mnt = clone_of(src->tmpfs, RO_ATTRS);
	return mnt < 0 ? mnt : attach_on(mnt, target);
}

/* /dev/null over target, read-only: reads are empty, an open for writing fails. It stays
 * a device (no nodev), so that a read gives EOF rather than EACCES. */
static int mask_file(const struct mask_src *src, int target)
{
	_cleanup_close_ int mnt =
	    clone_of(src->null, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	return mnt < 0 ? mnt : attach_on(mnt, target);
}

/* A read-only bind of target onto itself, keeping nosuid, nodev and noexec. */
static int make_read_only(int target)
{
	_cleanup_close_ int mnt = clone_of(target, RO_ATTRS);
	return mnt < 0 ? mnt : attach_on(mnt, target);
}

/* Apply how to path (relative to dirfd). A path the kernel does not have is skipped. */
static int protect_at(struct mask_src *src, int dirfd, const char *path, enum protect how,
		      struct cell_child_err *ce)
{
	_cleanup_close_ int target = cell_open_in_root(dirfd, path, O_PATH, 0, 1);
	if (target == -ENOENT)
		return 0;
	if (target < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, target, "opening", path);
	struct stat st;
	if (fstat(target, &st) < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, errno, "stat of", path);
	int r;
	if (how == READ_ONLY)
		r = make_read_only(target);
	else if (S_ISDIR(st.st_mode))
		r = mask_dir(src, target);
	else
		r = mask_file(src, target);
	if (r < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, r,
				       how == READ_ONLY ? "making read-only" : "masking", path);
	return 0;
}

/* /sys/devices/system/cpu/cpuN/thermal_throttle: the host's per-CPU throttling counters,
 * a side channel on other tenants' load. One directory per CPU, so they are found by
 * listing (getdents into a stack buffer: no allocation in the child). */
static bool is_cpu_dir(const char *name)
{
	if (strncmp(name, "cpu", 3) != 0 || !name[3])
		return false;
	for (const char *c = name + 3; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

static int mask_thermal_throttle(struct mask_src *src, int rootfd, struct cell_child_err *ce)
{
	static const char cpus[] = "/sys/devices/system/cpu";
	_cleanup_close_ int dir = cell_open_in_root(rootfd, cpus, O_RDONLY | O_DIRECTORY, 0, 1);
	if (dir == -ENOENT)
		return 0;
	if (dir < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, dir, "opening", cpus);
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
		if (n < 0)
			return cell_child_fail(ce, CELL_STEP_MASKS, errno, "listing", cpus);
		if (n == 0)
			return 0;
		for (long off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			if (d->d_type != DT_DIR || !is_cpu_dir(d->d_name))
				continue;
			_cleanup_close_ int cpu =
			    cell_open_in_root(dir, d->d_name, O_PATH | O_DIRECTORY, 0, 1);
			if (cpu == -ENOENT)
				continue;
			if (cpu < 0)
				return cell_child_fail(ce, CELL_STEP_MASKS, cpu, "opening",
						       d->d_name);
			int r = protect_at(src, cpu, "thermal_throttle", MASK, ce);
			if (r < 0)
				return r;
		}
	}
}

/* v in decimal at p (no NUL); its length. Not snprintf: the child may not (internal.h). */
static size_t put_uint(char *p, unsigned int v)
{
	char tmp[12];
	size_t n = 0, len = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(tmp));
	while (n)
		p[len++] = tmp[--n];
	return len;
}

/* ICMP echo without CAP_NET_RAW: the kernel's ping sockets (SOCK_DGRAM, IPPROTO_ICMP) are
 * open to the groups in this range, a knob of the sandbox's own network namespace. Every
 * gid of the sandbox may ping; raw sockets stay out of reach (see caps.c). Set before
 * /proc/sys goes read-only. A kernel without the knob (no IPv4) is skipped, and so is a
 * network namespace that is not the sandbox's (a pod's network a container of cell-oci
 * joined: its owner sets its knobs). */
static int allow_ping(int rootfd, struct cell_child_err *ce)
{
	static const char knob[] = "/proc/sys/net/ipv4/ping_group_range";
	_cleanup_close_ int fd = cell_open_in_root(rootfd, knob, O_WRONLY, 0, 1);
	if (fd == -ENOENT || fd == -EACCES || fd == -EPERM)
		return 0;
	if (fd < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, fd, "opening", knob);
	char val[32];
	size_t len = put_uint(val, 0);
	val[len++] = ' ';
	len += put_uint(val + len, CELL_UID_RANGE - 1);
	int r = cell_write_all(fd, val, len);
	if (r < 0)
		return cell_child_fail(ce, CELL_STEP_MASKS, r, "writing", knob);
	return 0;
}

int cell_child_mask_paths(struct cell_child_err *ce)
{
	_cleanup_close_ int rootfd = open_root(ce);
	if (rootfd < 0)
		return rootfd;
	int r = allow_ping(rootfd, ce);
	if (r < 0)
		return r;
	_cleanup_close_ int null = open_null(rootfd, ce);
	if (null < 0)
		return null;
	struct mask_src src = {.null = null, .tmpfs = -1};
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(protected_paths); i++)
		r = protect_at(&src, rootfd, protected_paths[i].path, protected_paths[i].how, ce);
	if (r == 0)
		r = mask_thermal_throttle(&src, rootfd, ce);
	if (src.tmpfs >= 0)
		close(src.tmpfs);
	return r;
}
