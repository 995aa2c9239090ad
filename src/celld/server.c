/* celld's listeners (server.h). */
#include "api/opensandbox/api.h"
#include "admission.h"
#include "api/e2b/e2b.h"
#include "http/keys.h"
#include "config.h"
#include "server.h"
#include "http/transport.h"

/* A TCP listener of api, behind the gate: each request acts for the key it carries
 * (keys.h), never for the operator. */
static int listen_tcp(const struct http_api *api, const char *where, struct cell_error *err)
{
	struct transport_listener tcp = {
	    .api = api,
	    .tcp = where,
	    .keyed = keys_count() > 0,
	    .max_connections = admission_tcp_connections(),
	    .keyless_per_client = celld.tcp_keyless_per_ip,
	    .upgrades = true,
	    .gate = {.pending_max = celld.tcp_pending_max,
		     .pending_per_ip = celld.tcp_pending_per_ip,
		     .head_timeout_s = celld.tcp_head_timeout_s},
	};
	return transport_listen(&tcp, err);
}

int server_start(struct cell_error *err)
{
	struct transport_listener unix_socket = {
	    .api = &api_opensandbox,
	    .unix_path = celld.socket_path,
	    .max_connections = 4096,
	    .upgrades = true, /* terminals' WebSockets, the proxy's upgrades, the TCP tunnel */
	};
	int r = transport_listen(&unix_socket, err);
	if (r == 0 && celld.listen)
		r = listen_tcp(&api_opensandbox, celld.listen, err);
	if (r == 0 && celld.e2b_listen)
		r = listen_tcp(&api_e2b, celld.e2b_listen, err);
	return r;
}

void server_stop(void)
{
	transport_stop(); /* upgraded connections first (http_upgrades_stop) */
}
