/* A recorded container's status (status.h). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/runtime.h"
#include "status.h"

/* A zombie has ended: only its parent (the engine's shim) has not reaped it yet. */
static bool zombie(pid_t pid)
{
	char path[32];
	_cleanup_free_ char *text = NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &text, NULL, NULL) < 0)
		return true;
	const char *end = strrchr(text, ')'); /* the name may hold anything, ')' too */
	return !end || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

bool oci_init_alive(const struct oci_state *st)
{
	return st->pid > 0 && cell_proc_starttime(st->pid) == st->starttime && !zombie(st->pid);
}

/* Frozen: v2's cgroup.events says "frozen 1", v1's freezer.state "FROZEN". */
static bool frozen(const char *cgroup)
{
	char path[1024];
	_cleanup_free_ char *text = NULL;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/cgroup.events", cgroup);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &text, NULL, NULL) == 0)
		return strstr(text, "frozen 1") != NULL;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/freezer/%s/freezer.state", cgroup);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &text, NULL, NULL) == 0)
		return strncmp(text, "FROZEN", 6) == 0;
	return false;
}

const char *oci_status(const struct oci_state *st)
{
	if (!oci_init_alive(st))
		return "stopped";
	if (!st->started)
		return "created";
	return st->cgroup && frozen(st->cgroup) ? "paused" : "running";
}

#define OCI_VERSION "1.2.0"

static void rfc3339(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	if (snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (int)(ms % 1000)) >= (int)size)
		buf[0] = '\0';
}

json_t *oci_state_json(const struct oci_state *st)
{
	char created[64];
	rfc3339(st->created_ms, created, sizeof(created));
	const char *status = oci_status(st);
	json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "ociVersion", OCI_VERSION,
			      "id", st->id, "pid", strcmp(status, "stopped") ? (int)st->pid : 0,
			      "status", status, "bundle", st->bundle ? st->bundle : "", "rootfs",
			      st->rootfs ? st->rootfs : "", "created", created, "owner", "");
	if (o && st->annotations)
		json_object_set(o, "annotations", st->annotations);
	return o;
}
