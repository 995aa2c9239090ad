/* untar.c: unpack a tar archive that came out of a sandbox (hostile input) beneath one
 * directory of the host, fed as it arrives. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

#define UNTAR_ENTRIES_MAX 100001 /* a sandbox's archive holds at most 100000 below its top */
#define UNTAR_DEPTH_MAX	  64	 /* components of one name */
#define UNTAR_PAX_MAX	  (1u << 20)

struct untar;

/* Unpack beneath the directory open on dirfd (not taken). The archive's first component
 * (the name of the directory archived) is dropped: what lies below it lands directly in
 * dirfd. */
struct untar *untar_new(int dirfd, struct cell_error *err);
/* Feed the next len bytes. 0, or -errno with err set: the unpacking stops there. */
int untar_feed(struct untar *u, const void *data, size_t len, struct cell_error *err);
/* The archive ended: 0 when it ended properly (the end-of-archive blocks), else -EPROTO. */
int untar_finish(struct untar *u, struct cell_error *err);
unsigned long untar_entries(const struct untar *u);
void untar_free(struct untar *u);
