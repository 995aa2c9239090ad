/* What every operation of cell-init stands on (see base.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

#define NOFILE_WANTED 65536

struct init_base init_base = {.rootfd = -1, .devnull_fd = -1};

/* fds 0-2 must be open so no pipe or socket made later lands there and gets confused with
 * a command's stdio. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			n = open("/", O_RDONLY | O_DIRECTORY);
		if (n >= 0 && n != fd) {
			dup2(n, fd);
			close(n);
		}
	}
}

static int open_devnull(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode))
		return fd;
	if (fd >= 0)
		close(fd);
	/* No /dev/null in this image: an empty pipe whose writer is gone reads as EOF. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	close(p[1]);
	return p[0];
}

static void raise_nofile(void)
{
	if (getrlimit(RLIMIT_NOFILE, &init_base.nofile_orig) < 0)
		return;
	struct rlimit r = init_base.nofile_orig;
	if (r.rlim_cur >= NOFILE_WANTED)
		return;
	r.rlim_cur = r.rlim_max < NOFILE_WANTED ? r.rlim_max : NOFILE_WANTED;
	setrlimit(RLIMIT_NOFILE, &r);
}

int init_base_setup(void)
{
	ensure_std_fds();
	raise_nofile();
	init_base.rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (init_base.rootfd < 0)
		return -errno;
	init_base.devnull_fd = open_devnull();
	return init_base.devnull_fd < 0 ? -errno : 0;
}
