/* Resource quantities ("500m", "2Gi"), as the OpenSandbox API writes them. Strict on purpose: a
 * typo ("2GB", "1,5Gi", " 2Gi") must be a 400 naming the field, never a limit silently read as
 * something else. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cell/quantity.h"

#define FRAC_DIGITS_MAX 9

/* digits[.digits] at text; *whole and *frac (scaled to 10^FRAC_DIGITS_MAX); returns the
 * length consumed or -errno. */
static int parse_decimal(const char *text, uint64_t *whole, uint64_t *frac, int *frac_digits)
{
	const char *c = text;
	*whole = 0;
	*frac = 0;
	*frac_digits = 0;
	if (*c < '0' || *c > '9')
		return -EINVAL;
	for (; *c >= '0' && *c <= '9'; c++) {
		if (*whole > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		*whole = *whole * 10 + (uint64_t)(*c - '0');
	}
	if (*c == '.') {
		c++;
		if (*c < '0' || *c > '9')
			return -EINVAL;
		for (; *c >= '0' && *c <= '9'; c++) {
			if (*frac_digits == FRAC_DIGITS_MAX)
				return -EINVAL;
			*frac = *frac * 10 + (uint64_t)(*c - '0');
			(*frac_digits)++;
		}
		for (int i = *frac_digits; i < FRAC_DIGITS_MAX; i++)
			*frac *= 10;
	}
	return (int)(c - text);
}

static uint64_t pow_u64(uint64_t base, int exp)
{
	uint64_t v = 1;
	while (exp-- > 0)
		v *= base;
	return v;
}

int cell_parse_cpu(const char *text, uint64_t *millis)
{
	uint64_t whole, frac;
	int digits;
	if (!text)
		return -EINVAL;
	int n = parse_decimal(text, &whole, &frac, &digits);
	if (n < 0)
		return n;
	const char *suffix = text + n;
	if (!strcmp(suffix, "m")) {
		if (digits) /* "1.5m": below a millicore */
			return -EINVAL;
		*millis = whole;
		return 0;
	}
	if (*suffix || digits > 3)
		return -EINVAL;
	if (whole > UINT64_MAX / 1000)
		return -ERANGE;
	*millis = whole * 1000 + frac / pow_u64(10, FRAC_DIGITS_MAX - 3);
	return 0;
}

int cell_parse_bytes(const char *text, uint64_t *bytes)
{
	static const struct {
		const char *name;
		uint64_t base;
		int exp;
	} suffixes[] = {
	    {"", 1, 0},	     {"Ki", 1024, 1}, {"Mi", 1024, 2}, {"Gi", 1024, 3}, {"Ti", 1024, 4},
	    {"Pi", 1024, 5}, {"Ei", 1024, 6}, {"k", 1000, 1},  {"M", 1000, 2},	{"G", 1000, 3},
	    {"T", 1000, 4},  {"P", 1000, 5},  {"E", 1000, 6},
	};
	uint64_t whole, frac;
	int digits;
	if (!text)
		return -EINVAL;
	int n = parse_decimal(text, &whole, &frac, &digits);
	if (n < 0)
		return n;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (strcmp(text + n, suffixes[i].name))
			continue;
		uint64_t mult = pow_u64(suffixes[i].base, suffixes[i].exp);
		if (whole > UINT64_MAX / mult)
			return -ERANGE;
		uint64_t v = whole * mult;
		if (frac) {
			/* frac / 10^9 of mult, rounded up; mult ≤ 2^60 so split to stay in range.
			 */
			const uint64_t scale = pow_u64(10, FRAC_DIGITS_MAX);
			uint64_t part = (mult / scale) * frac;
			uint64_t rest = (mult % scale) * frac;
			part += rest / scale + (rest % scale != 0);
			if (v > UINT64_MAX - part)
				return -ERANGE;
			v += part;
		}
		*bytes = v;
		return 0;
	}
	return -EINVAL;
}

int cell_parse_count(const char *text, uint64_t *out)
{
	uint64_t whole, frac;
	int digits;
	if (!text)
		return -EINVAL;
	int n = parse_decimal(text, &whole, &frac, &digits);
	if (n < 0)
		return n;
	if (text[n] || digits)
		return -EINVAL;
	*out = whole;
	return 0;
}
