/* Disk quota on a sandbox's writable layer (the overlay's upper/ and work/).
 *
 * Two ways, chosen per sandbox when it is created:
 *   project  the state dir's filesystem (ext4 or xfs) enforces project quotas: upper/ and
 *            work/ live in <dir>/layers, which carries a project id (the sandbox's uid_base,
 *            unique host-wide among live sandboxes) and FS_XFLAG_PROJINHERIT, and the
 *            project's block hard limit is the quota. Overlay copy-up creates files under
 *            upper/, so they inherit the id.
 *   loop     otherwise: an ext4 filesystem in a sparse image <dir>/disk.img of the quota's
 *            size (rounded down to 4 KiB; ext4's journal and inode tables take a few percent
 *            of it), on a loop device (autoclear). It is mounted detached (never in
 *            the host's mount namespace) and handed to the overlay through /proc/self/fd;
 *            the overlay's own reference keeps it mounted, so when the sandbox's last mount
 *            goes the filesystem is unmounted and the loop device frees itself (kernels
 *            whose overlayfs refuses detached layers: see src/runtime/overlay.c).
 * Either way, a write past the quota fails inside the sandbox with ENOSPC or EDQUOT, and
 * the host's disk use for the layer stays within the quota: overlayfs writes with its
 * creator's credentials minus CAP_SYS_RESOURCE, so host root's exemption from quotas and
 * reserved blocks never applies to a sandbox's writes.
 *
 * /tmp and /dev/shm of a sandbox are tmpfs (memory, charged to its memory cgroup): this
 * quota does not cover them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cell/error.h"

enum cell_quota_kind {
	CELL_QUOTA_NONE,    /* no quota: upper/ and work/ in the sandbox dir itself */
	CELL_QUOTA_PROJECT, /* <dir>/layers under a project quota */
	CELL_QUOTA_LOOP,    /* <dir>/disk.img, ext4 on a loop device */
};

/* The smallest loop image: below it ext4's own metadata (journal, inode tables) would take
 * most of the quota. */
#define CELL_QUOTA_LOOP_MIN (16ull << 20)

struct cell_quota_req {
	const char *dir; /* the sandbox's state dir (absolute, exists, 0700 root) */
	/* Where formatted empty images are kept, one per size, copied sparsely into each new
	 * sandbox (created 0700 when missing); NULL: format every image anew. */
	const char *templates_dir;
	uint32_t project_id; /* the sandbox's uid_base */
	uint64_t bytes;	     /* the quota; 0: none */
	/* The filesystem may be in use already (a named volume several sandboxes mount):
	 * a loop image that is attached is shared, never attached a second time. */
	bool shared;
};

struct cell_quota {
	enum cell_quota_kind kind;
	int mount_fd; /* loop: the detached mount of the image's filesystem, or -1 */
	/* What cell_spawn_req.layer_dir gets ("" with CELL_QUOTA_NONE: the sandbox dir). For
	 * a detached mount it names the fd ("/proc/self/fd/N"), valid until cell_quota_close. */
	char layer_dir[4096];
};

/* Set up the quota-limited dir that will hold upper/ and work/ (cell_spawn creates them in
 * q->layer_dir). An image or layers dir left by an earlier start of the same sandbox is
 * reused (its files are kept). On failure nothing is left mounted or attached; files in
 * dir are for cell_quota_release and the removal of dir. */
int cell_quota_prepare(const struct cell_quota_req *req, struct cell_quota *q,
		       struct cell_error *err);
/* Drop celld's references once cell_spawn returned (success or not): from then on only the
 * sandbox's overlay holds the filesystem. */
void cell_quota_close(struct cell_quota *q);
/* Before dir is removed: clear the project quota limit of <dir>/layers. Works from what
 * is on disk (after a restart, or for a dir without state.json). Missing pieces are
 * success. */
int cell_quota_release(const char *dir, struct cell_error *err);

struct cell_quota_usage {
	enum cell_quota_kind kind;
	uint64_t limit_bytes; /* the quota (project hard limit, or image size) */
	/* Bytes in use on the layer. loop: blocks in use in the filesystem (ext4's own
	 * metadata included) while the sandbox runs, else the image's allocated size on the
	 * host. */
	uint64_t used_bytes;
	uint64_t avail_bytes; /* what the sandbox can still write; 0 when not known */
};

/* The quota and use of the sandbox in dir. pid/starttime: its cell-init (0 when not
 * running); a loop layer is measured through /proc/<pid>/root, whose filesystem (the
 * overlay) reports its upper filesystem. */
int cell_quota_usage(const char *dir, pid_t pid, uint64_t starttime, struct cell_quota_usage *out,
		     struct cell_error *err);

/* The same for the sandbox dir open at dirfd (an O_PATH fd will do): no path walked. */
int cell_quota_usage_at(int dirfd, pid_t pid, uint64_t starttime, struct cell_quota_usage *out,
			struct cell_error *err);

const char *cell_quota_kind_name(enum cell_quota_kind kind); /* "none" "project" "loop" */
