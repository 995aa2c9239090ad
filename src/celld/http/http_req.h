/* struct http_req, shared by http.c (its accessors and responses) and transport.c (which
 * makes, runs and frees requests). No other file includes it: everyone else uses http.h. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cell/id.h"
#include "http.h"
#include "router.h"

/* A client's X-Request-ID is echoed when it is 1 to this many characters of
 * [A-Za-z0-9._:+/=~-] (UUIDs, trace ids, base64 tokens); anything else is replaced. */
#define HTTP_REQUEST_ID_MAX 128

struct MHD_Connection;
struct transport_listener;

struct http_req {
	struct MHD_Connection *conn;
	const struct transport_listener *listener;
	const struct http_api *api; /* the listener's */
	bool tcp;
	/* The client's X-Request-ID when it sent a valid one (request_id_take), else one
	 * made for the request. */
	char request_id[HTTP_REQUEST_ID_MAX + 1];
	char *raw_path;	 /* as sent, before any unescaping: segments are decoded one by one */
	char *raw_query; /* what followed the '?', as sent; NULL when none */
	bool rerouted;	 /* raw_path is the API's reroute hook's, not the one sent */
	const char *method;
	struct router_match match;
	bool started, queued, too_large;
	uint64_t body_limit, body_seen;
	char *body;
	size_t body_len, body_cap;
	unsigned status;
	int64_t t0;
	void *state;
	void (*state_free)(void *);
	struct adm_principal *who; /* NULL: the Unix socket */
	/* On TCP, set by the API's authorized hook (http_grant): whom the credential is of,
	 * and the one sandbox it is scoped to ("" for a key). */
	bool granted;
	char scope[CELL_ID_MAX + 1];
	bool close;	/* the answer closes the connection (Connection: close) */
	bool anonymous; /* its credential is one anyone may be handed (http_anonymous) */
	bool admitted;	/* counted as one of who's streams until completed */
};

/* Client and sandbox text in the log: no control bytes, so no forged lines. */
void http_printable(char *dst, size_t size, const char *src);
