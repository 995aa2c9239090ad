/* timers.c: expiry and the idle timers (Running idle → Paused → Stopped → deleted). */
#pragma once

#include <stdint.h>

#include "cell/error.h"

int timers_start(struct cell_error *err);
/* How long ago (ms) the timers' thread last showed it runs: at each wake and after each
 * sandbox it looked at. -1 before its first wake. */
int64_t timers_beat_age_ms(void);
