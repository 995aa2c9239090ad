/* Choosing the backend once at start, and what spawn asks of whichever was chosen. Sits on
 * top of both backends (cgroup_v1.c, cgroup_v2.c), which share the helpers of
 * cgroup_fs.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cell/cgroup.h"
#include "cell/codec.h"
#include "cell/id.h"
#include "cgroup_fs.h"
#include "internal.h"

/* ---- joining: the backend's join_open, or the parent attaches by pid ---- */

void cell_cgroup_join_close(struct cell_cgroup_join *j)
{
	if (j->clone_fd >= 0)
		close(j->clone_fd);
	j->clone_fd = -1;
	for (size_t i = 0; i < j->n_task_fds; i++)
		close(j->task_fds[i]);
	j->n_task_fds = 0;
}

int cell_cgroup_join_open(const struct cell_cgroup_ops *ops, const char *rel,
			  struct cell_cgroup_join *j, struct cell_error *err)
{
	*j = (struct cell_cgroup_join){.clone_fd = -1};
	if (!ops->join_open)
		return j->by_pid = true, 0;
	int r = ops->join_open(rel, j, err);
	if (r < 0)
		cell_cgroup_join_close(j);
	return r;
}

/* ---- detection ---- */

static const struct cell_cgroup_ops *detected;

static bool is_fs(const char *path, long magic)
{
	struct statfs sfs;
	return statfs(path, &sfs) == 0 && sfs.f_type == magic;
}

static const struct cell_cgroup_ops *detect(struct cell_error *err)
{
	const char *root = cell_cgroup_fs_root();
	char path[PATH_MAX];
	if (is_fs(root, CGROUP2_SUPER_MAGIC))
		return &cell_cgroup_v2_ops;
	snprintf(path, sizeof(path), "%s/memory", root);
	if (!is_fs(path, CGROUP_SUPER_MAGIC)) {
		cell_err(err, ENOENT,
			 "no usable cgroup layout at %s (neither cgroup2 nor a v1 "
			 "memory hierarchy)",
			 root);
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/unified", root);
	return is_fs(path, CGROUP2_SUPER_MAGIC) ? &cell_cgroup_v1_ops : &cell_cgroup_v1_plain_ops;
}

const struct cell_cgroup_ops *cell_cgroup_detect(struct cell_error *err)
{
	const struct cell_cgroup_ops *ops = detect(err);
	if (ops && !detected) {
		cell_cgroup_fs_start(ops);
		if (ops->probe)
			ops->probe();
		detected = ops;
	}
	return ops;
}

int cell_cgroup_name(const char *state_dir, const char *id, char *buf, size_t size)
{
	if (!cell_id_valid(id) || !state_dir || state_dir[0] != '/')
		return -EINVAL;
	size_t len = strlen(state_dir);
	while (len > 1 && state_dir[len - 1] == '/')
		len--;
	int n;
	if (len == strlen(CELL_DEFAULT_STATE_DIR) &&
	    !strncmp(state_dir, CELL_DEFAULT_STATE_DIR, len)) {
		n = snprintf(buf, size, "cell/%s", id);
	} else {
		char hex[CELL_SHA256_HEX_LEN + 1];
		cell_sha256_hex(state_dir, len, hex);
		n = snprintf(buf, size, "cell-%.8s/%s", hex, id);
	}
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}
