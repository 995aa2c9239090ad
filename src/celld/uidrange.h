/* uidrange.c: host-wide uid range reservations, shared by every celld */
#pragma once

#include <stdint.h>

#include "cell/error.h"
#include "cell/runtime.h"

#define CELLD_UID_RANGES_DIR "/run/cell/uid-ranges"

/* Slot n of CELLD_SLOTS owns the CELL_UID_RANGE host uids from uidrange_base(n). */
#define CELLD_SLOTS	16384u
#define CELLD_UID_FIRST 0x40000000u

/* Slot n → first host uid of its range (inline: the record's codec checks it). */
static inline uint32_t uidrange_base(int slot)
{
	return CELLD_UID_FIRST + (uint32_t)slot * CELL_UID_RANGE;
}

/* Refuse (EEXIST, naming the account) when /etc/passwd or /etc/group has an id inside the
 * range space, then create/open the reservations dir (NULL: the default), 0700 root. */
int uidrange_init(const char *dir, struct cell_error *err);
const char *uidrange_dir(void);
/* Reserve the lowest slot that is free (or stale) host-wide for sandbox id: 0 with *slot,
 * -ENOSPC when every slot is reserved, -errno. Waits on a lock other celld share: never
 * call it with the registry lock held. */
int uidrange_reserve(const char *id, int *slot, struct cell_error *err);
/* Re-reserve an adopted sandbox's recorded slot (recreating a missing file, reclaiming a
 * stale one). -EBUSY with err naming both sandboxes when another live owner holds it;
 * -EALREADY when a running celld on this same state dir holds it for this sandbox. */
int uidrange_adopt(const char *id, int slot, struct cell_error *err);
/* Drop our reservation of slot for id; nothing when we do not hold it for id. Quick (no
 * waiting on other processes): may run under the registry lock. */
void uidrange_release(const char *id, int slot);
