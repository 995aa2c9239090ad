/* timers.c: expiry and the idle timers (Running idle → Paused → Stopped → deleted). */
#pragma once

#include "cell/error.h"

int timers_start(struct cell_error *err);
