/* The cgroup filesystem as both backends use it (cgroup_fs.h): paths below celld's own
 * cgroup, mkdir/rmdir, cgroup.procs, the kill loop, the layout of the host's mounts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cgroup_fs.h"

#define CGROUP_REL_MAX 200
#define PROCS_FILE_MAX (4u << 20)

const char *cell_cgroup_fs_root(void)
{
	const char *root = getenv("CELL_CGROUP_ROOT");
	return root && root[0] == '/' ? root : "/sys/fs/cgroup";
}

/* rel is built by celld from a validated id, but it still becomes part of paths that are
 * mkdir'd and rmdir'd as root: accept only plain components, never "..". */
bool cell_cgroup_fs_rel_valid(const char *rel)
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

int cell_cgroup_fs_path(char *buf, size_t size, const char *hier, const char *rel, const char *file)
{
	const char *prefix = cell_cgroup_fs_prefix(hier);
	int n =
	    snprintf(buf, size, "%s%s%s%s%s/%s%s%s", cell_cgroup_fs_root(), hier[0] ? "/" : "",
		     hier, prefix[0] ? "/" : "", prefix, rel, file ? "/" : "", file ? file : "");
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* mkdir every component of path from start on; 0 or -errno. path is left as it was. */
static int mkdir_components(char *path, char *start)
{
	for (char *p = start;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		int r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
		*p = saved;
		if (r < 0)
			return r;
		if (!saved)
			return 0;
	}
}

int cell_cgroup_fs_mkdir(const char *hier, const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	if (cell_cgroup_fs_path(path, sizeof(path), hier, rel, NULL) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	/* Only the components of rel are created: the hierarchy root must already exist. A
	 * component may vanish between its mkdir and its child's: the delete of the instance's
	 * last other sandbox removes the empty instance dir (cell_cgroup_fs_rmdir). Then the
	 * whole path is made again; once the child exists, the instance is not empty. */
	char *start = path + strlen(path) - strlen(rel);
	for (int attempt = 0;; attempt++) {
		int r = mkdir_components(path, start);
		if (r != -ENOENT || attempt == 16)
			return r < 0 ? cell_err(err, -r, "creating cgroup %s", path) : 0;
	}
}

/* RMDIR_BUSY_POLLS × 5 ms: at most 2 s for an emptied cgroup to be released. */
#define RMDIR_BUSY_POLLS 400

int cell_cgroup_fs_rmdir(const char *hier, const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	if (cell_cgroup_fs_path(path, sizeof(path), hier, rel, NULL) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	/* Emptied is not yet released: a killed task leaves cgroup.procs before the kernel
	 * drops its hold on the cgroup, so rmdir may say EBUSY for a moment. */
	const struct timespec pause = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
	int r = rmdir(path);
	for (int i = 0; r < 0 && errno == EBUSY && i < RMDIR_BUSY_POLLS; i++) {
		nanosleep(&pause, NULL);
		r = rmdir(path);
	}
	if (r < 0 && errno != ENOENT)
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

int cell_cgroup_fs_instance(const char *rel, char *buf, size_t size)
{
	const char *slash = cell_cgroup_fs_rel_valid(rel) ? strrchr(rel, '/') : NULL;
	if (!slash || (size_t)(slash - rel) >= size)
		return -EINVAL;
	snprintf(buf, size, "%.*s", (int)(slash - rel), rel);
	return 0;
}

/* memory.stat is the largest file read (about 2 KiB on v2); a longer one is cut. */
#define NUMBER_FILE_MAX 8192

static int keyed(const char *text, const char *key, uint64_t *out)
{
	size_t len = strlen(key);
	for (const char *c = text; c && *c; c = strchr(c, '\n'), c = c ? c + 1 : NULL)
		if (!strncmp(c, key, len) && c[len] == ' ') {
			*out = strtoull(c + len + 1, NULL, 10);
			return 0;
		}
	return -ENODATA;
}

int cell_cgroup_fs_u64(int dirfd, const char *file, const char *key, uint64_t *out)
{
	char buf[NUMBER_FILE_MAX];
	*out = 0;
	int fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	int r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return r;
	buf[n] = '\0';
	if (key)
		return keyed(buf, key, out);
	*out = strtoull(buf, NULL, 10);
	return 0;
}

int cell_cgroup_fs_read_pids(const char *procs_path, pid_t **pids, size_t *n,
			     struct cell_error *err)
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

int cell_cgroup_fs_drain(const char *procs_path,
			 int (*kill_round)(const char *, struct cell_error *), const char *rel,
			 struct cell_error *err)
{
	const struct timespec pause = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
	/* Usually empty already: killing the sandbox's PID 1 took its whole pid namespace
	 * along. An empty cgroup stays empty (only a member can fork into it, and only celld
	 * moves processes in), so there is nothing to freeze or signal. A missing procs file
	 * (no such cgroup) reads as empty. */
	_cleanup_free_ pid_t *first = NULL;
	size_t n_first;
	int r0 = cell_cgroup_fs_read_pids(procs_path, &first, &n_first, err);
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
			r = cell_cgroup_fs_read_pids(procs_path, &pids, &n, err);
			if (r < 0)
				return r;
			if (n == 0)
				return 0;
			nanosleep(&pause, NULL);
		}
	}
	return cell_err(err, EBUSY, "%s still lists processes after SIGKILL", procs_path);
}

/* ---- celld's own cgroup, and the layout a sandbox sees ----
 *
 * Nesting: a sandbox's cgroup goes below celld's own cgroup in each hierarchy
 * (/proc/self/cgroup at start), so whatever limit or accounting the host put on celld (a
 * service unit, a CI job's cgroup) covers its sandboxes too, instead of them escaping to the
 * root. v1 has no rule against processes beside child cgroups, so that is all it takes.
 * cgroup v2 forbids enabling controllers for children of a cgroup that holds processes
 * ("no internal processes"): there the backend's settle (cgroup_v2.c) nests in the parent
 * of a leaf named celld that celld was started in (a service manager's delegated
 * subgroup), else moves celld into a leaf "<own>/celld", and when that is not enough
 * (other processes stay, e.g. a login session) or the controllers were not delegated to
 * celld's cgroup, it falls back to the root and says so in the log. CELL_CGROUP_ROOT (tests)
 * turns nesting off: /proc/self/cgroup describes the real root only. */

#define OWN_MAX 16

struct own_cgroup {
	char controllers[64]; /* "memory", "cpu,cpuacct", "" for the v2 hierarchy */
	char path[512];	      /* relative, no slashes around it; "" at the root */
};

static struct own_cgroup own[OWN_MAX];
static size_t n_own;
static const struct cell_cgroup_ops *backend;
static pthread_once_t settle_once = PTHREAD_ONCE_INIT;
static bool no_nesting;

void cell_cgroup_no_nesting(void)
{
	no_nesting = true;
}

static bool list_has(const char *list, const char *word)
{
	size_t len = strlen(word);
	for (const char *c = list; *c;) {
		size_t n = strcspn(c, ",");
		if (n == len && !strncmp(c, word, len))
			return true;
		c += n;
		c += *c == ',';
	}
	return false;
}

static void load_own_cgroups(void)
{
	_cleanup_free_ char *text = NULL;
	if (no_nesting || getenv("CELL_CGROUP_ROOT") ||
	    cell_read_file_at(AT_FDCWD, "/proc/self/cgroup", 65536, &text, NULL, NULL) < 0)
		return;
	for (char *line = strtok(text, "\n"); line && n_own < OWN_MAX; line = strtok(NULL, "\n")) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c2 = '\0';
		const char *path = c2 + 2;
		/* "/" and paths the kernel shows outside our namespace ("/../x") stay at root. */
		if (strstr(path, "..") || strlen(path) >= sizeof(own[0].path) ||
		    strlen(c1 + 1) >= sizeof(own[0].controllers))
			continue;
		struct own_cgroup *o = &own[n_own++];
		snprintf(o->controllers, sizeof(o->controllers), "%s", c1 + 1);
		snprintf(o->path, sizeof(o->path), "%s", path);
		size_t len = strlen(o->path);
		while (len && o->path[len - 1] == '/')
			o->path[--len] = '\0';
	}
}

static struct own_cgroup *own_for(const char *hier)
{
	bool v2 = !hier[0] || !strcmp(hier, "unified");
	for (size_t i = 0; i < n_own; i++) {
		if (v2 ? !own[i].controllers[0] : list_has(own[i].controllers, hier))
			return &own[i];
		/* "cpu,cpuacct" as a directory name: every controller must be in the entry. */
		if (!v2 && strchr(hier, ',')) {
			bool all = true;
			char tmp[CELL_CG_NAME_MAX];
			snprintf(tmp, sizeof(tmp), "%s", hier);
			for (char *sp, *w = strtok_r(tmp, ",", &sp); w;
			     w = strtok_r(NULL, ",", &sp))
				all = all && list_has(own[i].controllers, w);
			if (all)
				return &own[i];
		}
	}
	return NULL;
}

/* The backend's settle may change the host's cgroups (v2 moves celld into a leaf), so it
 * runs on first use, not at detection: `celld --version` detects and changes nothing. */
static void settle(void)
{
	struct own_cgroup *o = own_for("");
	if (o && o->path[0] && backend->settle && !backend->settle(o->path))
		o->path[0] = '\0';
}

void cell_cgroup_fs_start(const struct cell_cgroup_ops *ops)
{
	load_own_cgroups();
	backend = ops;
}

const char *cell_cgroup_fs_prefix(const char *hier)
{
	if (!hier[0] && backend)
		pthread_once(&settle_once, settle);
	struct own_cgroup *o = own_for(hier);
	return o ? o->path : "";
}

/* The v1 hierarchies a sandbox sees read-only (mount_cgroup.c), from /proc/self/mountinfo:
 * each cgroup mount right under the root, with its controllers. */
static const char *const inside_controllers[] = {"cpu",	 "cpuacct", "memory",
						 "pids", "blkio",   "freezer"};

static void add_mount(struct cell_cg_layout *layout, const char *dir, const char *super_opts,
		      bool v2)
{
	if (layout->n_mounts == CELL_CG_MAX_MOUNTS || strlen(dir) >= CELL_CG_NAME_MAX)
		return;
	struct cell_cg_mount m = {.v2 = v2};
	snprintf(m.dir, sizeof(m.dir), "%s", dir);
	for (size_t i = 0; !v2 && i < CELL_ARRAY_SIZE(inside_controllers); i++)
		if (list_has(super_opts, inside_controllers[i]) && m.n_opts < CELL_CG_MAX_OPTS)
			snprintf(m.opts[m.n_opts++], sizeof(m.opts[0]), "%s",
				 inside_controllers[i]);
	/* A hierarchy with other controllers too (cpuset, devices) cannot be mounted with a
	 * subset; those and named ones (name=systemd) are not shown. */
	size_t commas = 0;
	for (const char *c = super_opts; *c; c++)
		commas += *c == ',';
	if (!v2 && (m.n_opts == 0 || commas + 1 != m.n_opts))
		return;
	layout->mounts[layout->n_mounts++] = m;
}

void cell_cgroup_fs_layout(struct cell_cg_layout *layout)
{
	const char *root = cell_cgroup_fs_root();
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	char line[4096];
	size_t rlen = strlen(root);
	while (fgets(line, sizeof(line), f)) {
		char mnt[1024], fstype[64], super[1024];
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %1023s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (strncmp(mnt, root, rlen) || mnt[rlen] != '/' || strchr(mnt + rlen + 1, '/'))
			continue;
		const char *dir = mnt + rlen + 1;
		if (!strcmp(fstype, "cgroup2") && !strcmp(dir, "unified"))
			add_mount(layout, dir, "", true);
		else if (!strcmp(fstype, "cgroup"))
			/* super options start with "rw,": skip them for the count. */
			add_mount(layout, dir, strchr(super, ',') ? strchr(super, ',') + 1 : "",
				  false);
	}
	fclose(f);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(inside_controllers); i++) {
		char path[PATH_MAX], target[CELL_CG_NAME_MAX];
		snprintf(path, sizeof(path), "%s/%s", root, inside_controllers[i]);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0 || layout->n_links == CELL_CG_MAX_MOUNTS)
			continue;
		target[n] = '\0';
		struct cell_cg_link *l = &layout->links[layout->n_links++];
		snprintf(l->name, sizeof(l->name), "%s", inside_controllers[i]);
		snprintf(l->target, sizeof(l->target), "%s", target);
	}
}
