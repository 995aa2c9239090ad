/* The port proxy both fronts route to: any other port of a sandbox, proxied to its
 * 127.0.0.1:{port} (OpenSandbox's sandboxes/{id}/proxy/{port}/..., E2B's <port>-<id>. hosts).
 * Handlers answer on r and return 0. */
#pragma once

#include <stddef.h>

#include "http/http.h"

/* Streams: begin (connects, sends the head), data (the body as it comes), then the
 * answer, streamed back, or a protocol switch (101) and the two sockets joined. */
int api_proxy_begin(struct http_req *r);
int api_proxy_data(struct http_req *r, const char *data, size_t len);
int api_proxy(struct http_req *r);
