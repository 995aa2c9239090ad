/* relay.c: cell-oci's side of a container's relay socket (<root>/<id>/init.sock, cell-init's
 * listener): one conversation per connection, as celld speaks it (include/cell/proto.h). */
#pragma once

#include <jansson.h>

#include "cell/error.h"

/* Connect to dir's init.sock; the fd or -errno. */
int oci_relay_connect(int dirfd, const char *id, struct cell_error *err);
/* Send a JSON request, then read the answer: OK's payload as *out (NULL when not wanted),
 * and a descriptor that came with it in *fd (-1 when none, fd NULL: closed); ERROR is
 * -errno with its message in err. */
int oci_relay_call(int sock, int type, json_t *req, json_t **out, int *fd, struct cell_error *err);
