/* provision.c: what a sandbox runs each time it starts, before its create (or start) is
 * answered: declarative packages, the startup script, the skills it names. Deduplicated by
 * a state file inside the sandbox (/root/.cell/provision.json), read and written through
 * cell-init's file frames, so a fresh sandbox runs everything again. A failure never
 * fails the start: it is kept in the sandbox's record (its "provisionResult") and shown
 * in its status. */
#pragma once

#include <jansson.h>

#include "cell/error.h"

struct adm_principal;
struct sandbox;

#define PROVISION_SCRIPT_MAX	  (16u << 10)
#define PROVISION_TIMEOUT_DEFAULT 30
#define PROVISION_TIMEOUT_MAX	  600
#define PROVISION_OUTPUT_MAX	  (8u << 10)  /* kept of one step's output (its tail) */
#define PROVISION_OUTPUT_TOTAL	  (64u << 10) /* of all a run's steps: the record stays small */
#define PROVISION_PACKAGES_MAX	  64	      /* per manager */
#define PROVISION_PACKAGE_LEN	  128
#define PROVISION_SKILLS_MAX	  32
#define PROVISION_STATE_FILE	  "/root/.cell/provision.json"
#define PROVISION_SKILLS_DIR	  "/root/.cell/skills"

/* The create's extensions cell.startupScript, cell.startupTimeout, cell.packages and
 * cell.skills (ext: the extensions object, strings only) as the record's "provision"
 * object in *out (NULL when none is given): 0, -EINVAL with err naming the field, or
 * -ENOENT (err: "SKILL_NOT_FOUND"-worthy) naming a skill that is not registered or that
 * who (the sandbox's owner) may not use. Each skill is kept with the SHA-256 it was
 * registered with: every start installs those bytes or nothing. */
int provision_parse(json_t *ext, const struct adm_principal *who, json_t **out,
		    struct cell_error *err);
/* Run sb's provisioning (nothing when it has none): its init answers and its network is
 * up. The outcome replaces sb->provision_result; never fails. Called during a start (sb is
 * busy). */
void provision_run(struct sandbox *sb);
/* inspect's "provision": what each start runs (the script by its size and SHA-256) and
 * the outcome of the last run; null when the sandbox has no provisioning. */
json_t *provision_inspect_json(struct sandbox *sb);
/* The status a client sees while sb is Running: the outcome's "reason"/"message" (NULL
 * when all went well). v: a provision_result. */
const char *provision_reason(json_t *result);
const char *provision_message(json_t *result);
