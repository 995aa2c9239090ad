/* The cell-init binary, held in a sealed memfd that every sandbox executes. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/runtime.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: ask for an executable memfd explicitly */
#endif

#define INIT_EXE_MAX (256u << 20)

static int copy_all(int in, int out, const char *path, struct cell_error *err)
{
	char buf[65536];
	size_t total = 0;
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cell_err(err, errno, "reading %s", path);
		if (n == 0)
			return 0;
		if ((total += n) > INIT_EXE_MAX)
			return cell_err(err, EFBIG, "%s is larger than %u bytes", path,
					INIT_EXE_MAX);
		for (char *p = buf; n > 0;) {
			ssize_t w = write(out, p, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return cell_err(err, errno, "copying %s into a memfd", path);
			p += w;
			n -= w;
		}
	}
}

/* Sandboxes run cell-init from this sealed copy, never from the file on disk: a sandbox
 * that reopens /proc/1/exe for writing (the CVE-2019-5736 overwrite) hits the seals, and
 * replacing the file on disk later does not change what runs. */
int cell_init_memfd(const char *path, struct cell_error *err)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return cell_err(err, errno, "opening cell-init %s", path);
	struct stat st;
	if (fstat(in, &st) < 0)
		return cell_err(err, errno, "stat %s", path);
	if (!S_ISREG(st.st_mode))
		return cell_err(err, EINVAL, "cell-init %s is not a regular file", path);

	_cleanup_close_ int fd =
	    memfd_create("cell-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* kernel older than 6.3 */
		fd = memfd_create("cell-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return cell_err(err, errno, "memfd_create for cell-init");
	int r = copy_all(in, fd, path, err);
	if (r < 0)
		return r;
	if (fchmod(fd, 0555) < 0)
		return cell_err(err, errno, "chmod of the cell-init memfd");
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
		return cell_err(err, errno, "sealing the cell-init memfd");
	return move_fd(fd);
}
