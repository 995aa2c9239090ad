/* image_import.c: an image archive read from an fd into the layer store (image_store.h): an
 * OCI image layout as a tar (plain, gzip or zstd: oci-layout, index.json, blobs/sha256/...;
 * docker save's newer format is one) or a `docker save` archive (manifest.json naming a
 * config and layer tars).
 *
 * The archive is hostile input. Its members are spooled into a private work dir of the
 * store (tmp/import-<pid>-<random>), each file under a counter, never under its name; a
 * name is judged first (no "..", ".", empty part, absolute path or control character, no
 * duplicate), devices, fifos and sockets are refused, and a link must lead to another
 * member. The bounds (members, bytes) are checked on each header. Every digest is verified
 * (blobs against the manifest and index that name them, every layer's uncompressed content
 * against the config's rootfs.diff_ids) before the store is touched; the layers then go in
 * bottom first, each over the ones below. A failure names the member, and leaves the store
 * as it was: the layers this import added are removed again (unless another pull or import
 * holds the store: a prune takes them then). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"
#include "image_store.h"

#define IMPORT_MEMBERS_MAX 4096		 /* members of an archive */
#define IMPORT_BYTES_MAX   (64ull << 30) /* bytes of the archive, and of its files together */
#define IMPORT_DOC_MAX	   (4u << 20)	 /* a JSON document of it */

/* The archive names no image, and none was given. */
#define IMPORT_ENAME_REQUIRED EDESTADDRREQ

struct import_opts {
	const char *name;     /* what to call the image (normalized as a reference); NULL: the
			       * archive's own name for it (RepoTags, the index's annotations) */
	const char *ref;      /* which of several images: one its annotations or RepoTags name */
	const char *owner_id; /* recorded with the name (admission_principal_id's text) */
	/* May the name move from its current owner's image (image_store.h)? NULL: yes. */
	bool (*may_take)(const char *owner, void *cls);
	void *cls;
};

struct import_result {
	char name[STORE_NAME_MAX];
	char digest[STORE_DIGEST_MAX]; /* the manifest's (docker save: a canonical one's) */
	size_t layers, layers_added;
	uint64_t bytes; /* of the archive, as read */
};

/* Import the archive read from fd (to its end). 0, or -errno with err naming the member:
 * -EINVAL (not an archive of an image, a refused member, a missing blob), -EBADMSG (a
 * digest or size that does not match), -EFBIG (a bound), -ENOEXEC (another platform's
 * image), -IMPORT_ENAME_REQUIRED, -STORE_ENAME_TAKEN, or what the store met. */
int image_import(int fd, const struct import_opts *o, struct import_result *res,
		 struct cell_error *err);

/* A name for an image, normalized as a reference ("busybox" → "docker.io/library/
 * busybox:latest"; a digest is refused): 0 or -EINVAL. */
int image_import_name(const char *in, char out[STORE_NAME_MAX], struct cell_error *err);
