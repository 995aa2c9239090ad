#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cell/codec.h"

char *cell_base64_encode(const void *data, size_t len)
{
	if (len > (size_t)1 << 40)
		return NULL;
	size_t out_len = 4 * ((len + 2) / 3);
	char *out = malloc(out_len + 1);
	if (!out)
		return NULL;
	/* EVP_EncodeBlock takes an int length: encode in slices that keep it in range and stay
	 * a multiple of 3 bytes so no padding appears mid-stream. */
	const unsigned char *in = data;
	size_t done = 0, pos = 0;
	while (done < len) {
		size_t slice = len - done;
		if (slice > 3u << 20)
			slice = 3u << 20;
		pos += EVP_EncodeBlock((unsigned char *)out + pos, in + done, (int)slice);
		done += slice;
	}
	out[pos] = '\0';
	return out;
}

static int base64_char_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int cell_base64_decode(const char *text, size_t text_len, uint8_t **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (text_len % 4)
		return -EINVAL;
	size_t pad = 0;
	for (size_t i = 0; i < text_len; i++) {
		unsigned char c = text[i];
		if (c == '=') {
			/* padding only in the last two positions, and only trailing */
			if (i < text_len - 2)
				return -EINVAL;
			pad++;
		} else if (!base64_char_ok(c) || pad) {
			return -EINVAL;
		}
	}
	uint8_t *buf = malloc(text_len / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	size_t pos = 0;
	for (size_t done = 0; done < text_len;) {
		size_t slice = text_len - done;
		if (slice > 4u << 20)
			slice = 4u << 20;
		int n = EVP_DecodeBlock(buf + pos, (const unsigned char *)text + done, (int)slice);
		if (n < 0) {
			free(buf);
			return -EINVAL;
		}
		pos += n;
		done += slice;
	}
	/* EVP_DecodeBlock counts padding bytes as output; drop them. */
	pos -= pad;
	buf[pos] = '\0';
	*out = buf;
	*out_len = pos;
	return 0;
}

void cell_sha256_hex(const void *data, size_t len, char hex[CELL_SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[SHA256_DIGEST_LENGTH];
	unsigned int md_len = 0;
	EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL);
	for (unsigned int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[CELL_SHA256_HEX_LEN] = '\0';
}

int cell_ws_accept(const char *key, char accept[CELL_WS_ACCEPT_LEN + 1])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	char text[64 + sizeof(guid)];
	if (strlen(key) > 64)
		return -EINVAL;
	snprintf(text, sizeof(text), "%s%s", key, guid);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	if (!EVP_Digest(text, strlen(text), md, &md_len, EVP_sha1(), NULL) || md_len != 20)
		return -ENOMEM;
	char *b64 = cell_base64_encode(md, md_len);
	if (!b64 || strlen(b64) != CELL_WS_ACCEPT_LEN) {
		free(b64);
		return -ENOMEM;
	}
	memcpy(accept, b64, CELL_WS_ACCEPT_LEN + 1);
	free(b64);
	return 0;
}
