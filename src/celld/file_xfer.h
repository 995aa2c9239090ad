/* file_xfer.c: a file's bytes streamed between an HTTP body and cell-init's file
 * conversations, never held whole: a download (a reader of sbfile.c, its DATA frames
 * handed to the HTTP library as they come) and an upload into one file (FILE_WRITE, DATA
 * frames of CELL_FRAME_CHUNK, END), audited as file.write in sbfile_req.h's shape. Shared by
 * every API's file routes; the sandbox files service (sbfile.h) for everything else. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cell/error.h"
#include "relay_types.h"
#include "sbfile_req.h"

struct cell_frame;
struct sandbox;

/* A download streams DATA frames as they come. Byte mode (whole file or a range) promises
 * a length; line mode (skip lines, then want lines, -1 all) filters lines on the way; tar
 * mode sends an archive cell-init makes as it goes, no length known. */
struct file_download {
	struct sandbox *sb;
	int fd;
	struct cell_frame *cur; /* the DATA frame being sent */
	size_t cur_off;
	bool lines;
	bool tar;
	uint64_t left;	    /* byte mode: bytes still promised by Content-Length */
	int64_t skip, want; /* line mode: lines to drop, lines to send (-1: all) */
};

/* A download of sb's stream fd, taking both (the sandbox counts it as a live stream); NULL
 * (both released) when out of memory. */
struct file_download *file_download_new(struct sandbox *sb, int fd);
/* The HTTP library's content reader over a file_download. */
ssize_t file_download_read(void *cls, uint64_t pos, char *buf, size_t max);
void file_download_free(void *cls);

/* An upload into one file. Zero it, set sb, user (the sandbox user the call acts as, for
 * the audit; NULL when its API names none) and budget, fd -1. */
struct file_upload {
	struct sandbox *sb;
	const char *user;
	int fd; /* the open FILE_WRITE conversation, -1 when none */
	struct relay_budget *budget;
	char *chunk;
	size_t clen;
	char path[PATH_MAX]; /* the file being written */
};

/* Open the FILE_WRITE conversation of path, made with p's mode and owners and, with
 * xattrs (an object of strings), that metadata. 0 or -errno with err. */
int file_upload_begin(struct file_upload *fu, const char *path, const struct sbfile_perm *p,
		      json_t *xattrs, struct cell_error *err);
/* Bytes of the file, sent in frames of CELL_FRAME_CHUNK: 0, 1 when cell-init refused the
 * write (err->code its errno, err->msg its message), -errno with err. */
int file_upload_write(struct file_upload *fu, const char *data, size_t len, struct cell_error *err);
/* The file's end: the last bytes, END, cell-init's answer (0 with *size, 1 refused as
 * above, -errno); the conversation is closed and the write audited (file.write). */
int file_upload_end(struct file_upload *fu, int64_t *size, struct cell_error *err);
/* Close an unfinished conversation (cell-init drops its temporary file) and free the
 * buffer. */
void file_upload_release(struct file_upload *fu);
