/* Sandbox and command identifiers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define CELL_ID_MAX	   64 /* longest accepted id, without the NUL */
#define CELL_ID_RANDOM_LEN 16

/* An id is 1..64 characters of [a-z0-9-], not starting with '-'. Anything else (slashes,
 * dots, upper case, NUL, percent) is refused before it can reach a path. */
bool cell_id_valid(const char *id);

/* 16 random lowercase hex digits (OpenSSL RAND_bytes) into buf[17]. Returns 0 or -EIO. */
int cell_id_random(char buf[CELL_ID_RANDOM_LEN + 1]);

/* create-or-resume: the first 16 hex digits of SHA-256(key) into buf[17]. */
void cell_id_from_session_key(const char *key, size_t key_len, char buf[CELL_ID_RANDOM_LEN + 1]);
