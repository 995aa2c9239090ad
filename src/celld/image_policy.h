/* image_policy.c: the bounds of the image store (policies/images/limits.json): the most
 * compressed bytes of one image a pull takes, the most bytes every layer of the store may
 * take together, the most layers of one image. Missing file: the built-in bounds. */
#pragma once

#include <stdint.h>

#include "cell/error.h"

struct image_policy {
	uint64_t max_image_bytes; /* compressed layers of one image */
	uint64_t max_store_bytes; /* the store's layers together (their files' bytes) */
	unsigned max_layers;	  /* of one image, at most CELL_IMAGE_LAYERS_MAX */
};

/* Load it: a bad file refuses the start, naming the field. */
int image_policy_load(struct cell_error *err);
const struct image_policy *image_policy(void);
