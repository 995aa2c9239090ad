/* API keys: a constant-time comparison. */
#include <string.h>

#include <openssl/crypto.h>

#include "cell/codec.h"
#include "auth.h"

bool auth_key_equal(const char *given, size_t len, const char *key)
{
	if (!given || !key)
		return false;
	char a[CELL_SHA256_HEX_LEN + 1], b[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(given, len, a);
	cell_sha256_hex(key, strlen(key), b);
	return CRYPTO_memcmp(a, b, CELL_SHA256_HEX_LEN) == 0;
}
