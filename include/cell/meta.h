/* A file's metadata as both sides of the relay bound it (FILE_WRITE's "xattrs", STAT's;
 * implemented in src/common/proto.c): apart from the frames, so that what checks a client's
 * metadata needs no frame of cell/proto.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* File metadata (FILE_WRITE's "xattrs", STAT's): extended attributes "user.e2b.<key>", bounded
 * as E2B's envd bounds them. A key is 1..CELL_META_KEY_MAX HTTP token characters (RFC 9110:
 * it travels as a header name, X-Metadata-<key>), a value printable ASCII (0x20-0x7e); all
 * keys of a file (each counted with its CELL_META_PREFIX) and values are at most
 * CELL_META_MAX bytes. */
#define CELL_META_PREFIX  "user.e2b."
#define CELL_META_MAX	  4096
#define CELL_META_KEY_MAX 246
bool cell_meta_key_ok(const char *k, size_t n);
/* RFC 9110's tchar: what an HTTP token (a header name, a metadata key) is made of. */
bool cell_http_tchar(unsigned char c);
bool cell_meta_value_ok(const char *v, size_t n);
