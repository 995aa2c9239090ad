/* How a cell-oci command fails (cli.h). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>

#include "cell/cleanup.h"
#include "cell/error.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cli.h"

static bool log_to_file;

void oci_log_to_file(void)
{
	log_to_file = true;
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
