/* cell-oci delete [--force] ID: a stopped or created container's remains removed: its init
 * (a created one's waits for start), its cgroup, its uid range, its directory. A running
 * one only with --force (killed first), as runc. Deleting one that is already gone says
 * so (the shim calls delete twice: once itself, once with --force). */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/runtime.h"
#include "container.h"
#include "ranges.h"
#include "status.h"

int oci_cmd_delete(const struct oci_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"force", no_argument, NULL, 'f'}, {NULL, 0, NULL, 0}};
	struct cell_error err = {0};
	bool force = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+f", opts, NULL)) != -1;)
		if (c == 'f')
			force = true;
		else
			return cell_err_msg(&err, EINVAL, "delete: [--force] ID"),
			       oci_fail(cli, &err);
	if (optind + 1 != argc)
		return cell_err_msg(&err, EINVAL, "delete: [--force] ID"), oci_fail(cli, &err);
	const char *id = argv[optind];
	struct oci_container c;
	int r = oci_container_load(cli, id, &c, &err);
	if (r == -ENOENT && force) {
		oci_container_close(&c);
		return 0;
	}
	const char *status = r == 0 ? oci_status(&c.st) : NULL;
	if (r == 0 && !force && (!strcmp(status, "running") || !strcmp(status, "paused")))
		r = cell_err_msg(&err, EBUSY, "cannot delete container %s that is %s", id, status);
	const struct cell_cgroup_ops *cg = NULL;
	if (r == 0) {
		cg = oci_cgroups(&err);
		if (!cg)
			r = -EIO;
	}
	if (r == 0)
		r = cell_teardown(oci_init_alive(&c.st) ? c.st.pid : 0, -1, c.st.starttime, cg,
				  c.st.cgroup, &err);
	if (r == 0)
		oci_container_hooks(&c, OCI_HOOK_POSTSTOP);
	if (r == 0) {
		oci_range_release(c.st.uid_base);
		r = oci_container_remove(c.rootfd, id, c.dirfd, &err);
		c.dirfd = -1;
	}
	oci_container_close(&c);
	return r < 0 ? oci_fail(cli, &err) : 0;
}
