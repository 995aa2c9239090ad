/* Routing: a table of routes (method, path pattern with captures, flags, handler) and the
 * matching of a request's raw path against it. No I/O and nothing of any one API: an API
 * (api.h) brings its table, the transport (transport.h) runs what matched. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct http_req;

#define ROUTER_SEGS_MAX	  64
#define ROUTER_PARAMS_MAX 4
#define ROUTER_PATH_MAX	  4096

enum route_body {
	ROUTE_BODY_NONE,
	ROUTE_BODY_JSON,   /* read whole (up to HTTP_JSON_MAX) before the handler runs */
	ROUTE_BODY_STREAM, /* handed to begin/data as it arrives (up to HTTP_UPLOAD_MAX) */
};

/* A request whose answer is streamed for as long as the client or the command takes (an
 * event stream, a file, a log, the list) holds its connection and a relay or buffers that
 * long: it counts as one of its principal's streams (admission.c) from its headers to its
 * end. */
enum route_flags {
	ROUTE_SHORT = 0,
	ROUTE_STREAMED = 1 << 0,
	/* ROUTE_BODY_STREAM of an archive (an image's): up to HTTP_ARCHIVE_MAX, not
	 * HTTP_UPLOAD_MAX; the route bounds what it reads of it itself. */
	ROUTE_ARCHIVE = 1 << 1,
};

struct route {
	/* "*": any method, but only for a path no route before it in the table knows (a known
	 * path with another method stays a 405). */
	const char *method;
	/* Segments joined by '/'. "{id}" and "{cmd}" capture a cell id (refused unless valid,
	 * before any handler sees it); any other "{name}" captures one segment as it is. A
	 * last segment "*" matches whatever follows, nothing included (not captured: the
	 * handler reads it from the raw path). */
	const char *pattern;
	enum route_body body;
	unsigned flags;
	int (*handler)(struct http_req *r); /* answers on r; returns 0 */
	/* ROUTE_BODY_STREAM only: after the headers (may answer early), then per chunk. */
	int (*begin)(struct http_req *r);
	int (*data)(struct http_req *r, const char *data, size_t len);
};

struct route_table {
	const struct route *routes;
	size_t n;
	const char *prefix; /* a first segment that may be left out ("v1"), or NULL */
};

enum router_result {
	ROUTER_MATCH,
	ROUTER_BAD_PATH,  /* not a path that can be split (too long, "//", a bad escape) */
	ROUTER_NO_PATH,	  /* no route has this path */
	ROUTER_NO_METHOD, /* a route has this path, none with this method */
	ROUTER_BAD_ID,	  /* matched, but an {id}/{cmd} capture is not a valid id */
	ROUTER_NOMEM,
};

struct router_match {
	const struct route *route;
	char *params[ROUTER_PARAMS_MAX]; /* captures, decoded, in pattern order */
	unsigned n_params;
	unsigned bad_param;   /* ROUTER_BAD_ID: which capture */
	const char *bad_name; /* ROUTER_BAD_ID: its pattern name, "id" or "cmd" */
};

/* Split raw (the path as sent, no query) into segments decoded one by one, in buf; the
 * table's prefix is dropped when it comes first. Returns how many, or -EINVAL. */
int router_split(const struct route_table *t, const char *raw, char *buf, size_t size, char **segs);
/* Match method and raw path against t: m is filled on ROUTER_MATCH and ROUTER_BAD_ID
 * (free it with router_match_free either way). */
enum router_result router_route(const struct route_table *t, const char *method, const char *raw,
				struct router_match *m);
void router_match_free(struct router_match *m);
