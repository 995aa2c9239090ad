/* timefmt.c: clocks and RFC 3339 */
#pragma once

#include <stdint.h>
#include <time.h>

#include <jansson.h>

#define CELLD_TIME_LEN 32

int64_t celld_now_ms(void);
/* CLOCK_REALTIME's now plus ms into *at: the deadline pthread_cond_timedwait takes. */
void celld_deadline(int ms, struct timespec *at);
/* "2026-11-22T05:00:00Z" (UTC, whole seconds). */
void celld_format_time(time_t t, char buf[CELLD_TIME_LEN]);
/* Parse RFC 3339 ("2026-11-22T05:00:00Z", fractions and ±hh:mm offsets allowed). */
int celld_parse_time(const char *text, time_t *out);
/* The same as a JSON string; JSON null for 0 (never set). */
json_t *celld_time_json(time_t t);
