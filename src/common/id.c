#include <errno.h>
#include <string.h>

#include <openssl/rand.h>

#include "cell/codec.h"
#include "cell/id.h"

bool cell_id_valid(const char *id)
{
	if (!id || !id[0] || id[0] == '-')
		return false;
	size_t n = 0;
	for (const char *p = id; *p; p++, n++) {
		if (n >= CELL_ID_MAX)
			return false;
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

int cell_id_random(char buf[CELL_ID_RANDOM_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char raw[CELL_ID_RANDOM_LEN / 2];
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	for (size_t i = 0; i < sizeof(raw); i++) {
		buf[2 * i] = digits[raw[i] >> 4];
		buf[2 * i + 1] = digits[raw[i] & 15];
	}
	buf[CELL_ID_RANDOM_LEN] = '\0';
	return 0;
}

void cell_id_from_session_key(const char *key, size_t key_len, char buf[CELL_ID_RANDOM_LEN + 1])
{
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(key, key_len, hex);
	memcpy(buf, hex, CELL_ID_RANDOM_LEN);
	buf[CELL_ID_RANDOM_LEN] = '\0';
}
