/* volumes.c: a create's volumes (volumes[], cell.volumes), each volume's id mapping
 * chosen; named volumes opened for a start */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/runtime.h"
#include "create_spec.h"

/* Parse extensions["cell.volumes"] into spec->volumes_json (the record: host resolved, map,
 * owner ids, why); warnings for the create's answer are appended to spec->warnings.
 * -EINVAL with err naming the field. */
int volumes_parse(const char *text, struct create_spec *spec, struct cell_error *err);
/* Parse the create's volumes[] (NULL or null: none) into spec->volumes_json and, for named
 * volumes, spec->volume_claims. A host backend over TCP only under a --volume-root. -EINVAL
 * with err naming the field (-EAGAIN: a pvc.storage over the disk's free space). */
int volumes_parse_api(json_t *arr, bool over_tcp, struct create_spec *spec, struct cell_error *err);
/* After both parsers: the whole list checked (count, one volume per dest, and readable back
 * from the record as a start will read it). */
int volumes_finish(struct create_spec *spec, struct cell_error *err);
/* The runtime's volumes from a record's volumes (strings point into arr); refused when the
 * record would map the sandbox's root to a system account. */
int volumes_from_json(json_t *arr, struct cell_volume **out, size_t *n, struct cell_error *err);
/* Before a start: every named volume of vols (made from arr) opened in the volume store
 * (source_fd, sub_path). On failure nothing stays open. */
int volumes_open_named(json_t *arr, struct cell_volume *vols, size_t n, struct cell_error *err);
/* Once the start is done (the sandbox's mounts hold the volumes). */
void volumes_close_named(struct cell_volume *vols, size_t n);
