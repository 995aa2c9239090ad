/* How a cell-oci command fails (cli.h). */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>

#include "cell/cleanup.h"
#include "cell/error.h"
#include "cell/fsutil.h"
#include "cell/scm.h"
#include "cell/log.h"
#include "cli.h"

static bool log_to_file;
static int log_fd = -1;

void oci_log_to_file(int fd)
{
	log_to_file = true;
	log_fd = fd;
}

void oci_close_inherited(int keep)
{
	int a = log_fd < keep ? log_fd : keep, b = log_fd < keep ? keep : log_fd;
	unsigned from = 3;
	for (int k = 0; k < 2; k++) {
		int fd = k ? b : a;
		if (fd < (int)from)
			continue;
		if (fd > (int)from)
			close_range(from, (unsigned)fd - 1, 0);
		from = (unsigned)fd + 1;
	}
	close_range(from, ~0U, 0);
}

int oci_fail(const struct oci_cli *cli, const struct cell_error *err)
{
	(void)cli;
	const char *msg = err->msg[0] ? err->msg : "failed";
	log_error("%s", msg);
	if (log_to_file)
		fprintf(stderr, "cell-oci: %s\n", msg);
	return 1;
}

/* Written whole to a temporary file, then renamed: the engine never reads half a pid. */
int oci_write_pid_file(const char *path, pid_t pid, struct cell_error *err)
{
	if (!path)
		return 0;
	char text[24];
	int n = snprintf(text, sizeof(text), "%d", (int)pid);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	if (slash)
		*slash = '\0';
	_cleanup_close_ int dfd =
	    open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(err, errno, "--pid-file %s", path);
	return cell_write_file_atomic(dfd, name, text, (size_t)n, 0644, err);
}

/* The terminal's master to the engine's console socket, as runc sends it (SCM_RIGHTS,
 * with the terminal's name as the message). */
int oci_send_console(const char *path, int master, struct cell_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return cell_err_msg(err, ENAMETOOLONG, "--console-socket %s: too long", path);
	strcpy(sa.sun_path, path);
	_cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return cell_err(err, errno, "--console-socket %s", path);
	char name[] = "/dev/ptmx";
	struct iovec iov = {name, sizeof(name) - 1};
	long n = cell_scm_send_fd(s, &iov, 1, master, 0);
	return n < 0 ? cell_err(err, (int)-n, "--console-socket %s", path) : 0;
}
