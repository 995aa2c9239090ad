/* images.c: the images a create may name: those cell built (<images>/<name>/rootfs) and
 * those of the layer store (pulled or imported: image_store.h) */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"
#include "image_store.h"

/* An image found for a create. */
struct image_found {
	char rootfs[4096]; /* its top lower dir (a built image's rootfs) */
	json_t *layers;	   /* a store image's lower dirs, top first; NULL: rootfs alone */
	char digest[STORE_DIGEST_MAX]; /* a store image's manifest digest; "" for a built one */
	json_t *config;	     /* a store image's config; a built one's {"config": {"Entrypoint"}}
			      * from its manifest.json, or NULL */
	char private_to[32]; /* store_image's: pulled with that principal's own credentials */
};

/* uri names a built image ("name", "name:latest"), else an image of the store (by the name
 * it was imported under, or as a registry reference, normalized: "busybox:1.36" is
 * docker.io/library/busybox:1.36). -ENOENT (err says where it was looked for), -EINVAL
 * (neither a local name nor a reference), or another -errno. Free with image_found_free. */
int image_find(const char *uri, struct image_found *out, struct cell_error *err);
void image_found_free(struct image_found *f);
/* uri names an image cell built (a valid local name whose rootfs is there). */
bool image_is_built(const char *uri);

/* uri names a local image; writes <images>/<name>/rootfs into buf. -ENOENT (not there)
 * or -EINVAL (not a valid name), with err naming image.uri. */
int image_resolve(const char *uri, char *buf, size_t size, struct cell_error *err);
