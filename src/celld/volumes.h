/* volumes.c: cell.volumes, each volume's id mapping chosen */
#pragma once

#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/runtime.h"
#include "create_spec.h"

/* Parse extensions["cell.volumes"] into spec->volumes_json (the record: host resolved, map,
 * owner ids, why) and spec->volumes; warnings for the create's answer are appended to
 * spec->warnings. -EINVAL with err naming the field. */
int volumes_parse(const char *text, struct create_spec *spec, struct cell_error *err);
/* The runtime's volumes from a record's volumes (strings point into arr); refused when the
 * record would map the sandbox's root to a system account. */
int volumes_from_json(json_t *arr, struct cell_volume **out, size_t *n, struct cell_error *err);
