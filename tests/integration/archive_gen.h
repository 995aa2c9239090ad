/* Skill archives made by the tests themselves (tar.gz through zlib's gz writer, zip with
 * stored or deflated entries), hostile ones included: entries no tar or zip tool would
 * write on request (a "..", an absolute path, a device node). Header-only: the unit suite
 * of the archive reader and it_provision share it. Link with -lz. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* One tar entry (ustar header, then data padded to 512) onto gz. type: '0' file, '5'
 * directory, '2' symlink (link names the target), '1' hard link, '3' character device,
 * '6' fifo. A name over 100 bytes goes in a GNU 'L' entry first. */
static inline void agen_tar_pad(gzFile gz, size_t len)
{
	static const unsigned char zero[512];
	if (len % 512)
		gzwrite(gz, zero, (unsigned)(512 - len % 512));
}

static inline void agen_tar_header(gzFile gz, const char *name, char type, size_t len,
				   unsigned mode, const char *link)
{
	unsigned char h[512];
	if (strlen(name) > 99) {
		size_t nl = strlen(name) + 1;
		agen_tar_header(gz, "././@LongLink", 'L', nl, 0644, NULL);
		gzwrite(gz, name, (unsigned)nl);
		agen_tar_pad(gz, nl);
	}
	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	char size[32];
	snprintf(size, sizeof(size), "%011llo", (unsigned long long)len);
	memcpy(h + 124, size, 11);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	gzwrite(gz, h, 512);
}

static inline void agen_tar_entry(gzFile gz, const char *name, char type, const void *data,
				  size_t len, unsigned mode, const char *link)
{
	agen_tar_header(gz, name, type, len, mode, link);
	if (len && data)
		gzwrite(gz, data, (unsigned)len);
	agen_tar_pad(gz, len);
}

/* len zero bytes as one file (a bomb's payload), written in slices. */
static inline void agen_tar_zeros(gzFile gz, const char *name, size_t len)
{
	static const unsigned char zero[65536];
	agen_tar_header(gz, name, '0', len, 0644, NULL);
	for (size_t left = len; left;) {
		size_t n = left < sizeof(zero) ? left : sizeof(zero);
		gzwrite(gz, zero, (unsigned)n);
		left -= n;
	}
	agen_tar_pad(gz, len);
}

static inline void agen_tar_end(gzFile gz)
{
	static const unsigned char zero[1024];
	gzwrite(gz, zero, sizeof(zero));
}

/* ---- zip ---- */

struct agen_zip {
	FILE *f;
	unsigned char *cd;
	size_t cd_len, cd_cap;
	unsigned count;
};

static inline void agen_le16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void agen_le32(unsigned char *p, unsigned long v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* One entry: unix_mode is st_mode (S_IFREG|0644, S_IFLNK|0777, ...) recorded as made on
 * Unix; compress deflates (raw deflate), else stored. claim_size: the uncompressed size the
 * headers state (0: the real one). */
static inline void agen_zip_entry(struct agen_zip *z, const char *name, const void *data,
				  size_t len, unsigned unix_mode, bool compress,
				  unsigned long claim_size)
{
	unsigned char *out = (unsigned char *)data;
	size_t olen = len;
	unsigned char *buf = NULL;
	if (compress) {
		z_stream s;
		memset(&s, 0, sizeof(s));
		deflateInit2(&s, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
		size_t cap = deflateBound(&s, len) + 16;
		buf = malloc(cap);
		s.next_in = (unsigned char *)data;
		s.avail_in = (uInt)len;
		s.next_out = buf;
		s.avail_out = (uInt)cap;
		deflate(&s, Z_FINISH);
		olen = cap - s.avail_out;
		deflateEnd(&s);
		out = buf;
	}
	unsigned long crc = crc32(0, data, (uInt)len);
	unsigned long usize = claim_size ? claim_size : len;
	long off = ftell(z->f);
	unsigned nlen = (unsigned)strlen(name);
	unsigned char lh[30] = {'P', 'K', 3, 4};
	agen_le16(lh + 4, 20);
	agen_le16(lh + 8, compress ? 8 : 0);
	agen_le32(lh + 14, crc);
	agen_le32(lh + 18, olen);
	agen_le32(lh + 22, usize);
	agen_le16(lh + 26, nlen);
	fwrite(lh, 1, 30, z->f);
	fwrite(name, 1, nlen, z->f);
	fwrite(out, 1, olen, z->f);
	if (z->cd_len + 46 + nlen > z->cd_cap) {
		z->cd_cap = (z->cd_len + 46 + nlen) * 2 + 256;
		z->cd = realloc(z->cd, z->cd_cap);
	}
	unsigned char *c = z->cd + z->cd_len;
	memset(c, 0, 46);
	memcpy(c, "PK\x01\x02", 4);
	agen_le16(c + 4, 3u << 8 | 20); /* made on Unix */
	agen_le16(c + 6, 20);
	agen_le16(c + 10, compress ? 8 : 0);
	agen_le32(c + 16, crc);
	agen_le32(c + 20, olen);
	agen_le32(c + 24, usize);
	agen_le16(c + 28, nlen);
	agen_le32(c + 38, (unsigned long)unix_mode << 16);
	agen_le32(c + 42, (unsigned long)off);
	memcpy(c + 46, name, nlen);
	z->cd_len += 46 + nlen;
	z->count++;
	free(buf);
}

static inline void agen_zip_finish(struct agen_zip *z)
{
	long off = ftell(z->f);
	fwrite(z->cd, 1, z->cd_len, z->f);
	unsigned char e[22] = {'P', 'K', 5, 6};
	agen_le16(e + 8, z->count);
	agen_le16(e + 10, z->count);
	agen_le32(e + 12, z->cd_len);
	agen_le32(e + 16, (unsigned long)off);
	fwrite(e, 1, 22, z->f);
	fclose(z->f);
	free(z->cd);
	memset(z, 0, sizeof(*z));
}
