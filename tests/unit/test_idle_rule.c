/* The idle rule (src/celld/idle_rule.c): what one look of the timers does with a sandbox.
 * Only a client's use holds a Running sandbox off its pause: a proxied connection or
 * tunnel, a stream (terminal, transfer, watch, a foreground command's events). What runs
 * inside by itself (the entrypoint, background commands, a foreground command whose
 * client left) is not an input at all: such a sandbox idles as an empty one does. */
#include <stdio.h>

#include "../../src/celld/idle_rule.h"
#include "unit.h"

#define NOW ((time_t)1800000000)

struct row {
	const char *what;
	enum sbx_state state;
	int64_t quiet;	 /* seconds since the transition or the last use */
	int64_t expires; /* expiresAt - NOW; 0: no expiry */
	struct sbx_timers timers;
	struct idle_use use;
	enum idle_step want;
};

/* idleTimeout 300, stopAfter 3600, reclaimAfter 604800 (the shipped policy). */
#define T                                                                                          \
	{                                                                                          \
		300, 3600, 604800, SBX_TIMEOUT_DELETE                                              \
	}
#define T_OFF                                                                                      \
	{                                                                                          \
		0, 0, 0, SBX_TIMEOUT_DELETE                                                        \
	}

static const struct row rows[] = {
    {"running, just used", SBX_RUNNING, 10, 0, T, {0, 0}, IDLE_NOTHING},
    {"running, one second short of idle", SBX_RUNNING, 299, 0, T, {0, 0}, IDLE_NOTHING},
    {"running, unused for idleTimeout (entrypoint, background commands, daemons inside "
     "count for nothing)",
     SBX_RUNNING,
     300,
     0,
     T,
     {0, 0},
     IDLE_PAUSE},
    {"running, long unused", SBX_RUNNING, 100000, 0, T, {0, 0}, IDLE_PAUSE},
    {"running, a foreground command's client reading",
     SBX_RUNNING,
     100000,
     0,
     T,
     {0, 1},
     IDLE_IN_USE},
    {"running, an attached terminal and a transfer", SBX_RUNNING, 5, 0, T, {0, 2}, IDLE_IN_USE},
    {"running, an open proxied connection", SBX_RUNNING, 100000, 0, T, {1, 0}, IDLE_IN_USE},
    {"running, a tunnel and a stream", SBX_RUNNING, 100000, 0, T, {3, 4}, IDLE_IN_USE},
    {"running, idle timer off", SBX_RUNNING, 100000, 0, T_OFF, {0, 0}, IDLE_NOTHING},
    {"running, in use, timer off", SBX_RUNNING, 100000, 0, T_OFF, {1, 0}, IDLE_IN_USE},
    {"paused, short of stopAfter", SBX_PAUSED, 3599, 0, T, {0, 0}, IDLE_NOTHING},
    {"paused for stopAfter", SBX_PAUSED, 3600, 0, T, {0, 0}, IDLE_STOP},
    {"paused, stop timer off", SBX_PAUSED, 100000, 0, T_OFF, {0, 0}, IDLE_NOTHING},
    {"stopped, short of reclaimAfter", SBX_STOPPED, 604799, 0, T, {0, 0}, IDLE_NOTHING},
    {"stopped for reclaimAfter", SBX_STOPPED, 604800, 0, T, {0, 0}, IDLE_RECLAIM},
    {"failed for reclaimAfter", SBX_FAILED, 604800, 0, T, {0, 0}, IDLE_RECLAIM},
    {"stopped, reclaim timer off", SBX_STOPPED, 10000000, 0, T_OFF, {0, 0}, IDLE_NOTHING},
    {"pending is never the timers'", SBX_PENDING, 10000000, 0, T, {0, 0}, IDLE_NOTHING},
    {"running, expiry not reached", SBX_RUNNING, 10, 1, T, {0, 0}, IDLE_NOTHING},
    {"running, expired", SBX_RUNNING, 10, -1, T, {0, 0}, IDLE_EXPIRE},
    {"running and in use, expired", SBX_RUNNING, 0, -5, T, {1, 1}, IDLE_EXPIRE},
    {"paused, expired", SBX_PAUSED, 1, -1, T, {0, 0}, IDLE_EXPIRE},
    {"stopped, expired", SBX_STOPPED, 1, -1, T_OFF, {0, 0}, IDLE_EXPIRE},
};

START_TEST(the_table)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct idle_view v = {
		    .state = r->state,
		    .since = NOW - (time_t)r->quiet,
		    .expires_at = r->expires ? NOW + (time_t)r->expires : 0,
		    .timers = r->timers,
		    .use = r->use,
		};
		ck_assert_msg(idle_rule_next(&v, NOW) == r->want, "%s: step %d, want %d", r->what,
			      (int)idle_rule_next(&v, NOW), (int)r->want);
	}
}
END_TEST

START_TEST(use_is_a_client_holding_something)
{
	ck_assert(!idle_rule_in_use(&(struct idle_use){0, 0}));
	ck_assert(idle_rule_in_use(&(struct idle_use){1, 0}));
	ck_assert(idle_rule_in_use(&(struct idle_use){0, 1}));
}
END_TEST

static Suite *idle_rule_suite(void)
{
	Suite *s = suite_create("idle_rule");
	TCase *tc = tcase_create("idle_rule");
	tcase_add_test(tc, the_table);
	tcase_add_test(tc, use_is_a_client_holding_something);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(idle_rule_suite());
}
