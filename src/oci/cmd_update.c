/* cell-oci update [--resources FILE|-] ID: a running container's limits changed, as the
 * engine's update (docker update, a pod's resize) asks: memory.limit, cpu quota and period,
 * pids.limit of the LinuxResources JSON; what it leaves out stays as it was. Other
 * resources are refused, naming them. cell-oci events, checkpoint and restore: refused,
 * saying so. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "commands.h"
#include "container.h"
#include "status.h"

#define RESOURCES_MAX (1u << 20)

/* "-": the JSON from stdin, bounded as a file would be. */
static int read_stdin(char **out, size_t *len, struct cell_error *err)
{
	*out = malloc(RESOURCES_MAX + 1);
	*len = 0;
	if (!*out)
		return cell_err(err, ENOMEM, "--resources");
	for (;;) {
		ssize_t n = read(0, *out + *len, RESOURCES_MAX + 1 - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cell_err(err, errno, "--resources -: reading stdin");
		if (n == 0)
			break;
		*len += (size_t)n;
		if (*len > RESOURCES_MAX)
			return cell_err_msg(err, E2BIG, "--resources -: more than %u bytes",
					    RESOURCES_MAX);
	}
	return 0;
}

static int read_resources(const char *path, json_t **out, struct cell_error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = !strcmp(path, "-")
		    ? read_stdin(&text, &len, err)
		    : cell_read_file_at(AT_FDCWD, path, RESOURCES_MAX, &text, &len, err);
	if (r < 0)
		return r;
	json_error_t je;
	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return cell_err_msg(err, EINVAL, "--resources: not a JSON object (%s)", je.text);
	}
	return 0;
}

static int64_t number(json_t *o, const char *a, const char *b, bool *has)
{
	json_t *v = json_object_get(json_object_get(o, a), b);
	*has = json_is_integer(v);
	return *has ? json_integer_value(v) : 0;
}

/* The resources onto st's limits: 0 or -EINVAL naming what cell-oci cannot change. */
static int merge(json_t *res, struct oci_state *st, struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(res, k, v)
	{
		if (strcmp(k, "memory") && strcmp(k, "cpu") && strcmp(k, "pids") &&
		    !json_is_null(v))
			return cell_err_msg(err, ENOTSUP,
					    "--resources: %s cannot be changed by "
					    "cell-oci (memory, cpu, pids can)",
					    k);
	}
	bool has, has_period;
	int64_t mem = number(res, "memory", "limit", &has);
	if (has)
		st->memory_bytes = mem > 0 ? (uint64_t)mem : 0;
	int64_t quota = number(res, "cpu", "quota", &has);
	int64_t period = number(res, "cpu", "period", &has_period);
	if (has)
		st->cpu_millis = quota > 0
				     ? (uint64_t)quota * 1000 /
					   (uint64_t)(has_period && period > 0 ? period : 100000)
				     : 0;
	int64_t pids = number(res, "pids", "limit", &has);
	if (has)
		st->pids = pids > 0 ? (uint64_t)pids : 0;
	return 0;
}

int oci_cmd_update(const struct oci_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"resources", required_argument, NULL, 'r'},
					     {NULL, 0, NULL, 0}};
	struct cell_error err = {0};
	const char *resources = NULL;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+r:", opts, NULL)) != -1;) {
		if (c != 'r')
			return cell_err_msg(&err, EINVAL,
					    "update: --resources FILE|- ID (runc's single-value "
					    "flags are not supported)"),
			       oci_fail(cli, &err);
		resources = optarg;
	}
	if (!resources || optind + 1 != argc)
		return cell_err_msg(&err, EINVAL, "update: --resources FILE|- ID"),
		       oci_fail(cli, &err);
	struct oci_container c;
	json_t *res = NULL;
	int r = oci_container_load(cli, argv[optind], &c, &err);
	if (r == 0 && strcmp(oci_status(&c.st), "stopped") == 0)
		r = cell_err_msg(&err, EINVAL, "container %s is stopped", argv[optind]);
	if (r == 0)
		r = read_resources(resources, &res, &err);
	if (r == 0)
		r = merge(res, &c.st, &err);
	const struct cell_cgroup_ops *cg = NULL;
	if (r == 0) {
		cg = oci_cgroups(&err);
		if (!cg)
			r = -EIO;
	}
	struct cell_limits lim = {
	    .memory_bytes = c.st.memory_bytes, .cpu_millis = c.st.cpu_millis, .pids = c.st.pids};
	if (r == 0)
		r = cg->set_limits(c.st.cgroup, &lim, &err);
	if (r == 0)
		r = oci_state_write(c.dirfd, &c.st, &err);
	json_decref(res);
	oci_container_close(&c);
	return r < 0 ? oci_fail(cli, &err) : 0;
}

int oci_cmd_refused(const struct oci_cli *cli, int argc, char **argv)
{
	(void)argc;
	struct cell_error err = {0};
	cell_err_msg(&err, ENOTSUP,
		     "%s is not supported by cell-oci (a container's processes stay in cell-init's "
		     "care; their counters are in its cgroup)",
		     argv[0]);
	return oci_fail(cli, &err);
}
