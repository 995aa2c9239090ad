/* Creating and tearing down the kernel side of a sandbox.
 *
 * celld calls cell_spawn() with everything decided in advance (paths, uid range, image).
 * The steps run in one fixed order (see src/runtime/spawn.c): clone3 into new user, mount,
 * pid, net, ipc and uts namespaces → uid/gid map (0 → uid_base, 65536 ids) → cgroup →
 * idmapped read-only image mount + overlay (built by the parent, detached) handed to the
 * child → child: private mounts, cgroup namespace, overlay moved to <dir>/rootfs, /proc,
 * /sys (ro), /dev (tmpfs + bind-mounted null zero full random urandom tty, devpts
 * newinstance, shm), /tmp, /workspace, volumes → pivot_root → hostname, loopback up →
 * fexecve of the sealed cell-init memfd as PID 1 with the relay socket as fd 3.
 *
 * Nothing is mounted in the host's mount namespace: every mount lives in the sandbox's
 * own, and disappears with it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cell/cgroup.h"
#include "cell/error.h"

struct sock_filter;

#define CELL_UID_RANGE 65536u

/* How a volume's host ids appear inside (man/cell-security.7, "Volumes"). Whatever the
 * mapping, a volume is mounted nosuid and nodev in the sandbox. */
enum cell_volume_map {
	/* No mapping: the sandbox's ids are its own reserved host range, so what it creates
	 * belongs to that range and the files of host accounts show as nobody. */
	CELL_VOLUME_MAP_RANGE,
	/* The sandbox's root (uid and gid 0) is owner_uid (and owner_gid) on the host, every
	 * other sandbox id its own range: files come back owned by the directory's owner. */
	CELL_VOLUME_MAP_OWNER,
	/* Host ids 0..65535 are the sandbox's 0..65535: its root is host root on the volume
	 * (set-id files, file capabilities). Only on an operator's explicit request. */
	CELL_VOLUME_MAP_IDENTITY,
	/* Ids store_base..store_base+65535 on disk are the sandbox's 0..65535 (celld's named
	 * volumes): whichever sandbox mounts the volume owns what an earlier one wrote, and
	 * on disk the files belong to a range no account and no sandbox runs as. */
	CELL_VOLUME_MAP_STORE,
};

struct cell_volume {
	/* A host volume: absolute host path, must exist; no symlink on the way to it. NULL
	 * for a named volume, whose files are taken from source_fd instead. */
	const char *host;
	/* A named volume: an O_PATH fd of its filesystem's root (a detached mount, or a
	 * directory of the host), and the directory below it to mount (relative, resolved
	 * beneath source_fd without following a symlink or crossing a mount). */
	int source_fd;
	const char *sub_path;
	const char *dest; /* absolute path inside the sandbox, created if missing */
	bool read_only;
	enum cell_volume_map map;
	uint32_t owner_uid, owner_gid; /* OWNER: the host ids the sandbox's root becomes */
	bool map_gid;		       /* OWNER: gid 0 is owner_gid (else it stays in the range) */
	uint32_t store_base;	       /* STORE: the on-disk id of the sandbox's root */
};

/* A tmpfs a container asks for (cell-oci: a spec's tmpfs mount, /run in containerd's
 * default spec), mounted nosuid and nodev. */
struct cell_tmpfs {
	const char *dest; /* absolute, as cell_mount_check_dest takes it */
	char mode[8];	  /* octal, "" for the kernel's 1777 */
	char size[24];	  /* tmpfs size= ("64m", bytes), "" for the default */
	bool noexec, read_only;
};

#define CELL_MAX_TMPFS 16

/* A volume's dest as the runtime takes it: absolute, no '.' or '..' component, not / nor
 * under /proc, /sys or /dev. 0, or -EINVAL/-ENAMETOOLONG with err saying why. */
int cell_mount_check_dest(const char *dest, struct cell_error *err);

/* A compiled seccomp filter (classic BPF, built by celld from a profile in
 * policies/seccomp/ with libseccomp; see include/cell/seccomp.h). The child installs it
 * last, right before exec, so it covers cell-init and every command. */
struct cell_seccomp_prog {
	const struct sock_filter *filter;
	unsigned short len;
	bool notify; /* install with a user-notification listener (denied calls logged) */
};

/* One resource limit set in the child before exec (RLIMIT_CORE 0 by default). */
struct cell_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t soft, hard;
};

#define CELL_MAX_RLIMITS 16
/* Volumes of one sandbox at most. */
#define CELL_MAX_VOLUMES 64
/* Lower dirs of an image at most (a manifest's layers). */
#define CELL_IMAGE_LAYERS_MAX 128

struct cell_spawn_req {
	const char *id;
	const char *dir; /* the sandbox's state dir: holds upper/ work/ rootfs/ init.sock */
	const char *image_rootfs; /* <images>/<name>/rootfs, owned by host root, never written */
	/* An image of several layers: its lower dirs, top first (the first is image_rootfs);
	 * NULL (or 0): image_rootfs alone. Each owned by host root, never written. */
	const char *const *image_layers;
	size_t n_image_layers;
	uint32_t uid_base; /* first host uid/gid of the sandbox's range */
	const char *hostname;
	/* The text of the sandbox's /etc/resolv.conf, written into its root before exec (its
	 * resolver on the host side of its network); NULL: the image's stays. */
	const char *resolv_conf;
	int init_exe_fd; /* sealed memfd holding the cell-init binary */
	const struct cell_cgroup_ops *cgroup;
	const char *cgroup_rel;
	const struct cell_volume *volumes;
	size_t n_volumes;
	/* Where upper/ and work/ of the overlay live (a quota-limited filesystem, see
	 * include/cell/quota.h); NULL: dir itself. */
	const char *layer_dir;
	/* The upper dir's name in layer_dir; NULL: "upper" (cell-oci: an engine's snapshot,
	 * "fs" for containerd's, "diff" for dockerd's). */
	const char *upper_name;
	/* Applied to the cgroup after it is created and before the child is born; NULL:
	 * none. */
	const struct cell_limits *limits;
	const struct cell_rlimit *rlimits;
	size_t n_rlimits;
	/* NULL: no filter (only tests of the runtime itself do that). */
	const struct cell_seccomp_prog *seccomp;
	/* no_new_privs left off: set-user-ID programs (sudo, su) and file capabilities raise a
	 * command to the sandbox's root, within the bounding set (E2B's passwordless sudo).
	 * The filter is then installed before the capabilities are dropped, while the child
	 * still holds CAP_SYS_ADMIN in its user namespace (seccomp(2) needs one or the
	 * other). */
	bool allow_setuid;
	/* cell-oci (src/oci): the container's root is this directory, bound idmapped (read-only
	 * with root_readonly) instead of image layers under an overlay; no upper or work dir
	 * is made, image_rootfs and layer_dir are unused. */
	const char *root_dir;
	bool root_readonly;
	/* cell-oci: an OCI container rather than a sandbox. cell-init runs with --oci; no /tmp
	 * tmpfs, no /workspace and no line added to /etc/hosts (the image's and the engine's
	 * own). */
	bool oci;
	/* cell-oci: cell-init keeps the caller's stdio (the engine's pipes) for the container's
	 * process, instead of /dev/null. Not with a terminal: an engine waits for the EOF of
	 * the pipes it gave create, which cell-init would hold open for the container's life. */
	bool keep_stdio;
	/* CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS: not made, the caller joined them before the
	 * spawn (a pod's namespaces). */
	int joined_ns;
	/* cell-oci: tmpfs mounts, after cell's own and before the volumes. */
	const struct cell_tmpfs *tmpfs;
	size_t n_tmpfs;
};

struct cell_spawn_result {
	pid_t pid;	      /* host pid of the sandbox's PID 1 (cell-init) */
	int pidfd;	      /* pidfd for it (CLOEXEC), owned by the caller */
	uint64_t starttime;   /* field 22 of /proc/<pid>/stat, to recognise it after a restart */
	int seccomp_listener; /* user-notification fd when req->seccomp->notify, else -1 */
};

/* Create the upper/work/rootfs dirs (owned by the range), the relay socket
 * <dir>/init.sock, and the sandbox. On failure everything made so far is undone (process
 * killed, cgroup removed) except <dir> itself, which the caller owns. */
int cell_spawn(const struct cell_spawn_req *req, struct cell_spawn_result *out,
	       struct cell_error *err);

/* Ask a sandbox to end: SIGTERM to its PID 1 (cell-init passes it to every other process
 * of the sandbox and exits once they are all gone), then wait up to grace_ms for it to
 * exit. 0 when it did (or was gone), -ETIMEDOUT when it outlived the grace, -ESRCH when pid
 * is no longer the sandbox's. pidfd may be -1, as for cell_teardown, which follows in any
 * case. */
int cell_terminate(pid_t pid, int pidfd, uint64_t starttime, long grace_ms, struct cell_error *err);

/* Kill the sandbox's PID 1 (which takes its whole pid namespace with it), wait for it,
 * then kill and remove the cgroup. pidfd may be -1 (then pid + starttime are checked
 * before signalling, so a recycled pid is never hit). Idempotent. */
int cell_teardown(pid_t pid, int pidfd, uint64_t starttime, const struct cell_cgroup_ops *cg,
		  const char *cgroup_rel, struct cell_error *err);

/* Read field 22 (starttime) of /proc/<pid>/stat; 0 when the process is gone. */
uint64_t cell_proc_starttime(pid_t pid);

/* Copy the cell-init binary at path into a sealed, read-only memfd (the /proc/self/exe
 * overwrite class of CVE-2019-5736 cannot reach it). Returns the fd or -errno. */
int cell_init_memfd(const char *path, struct cell_error *err);
