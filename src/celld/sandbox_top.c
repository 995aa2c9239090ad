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
#include "sandbox.h"
#include "sandbox_top.h"

#define STAT_MAX    2048
#define STATUS_MAX  8192
#define CGROUP_MAX  4096
#define MAP_MAX	    1024
#define CMDLINE_MAX 4096

/* What is left of one process's files. */
struct proc_view {
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

/* Whether a line of /proc/<pid>/cgroup ("hierarchy:controllers:/path") ends in rel. */
static bool in_cgroup(const char *text, const char *rel)
{
	size_t rl = strlen(rel);
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > rl + 1 && line[len - rl - 1] == '/' && !memcmp(line + len - rl, rel, rl))
			return true;
		line += len + (end ? 1 : 0);
	}
	return false;
}

/* The numbers after "key:" in status, the last (the innermost namespace's) or the first;
 * -1 when absent. */
static long status_field(const char *status, const char *key, bool last)
{
	size_t kl = strlen(key);
	for (const char *line = status; line && *line; line = strchr(line, '\n'), line += !!line) {
		if (strncmp(line, key, kl) || line[kl] != ':')
			continue;
		long v = -1;
		const char *c = line + kl + 1;
		while (*c && *c != '\n') {
			char *end;
			long n = strtol(c, &end, 10);
			if (end == c)
				break;
			v = n;
			if (!last)
				return v;
			c = end;
		}
		return v;
	}
	return -1;
}

/* The effective uid of status as the sandbox sees it, through the process's uid_map. */
static long inner_uid(int pidfd, const char *status)
{
	long host = -1;
	const char *line = strstr(status, "\nUid:");
	if (line) {
		char *end;
		strtol(line + 5, &end, 10); /* real */
		host = strtol(end, NULL, 10);
	}
	char map[MAP_MAX];
	if (host < 0 || read_bounded(pidfd, "uid_map", map, sizeof(map)) < 0)
		return -1;
	for (char *c = map; *c;) {
		unsigned long in, out, count;
		if (sscanf(c, "%lu %lu %lu", &in, &out, &count) == 3 &&
		    (unsigned long)host >= out && (unsigned long)host - out < count)
			return (long)(in + ((unsigned long)host - out));
		char *nl = strchr(c, '\n');
		if (!nl)
			break;
		c = nl + 1;
	}
	return -1;
}

/* The fields of stat after the command's name, whose closing parenthesis is the last one
 * (a name may hold any byte, parentheses and spaces included). */
struct stat_fields {
	char state;
	unsigned long long utime, stime, starttime;
	long rss_pages;
	char comm[32];
};

static int parse_stat(const char *text, struct stat_fields *f)
{
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	if (!open || !close || close < open)
		return -EPROTO;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(f->comm))
		n = sizeof(f->comm) - 1;
	memcpy(f->comm, open + 1, n);
	f->comm[n] = '\0';
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice threads itrealvalue starttime vsize rss */
	int got = sscanf(close + 1,
			 " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
			 "%*d %*d %llu %*u %ld",
			 &f->state, &f->utime, &f->stime, &f->starttime, &f->rss_pages);
	return got == 5 ? 0 : -EPROTO;
}

/* s (len bytes) with every byte outside printable ASCII and the backslash as \xNN, and
 * NULs (between arguments) as spaces; malloc'd. */
static char *escape_text(const char *s, size_t len)
{
	while (len && s[len - 1] == '\0')
		len--;
	char *out = malloc(len * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\0')
			*o++ = ' ';
		else if (c < 0x20 || c >= 0x7f || c == '\\')
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = (char)c;
	}
	*o = '\0';
	return out;
}

static json_t *command_json(const struct proc_view *v, const struct stat_fields *f)
{
	char *cmd;
	if (v->cmdline_len) {
		cmd = escape_text(v->cmdline, v->cmdline_len);
	} else {
		char bracket[sizeof(f->comm) + 2];
		int n = snprintf(bracket, sizeof(bracket), "[%s]", f->comm);
		cmd = escape_text(bracket, (size_t)n);
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
static json_t *process_json(int procfd, pid_t pid, const char *rel, struct proc_view *v,
			    int64_t booted_ms)
{
	char name[16];
	snprintf(name, sizeof(name), "%d", (int)pid);
	_cleanup_close_ int pidfd =
	    openat(procfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char cg[CGROUP_MAX];
	struct stat_fields f;
	if (pidfd < 0 || read_bounded(pidfd, "cgroup", cg, sizeof(cg)) < 0 || !in_cgroup(cg, rel) ||
	    read_bounded(pidfd, "stat", v->stat, sizeof(v->stat)) < 0 ||
	    parse_stat(v->stat, &f) < 0 ||
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
	    (int)status_field(v->status, "NSpid", true), "uid",
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
	_cleanup_free_ struct proc_view *v = malloc(sizeof(*v));
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
