/* cell-oci state ID and cell-oci list [--format table|json] [-q]: what the engine reads of
 * its containers, in runc's shapes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "container.h"
#include "status.h"

int oci_cmd_state(const struct oci_cli *cli, int argc, char **argv)
{
	struct cell_error err = {0};
	if (argc != 2)
		return cell_err_msg(&err, EINVAL, "state: expected one container id"),
		       oci_fail(cli, &err);
	struct oci_container c;
	int r = oci_container_load(cli, argv[1], &c, &err);
	json_t *o = r == 0 ? oci_state_json(&c.st) : NULL;
	oci_container_close(&c);
	if (r < 0)
		return oci_fail(cli, &err);
	if (!o)
		return cell_err(&err, ENOMEM, "state"), oci_fail(cli, &err);
	json_dumpf(o, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(o);
	return 0;
}

int oci_cmd_list(const struct oci_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"format", required_argument, NULL, 'f'},
					     {"quiet", no_argument, NULL, 'q'},
					     {NULL, 0, NULL, 0}};
	struct cell_error err = {0};
	bool json = false, quiet = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+f:q", opts, NULL)) != -1;) {
		if (c == 'f' && (!strcmp(optarg, "json") || !strcmp(optarg, "table")))
			json = !strcmp(optarg, "json");
		else if (c == 'q')
			quiet = true;
		else
			return cell_err_msg(&err, EINVAL, "list: --format table|json, -q"),
			       oci_fail(cli, &err);
	}
	int rootfd = oci_root_open(cli->root, &err);
	char **ids = NULL;
	size_t n = 0;
	if (rootfd < 0 || oci_container_ids(rootfd, &ids, &n, &err) < 0)
		return oci_fail(cli, &err);
	json_t *all = json_array();
	if (!json && !quiet)
		printf("%-12s %-10s %-10s %-40s %-24s %s\n", "ID", "PID", "STATUS", "BUNDLE",
		       "CREATED", "OWNER");
	for (size_t i = 0; i < n; i++) {
		struct oci_container c;
		if (oci_container_load(cli, ids[i], &c, NULL) == 0) {
			json_t *o = oci_state_json(&c.st);
			if (quiet)
				printf("%s\n", ids[i]);
			else if (!json && o)
				printf("%-12s %-10lld %-10s %-40s %-24s %s\n", ids[i],
				       json_integer_value(json_object_get(o, "pid")),
				       json_string_value(json_object_get(o, "status")),
				       c.st.bundle ? c.st.bundle : "",
				       json_string_value(json_object_get(o, "created")), "root");
			if (o)
				json_array_append_new(all, o);
		}
		oci_container_close(&c);
		free(ids[i]);
	}
	free(ids);
	close(rootfd);
	if (json && !quiet) {
		json_dumpf(all, stdout, JSON_COMPACT);
		putchar('\n');
	}
	json_decref(all);
	return 0;
}
