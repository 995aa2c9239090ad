/* celld's listeners, from its configuration: the Unix socket and the TCP port, each with
 * the API it serves. A second API (its own listener, auth and error body) is one more
 * transport_listen call here. */
#pragma once

#include "cell/error.h"

int server_start(struct cell_error *err);
void server_stop(void);
