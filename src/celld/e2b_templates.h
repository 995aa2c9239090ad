/* e2b_templates.c: E2B's template ids mapped onto cell's images (policies/e2b/templates.json,
 * cell-policy(5)): {"templates": {"base": "default", "id": {"image": "name",
 * "codeInterpreter": true}}, "unlisted": "image" | "refuse"}. */
#pragma once

#include <stdbool.h>

#include "cell/error.h"

/* Load the map; a missing file means the built-in one (base → default, unlisted ids name
 * images). -EINVAL naming the member when the file is wrong. */
int e2b_templates_load(struct cell_error *err);
/* The image name a create's templateID asks for: the map's entry (storage kept until exit),
 * or the id itself when the map lets unlisted ids name images. -ENOENT when the map refuses
 * it. Whether the image exists is the create's check. */
int e2b_template_image(const char *template_id, const char **image);
/* Whether the map lists template_id (a listed id is always its image, never a snapshot,
 * and no snapshot may take it as its name). */
bool e2b_template_listed(const char *template_id);
/* Whether the map marks template_id "codeInterpreter": the code interpreter runs in its
 * image, cell's own service when the image has none (interp_service.h). */
bool e2b_template_interpreter(const char *template_id);
