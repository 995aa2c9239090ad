/* File uploads through the client library: multipart POST .../files/upload, the "metadata"
 * JSON part then the "file" part, streamed from an fd or a buffer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "internal.h"

static size_t fd_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	int fd = *(int *)arg;
	for (;;) {
		ssize_t n = read(fd, buf, size * nitems);
		if (n >= 0)
			return (size_t)n;
		if (errno != EINTR)
			return CURL_READFUNC_ABORT;
	}
}

/* {"path","mode"}: FileInfo.mode is an integer whose decimal digits are the octal
 * permission (0755 is sent as 755), as in the execd API. */
static char *upload_metadata(const struct cell_client_upload *up)
{
	json_t *meta = json_pack("{s:s}", "path", up->dest);
	if (!meta)
		return NULL;
	if (up->mode >= 0) {
		unsigned m = (unsigned)up->mode & 07777;
		unsigned digits =
		    (m >> 9 & 7) * 1000 + (m >> 6 & 7) * 100 + (m >> 3 & 7) * 10 + (m & 7);
		json_object_set_new(meta, "mode", json_integer(digits));
	}
	char *text = json_dumps(meta, JSON_COMPACT);
	json_decref(meta);
	return text;
}

static curl_mime *upload_mime(CURL *h, const struct cell_client_upload *up, const char *meta,
			      int *fdv)
{
	curl_mime *mime = curl_mime_init(h);
	curl_mimepart *part = curl_mime_addpart(mime);
	curl_mime_name(part, "metadata");
	curl_mime_filename(part, "metadata");
	curl_mime_type(part, "application/json");
	curl_mime_data(part, meta, CURL_ZERO_TERMINATED);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "file");
	curl_mime_filename(part, up->filename ? up->filename : "file");
	curl_mime_type(part, "application/octet-stream");
	if (up->fd < 0) {
		curl_mime_data(part, up->data, up->len);
		return mime;
	}
	struct stat stbuf;
	curl_off_t size = -1; /* unknown (a pipe): the body goes out chunked */
	if (fstat(up->fd, &stbuf) == 0 && S_ISREG(stbuf.st_mode))
		size = stbuf.st_size;
	*fdv = up->fd;
	curl_mime_data_cb(part, size, fd_read_cb, NULL, NULL, fdv);
	return mime;
}

int cell_client_upload(struct cell_client *c, const struct cell_client_upload *up,
		       struct cell_error *err)
{
	if (up->answer)
		*up->answer = (struct cell_client_resp){0};
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/files/upload", up->id) <
	    0)
		return cell_err(err, ENOMEM, "building the upload request");
	_cleanup_free_ char *meta = upload_metadata(up);
	if (!meta)
		return cell_err_msg(err, EINVAL, "destination path '%s' is not valid UTF-8",
				    up->dest);
	CURL *h = cell_client_begin(c, path, err);
	if (!h)
		return -err->code;
	int fdv = -1;
	curl_mime *mime = upload_mime(h, up, meta, &fdv);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
	/* The multipart body sets its own Content-Type. */
	struct curl_slist *hdrs = cell_client_headers(c, NULL, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	struct cell_client_buf own = {0};
	struct cell_client_buf *resp = up->answer ? &up->answer->body : &own;
	if (up->answer) {
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cell_client_collect);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &up->answer->headers);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cell_client_collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);

	CURLcode rc = cell_client_perform(c, true);
	long st = cell_client_status(c);
	if (up->answer)
		up->answer->status = st;
	int r = 0;
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		r = cell_err_msg(err, EINTR, "upload to %s:%s interrupted", up->id, up->dest);
	else if (rc != CURLE_OK)
		r = cell_client_transport_error(c, rc, "upload", err);
	else if (st < 200 || st > 299)
		r = cell_client_status_error(st, resp, "upload", NULL, 0, err);
	cell_client_buf_free(&own);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	return r;
}

struct post_src {
	int fd;
	unsigned long long sent;
	cell_client_progress_fn *progress;
	void *cls;
};

static size_t post_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct post_src *s = arg;
	size_t n = fd_read_cb(buf, size, nitems, &s->fd);
	if (n != CURL_READFUNC_ABORT) {
		s->sent += n;
		if (s->progress)
			s->progress(s->cls, s->sent);
	}
	return n;
}

int cell_client_post_fd(struct cell_client *c, const char *path, int fd, const char *content_type,
			cell_client_progress_fn *progress, void *cls,
			struct cell_client_resp *answer, struct cell_error *err)
{
	*answer = (struct cell_client_resp){0};
	CURL *h = cell_client_begin(c, path, err);
	if (!h)
		return -err->code;
	struct post_src src = {.fd = fd, .progress = progress, .cls = cls};
	struct stat st;
	curl_off_t size = -1; /* a pipe: chunked */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		size = st.st_size - lseek(fd, 0, SEEK_CUR);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, post_read_cb);
	curl_easy_setopt(h, CURLOPT_READDATA, &src);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, size);
	_cleanup_free_ char *ct = NULL;
	if (asprintf(&ct, "Content-Type: %s",
		     content_type ? content_type : "application/octet-stream") < 0)
		return cell_err(err, ENOMEM, "building the request");
	struct curl_slist *hdrs = cell_client_headers(c, ct, NULL);
	if (size < 0)
		hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cell_client_collect);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &answer->headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cell_client_collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer->body);
	CURLcode rc = cell_client_perform(c, true);
	answer->status = cell_client_status(c);
	int r = 0;
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		r = cell_err_msg(err, EINTR, "POST %s interrupted", path);
	else if (rc != CURLE_OK)
		r = cell_client_transport_error(c, rc, path, err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, NULL);
	curl_easy_setopt(h, CURLOPT_READDATA, NULL);
	curl_easy_setopt(h, CURLOPT_POST, 0L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
	curl_slist_free_all(hdrs);
	return r;
}
