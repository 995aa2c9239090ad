/* image_store.c: the content-addressed layer store under <images>/.store (0700 root), for
 * images pulled from a registry or imported from an archive (images cell builds itself keep
 * <images>/<name>/rootfs):
 *
 *   layers/<hex>/diff/         a layer unpacked once (layer_unpack.c), named by its diffID
 *   layers/<hex>/layer.json    {diffId, blobDigest, bytes, entries, created}
 *   images/<hex>.json          an image by its manifest's digest: {digest, configDigest,
 *                              config, layers (diffIDs, bottom first), bytes, created}
 *   refs/<hex of the name>.json  a name ("docker.io/library/busybox:1.36") → a digest
 *                              (and "owner": who imported or committed it)
 *   tmp/                       layers being unpacked, imports' and commits' work dirs
 *                              (swept at start)
 *
 * An image's lower dirs are its layers' diff/ dirs, top first. Nothing here follows a link
 * or trusts a name: digests are checked for their grammar before they become file names,
 * and names are hashed. Two callers adding the same layer wait for one unpack. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "layer_unpack.h"

#define STORE_DIGEST_MAX 72  /* "sha256:" and 64 hex, NUL */
#define STORE_NAME_MAX	 256 /* an image's name (a normalized reference) */

/* An image of the store. */
struct store_image {
	char digest[STORE_DIGEST_MAX];	      /* its manifest's */
	char config_digest[STORE_DIGEST_MAX]; /* its config's */
	json_t *config;			      /* the image config (a reference) */
	char (*layers)[STORE_DIGEST_MAX];     /* diffIDs, bottom first */
	size_t n_layers;
	uint64_t bytes; /* its layers' apparent bytes */
	/* Looked up by a name pulled with a request's own credentials: the principal that
	 * pulled it (admission_principal_id's text); "" when the name is everyone's. */
	char private_to[32];
};

/* Make the store's dirs under <images>/.store and sweep tmp/: 0 or -errno with err. */
int store_init(const char *images_dir, struct cell_error *err);
/* <images>/.store, open (-1 before store_init): the parent of its events' dir, named
 * STORE_EVENTS_ID (no sandbox's id: those have no dot). */
int store_fd(void);
#define STORE_EVENTS_ID ".events"
/* The bounds of one layer. */
const struct layer_limits *store_layer_limits(void);

/* A diffID's layer is in the store. */
bool store_has_layer(const char *diff_id);
/* Its diff/ dir into buf: 0, -ENOENT (not there), -EINVAL (not a digest). */
int store_layer_dir(const char *diff_id, char *buf, size_t size);
/* The bytes of a layer's files (its layer.json's), 0 when unknown. */
uint64_t store_layer_bytes(const char *diff_id);
/* The bytes every layer of the store takes (their files'), kept as layers come and go. */
uint64_t store_used_bytes(void);
/* Unpack a layer read from fd into the store, unless it is there already (then fd is not
 * read): want_blob (the compressed digest a manifest names) and want_diff (the diffID a
 * config names) are checked when not NULL, and a layer that does not match them is
 * refused (-EINVAL naming both), leaving the store as it was. *diff_id_out: the layer's
 * diffID. Another caller adding the same diffID waits for the first. */
int store_layer_add(int fd, const char *want_blob, const char *want_diff,
		    char diff_id_out[STORE_DIGEST_MAX], struct cell_error *err);
/* The same for a layer over others (parents: their diffIDs, top first, in the store): a
 * directory it implies but does not list takes its owner and mode from them
 * (layer_unpack_over). A layer is kept by its diffID alone: the first image to bring it
 * decides such directories for every image that shares it. */
int store_layer_add_over(int fd, const char *want_blob, const char *want_diff,
			 const char *const *parents, size_t n_parents,
			 char diff_id_out[STORE_DIGEST_MAX], struct cell_error *err);

/* Record img (its layers must be in the store, its config given) under its digest, and
 * name it when name is not NULL (a name names one image: naming another moves it). */
int store_image_put(const char *name, const struct store_image *img, struct cell_error *err);
/* The name was pulled with owner_id's own credentials (a request's image.auth): others
 * must show the registry credentials of their own before they use it (private_to); NULL:
 * with no one's, or the operator's: everyone's. */
int store_name_private(const char *name, const char *owner_id, struct cell_error *err);
/* The name's owner, the principal that imported or committed it (admission_principal_id's
 * text; "" when none was recorded: a pull's, everyone's), into owner: 0, or -ENOENT. */
int store_name_owner(const char *name, char *owner, size_t size, struct cell_error *err);
/* store_image_put recording owner_id ("" or NULL: none) with the name. When may_take is
 * not NULL and the name names an image already, may_take(its owner, cls) decides, under
 * the store's lock, whether the name may move: -STORE_ENAME_TAKEN when not. */
#define STORE_ENAME_TAKEN EADDRINUSE
int store_image_put_owned(const char *name, const char *owner_id,
			  bool (*may_take)(const char *owner, void *cls), void *cls,
			  const struct store_image *img, struct cell_error *err);
/* The image a name or a digest ("sha256:...") names: 0 with *out filled (free with
 * store_image_free), -ENOENT, or another -errno. */
int store_image_get(const char *name_or_digest, struct store_image *out, struct cell_error *err);
void store_image_free(struct store_image *img);
/* The image's lower dirs, top first, into *dirs (malloc'd array of malloc'd strings; free
 * with store_dirs_free): 0, or -ENOENT when a layer is missing. */
int store_image_dirs(const struct store_image *img, char ***dirs, struct cell_error *err);
void store_dirs_free(char **dirs, size_t n);
/* Every named image: [{name, digest, bytes, layers, created}], a new array. */
json_t *store_image_list(void);
/* Remove the name (its image record and layers stay until store_prune). -ENOENT when the
 * name is not there. */
int store_name_remove(const char *name, struct cell_error *err);
/* A pull or an import is under way from hold to unhold: its layers are in the store before
 * its image record names them, and no prune may take them meanwhile. */
void store_hold(void);
void store_unhold(void);
/* A private work dir of an import or a commit, tmp/<kind>-<pid>-<random>: its fd, locked
 * for as long as it is open (a celld that starts on the same images dir sweeps only work
 * dirs nobody holds, of a process that is no live celld), its name into name. */
int store_tmp_make(const char *kind, char *name, size_t size, struct cell_error *err);
/* The work dir's path (for what must name it: a mount's source). */
int store_tmp_path(const char *name, char *buf, size_t size);
void store_tmp_remove(const char *name);
/* Undo of a failed import or commit (which holds the store): remove the layers it added
 * (diff_ids) that no image record names. -EBUSY, removing none, while another pull or
 * import holds the store (one may stand on them; a later prune takes them). */
int store_layers_drop(const char (*diff_ids)[STORE_DIGEST_MAX], size_t n, struct cell_error *err);
/* Remove every layer no image record names and every image record no name names and
 * keep() does not keep (keep: a digest a sandbox or snapshot uses). *freed: bytes.
 * -EBUSY while a pull or import holds the store. */
int store_prune(bool (*keep)(const char *digest, void *cls), void *cls, uint64_t *freed,
		struct cell_error *err);
