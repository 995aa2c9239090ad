/* A file's bytes streamed between an HTTP body and cell-init (file_xfer.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/log.h"
#include "audit.h"
#include "file_xfer.h"
#include "relay.h"
#include "sandbox.h"

/* ---- download ---- */

static ssize_t take_bytes(struct file_download *d, char *buf, size_t max)
{
	size_t n = d->cur->len - d->cur_off;
	if (n > max)
		n = max;
	if (n > d->left)
		n = d->left; /* never more than promised, whatever init sends */
	memcpy(buf, d->cur->payload + d->cur_off, n);
	d->cur_off += n;
	d->left -= n;
	return (ssize_t)n;
}

static ssize_t take_lines(struct file_download *d, char *buf, size_t max)
{
	const char *p = (const char *)d->cur->payload + d->cur_off;
	size_t avail = d->cur->len - d->cur_off;
	while (d->skip > 0 && avail) {
		const char *nl = memchr(p, '\n', avail);
		size_t k = nl ? (size_t)(nl - p) + 1 : avail;
		p += k;
		avail -= k;
		d->cur_off += k;
		if (nl)
			d->skip--;
	}
	if (!avail || d->want == 0)
		return 0;
	size_t lim = avail < max ? avail : max, n = 0;
	while (n < lim) {
		const char *nl = memchr(p + n, '\n', lim - n);
		if (!nl) {
			n = lim;
			break;
		}
		n = (size_t)(nl - p) + 1;
		if (d->want > 0 && --d->want == 0)
			break;
	}
	memcpy(buf, p, n);
	d->cur_off += n;
	return (ssize_t)n;
}

ssize_t file_download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct file_download *d = cls;
	for (;;) {
		if ((d->lines && d->want == 0) || (!d->lines && !d->left))
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (d->cur->payload && d->cur_off < d->cur->len) {
			ssize_t n = d->lines ? take_lines(d, buf, max) : take_bytes(d, buf, max);
			if (n > 0)
				return n;
			continue;
		}
		cell_frame_free(d->cur);
		d->cur_off = 0;
		struct cell_error err;
		int rc = relay_file_read_next(d->fd, d->cur, &err);
		/* Byte mode: END before the promised length (the file shrank) or any error
		 * leaves a truncated body, never made-up bytes. */
		if (rc == 0 && (d->lines || d->tar))
			return MHD_CONTENT_READER_END_OF_STREAM;
		/* An archive cut short (a bound, a read error) ends without its end-of-archive
		 * blocks and without the chunked body's last chunk: the client sees a truncated
		 * transfer, never a complete-looking archive missing files. */
		if (rc < 0 && d->tar)
			log_warn("archive download cut short: %s", err.msg);
		if (rc <= 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

struct file_download *file_download_new(struct sandbox *sb, int fd)
{
	struct file_download *d = calloc(1, sizeof(*d));
	if (d && !(d->cur = calloc(1, sizeof(*d->cur)))) {
		free(d);
		d = NULL;
	}
	if (!d) {
		close(fd);
		sandbox_unref(sb);
		return NULL;
	}
	d->sb = sb;
	d->fd = fd;
	sandbox_stream_begin(sb); /* a long download keeps the sandbox from idling */
	return d;
}

void file_download_free(void *cls)
{
	struct file_download *d = cls;
	cell_frame_free(d->cur);
	free(d->cur);
	if (d->fd >= 0)
		close(d->fd);
	sandbox_stream_end(d->sb);
	sandbox_unref(d->sb);
	free(d);
}

/* ---- upload ---- */

int file_upload_begin(struct file_upload *fu, const char *path, const struct sbfile_perm *p,
		      json_t *xattrs, struct cell_error *err)
{
	snprintf(fu->path, sizeof(fu->path), "%s", path);
	json_t *req = sbfile_req_perm(path, p);
	if (req && xattrs)
		json_object_set(req, "xattrs", xattrs);
	int rc = req ? relay_file_write(fu->sb, req, &fu->fd, fu->budget, err)
		     : cell_err(err, ENOMEM, "request");
	json_decref(req);
	if (rc < 0)
		return rc;
	if (!fu->chunk && !(fu->chunk = malloc(CELL_FRAME_CHUNK)))
		return cell_err(err, ENOMEM, "upload buffer");
	fu->clen = 0;
	return 0;
}

/* cell-init's refusal, read as sbfile.h's calls answer it: 1 with its errno and message. */
static int refused(const struct relay_error *rerr, struct cell_error *err)
{
	cell_err_msg(err, rerr->errnum, "%s", rerr->message);
	return 1;
}

static int flush_chunk(struct file_upload *fu, struct cell_error *err)
{
	if (!fu->clen)
		return 0;
	/* init may have refused the write already (no such dir, read-only): stop at once
	 * instead of pushing the rest of the file at a closed door. */
	struct relay_error rerr;
	int t = relay_take_error(fu->fd, &rerr, 0);
	if (t == 1)
		return refused(&rerr, err);
	if (t < 0)
		return cell_err(err, EPROTO, "relay: protocol violation");
	if (cell_frame_send(fu->fd, CELL_FRAME_DATA, fu->chunk, fu->clen, err) < 0)
		return relay_take_error(fu->fd, &rerr, 1000) == 1 ? refused(&rerr, err)
								  : -err->code;
	fu->clen = 0;
	return 0;
}

int file_upload_write(struct file_upload *fu, const char *data, size_t len, struct cell_error *err)
{
	while (len) {
		size_t n = CELL_FRAME_CHUNK - fu->clen;
		if (n > len)
			n = len;
		memcpy(fu->chunk + fu->clen, data, n);
		fu->clen += n;
		data += n;
		len -= n;
		if (fu->clen == CELL_FRAME_CHUNK) {
			int rc = flush_chunk(fu, err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int file_upload_end(struct file_upload *fu, int64_t *size, struct cell_error *err)
{
	struct relay_error rerr;
	*size = 0;
	int rc = flush_chunk(fu, err);
	if (rc == 0 && (rc = relay_file_write_end(fu->fd, size, &rerr, fu->budget, err)) == 1)
		refused(&rerr, err);
	close(fu->fd);
	fu->fd = -1;
	/* The audit log: where, how much and as whom, never what. */
	audit_log(fu->sb->id, "file.write",
		  sbfile_req_audit_write(fu->path, rc == 0 ? *size : 0, fu->user, rc == 0));
	return rc;
}

void file_upload_release(struct file_upload *fu)
{
	if (fu->fd >= 0)
		close(fu->fd); /* no END: init drops its temporary file */
	fu->fd = -1;
	free(fu->chunk);
	fu->chunk = NULL;
}
