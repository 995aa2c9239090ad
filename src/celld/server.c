/* celld's listeners (server.h). */
#include "api.h"
#include "admission.h"
#include "config.h"
#include "server.h"
#include "transport.h"

int server_start(struct cell_error *err)
{
	struct transport_listener unix_socket = {
	    .api = &api_opensandbox,
	    .unix_path = celld.socket_path,
	    .max_connections = 4096,
	    .upgrades = true, /* terminals' WebSockets, the proxy's upgrades, the TCP tunnel */
	};
	int r = transport_listen(&unix_socket, err);
	if (r < 0 || !celld.listen)
		return r;
	struct transport_listener tcp = {
	    .api = &api_opensandbox,
	    .tcp = celld.listen,
	    .keyed = celld.api_key && celld.api_key[0],
	    .who = admission_principal(celld.api_key),
	    .max_connections = admission_tcp_connections(),
	    .upgrades = true,
	    .gate = {.pending_max = celld.tcp_pending_max,
		     .pending_per_ip = celld.tcp_pending_per_ip,
		     .head_timeout_s = celld.tcp_head_timeout_s},
	};
	return transport_listen(&tcp, err);
}

void server_stop(void)
{
	transport_stop(); /* upgraded connections first (http_upgrades_stop) */
}
