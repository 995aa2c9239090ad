/* Resource quantities as the OpenSandbox API writes them ("500m", "2Gi"), parsed strictly
 * (resourceLimits and policies/resources/). */
#pragma once

#include <stdint.h>

/* CPU: "500m" (millicores), "2", "0.5" (at most 3 decimals) → millicores. Returns 0,
 * -EINVAL (malformed: empty, sign, spaces, exponent, other suffix) or -ERANGE. */
int cell_parse_cpu(const char *text, uint64_t *millis);
/* Bytes: a whole or decimal number with an optional suffix: binary Ki Mi Gi Ti Pi Ei
 * (powers of 1024) or decimal k M G T P E (powers of 1000); a fraction is rounded up to a
 * whole byte ("1.5Ki" → 1536). Returns 0, -EINVAL or -ERANGE. */
int cell_parse_bytes(const char *text, uint64_t *bytes);
/* A plain count ("1024"): digits only. Returns 0, -EINVAL or -ERANGE. */
int cell_parse_count(const char *text, uint64_t *out);
