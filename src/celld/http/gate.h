/* The TCP listener's gate: connections not yet authenticated (gate.c says how). */
#pragma once

#include "cell/error.h"

struct MHD_Daemon;
struct http_api;
struct gate;

/* The head of a connection's first request, before the key is known. */
#define GATE_HEAD_MAX	   (16u << 10)
#define GATE_HEAD_MAX_TEXT "16384 bytes"

struct gate_limits {
	unsigned pending_max;	 /* held at once, in all */
	unsigned pending_per_ip; /* held at once from one client (IPv6: one /64) */
	unsigned head_timeout_s; /* for the whole head of the first request */
};

/* A gate (*out) accepting on listen_fd (owned from here, also on failure): each connection
 * whose first request head api->head_authorized accepts is handed to daemon (started
 * without a listen socket); the rest are answered 401 or 431 in api's error body, or
 * closed, within lim. One gate per TCP listener, each with its own thread. */
int gate_start(int listen_fd, struct MHD_Daemon *daemon, const struct http_api *api,
	       const struct gate_limits *lim, struct gate **out, struct cell_error *err);
/* Stop accepting, close every connection not handed over yet, free g (NULL: nothing). */
void gate_stop(struct gate *g);
