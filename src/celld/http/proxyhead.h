/* What of a request's head reaches an app through the port proxy, and what of the app's
 * answer head reaches the client, decided in one place for every listener. Pure (no I/O):
 * unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum proxyhead_verdict {
	PROXYHEAD_PASS,	   /* as it is */
	PROXYHEAD_DROP,	   /* not at all */
	PROXYHEAD_REWRITE, /* as *out says (malloc'd, the caller frees it) */
};

/* A client's request header name: value on its way to an app. Every credential of
 * credentials.h is dropped (its header, in any case), and the preview cookie is taken out
 * of a Cookie header (dropped when nothing else is left in it). The preview query
 * parameter never gets this far: a request carrying it is answered by celld
 * (api_preview_begin). Out of memory: the header is dropped. */
enum proxyhead_verdict proxyhead_request(const char *name, const char *value, char **out);

/* An app's answer header name: value on its way to the client. prefix: the path of the
 * port's proxy route as the client sent it (".../proxy/<port>"), or NULL when the request
 * came by its host (a preview host, E2B's port headers) and the app is at "/".
 * Dropped: a name that is not an RFC 9110 token, a value with a control character other
 * than a tab (the client would read another header, or another answer), and a Set-Cookie
 * of the preview cookie (celld's, never the app's). A Set-Cookie loses its Domain
 * attributes (an app would set cookies for every preview host under the domain: a cookie
 * bomb answers 431 to all of them) and, under a prefix, has each Path below it (else the
 * cookie is the whole API host's); out of memory, it is dropped. */
enum proxyhead_verdict proxyhead_answer(const char *name, const char *value, const char *prefix,
					char **out);
