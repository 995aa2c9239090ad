/* timers.c: the expiry reaper (a sandbox past its expiresAt is deleted). */
#pragma once

#include "cell/error.h"

int timers_start(struct cell_error *err);
