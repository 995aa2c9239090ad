/* volstore.c: celld's named volumes on disk, under <state>/volumes */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/id.h"
#include "uidrange.h"

/* The on-disk id of a sandbox's root in every named volume: the range just past the
 * sandboxes' (uidrange.h), which no account and no sandbox runs as. */
#define VOLSTORE_UID_BASE ((uint32_t)(CELLD_UID_FIRST + CELLD_SLOTS * CELL_UID_RANGE))
#define VOLSTORE_NAME_MAX 253

/* How sandboxes may share a volume (pvc.accessModes, set when it is created). */
enum volstore_access {
	VOL_RWO,  /* ReadWriteOnce (the default): one writer at a time, any readers */
	VOL_ROX,  /* ReadOnlyMany: mounted read-only only */
	VOL_RWX,  /* ReadWriteMany: several writers, only where the operator allows it */
	VOL_RWOP, /* ReadWriteOncePod: one sandbox at a time, writer or reader */
};

struct volstore_info {
	char name[VOLSTORE_NAME_MAX + 1];
	time_t created_at;
	uint64_t bytes; /* its disk quota */
	enum volstore_access access;
	char owner[80];	  /* the principal that created it ("" for the Unix socket) */
	uint32_t project; /* its project quota id (used only with project quotas) */
	/* The sandbox whose create made it and whose delete removes it
	 * (pvc.deleteOnSandboxTermination), or "". */
	char delete_with[CELL_ID_MAX + 1];
};

/* Open (creating if missing, 0700) <state>/volumes and clear what a create cut short left
 * there. */
int volstore_init(const char *state_dir, struct cell_error *err);
/* A DNS label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most VOLSTORE_NAME_MAX bytes. */
bool volstore_name_valid(const char *name);
const char *volstore_access_name(enum volstore_access a);
/* "ReadWriteOnce" … → a; -EINVAL for anything else. */
int volstore_access_parse(const char *text, enum volstore_access *a);

/* name's record: 0, -ENOENT, or -errno with err. */
int volstore_get(const char *name, struct volstore_info *out, struct cell_error *err);
/* name made with info's bytes, access and owner (1), or found as it is (0, *info filled
 * from its record). -EEXIST is never returned: a racing create finds the other's. A new
 * volume's data dir takes the owner (a sandbox's id) and mode of like, when given: the
 * directory the image has where the volume is mounted, as a new volume takes its mount
 * point's ownership elsewhere. */
int volstore_create(struct volstore_info *info, const struct stat *like, struct cell_error *err);
/* For a start of a sandbox that mounts name: the volume's filesystem root as an O_PATH fd
 * (a detached mount of its own for a loop image), and the directory below it to mount
 * ("data" or "data/<sub>"), made (owned by the sandbox's root) where missing. */
int volstore_open(const char *name, const char *sub, int *fd, char *rel, size_t rel_size,
		  struct cell_error *err);
/* Remove name and everything in it: -ENOENT, -EBUSY (a sandbox's mount still holds its
 * filesystem), or 0. The caller checks first that no sandbox records it. */
int volstore_remove(const char *name, struct cell_error *err);
/* The record as the API shows it, with its use of the disk. */
json_t *volstore_json(const struct volstore_info *info);
/* Every volume's name, sorted (a JSON array of strings). */
json_t *volstore_names(void);
