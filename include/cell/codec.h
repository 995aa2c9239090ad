/* Base64, SHA-256 and the WebSocket accept key (through OpenSSL's libcrypto). */
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

/* RFC 6455's Sec-WebSocket-Accept for a Sec-WebSocket-Key (base64 of SHA-1 of the key and
 * the protocol's GUID): 28 characters and a NUL into accept; -ENOMEM or -EINVAL (a key
 * longer than a handshake's). Both ends use it: celld's check, the client's. */
#define CELL_WS_ACCEPT_LEN 28
int cell_ws_accept(const char *key, char accept[CELL_WS_ACCEPT_LEN + 1]);
