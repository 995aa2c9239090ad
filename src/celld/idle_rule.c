/* The idle rule: one function of what the timers saw (idle_rule.h says what counts). It
 * reads no clock and no lock, so its whole table is a unit test (tests/unit/test_idle_rule.c). */
#include "idle_rule.h"

bool idle_rule_in_use(const struct idle_use *use)
{
	return use->proxy_conns > 0 || use->streams > 0;
}

/* t seconds (0: never) have passed since since. */
static bool past(time_t since, int64_t t, time_t now)
{
	return t > 0 && (int64_t)(now - since) >= t;
}

enum idle_step idle_rule_next(const struct idle_view *v, time_t now)
{
	if (v->expires_at && now >= v->expires_at)
		return IDLE_EXPIRE;
	switch (v->state) {
	case SBX_RUNNING:
		if (idle_rule_in_use(&v->use))
			return IDLE_IN_USE;
		return past(v->since, v->timers.idle_timeout, now) ? IDLE_PAUSE : IDLE_NOTHING;
	case SBX_PAUSED:
		return past(v->since, v->timers.stop_after, now) ? IDLE_STOP : IDLE_NOTHING;
	case SBX_STOPPED:
	case SBX_FAILED:
		return past(v->since, v->timers.reclaim_after, now) ? IDLE_RECLAIM : IDLE_NOTHING;
	default:
		return IDLE_NOTHING;
	}
}
