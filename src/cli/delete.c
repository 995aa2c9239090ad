/* Deleting a sandbox. */
#include <errno.h>
#include <stdio.h>

#include "cell/cleanup.h"
#include "client.h"
#include "delete.h"

int cli_delete_sandbox(const char *id, struct cell_error *err)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s", id) < 0)
		return cell_err(err, ENOMEM, "rm %s", id);
	_cleanup_free_ char *what = NULL;
	if (asprintf(&what, "rm %s", id) < 0)
		return cell_err(err, ENOMEM, "rm %s", id);
	return cli_client_api("DELETE", path, NULL, what, NULL, NULL, err);
}
