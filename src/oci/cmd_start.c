/* cell-oci start ID: the created container's process let go (cell-init's OCI_START). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/proto.h"
#include "container.h"
#include "relay.h"
#include "status.h"

int oci_cmd_start(const struct oci_cli *cli, int argc, char **argv)
{
	struct cell_error err = {0};
	if (argc != 2)
		return cell_err_msg(&err, EINVAL, "start: expected one container id"),
		       oci_fail(cli, &err);
	struct oci_container c;
	int r = oci_container_load(cli, argv[1], &c, &err);
	const char *status = r == 0 ? oci_status(&c.st) : NULL;
	if (r == 0 && strcmp(status, "created"))
		r = cell_err_msg(&err, EINVAL, "cannot start a container that is %s", status);
	_cleanup_close_ int sock = r == 0 ? oci_relay_connect(c.dirfd, argv[1], &err) : -1;
	if (r == 0 && sock < 0)
		r = sock;
	json_t *req = json_object();
	if (r == 0)
		r = oci_relay_call(sock, CELL_FRAME_OCI_START, req, NULL, NULL, &err);
	json_decref(req);
	if (r == 0) {
		c.st.started = true;
		r = oci_state_write(c.dirfd, &c.st, &err);
	}
	if (r == 0)
		oci_container_hooks(&c, OCI_HOOK_POSTSTART);
	oci_container_close(&c);
	return r < 0 ? oci_fail(cli, &err) : 0;
}
