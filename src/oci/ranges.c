/* Host id ranges of cell-oci's containers (ranges.h). The directory's flock serialises
 * every cell-oci on the host, whichever engine runs it; a reservation file is made with
 * O_EXCL under it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/runtime.h"
#include "ranges.h"

static int open_ranges(struct cell_error *err)
{
	int r = cell_mkdir_p(CELL_OCI_RANGES_DIR, 0700, err);
	if (r < 0)
		return r;
	int fd = open(CELL_OCI_RANGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", CELL_OCI_RANGES_DIR);
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "locking %s", CELL_OCI_RANGES_DIR);
	}
	return fd;
}

/* A reservation is stale when the container directory it names is gone. */
static bool stale(int dirfd, const char *slot)
{
	_cleanup_free_ char *text = NULL;
	if (cell_read_file_at(dirfd, slot, 8192, &text, NULL, NULL) < 0)
		return false;
	text[strcspn(text, "\n")] = '\0';
	struct stat st;
	return text[0] == '/' && lstat(text, &st) < 0 && errno == ENOENT;
}

int64_t oci_range_reserve(const char *root, const char *id, struct cell_error *err)
{
	_cleanup_close_ int dirfd = open_ranges(err);
	if (dirfd < 0)
		return dirfd;
	char line[8192];
	int len = snprintf(line, sizeof(line), "%s/%s\n", root, id);
	if (len < 0 || (size_t)len >= sizeof(line))
		return cell_err(err, ENAMETOOLONG, "container %s", id);
	for (uint32_t slot = 0; slot < CELL_OCI_SLOTS; slot++) {
		char name[16];
		snprintf(name, sizeof(name), "%u", slot);
		if (stale(dirfd, name))
			unlinkat(dirfd, name, 0);
		int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return cell_err(err, errno, "reserving a uid range");
		int w = cell_write_all(fd, line, (size_t)len);
		close(fd);
		if (w < 0) {
			unlinkat(dirfd, name, 0);
			return cell_err(err, -w, "reserving a uid range");
		}
		return (int64_t)CELL_OCI_UID_FIRST + (int64_t)slot * CELL_UID_RANGE;
	}
	return cell_err_msg(err, ENOSPC, "all %u uid ranges of cell-oci are taken", CELL_OCI_SLOTS);
}

void oci_range_release(uint32_t uid_base)
{
	if (uid_base < CELL_OCI_UID_FIRST || (uid_base - CELL_OCI_UID_FIRST) % CELL_UID_RANGE)
		return;
	uint32_t slot = (uid_base - CELL_OCI_UID_FIRST) / CELL_UID_RANGE;
	_cleanup_close_ int dirfd = open_ranges(NULL);
	if (dirfd < 0)
		return;
	char name[16];
	snprintf(name, sizeof(name), "%u", slot);
	unlinkat(dirfd, name, 0);
}
