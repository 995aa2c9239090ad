/* A TCP connection to 127.0.0.1:<port> inside a sandbox's own network namespace, for the
 * port proxy (api_proxy.c) and the TCP tunnel (api_tunnel.c). */
#pragma once

#include "cell/error.h"

struct sandbox;

#define PORTCONN_CONNECT_MS 10000

/* Connected (non-blocking, TCP_NODELAY) to 127.0.0.1:port in sb's namespace: the fd, or
 * -errno (-ECONNREFUSED: nothing listens there; -ETIMEDOUT past PORTCONN_CONNECT_MS). The
 * socket is made by a short thread that enters the namespace and ends there (a socket
 * keeps the namespace it was made in), so no host port is ever opened, and a sandbox with
 * network "none" is reached as well. */
int portconn_open(struct sandbox *sb, unsigned port, struct cell_error *err);
