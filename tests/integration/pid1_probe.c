/* pid1_probe: run by it_init as root inside a sandbox, it tries to reach PID 1 (cell-init)
 * the way a dumpable PID 1 would let it, and prints one line per attempt:
 *
 *   getfd <ok|ERRNO>     pidfd_getfd of PID 1's fd 3, its relay listening socket
 *   environ <ok|ERRNO>   a read of /proc/1/environ
 *
 * Static, so it runs on any image. Whatever it obtains it closes at once: it never uses
 * PID 1's socket. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static const char *ename(int e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ESRCH:
		return "ESRCH";
	case EBADF:
		return "EBADF";
	case ENOSYS:
		return "ENOSYS";
	default:
		return strerror(e);
	}
}

static void report(const char *what, int r)
{
	printf("%s %s\n", what, r >= 0 ? "ok" : ename(errno));
}

int main(void)
{
	int pfd = (int)syscall(SYS_pidfd_open, 1, 0);
	int fd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, 3, 0);
	report("getfd", pfd < 0 ? pfd : fd);
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);

	char buf[256];
	int efd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
	ssize_t n = efd < 0 ? -1 : read(efd, buf, sizeof(buf));
	report("environ", efd < 0 ? efd : (int)n);
	if (efd >= 0)
		close(efd);
	return 0;
}
