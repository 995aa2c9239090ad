/* File downloads through the client library: GET .../files/download into an fd, or a
 * directory's tar archive (format=tar) into a sink; any other streamed GET (a sandbox's
 * logs) into a sink. */
#include <errno.h>
#include <stdio.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

struct download_state {
	struct cell_client *c;
	int fd;
	cell_client_sink_fn *sink; /* when set, instead of fd */
	void *cls;
	struct cell_error *sink_err;
	long status;
	int write_errno;
	struct cell_client_buf errbody;
};

static size_t download_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct download_state *ds = data;
	size_t n = size * nmemb;
	if (!ds->status)
		ds->status = cell_client_status(ds->c);
	if (ds->status < 200 || ds->status > 299) {
		size_t room = CELL_CLIENT_ERRBODY_MAX - ds->errbody.len;
		cell_client_buf_append(&ds->errbody, ptr, n < room ? n : room,
				       CELL_CLIENT_ERRBODY_MAX);
		return n;
	}
	int r = ds->sink ? ds->sink(ds->cls, ptr, n, ds->sink_err) : cell_write_all(ds->fd, ptr, n);
	if (r < 0) {
		ds->write_errno = -r;
		return 0;
	}
	return n;
}

/* GET url into ds; headers, when not NULL, gets the answer's header lines. what names the
 * request in messages. */
static int get_into(struct cell_client *c, const char *url, struct download_state *ds,
		    struct cell_client_buf *headers, const char *what, struct cell_error *err)
{
	CURL *h = cell_client_begin(c, url, err);
	if (!h)
		return -err->code;
	ds->c = c;
	ds->sink_err = err;
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, download_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, ds);
	if (headers) {
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cell_client_collect);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, headers);
	}
	CURLcode rc = cell_client_perform(c, true);
	if (!ds->status)
		ds->status = cell_client_status(c);
	int r = 0;
	if (ds->write_errno && ds->sink)
		r = -ds->write_errno; /* the sink set err */
	else if (ds->write_errno)
		r = cell_err(err, ds->write_errno, "writing the downloaded data");
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
		r = cell_err_msg(err, EINTR, "%s interrupted", what);
	else if (rc != CURLE_OK)
		r = cell_client_transport_error(c, rc, what, err);
	else if (ds->status < 200 || ds->status > 299)
		r = cell_client_status_error(ds->status, &ds->errbody, what, NULL, 0, err);
	cell_client_buf_free(&ds->errbody);
	return r;
}

static int download(struct cell_client *c, const char *id, const char *path, const char *query,
		    struct download_state *ds, struct cell_error *err)
{
	_cleanup_free_ char *enc = cell_client_urlencode(path);
	_cleanup_free_ char *url = NULL, *what = NULL;
	if (!enc ||
	    asprintf(&url, "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/files/download?path=%s%s",
		     id, enc, query) < 0 ||
	    asprintf(&what, "download of %s:%s", id, path) < 0)
		return cell_err(err, ENOMEM, "building the download request");
	return get_into(c, url, ds, NULL, what, err);
}

int cell_client_get_sink(struct cell_client *c, const char *path, const char *what,
			 cell_client_sink_fn *sink, void *cls, struct cell_client_buf *headers,
			 struct cell_error *err)
{
	struct download_state ds = {.fd = -1, .sink = sink, .cls = cls};
	return get_into(c, path, &ds, headers, what, err);
}

int cell_client_download(struct cell_client *c, const char *id, const char *path, int fd,
			 struct cell_error *err)
{
	struct download_state ds = {.fd = fd};
	return download(c, id, path, "", &ds, err);
}

int cell_client_download_tar(struct cell_client *c, const char *id, const char *path,
			     cell_client_sink_fn *sink, void *cls, struct cell_error *err)
{
	struct download_state ds = {.fd = -1, .sink = sink, .cls = cls};
	return download(c, id, path, "&format=tar", &ds, err);
}
