/* The processes of a sandbox, from the host's /proc. Every file of /proc/<pid> is written
 * by (or shaped by) a process the sandbox runs, so each is hostile: opened relative to one
 * /proc fd without following links, read to a bound (a longer command line is cut), parsed
 * from the right where a name could fake fields, and its text escaped before it leaves.
 * A pid read from the cgroup may end and be reused before its files are read: a process
 * counts only when its own cgroup file names the sandbox's cgroup. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "config.h"
#include "proc_view.h"
#include "sandbox.h"
#include "sandbox_top.h"

#define STAT_MAX    2048
#define STATUS_MAX  8192
#define CGROUP_MAX  4096
#define MAP_MAX	    1024
#define CMDLINE_MAX 4096

/* What is read of one process's files. */
struct proc_files {
	char stat[STAT_MAX], status[STATUS_MAX], cmdline[CMDLINE_MAX];
	size_t cmdline_len;
};

/* Up to max-1 bytes of name in dirfd, NUL-terminated; the length, or -errno. */
static ssize_t read_bounded(int dirfd, const char *name, char *buf, size_t max)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len < max - 1) {
		ssize_t n = read(fd, buf + len, max - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				len = 0;
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

/* The effective uid of status as the sandbox sees it, through the process's uid_map. */
static long inner_uid(int pidfd, const char *status)
{
	char map[MAP_MAX];
	if (read_bounded(pidfd, "uid_map", map, sizeof(map)) < 0)
		return -1;
	return proc_view_inner_uid(status, map);
}

static json_t *command_json(const struct proc_files *v, const struct proc_stat *f)
{
	char *cmd;
	if (v->cmdline_len) {
		cmd = proc_view_escape(v->cmdline, v->cmdline_len);
	} else {
		char bracket[sizeof(f->comm) + 2];
		int n = snprintf(bracket, sizeof(bracket), "[%s]", f->comm);
		cmd = proc_view_escape(bracket, (size_t)n);
	}
	json_t *s = cmd ? json_string(cmd) : NULL;
	free(cmd);
	return s;
}

/* The boot's time in Unix ms: starttime counts from it. */
static int64_t boot_ms(void)
{
	struct timespec real, boot;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	return ((int64_t)real.tv_sec - boot.tv_sec) * 1000 +
	       (real.tv_nsec - boot.tv_nsec) / 1000000;
}

/* One process as the sandbox sees it; NULL when it is gone or not the sandbox's. */
static json_t *process_json(int procfd, pid_t pid, const char *rel, struct proc_files *v,
			    int64_t booted_ms)
{
	char name[16];
	snprintf(name, sizeof(name), "%d", (int)pid);
	_cleanup_close_ int pidfd =
	    openat(procfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char cg[CGROUP_MAX];
	struct proc_stat f;
	if (pidfd < 0 || read_bounded(pidfd, "cgroup", cg, sizeof(cg)) < 0 ||
	    !proc_view_in_cgroup(cg, rel) ||
	    read_bounded(pidfd, "stat", v->stat, sizeof(v->stat)) < 0 ||
	    proc_view_stat(v->stat, &f) < 0 ||
	    read_bounded(pidfd, "status", v->status, sizeof(v->status)) < 0)
		return NULL;
	ssize_t cl = read_bounded(pidfd, "cmdline", v->cmdline, sizeof(v->cmdline));
	v->cmdline_len = cl > 0 ? (size_t)cl : 0;
	long hz = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	if (hz <= 0)
		hz = 100;
	char state[2] = {isalpha((unsigned char)f.state) ? f.state : '?', '\0'};
	json_t *cmd = command_json(v, &f);
	if (!cmd)
		return NULL;
	return json_pack(
	    "{s:i, s:I, s:s, s:I, s:I, s:I, s:o}", "pid",
	    (int)proc_view_status_last(v->status, "NSpid"), "uid",
	    (json_int_t)inner_uid(pidfd, v->status), "state", state, "cpuUsec",
	    (json_int_t)((f.utime + f.stime) * 1000000ULL / (unsigned long long)hz), "rssBytes",
	    (json_int_t)(f.rss_pages > 0 ? f.rss_pages * page : 0), "startedAt",
	    (json_int_t)(booted_ms + (int64_t)(f.starttime * 1000ULL / (unsigned long long)hz)),
	    "command", cmd);
}

int sandbox_top_json(struct sandbox *sb, json_t **out, struct cell_error *err)
{
	*out = NULL;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	if (!celld.cgroup->list_pids)
		return cell_err(err, ENOTSUP, "the cgroup backend lists no processes");
	int r = celld.cgroup->list_pids(sb->cgroup_rel, &pids, &n, err);
	if (r < 0)
		return r;
	if (n == 0)
		return cell_err(err, ENOENT, "sandbox %s has no processes (not running)", sb->id);
	_cleanup_close_ int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return cell_err(err, errno, "opening /proc");
	_cleanup_free_ struct proc_files *v = malloc(sizeof(*v));
	json_t *list = json_array();
	if (!v || !list) {
		json_decref(list);
		return cell_err(err, ENOMEM, "the processes of %s", sb->id);
	}
	int64_t booted = boot_ms();
	size_t shown = 0;
	for (size_t i = 0; i < n && shown < SANDBOX_TOP_MAX; i++) {
		json_t *p = process_json(procfd, pids[i], sb->cgroup_rel, v, booted);
		if (p && json_array_append_new(list, p) == 0)
			shown++;
	}
	*out = json_pack("{s:s, s:o, s:b}", "id", sb->id, "processes", list, "truncated",
			 n > SANDBOX_TOP_MAX);
	return *out ? 0 : cell_err(err, ENOMEM, "the processes of %s", sb->id);
}
