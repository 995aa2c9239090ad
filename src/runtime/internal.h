/* Declarations shared by the files of src/runtime/ only (not part of the public surface).
 *
 * Functions named cell_child_* run in the cloned child before it execs cell-init. celld is
 * multi-threaded, so the child may hold copies of locks another thread had taken: these
 * functions only make system calls and read memory prepared by the parent before clone —
 * no malloc, no stdio, no snprintf. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cell/error.h"
#include "cell/runtime.h"

#define CELL_N_DEVNODES 6 /* null zero full random urandom tty */

/* A failure in the child, written as-is to the sync socket before _exit(1). */
struct cell_child_err {
	int step;
	int errno_value;
	char what[128];
};

enum cell_child_step {
	CELL_STEP_RECV = 1,
	CELL_STEP_PRIVATE,
	CELL_STEP_DEVNODES,
	CELL_STEP_ROOTFS,
	CELL_STEP_IDS,
	CELL_STEP_CGROUPNS,
	CELL_STEP_PROC,
	CELL_STEP_SYS,
	CELL_STEP_DEV,
	CELL_STEP_DEVPTS,
	CELL_STEP_SHM,
	CELL_STEP_TMP,
	CELL_STEP_WORKSPACE,
	CELL_STEP_VOLUME,
	CELL_STEP_PIVOT,
	CELL_STEP_HOSTNAME,
	CELL_STEP_LOOPBACK,
	CELL_STEP_FDS,
	CELL_STEP_EXEC,
	CELL_STEP_CGROUP,
	CELL_STEP_CGROUPFS,
	CELL_STEP_MASKS,
	CELL_STEP_BOOT_ID,
	CELL_STEP_RLIMITS,
	CELL_STEP_CAPS,
	CELL_STEP_SECCOMP,
	CELL_STEP_RESOLV,
};

/* child.c: fill ce with "<what> <path>" (path may be NULL) and return -errno. errnum may
 * be given positive or negative. Async-signal-safe. */
int cell_child_fail(struct cell_child_err *ce, int step, int errnum, const char *what,
		    const char *path);
/* child.c: write ce as-is to the sync socket (the parent reads it instead of the EOF of a
 * successful exec) and _exit(1). */
_Noreturn void cell_child_exit(int sync_fd, const struct cell_child_err *ce);

/* fdpass.c: one fd over a Unix socket (SCM_RIGHTS, one byte of data). 0 or -errno;
 * cell_recv_fd gives -EPIPE at EOF, -EPROTO for a message without exactly one fd. */
int cell_send_fd(int sock, int fd);
int cell_recv_fd(int sock, int *fd);

/* userns.c */
int cell_userns_write_maps(pid_t pid, uint32_t uid_base, struct cell_error *err);
int cell_userns_open(pid_t pid, struct cell_error *err);
/* The calling thread alone acts as host uid owner (capabilities and fsuid 0 kept) until
 * cell_userns_owner_end: a user namespace it makes meanwhile is owned by owner, whose
 * per-user pools it draws on. *securebits: the thread's before, for _end and for the child's
 * cell_userns_owner_reset (-errno), which a child cloned meanwhile calls first. */
int cell_userns_owner_begin(uint32_t owner, int *securebits, struct cell_error *err);
void cell_userns_owner_end(int securebits);
int cell_userns_owner_reset(int securebits);
/* A user namespace with these uid_map and gid_map lines, made only to idmap a mount; an fd
 * of it or -errno. */
int cell_userns_make(const char *uid_map, const char *gid_map, struct cell_error *err);

/* private_ns.c: fn(scratch, arg, err) on a short-lived thread in a private copy of the
 * mount namespace, with an empty tmpfs attached on scratch (an empty dir of the sandbox)
 * that only the thread sees; fn's result. Whatever fn attaches ends with the thread. */
typedef int (*cell_private_fn)(int scratch, void *arg, struct cell_error *err);
int cell_in_private_mount_ns(const char *scratch, cell_private_fn fn, void *arg,
			     struct cell_error *err);
/* Attach fd (the root of a detached mount) on <scratch>/<name>, made if missing: 0, or
 * -errno (-EINVAL when fd is not a detached mount's root but a directory of an attached
 * mount, which the private namespace already shows). */
int cell_private_attach(int fd, int scratch, const char *name);

/* mount.c, parent side: detached mounts, never attached in the host's namespace. */
/* overlay.c: the root overlay (the image's n lower dirs, top first, each idmapped to
 * userns_fd; upper_name (NULL: upper/) and work/ in layer_dir) as a detached mount fd.
 * scratch: an empty dir of the sandbox (its rootfs/), used only in a private mount
 * namespace on kernels whose overlayfs refuses detached layers. */
int cell_mount_overlay_fd(const char *const *lowers, size_t n, const char *layer_dir,
			  const char *upper_name, const char *scratch, int userns_fd,
			  struct cell_error *err);
/* The volume as a detached mount, its ids mapped as vol->map says; sandbox_userns is the
 * sandbox's own user namespace (the IDENTITY map). scratch as for the overlay (a named
 * volume's subtree of a detached mount is copied in a private namespace on old kernels). */
int cell_mount_volume_fd(const struct cell_volume *vol, uint32_t uid_base, int sandbox_userns,
			 const char *scratch, struct cell_error *err);

/* mount.c, child side. The parent fills rootfs, volumes and n_volumes before clone; the
 * child fills the fds. */
struct cell_mount_plan {
	const char *rootfs; /* host path <dir>/rootfs */
	const struct cell_volume *volumes;
	size_t n_volumes;
	/* size= of /tmp and /dev/shm in bytes, decimal ("" = the kernel's default, half the
	 * host's memory): half the sandbox's memory limit each, so filling them ends in
	 * ENOSPC rather than in an OOM kill that cannot free tmpfs pages. */
	char tmpfs_size[24];
	bool oci; /* no /tmp tmpfs, no /workspace (struct cell_spawn_req) */
	const struct cell_tmpfs *tmpfs;
	size_t n_tmpfs;
	int host_sys_fd; /* oci: a clone of the host's /sys, for a network joined from it */
	int overlay_fd;
	int volume_fds[CELL_MAX_VOLUMES];
	int devnode_fds[CELL_N_DEVNODES];
};

/* Host-path steps, while the child is still host uid 0 (the sandbox dir is 0700 root):
 * private propagation, clones of the host device nodes, the overlay moved onto rootfs.
 * Returns an O_PATH fd of the new root or -errno. */
int cell_child_mount_prepare(struct cell_mount_plan *plan, struct cell_child_err *ce);
/* After the id switch: /proc, /sys, /dev, /tmp, /workspace, volumes, all fd-relative. */
int cell_child_mount_populate(const struct cell_mount_plan *plan, int rootfd,
			      struct cell_child_err *ce);
int cell_child_pivot_root(int rootfd, struct cell_child_err *ce);
/* overlay.c: dir as a detached mount idmapped into the user namespace, nodev, read-only
 * when asked (cell-oci's root directory). */
int cell_mount_dir_tree_fd(const char *dir, int userns_fd, bool read_only, struct cell_error *err);

/* mount_cgroup.c: the sandbox's own cgroup, read-only at /sys/fs/cgroup (through its
 * cgroup namespace), so runtimes that size themselves from cgroup limits see the sandbox's.
 * The backends' mount_inside: after populate, before pivot_root; rootfd as for populate.
 * cgroup2: one mount (v2 host). hybrid: the v1 hierarchies of layout (read before clone)
 * under a tmpfs. */
struct cell_cg_layout;
int cell_child_mount_cgroup2(int rootfd, struct cell_child_err *ce);
int cell_child_mount_cgroup_hybrid(const struct cell_cg_layout *layout, int rootfd,
				   struct cell_child_err *ce);

/* masks.c: after pivot_root, /proc and /sys paths masked or made read-only. */
int cell_child_mask_paths(struct cell_child_err *ce);
/* bootid.c: a fresh boot id of the sandbox's own over the kernel's (after the masks). */
int cell_child_boot_id(struct cell_child_err *ce);

/* rlimits.c: setrlimit for each; after the fds are set up. */
int cell_child_set_rlimits(const struct cell_rlimit *rl, size_t n, struct cell_child_err *ce);

/* caps.c: bounding, permitted, effective to the kept set; inheritable and ambient cleared;
 * no_new_privs on. Second to last before exec. */
/* allow_setuid: no_new_privs is not set (struct cell_spawn_req). */
int cell_child_drop_privileges(bool allow_setuid, struct cell_child_err *ce);

/* seccomp.c: install prog (last before exec). With prog->notify, the listener fd is sent on
 * notify_sock (SCM_RIGHTS) for the parent to take after the exec. */
/* Sets no_new_privs first unless allow_setuid (the caller then still holds
 * CAP_SYS_ADMIN). */
int cell_child_apply_seccomp(const struct cell_seccomp_prog *prog, bool allow_setuid,
			     int notify_sock, struct cell_child_err *ce);

/* held.c: the root overlay of each live sandbox, held by the runtime (keyed by the host pid
 * of its PID 1) so that its final release, which syncs the upper filesystem, happens off
 * the path of a delete. hold takes the fd; release hands it to a closer thread. */
void cell_mount_hold(pid_t pid, int fd);
void cell_mount_release(pid_t pid);

/* loopdev.c, for quota.c: <dir>/disk.img of bytes (the existing one, or a sparse copy of
 * the template of that size in templates_dir, formatted when missing; NULL: formatted in
 * place) on a loop device that clears itself, its ext4 mounted detached. Returns the mount
 * fd (its only holder) or -errno. shared: an image already attached (mounted by a sandbox)
 * is mounted again from its loop device, sharing its filesystem, instead of waited for. */
int cell_loop_mount_image(int dirfd, const char *dir, const char *templates_dir, uint64_t bytes,
			  bool shared, struct cell_error *err);

/* cgroup_v1.c: the v1 backend on a host without the cgroup2 "unified" mount. */
extern const struct cell_cgroup_ops cell_cgroup_v1_plain_ops;

/* Joining the sandbox's cgroup without migrating a running process. A migration by pid
 * (a write to cgroup.procs) takes the kernel's global threadgroup lock for writing, which
 * waits for an RCU grace period: ~10 ms on an idle host, most of a sandbox's start. So the
 * child is born into its cgroup2 cgroup (clone3 CLONE_INTO_CGROUP), and on v1 hierarchies
 * it moves itself: a thread writing "0" to a v1 "tasks" file migrates only itself and the
 * kernel skips that lock. The fds are opened by the parent (host root; v1 checks the
 * opener's credentials), before clone. */
#define CELL_CGROUP_JOIN_MAX 8

struct cell_cgroup_join {
	int clone_fd;			    /* cgroup2 dir for CLONE_INTO_CGROUP, or -1 */
	int task_fds[CELL_CGROUP_JOIN_MAX]; /* v1 <hier>/<rel>/tasks, "0" written by the child */
	size_t n_task_fds;
	bool by_pid; /* no ops->join_open: the parent attaches by pid after clone (attach) */
};

/* cgroup.c: fill j for rel under ops (the cgroup exists), through ops->join_open. On
 * failure j holds no fd. */
int cell_cgroup_join_open(const struct cell_cgroup_ops *ops, const char *rel,
			  struct cell_cgroup_join *j, struct cell_error *err);
void cell_cgroup_join_close(struct cell_cgroup_join *j);
