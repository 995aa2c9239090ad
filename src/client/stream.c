/* Requests whose answer is an event stream: the body goes through the framer as it arrives;
 * an answer that is not 200 is kept (its start) for the error message. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

struct stream_state {
	struct cell_client *c;
	struct cell_client_sse sse;
	struct cell_client_buf errbody; /* the start of a non-200 answer */
	long status;
	int r; /* the framer's or callback's -errno that stopped the transfer */
};

static size_t stream_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct stream_state *st = data;
	size_t n = size * nmemb;
	if (!st->status)
		st->status = cell_client_status(st->c);
	if (st->status != 200) {
		/* Keep the start of an error body; the rest is not needed for the message. */
		size_t room = CELL_CLIENT_ERRBODY_MAX - st->errbody.len;
		cell_client_buf_append(&st->errbody, ptr, n < room ? n : room,
				       CELL_CLIENT_ERRBODY_MAX);
		return n;
	}
	int r = cell_client_sse_feed(&st->sse, ptr, n);
	if (r < 0) {
		st->r = r;
		return 0;
	}
	return n;
}

static int stream_result(struct stream_state *st, CURLcode rc, const char *what,
			 struct cell_error *err)
{
	if (st->r < 0)
		return st->r;
	if (rc != CURLE_OK)
		return cell_client_transport_error(st->c, rc, what, err);
	if (st->status != 200)
		return cell_client_status_error(st->status, &st->errbody, what, NULL, 0, err);
	int r = cell_client_sse_finish(&st->sse);
	return r < 0 ? r : 0;
}

int cell_client_stream(struct cell_client *c, const struct cell_client_req *req,
		       cell_client_event_fn *on_event, void *ctx, const char *what, long *status,
		       struct cell_error *err)
{
	if (status)
		*status = 0;
	CURL *h = cell_client_begin(c, req->path, err);
	if (!h)
		return -err->code;
	struct curl_slist *hdrs = NULL;
	if (req->headers || (req->content_type && req->body)) {
		char ctype[256];
		snprintf(ctype, sizeof(ctype), "Content-Type: %s",
			 req->content_type ? req->content_type : "application/json");
		hdrs = cell_client_headers(c, ctype, req->headers);
		if (!hdrs)
			return cell_err(err, ENOMEM, "%s: building the request", what);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	}
	const char *method = req->method ? req->method : "GET";
	if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(req->body_len ? req->body_len : strlen(req->body)));
	}
	if (strcmp(method, "GET") && strcmp(method, "POST"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	struct stream_state st = {
	    .c = c,
	    .sse = {.on_event = on_event, .ctx = ctx, .err = err, .max_event = req->max_event}};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
	/* Small receive buffer by default: output is handed on as soon as it arrives. */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE,
			 req->recv_buffer ? (long)req->recv_buffer : 64L << 10);

	CURLcode rc = cell_client_perform(c, req->abortable);
	if (!st.status)
		st.status = cell_client_status(c);
	if (status)
		*status = st.status;
	int r = stream_result(&st, rc, what, err);
	if (req->error_body && st.status != 200) {
		*req->error_body = st.errbody;
		st.errbody = (struct cell_client_buf){0};
	}
	if (hdrs) {
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hdrs);
	}
	cell_client_sse_free(&st.sse);
	cell_client_buf_free(&st.errbody);
	return r;
}
