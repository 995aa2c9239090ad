/* cell-oci ps [--format table|json] ID: the host pids of the container's processes (its
 * cgroup's), the JSON array containerd's shim reads for `ctr task ps`. cell-oci pause ID and
 * resume ID: its cgroup frozen and thawed. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "container.h"
#include "status.h"

int oci_cmd_ps(const struct oci_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"format", required_argument, NULL, 'f'},
					     {NULL, 0, NULL, 0}};
	struct cell_error err = {0};
	bool json = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+f:", opts, NULL)) != -1;) {
		if (c != 'f' || (strcmp(optarg, "json") && strcmp(optarg, "table")))
			return cell_err_msg(&err, EINVAL, "ps: [--format table|json] ID"),
			       oci_fail(cli, &err);
		json = !strcmp(optarg, "json");
	}
	if (optind + 1 != argc)
		return cell_err_msg(&err, EINVAL, "ps: [--format table|json] ID"),
		       oci_fail(cli, &err);
	struct oci_container c;
	int r = oci_container_load(cli, argv[optind], &c, &err);
	const struct cell_cgroup_ops *cg = r == 0 ? oci_cgroups(&err) : NULL;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	if (r == 0 && !cg)
		r = -EIO;
	if (r == 0)
		r = cg->list_pids(c.st.cgroup, &pids, &n, &err);
	oci_container_close(&c);
	if (r < 0)
		return oci_fail(cli, &err);
	if (json) {
		putchar('[');
		for (size_t i = 0; i < n; i++)
			printf("%s%d", i ? "," : "", (int)pids[i]);
		puts("]");
	} else {
		puts("PID");
		for (size_t i = 0; i < n; i++)
			printf("%d\n", (int)pids[i]);
	}
	return 0;
}

static int freeze(const struct oci_cli *cli, int argc, char **argv, bool frozen)
{
	struct cell_error err = {0};
	if (argc != 2)
		return cell_err_msg(&err, EINVAL, "%s: expected one container id", argv[0]),
		       oci_fail(cli, &err);
	struct oci_container c;
	int r = oci_container_load(cli, argv[1], &c, &err);
	const char *status = r == 0 ? oci_status(&c.st) : NULL;
	if (r == 0 && strcmp(status, frozen ? "running" : "paused"))
		r = cell_err_msg(&err, EINVAL, "container %s is %s", argv[1], status);
	const struct cell_cgroup_ops *cg = r == 0 ? oci_cgroups(&err) : NULL;
	if (r == 0 && !cg)
		r = -EIO;
	if (r == 0)
		r = cg->freeze(c.st.cgroup, frozen, &err);
	oci_container_close(&c);
	return r < 0 ? oci_fail(cli, &err) : 0;
}

int oci_cmd_pause(const struct oci_cli *cli, int argc, char **argv)
{
	return freeze(cli, argc, argv, true);
}

int oci_cmd_resume(const struct oci_cli *cli, int argc, char **argv)
{
	return freeze(cli, argc, argv, false);
}
