/* Base64 (RFC 4648, strict decoding) and SHA-256 (known vectors). Commands travel
 * base64-encoded to cell-init, so a lenient decoder would let two different texts mean the
 * same command; every malformed input must be refused. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cell/codec.h"
#include "unit.h"

static const struct {
	const char *plain;
	const char *b64;
} rfc4648[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

START_TEST(base64_rfc4648_encode)
{
	char *enc = cell_base64_encode(rfc4648[_i].plain, strlen(rfc4648[_i].plain));
	ck_assert_ptr_nonnull(enc);
	ck_assert_str_eq(enc, rfc4648[_i].b64);
	free(enc);
}
END_TEST

START_TEST(base64_rfc4648_decode)
{
	uint8_t *out = (uint8_t *)"sentinel";
	size_t len = 99;
	ck_assert_int_eq(cell_base64_decode(rfc4648[_i].b64, strlen(rfc4648[_i].b64), &out, &len),
			 0);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(len, strlen(rfc4648[_i].plain));
	ck_assert_mem_eq(out, rfc4648[_i].plain, len);
	ck_assert_uint_eq(out[len], 0);
	free(out);
}
END_TEST

START_TEST(base64_binary_with_nul_bytes)
{
	const uint8_t bin[] = {0, 0, 0, 'a', 0, 0xff, 0xfe, 0, 0x80};
	char *enc = cell_base64_encode(bin, sizeof(bin));
	ck_assert_ptr_nonnull(enc);
	ck_assert_str_eq(enc, "AAAAYQD//gCA");
	uint8_t *out;
	size_t len;
	ck_assert_int_eq(cell_base64_decode(enc, strlen(enc), &out, &len), 0);
	ck_assert_uint_eq(len, sizeof(bin));
	ck_assert_mem_eq(out, bin, sizeof(bin));
	free(out);
	free(enc);
}
END_TEST

static const char *const strict_rejects[] = {
    /* characters outside the standard alphabet (incl. the URL-safe one) */
    "Zm9*",
    "Zm9-",
    "Zm9_",
    "Zm9v\x80\x80\x80\x80",
    "Zm9\x01",
    /* whitespace anywhere */
    "Zm9v\n",
    "Zm 9",
    " Zm9",
    "Zm9v\r\nYmFy",
    "Zm9v\tYmFy",
    "Zm9vYg==\n",
    /* bad padding */
    "Zg=a",
    "=Zg=",
    "Z===",
    "====",
    "Zm=v",
    "Zg==Zg==",
    "Zm9v====",
    "Zm8=Zm8=",
    "Z=g=",
    /* length not a multiple of 4 */
    "Z",
    "Zm",
    "Zm9",
    "Zm9vY",
    "Zg=",
    "Zg",
    "Zm9vYmF",
    "Zm9vYg=",
};

START_TEST(base64_strict_rejects)
{
	const char *t = strict_rejects[_i];
	uint8_t *out = (uint8_t *)"sentinel";
	size_t len = 99;
	int r = cell_base64_decode(t, strlen(t), &out, &len);
	ck_assert_msg(r == -EINVAL, "'%s' decoded (r=%d)", t, r);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(len, 0);
}
END_TEST

/* An embedded NUL must not end the text early: the length given is what is decoded. */
START_TEST(base64_embedded_nul_rejected)
{
	uint8_t *out;
	size_t len;
	ck_assert_int_eq(cell_base64_decode("Zm9v\0AAA", 8, &out, &len), -EINVAL);
	ck_assert_int_eq(cell_base64_decode("Zg=\0", 4, &out, &len), -EINVAL);
	ck_assert_int_eq(cell_base64_decode("\0\0\0\0", 4, &out, &len), -EINVAL);
	/* ...and a shorter length means only that prefix is decoded. */
	ck_assert_int_eq(cell_base64_decode("Zm9vYmFy", 4, &out, &len), 0);
	ck_assert_uint_eq(len, 3);
	ck_assert_mem_eq(out, "foo", 3);
	free(out);
}
END_TEST

static void fill_random(uint8_t *buf, size_t n, unsigned int *seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)rand_r(seed);
}

static void round_trip(const uint8_t *data, size_t n)
{
	char *enc = cell_base64_encode(data, n);
	ck_assert_ptr_nonnull(enc);
	size_t elen = strlen(enc);
	ck_assert_uint_eq(elen, 4 * ((n + 2) / 3));
	uint8_t *out;
	size_t len;
	ck_assert_int_eq(cell_base64_decode(enc, elen, &out, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert_msg(memcmp(out, data, n) == 0, "round trip of %zu bytes differs", n);
	free(out);
	free(enc);
}

START_TEST(base64_round_trip_random_small)
{
	unsigned int seed = 12345;
	uint8_t buf[600];
	for (size_t n = 0; n <= sizeof(buf); n++) {
		fill_random(buf, n, &seed);
		if (n > 2)
			buf[n / 2] = 0;
		round_trip(buf, n);
	}
}
END_TEST

/* Sizes around the internal slicing (3 MiB of input per encode slice, 4 MiB of text per
 * decode slice) must not introduce padding or lose bytes at slice boundaries. */
START_TEST(base64_round_trip_random_large)
{
	const size_t sizes[] = {(3u << 20) - 1, 3u << 20, (3u << 20) + 1, (3u << 20) + 2,
				(6u << 20) + 5};
	unsigned int seed = 777;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *buf = malloc(sizes[i]);
		ck_assert_ptr_nonnull(buf);
		fill_random(buf, sizes[i], &seed);
		memset(buf + sizes[i] / 3, 0, 4096);
		round_trip(buf, sizes[i]);
		free(buf);
	}
}
END_TEST

static const struct {
	const char *in;
	const char *hex;
} sha_vectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmno"
     "pqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

START_TEST(sha256_known_vectors)
{
	char hex[CELL_SHA256_HEX_LEN + 1];
	memset(hex, 'x', sizeof(hex));
	cell_sha256_hex(sha_vectors[_i].in, strlen(sha_vectors[_i].in), hex);
	ck_assert_str_eq(hex, sha_vectors[_i].hex);
}
END_TEST

START_TEST(sha256_million_a)
{
	size_t n = 1000000;
	char *a = malloc(n);
	ck_assert_ptr_nonnull(a);
	memset(a, 'a', n);
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(a, n, hex);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(a);
}
END_TEST

START_TEST(sha256_binary_with_nul)
{
	/* sha256 of the single byte 0x00 */
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex("", 1, hex);
	ck_assert_str_eq(hex, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
	ck_assert_uint_eq(strlen(hex), CELL_SHA256_HEX_LEN);
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("base64");
	tcase_set_timeout(tc, 60);
	int nv = (int)(sizeof(rfc4648) / sizeof(rfc4648[0]));
	tcase_add_loop_test(tc, base64_rfc4648_encode, 0, nv);
	tcase_add_loop_test(tc, base64_rfc4648_decode, 0, nv);
	tcase_add_test(tc, base64_binary_with_nul_bytes);
	tcase_add_loop_test(tc, base64_strict_rejects, 0,
			    (int)(sizeof(strict_rejects) / sizeof(strict_rejects[0])));
	tcase_add_test(tc, base64_embedded_nul_rejected);
	tcase_add_test(tc, base64_round_trip_random_small);
	tcase_add_test(tc, base64_round_trip_random_large);
	suite_add_tcase(s, tc);

	tc = tcase_create("sha256");
	tcase_add_loop_test(tc, sha256_known_vectors, 0,
			    (int)(sizeof(sha_vectors) / sizeof(sha_vectors[0])));
	tcase_add_test(tc, sha256_million_a);
	tcase_add_test(tc, sha256_binary_with_nul);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(codec_suite());
}
