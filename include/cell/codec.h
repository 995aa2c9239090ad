/* Base64 and SHA-256 (both through OpenSSL's libcrypto). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Standard base64 with padding, no newlines. Returns a malloc'd NUL-terminated string,
 * or NULL on allocation failure. */
char *cell_base64_encode(const void *data, size_t len);

/* Strict decode: rejects characters outside the alphabet, bad padding and embedded
 * whitespace. On success *out is malloc'd (NUL-terminated for convenience) and *out_len
 * set; returns 0, or -EINVAL / -ENOMEM. */
int cell_base64_decode(const char *text, size_t text_len, uint8_t **out, size_t *out_len);

#define CELL_SHA256_HEX_LEN 64
/* Writes 64 lowercase hex digits and a NUL into hex[65]. */
void cell_sha256_hex(const void *data, size_t len, char hex[CELL_SHA256_HEX_LEN + 1]);
