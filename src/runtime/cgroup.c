/* cgroup layout detection and the path helpers both backends share. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "internal.h"

#define CGROUP_REL_MAX 200
#define PROCS_FILE_MAX (4u << 20)

const char *cell_cgroup_root(void)
{
	const char *root = getenv("CELL_CGROUP_ROOT");
	return root && root[0] == '/' ? root : "/sys/fs/cgroup";
}

/* rel is built by celld from a validated id, but it still becomes part of paths that are
 * mkdir'd and rmdir'd as root: accept only plain components, never "..". */
bool cell_cgroup_rel_valid(const char *rel)
{
	if (!rel || !rel[0] || rel[0] == '/' || strlen(rel) > CGROUP_REL_MAX)
		return false;
	for (const char *c = rel; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
			return false;
		for (size_t i = 0; i < len; i++)
			if (!(c[i] >= 'a' && c[i] <= 'z') && !(c[i] >= '0' && c[i] <= '9') &&
			    c[i] != '-' && c[i] != '_' && c[i] != '.')
				return false;
		c += len;
		if (*c == '/' && !*++c)
			return false;
	}
	return true;
}

int cell_cgroup_path(char *buf, size_t size, const char *hier, const char *rel, const char *file)
{
	int n = snprintf(buf, size, "%s%s%s/%s%s%s", cell_cgroup_root(), hier[0] ? "/" : "", hier,
			 rel, file ? "/" : "", file ? file : "");
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int cell_cgroup_mkdir(const char *hier, const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	if (cell_cgroup_path(path, sizeof(path), hier, rel, NULL) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	/* Only the components of rel are created: the hierarchy root must already exist. */
	char *p = path + strlen(path) - strlen(rel);
	for (;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return cell_err(err, errno, "creating cgroup %s", path);
		*p = saved;
		if (!saved)
			return 0;
	}
}

int cell_cgroup_rmdir(const char *hier, const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	if (cell_cgroup_path(path, sizeof(path), hier, rel, NULL) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	if (rmdir(path) < 0 && errno != ENOENT)
		return cell_err(err, errno, "removing cgroup %s", path);
	/* The instance dir ("cell", "cell-xxxxxxxx") goes when its last sandbox went; another
	 * sandbox still in it (EBUSY/ENOTEMPTY) or a concurrent removal is fine. */
	char *slash = strrchr(path + strlen(path) - strlen(rel), '/');
	if (slash) {
		*slash = '\0';
		if (rmdir(path) < 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
			return cell_err(err, errno, "removing cgroup %s", path);
	}
	return 0;
}

int cell_cgroup_read_pids(const char *procs_path, pid_t **pids, size_t *n, struct cell_error *err)
{
	*pids = NULL;
	*n = 0;
	_cleanup_free_ char *text = NULL;
	struct cell_error rerr;
	int r = cell_read_file_at(AT_FDCWD, procs_path, PROCS_FILE_MAX, &text, NULL, &rerr);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return cell_err(err, -r, "reading %s", procs_path);
	size_t lines = 0;
	for (const char *c = text; *c; c++)
		lines += *c == '\n';
	_cleanup_free_ pid_t *out = calloc(lines + 1, sizeof(*out));
	if (!out)
		return cell_err(err, ENOMEM, "reading %s", procs_path);
	size_t count = 0;
	for (char *c = text; *c;) {
		char *end;
		long v = strtol(c, &end, 10);
		if (end == c || v <= 0 || v > INT_MAX || (*end != '\n' && *end != '\0'))
			return cell_err(err, EPROTO, "unexpected content in %s", procs_path);
		out[count++] = (pid_t)v;
		c = *end ? end + 1 : end;
	}
	*pids = steal_ptr(out);
	*n = count;
	return 0;
}

/* KILL_ROUNDS × POLLS_PER_ROUND × 5 ms: at most 10 s for a cgroup to empty after SIGKILL. */
#define KILL_ROUNDS	50
#define POLLS_PER_ROUND 40

int cell_cgroup_drain(const char *procs_path, int (*kill_round)(const char *, struct cell_error *),
		      const char *rel, struct cell_error *err)
{
	const struct timespec pause = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
	/* Usually empty already: killing the sandbox's PID 1 took its whole pid namespace
	 * along. An empty cgroup stays empty (only a member can fork into it, and only celld
	 * moves processes in), so there is nothing to freeze or signal. A missing procs file
	 * (no such cgroup) reads as empty. */
	_cleanup_free_ pid_t *first = NULL;
	size_t n_first;
	int r0 = cell_cgroup_read_pids(procs_path, &first, &n_first, err);
	if (r0 < 0)
		return r0;
	if (n_first == 0)
		return 0;
	for (int round = 0; round < KILL_ROUNDS; round++) {
		int r = kill_round(rel, err);
		if (r < 0)
			return r;
		for (int i = 0; i < POLLS_PER_ROUND; i++) {
			_cleanup_free_ pid_t *pids = NULL;
			size_t n;
			r = cell_cgroup_read_pids(procs_path, &pids, &n, err);
			if (r < 0)
				return r;
			if (n == 0)
				return 0;
			nanosleep(&pause, NULL);
		}
	}
	return cell_err(err, EBUSY, "%s still lists processes after SIGKILL", procs_path);
}

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
	int r;
	if (ops == &cell_cgroup_v2_ops)
		r = cell_cgroup_v2_join_open(rel, j, err);
	else if (ops == &cell_cgroup_v1_ops || ops == &cell_cgroup_v1_plain_ops)
		r = cell_cgroup_v1_join_open(rel, j, err);
	else
		return j->by_pid = true, 0;
	if (r < 0)
		cell_cgroup_join_close(j);
	return r;
}

static bool is_fs(const char *path, long magic)
{
	struct statfs sfs;
	return statfs(path, &sfs) == 0 && sfs.f_type == magic;
}

const struct cell_cgroup_ops *cell_cgroup_detect(struct cell_error *err)
{
	const char *root = cell_cgroup_root();
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
