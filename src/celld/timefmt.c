/* Clocks and RFC 3339 timestamps as the API shows them. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "timefmt.h"

int64_t celld_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void celld_deadline(int ms, struct timespec *at)
{
	clock_gettime(CLOCK_REALTIME, at);
	at->tv_sec += ms / 1000;
	at->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (at->tv_nsec >= 1000000000L) {
		at->tv_sec++;
		at->tv_nsec -= 1000000000L;
	}
}

void celld_format_time(time_t t, char buf[CELLD_TIME_LEN])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(buf, CELLD_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, CELLD_TIME_LEN, "1970-01-01T00:00:00Z");
}

/* Reads exactly n digits. */
static int digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -EINVAL;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int expect(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

int celld_parse_time(const char *text, time_t *out)
{
	const char *p = text;
	int y, mo, d, h, mi, s;
	if (!text || digits(&p, 4, &y) || expect(&p, '-') || digits(&p, 2, &mo) ||
	    expect(&p, '-') || digits(&p, 2, &d))
		return -EINVAL;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -EINVAL;
	p++;
	if (digits(&p, 2, &h) || expect(&p, ':') || digits(&p, 2, &mi) || expect(&p, ':') ||
	    digits(&p, 2, &s))
		return -EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	long offset = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, oh, om;
		p++;
		if (digits(&p, 2, &oh) || expect(&p, ':') || digits(&p, 2, &om) || oh > 23 ||
		    om > 59)
			return -EINVAL;
		offset = sign * (oh * 3600L + om * 60L);
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	struct tm tm = {
	    .tm_year = y - 1900,
	    .tm_mon = mo - 1,
	    .tm_mday = d,
	    .tm_hour = h,
	    .tm_min = mi,
	    .tm_sec = s == 60 ? 59 : s,
	};
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = t - offset;
	return 0;
}

json_t *celld_time_json(time_t t)
{
	if (!t)
		return json_null();
	char buf[CELLD_TIME_LEN];
	celld_format_time(t, buf);
	return json_string(buf);
}
