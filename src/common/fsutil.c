#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"

int cell_mkdir_p(const char *path, mode_t mode, struct cell_error *err)
{
	char buf[PATH_MAX];
	if (!path || path[0] != '/' || strlen(path) >= sizeof(buf))
		return cell_err(err, EINVAL, "mkdir -p: bad path '%s'", path ? path : "");
	strcpy(buf, path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return cell_err(err, errno, "mkdir %s", buf);
			*p = saved;
			if (!saved)
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return cell_err(err, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return cell_err(err, ENOTDIR, "%s", path);
	return 0;
}

int cell_open_in_root(int rootfd, const char *path, int flags, mode_t mode, int no_symlinks)
{
	struct open_how how = {
	    .flags = (uint64_t)flags | O_CLOEXEC,
	    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
	    .resolve =
		RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (no_symlinks ? RESOLVE_NO_SYMLINKS : 0),
	};
	/* EAGAIN means a concurrent rename raced the lookup; retry a bounded number of times
	 * so a sandbox renaming directories in a loop cannot make its caller spin forever. */
	int fd, tries = 0;
	do
		fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	while (fd < 0 && (errno == EINTR || errno == EAGAIN) && ++tries < 64);
	return fd < 0 ? -errno : fd;
}

int cell_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = {.fd = fd, .events = POLLOUT};
				poll(&pfd, 1, -1);
				continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cell_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
			   struct cell_error *err)
{
	char tmp[NAME_MAX + 1];
	if (snprintf(tmp, sizeof(tmp), ".%s.tmp%d", name, (int)getpid()) >= (int)sizeof(tmp))
		return cell_err(err, ENAMETOOLONG, "%s", name);
	_cleanup_close_ int fd =
	    openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return cell_err(err, errno, "creating %s", tmp);
	int w = cell_write_all(fd, data, len);
	if (w < 0) {
		unlinkat(dirfd, tmp, 0);
		return cell_err(err, -w, "writing %s", tmp);
	}
	if (fsync(fd) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
		int e = errno;
		unlinkat(dirfd, tmp, 0);
		return cell_err(err, e, "replacing %s", name);
	}
	return 0;
}

int cell_read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *out_len,
		      struct cell_error *err)
{
	*out = NULL;
	/* O_NONBLOCK: a FIFO planted where a file is expected must not block the open forever
	 * (it is refused as non-regular below); regular files ignore the flag. */
	_cleanup_close_ int fd =
	    openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return cell_err(err, errno, "stat %s", path);
	if (!S_ISREG(st.st_mode))
		return cell_err(err, EINVAL, "%s is not a regular file", path);
	size_t cap = 4096, len = 0;
	_cleanup_free_ char *buf = malloc(cap);
	if (!buf)
		return cell_err(err, ENOMEM, "reading %s", path);
	for (;;) {
		if (len + 1 >= cap) {
			if (cap > max + 1)
				return cell_err(err, EFBIG, "%s is larger than %zu bytes", path,
						max);
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				return cell_err(err, ENOMEM, "reading %s", path);
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cell_err(err, errno, "reading %s", path);
		if (n == 0)
			break;
		len += n;
		if (len > max)
			return cell_err(err, EFBIG, "%s is larger than %zu bytes", path, max);
	}
	buf[len] = '\0';
	*out = steal_ptr(buf);
	if (out_len)
		*out_len = len;
	return 0;
}

int cell_write_string(const char *path, const char *value, struct cell_error *err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	if (n < 0)
		return cell_err(err, errno, "writing '%s' to %s", value, path);
	if ((size_t)n != len)
		return cell_err(err, EIO, "short write to %s", path);
	return 0;
}

/* Depth-first removal. Each directory is opened with O_NOFOLLOW|O_DIRECTORY relative to its
 * parent's fd, so a symlink planted inside a sandbox's upper dir is unlinked, never
 * followed; a mount point below (st_dev differs) is refused rather than crossed. */
static int remove_tree_fd(int parent_fd, const char *name, dev_t dev, int depth,
			  struct cell_error *err)
{
	if (depth > 4096)
		return cell_err(err, ELOOP, "directory tree too deep at %s", name);
	if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return cell_err(err, errno, "unlinking %s", name);
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : cell_err(err, errno, "opening %s", name);
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		close(fd);
		return cell_err(err, EXDEV, "refusing to cross a mount at %s", name);
	}
	/* A directory with mode 000 (overlayfs work dirs) must still be emptied. */
	fchmod(fd, 0700);
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cell_err(err, errno, "listing %s", name);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = remove_tree_fd(dirfd(d), de->d_name, dev, depth + 1, err);
		if (r < 0)
			return cell_err_wrap(err, "%s/", name);
	}
	if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return cell_err(err, errno, "removing %s", name);
	return 0;
}

int cell_remove_tree_at(int dirfd, const char *name, struct cell_error *err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cell_err(err, errno, "stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return cell_err(err, errno, "unlinking %s", name);
		return 0;
	}
	return remove_tree_fd(dirfd, name, st.st_dev, 0, err);
}

void cell_pick_path(char *buf, size_t size, const char *flag, const char *beside, int mode,
		    const char *installed)
{
	if (flag) {
		snprintf(buf, size, "%s", flag);
		return;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
	if (slash) {
		*slash = '\0';
		int len = snprintf(buf, size, "%s/%s", self, beside);
		if (len > 0 && (size_t)len < size && access(buf, mode) == 0)
			return;
	}
	snprintf(buf, size, "%s", installed);
}
