/* The sandbox's user namespace: uid/gid maps and a handle on it for idmapped mounts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "internal.h"

/* Maps ids 0..65535 inside to uid_base.. on the host, for uids and gids alike. Written by
 * the parent (host root) while the child waits: only a privileged writer may map a range
 * other than its own uid. Host root (0) is never in the range: the caller checked
 * uid_base >= CELL_UID_RANGE. The pid is our unreaped child, so /proc/<pid> is stable. */
int cell_userns_write_maps(pid_t pid, uint32_t uid_base, struct cell_error *err)
{
	static const char *const maps[] = {"uid_map", "gid_map"};
	char line[64];
	snprintf(line, sizeof(line), "0 %u %u\n", uid_base, CELL_UID_RANGE);
	for (size_t i = 0; i < 2; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, maps[i]);
		int r = cell_write_string(path, line, err);
		if (r < 0)
			return cell_err_wrap(err, "writing the %s: ", maps[i]);
	}
	return 0;
}

int cell_userns_open(pid_t pid, struct cell_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	return fd;
}
