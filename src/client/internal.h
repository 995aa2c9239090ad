/* What the files of the client library share and its users do not see. */
#pragma once

#include <curl/curl.h>

#include "cell/client.h"

/* Prepare the handle for one request to path (URL path + query): the kept connection, the
 * endpoint, timeouts, the JSON headers (with the API key), the progress callback. */
CURL *cell_client_begin(struct cell_client *c, const char *path, struct cell_error *err);
/* curl_easy_perform, abortable through c->interrupt when asked. */
CURLcode cell_client_perform(struct cell_client *c, bool abortable);
/* The HTTP status of the transfer in progress or done. */
long cell_client_status(struct cell_client *c);
/* A transfer that got no answer: -errno with err saying why ("what: ..."). */
int cell_client_transport_error(struct cell_client *c, CURLcode rc, const char *what,
				struct cell_error *err);
/* A non-2xx answer: -errno of the status, err from the body's {"code","message"}; code
 * (may be NULL) gets the server's code. */
int cell_client_status_error(long status, const struct cell_client_buf *body, const char *what,
			     char *code, size_t code_size, struct cell_error *err);
/* A curl header list: "Expect:" (a 1 s wait for "100 Continue" is pure latency), the API
 * key when set, then `first` and the NULL-terminated extra lines; NULL on ENOMEM. */
struct curl_slist *cell_client_headers(const struct cell_client *c, const char *first,
				       const char *const *extra);
/* curl write callback collecting into a struct cell_client_buf bounded by
 * CELL_CLIENT_BODY_MAX. */
size_t cell_client_collect(char *ptr, size_t size, size_t nmemb, void *data);
