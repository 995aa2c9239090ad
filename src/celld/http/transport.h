/* The HTTP transport: libmicrohttpd daemons on a Unix socket (trusted) or a TCP port
 * (behind the gate, gate.h), one per listener, each serving one API (http.h: its routes,
 * auth and error body). It makes a request per exchange, reads and bounds its body (whole
 * for JSON, streamed to the route for uploads), runs the route the router matched, queues
 * the answer and logs the exchange; connection upgrade (http_upgrade) happens here too.
 *
 * Every daemon runs one thread per connection, so a handler may block on a sandbox's relay
 * socket while streaming (command events, downloads). A TCP daemon has no listen socket of
 * its own: the gate accepts, and hands it only connections whose first request carried the
 * key, so no unauthenticated peer ever holds one of its threads or pools. */
#pragma once

#include <stdbool.h>

#include "cell/error.h"
#include "gate.h"
#include "http.h"

#define HTTP_JSON_MAX	 (1u << 20)		     /* JSON request bodies */
#define HTTP_UPLOAD_MAX	 ((1ull << 30) + (1u << 20)) /* multipart uploads: 1 GiB + framing */
#define HTTP_ARCHIVE_MAX (64ull << 30)		     /* ROUTE_ARCHIVE bodies: an image archive */

struct transport_listener {
	const struct http_api *api;
	const char *unix_path; /* a Unix socket (0660, group cell), or */
	const char *tcp;       /* HOST:PORT, behind the gate with the API's key check */
	/* TCP: a key is configured. Without one, only a loopback address is accepted. */
	bool keyed;
	struct adm_principal *who; /* whom its requests act for (NULL: none) */
	unsigned max_connections;  /* held by the HTTP server at once */
	struct gate_limits gate;   /* TCP: the unauthenticated ones */
	/* TCP: connections held for clients whose credential anyone may be handed (keyless.h),
	 * from one client; in all a quarter of max_connections. */
	unsigned keyless_per_client;
	bool upgrades; /* its API has routes that upgrade the connection */
};

/* Listen and serve l (copied) until transport_stop. */
int transport_listen(const struct transport_listener *l, struct cell_error *err);
/* Stop every listener (gates first) and wait for their connections to end. */
void transport_stop(void);
