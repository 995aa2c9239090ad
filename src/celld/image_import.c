/* Image archives into the layer store: see image_import.h.
 *
 * Three passes. Spool: the outer tar read by libarchive, each member's name judged and its
 * bytes written to the work dir under a counter, hashed on the way. Judge: the format told
 * by its members, the image chosen, every document parsed by oci_image.c, every blob's
 * digest and size compared, every layer decompressed once more to compare its diffID with
 * the config's. Store: the layers added bottom first, the image recorded under its name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include "cell/cleanup.h"
#include "cell/runtime.h"
#include "image_import.h"
#include "layer_unpack.h"
#include "oci_image.h"

#define NAME_MAX_LEN 1024 /* bytes of a member's name */
#define LINKS_MAX    8	  /* symlinks followed from one name */
#define TAIL_MAX     (1u << 20)

enum mtype { M_DIR, M_FILE, M_SYMLINK, M_HARDLINK };

struct member {
	char *name;
	enum mtype type;
	uint64_t size;
	int spool; /* its file in the work dir (a hard link: its target's); -1: none */
	char digest[STORE_DIGEST_MAX];
	char *link; /* a symlink's target as written; a hard link's member */
};

struct import {
	int src;
	uint64_t bytes_in, bytes_files;
	int dir; /* the work dir */
	char dir_name[64];
	struct member *m;
	size_t n, cap;
	int spools;
	json_t *index;		      /* name → member */
	unsigned char in[128 << 10];  /* the archive's bytes as read (libarchive holds them) */
	unsigned char buf[128 << 10]; /* a member's */
};

/* ---- spool ---- */

static ssize_t src_read(struct archive *a, void *cls, const void **out)
{
	struct import *imp = cls;
	for (;;) {
		ssize_t n = read(imp->src, imp->in, sizeof(imp->in));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			archive_set_error(a, errno, "reading the archive");
			return -1;
		}
		imp->bytes_in += (uint64_t)n;
		if (imp->bytes_in > IMPORT_BYTES_MAX) {
			archive_set_error(a, EFBIG, "the archive is larger than %llu bytes",
					  (unsigned long long)IMPORT_BYTES_MAX);
			return -1;
		}
		*out = imp->in;
		return n;
	}
}

/* A member's name made plain: a leading "./" dropped, a directory's trailing '/' too.
 * *out NULL (and 0) for the archive's root entry. -EINVAL for a name refused. */
static int name_judge(const char *raw, bool dir, char **out, struct cell_error *err)
{
	*out = NULL;
	if (!raw || !raw[0])
		return cell_err_msg(err, EINVAL, "a member has an empty name");
	size_t len = strlen(raw);
	if (len > NAME_MAX_LEN)
		return cell_err_msg(err, EINVAL, "member '%.80s...': a name of %zu bytes", raw,
				    len);
	for (const unsigned char *c = (const unsigned char *)raw; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return cell_err_msg(
			    err, EINVAL, "member '%.200s': a control character in its name", raw);
	if (raw[0] == '/')
		return cell_err_msg(err, EINVAL, "member '%.200s': an absolute path", raw);
	const char *p = raw;
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (!p[0] || !strcmp(p, ".")) {
		if (!dir)
			return cell_err_msg(err, EINVAL, "member '%.200s': not a file's name", raw);
		return 0; /* the root */
	}
	char *s = strdup(p);
	if (!s)
		return cell_err(err, ENOMEM, "member names");
	size_t n = strlen(s);
	if (s[n - 1] == '/') {
		if (!dir) {
			free(s);
			return cell_err_msg(err, EINVAL,
					    "member '%.200s': a file named as a directory", raw);
		}
		s[--n] = '\0';
	}
	for (char *part = s;;) {
		char *slash = strchr(part, '/');
		size_t plen = slash ? (size_t)(slash - part) : strlen(part);
		if (plen == 0 || (plen == 1 && part[0] == '.') ||
		    (plen == 2 && part[0] == '.' && part[1] == '.')) {
			free(s);
			return cell_err_msg(
			    err, EINVAL, "member '%.200s': an empty, '.' or '..' part in its name",
			    raw);
		}
		if (!slash)
			break;
		part = slash + 1;
	}
	*out = s;
	return 0;
}

static struct member *find(struct import *imp, const char *name)
{
	json_t *v = json_object_get(imp->index, name);
	return v ? &imp->m[json_integer_value(v)] : NULL;
}

static int add_member(struct import *imp, char *name, enum mtype type, struct member **out,
		      struct cell_error *err)
{
	if (find(imp, name)) {
		int r = cell_err_msg(err, EINVAL, "member '%.200s': a second member of that name",
				     name);
		free(name);
		return r;
	}
	if (imp->n == imp->cap) {
		size_t cap = imp->cap ? imp->cap * 2 : 64;
		struct member *m = realloc(imp->m, cap * sizeof(*m));
		if (!m) {
			free(name);
			return cell_err(err, ENOMEM, "member table");
		}
		imp->m = m;
		imp->cap = cap;
	}
	struct member *m = &imp->m[imp->n];
	*m = (struct member){.name = name, .type = type, .spool = -1};
	if (json_object_set_new(imp->index, name, json_integer((json_int_t)imp->n)) < 0) {
		free(name);
		return cell_err(err, ENOMEM, "member table");
	}
	imp->n++;
	*out = m;
	return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int spool_file(struct import *imp, struct archive *a, struct member *m,
		      struct cell_error *err)
{
	char file[16];
	snprintf(file, sizeof(file), "%d", imp->spools);
	_cleanup_close_ int fd =
	    openat(imp->dir, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cell_err(err, errno, "spooling member '%.200s'", m->name);
	m->spool = imp->spools++;
	struct oci_digester d;
	if (oci_digest_init(&d, OCI_DIGEST_SHA256) < 0)
		return cell_err(err, ENOMEM, "hashing member '%.200s'", m->name);
	int r = 0;
	uint64_t got = 0;
	for (;;) {
		la_ssize_t n = archive_read_data(a, imp->buf, sizeof(imp->buf));
		if (n == 0)
			break;
		if (n < 0) {
			r = cell_err_msg(err, archive_errno(a) == EFBIG ? EFBIG : EINVAL,
					 "member '%.200s': %s", m->name, archive_error_string(a));
			break;
		}
		got += (uint64_t)n;
		imp->bytes_files += (uint64_t)n;
		if (imp->bytes_files > IMPORT_BYTES_MAX) {
			r = cell_err_msg(err, EFBIG, "member '%.200s': the files pass %llu bytes",
					 m->name, (unsigned long long)IMPORT_BYTES_MAX);
			break;
		}
		oci_digest_update(&d, imp->buf, (size_t)n);
		int w = write_all(fd, imp->buf, (size_t)n);
		if (w < 0) {
			r = cell_err(err, -w, "spooling member '%.200s'", m->name);
			break;
		}
	}
	struct oci_digest dg;
	if (r < 0) {
		oci_digest_abandon(&d);
		return r;
	}
	oci_digest_final(&d, &dg);
	snprintf(m->digest, sizeof(m->digest), "%.71s", dg.text);
	m->size = got;
	return 0;
}

static int spool_entry(struct import *imp, struct archive *a, struct archive_entry *e,
		       struct cell_error *err)
{
	const char *raw = archive_entry_pathname(e);
	mode_t type = archive_entry_filetype(e);
	const char *hard = archive_entry_hardlink(e);
	enum mtype t;
	if (hard)
		t = M_HARDLINK;
	else if (type == AE_IFDIR)
		t = M_DIR;
	else if (type == AE_IFREG)
		t = M_FILE;
	else if (type == AE_IFLNK)
		t = M_SYMLINK;
	else
		return cell_err_msg(err, EINVAL,
				    "member '%.200s': a %s has no place in an image archive",
				    raw ? raw : "",
				    type == AE_IFCHR || type == AE_IFBLK ? "device"
				    : type == AE_IFIFO			 ? "fifo"
				    : type == AE_IFSOCK			 ? "socket"
							: "member of unknown type");
	char *name;
	int r = name_judge(raw, t == M_DIR, &name, err);
	if (r < 0 || !name)
		return r;
	/* Bounds on the header, before a byte of the member is read. */
	int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
	if (size < 0 || (uint64_t)size > IMPORT_BYTES_MAX - imp->bytes_files) {
		r = cell_err_msg(err, EFBIG, "member '%.200s': %lld bytes pass the bound of %llu",
				 name, (long long)size, (unsigned long long)IMPORT_BYTES_MAX);
		free(name);
		return r;
	}
	struct member *m = NULL;
	if ((r = add_member(imp, name, t, &m, err)) < 0)
		return r;
	if (t == M_FILE)
		return spool_file(imp, a, m, err);
	if (t == M_SYMLINK) {
		const char *target = archive_entry_symlink(e);
		if (!target || !target[0] || !(m->link = strdup(target)))
			return cell_err_msg(err, EINVAL, "member '%.200s': a link to nothing",
					    m->name);
		return 0;
	}
	if (t == M_HARDLINK) {
		char *to;
		r = name_judge(hard, false, &to, err);
		if (r < 0)
			return cell_err_wrap(err, "member '%.200s' links to: ", m->name);
		struct member *target = to ? find(imp, to) : NULL;
		if (!target || target->type != M_FILE) {
			r = cell_err_msg(
			    err, EINVAL,
			    "member '%.200s': a hard link to '%.200s', no file before it", m->name,
			    hard);
			free(to);
			return r;
		}
		m->link = to;
		m->spool = target->spool;
		m->size = target->size;
		snprintf(m->digest, sizeof(m->digest), "%s", target->digest);
	}
	return 0;
}

/* A reader of plain, gzip or zstd streams: of tar archives, or (raw) of the stream as it
 * is once decompressed. */
static struct archive *reader(bool raw)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	if (raw) {
		archive_read_support_format_raw(a);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_format_gnutar(a);
	}
	return a;
}

static int spool(struct import *imp, struct cell_error *err)
{
	struct archive *a = reader(false);
	if (!a)
		return cell_err(err, ENOMEM, "archive reader");
	int r = 0;
	if (archive_read_open(a, imp, NULL, src_read, NULL) != ARCHIVE_OK) {
		r = cell_err_msg(err, archive_errno(a) == EFBIG ? EFBIG : EINVAL,
				 "not a tar archive (plain, gzip or zstd): %s",
				 archive_error_string(a));
		archive_read_free(a);
		return r;
	}
	struct archive_entry *e;
	size_t members = 0;
	for (;;) {
		int ar = archive_read_next_header(a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
			r = cell_err_msg(err, archive_errno(a) == EFBIG ? EFBIG : EINVAL,
					 "the archive after member %zu: %s", members,
					 archive_error_string(a));
			break;
		}
		if (++members > IMPORT_MEMBERS_MAX) {
			r = cell_err_msg(err, EFBIG, "member '%.200s': more than %d members",
					 archive_entry_pathname(e) ? archive_entry_pathname(e) : "",
					 IMPORT_MEMBERS_MAX);
			break;
		}
		if ((r = spool_entry(imp, a, e, err)) < 0)
			break;
	}
	archive_read_free(a);
	if (r < 0)
		return r;
	if (members == 0)
		return cell_err_msg(err, EINVAL, "an empty archive");
	/* What follows the archive's end (blocks of zeros, a writer's padding) is read within
	 * a bound, so a client streaming it is not cut off. */
	uint64_t tail = 0;
	for (ssize_t n; tail < TAIL_MAX && (n = read(imp->src, imp->buf, sizeof(imp->buf))) != 0;) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		tail += (uint64_t)n;
		imp->bytes_in += (uint64_t)n;
	}
	return 0;
}

/* ---- members by name ---- */

/* name's regular file, symlinks followed (each to another member, never out of the
 * archive): NULL with err naming the member. */
static struct member *file_of(struct import *imp, const char *name, struct cell_error *err)
{
	char *cur = NULL;
	int r = name_judge(name, false, &cur, err);
	if (r < 0)
		return NULL;
	if (!cur) {
		cell_err_msg(err, EINVAL, "member '%.200s' is not a file", name);
		return NULL;
	}
	for (int hops = 0;; hops++) {
		struct member *m = find(imp, cur);
		if (!m) {
			cell_err_msg(err, EINVAL, "member '%.200s' is missing from the archive",
				     cur);
			free(cur);
			return NULL;
		}
		if (m->type == M_FILE || m->type == M_HARDLINK) {
			free(cur);
			return m;
		}
		if (m->type != M_SYMLINK || hops >= LINKS_MAX || m->link[0] == '/') {
			cell_err_msg(err, EINVAL, "member '%.200s' is %s", m->name,
				     m->type == M_DIR ? "a directory, not a file"
						      : "a link that leads to no member");
			free(cur);
			return NULL;
		}
		/* The target, read from the link's directory, with "." and ".." done by name. */
		size_t cap = strlen(cur) + strlen(m->link) + 2;
		char *path = malloc(cap), *out = malloc(cap);
		if (!path || !out) {
			free(path);
			free(out);
			free(cur);
			cell_err(err, ENOMEM, "member names");
			return NULL;
		}
		char *slash = strrchr(cur, '/');
		snprintf(path, cap, "%.*s%s%s", slash ? (int)(slash - cur) : 0, cur,
			 slash ? "/" : "", m->link);
		size_t olen = 0;
		bool bad = false;
		for (char *part = strtok(path, "/"); part && !bad; part = strtok(NULL, "/")) {
			if (!strcmp(part, "."))
				continue;
			if (!strcmp(part, "..")) {
				if (!olen) {
					bad = true;
					break;
				}
				while (olen && out[olen - 1] != '/')
					olen--;
				if (olen)
					olen--;
				continue;
			}
			if (olen)
				out[olen++] = '/';
			size_t pl = strlen(part);
			memcpy(out + olen, part, pl);
			olen += pl;
		}
		out[olen] = '\0';
		free(path);
		if (bad || !olen) {
			cell_err_msg(err, EINVAL,
				     "member '%.200s': a link out of the archive ('%.200s')",
				     m->name, m->link);
			free(out);
			free(cur);
			return NULL;
		}
		free(cur);
		cur = out;
	}
}

/* Every link leads to a file of the archive. */
static int check_links(struct import *imp, struct cell_error *err)
{
	for (size_t i = 0; i < imp->n; i++)
		if (imp->m[i].type == M_SYMLINK && !file_of(imp, imp->m[i].name, err))
			return -EINVAL;
	return 0;
}

static int open_spool(struct import *imp, const struct member *m, struct cell_error *err)
{
	char file[16];
	snprintf(file, sizeof(file), "%d", m->spool);
	int fd = openat(imp->dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? cell_err(err, errno, "member '%.200s'", m->name) : fd;
}

/* A member's bytes whole (NUL-terminated), at most max. */
static int read_doc(struct import *imp, const struct member *m, size_t max, char **out, size_t *len,
		    struct cell_error *err)
{
	if (m->size > max)
		return cell_err_msg(err, EFBIG, "member '%.200s': %llu bytes, more than %zu",
				    m->name, (unsigned long long)m->size, max);
	_cleanup_close_ int fd = open_spool(imp, m, err);
	if (fd < 0)
		return fd;
	char *buf = malloc(m->size + 1);
	if (!buf)
		return cell_err(err, ENOMEM, "member '%.200s'", m->name);
	size_t got = 0;
	while (got < m->size) {
		ssize_t n = read(fd, buf + got, m->size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return cell_err(err, n < 0 ? errno : EIO, "member '%.200s'", m->name);
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

static json_t *parse_doc(const char *text, size_t len, const char *member, struct cell_error *err)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		cell_err_msg(err, EINVAL, "member '%.200s': not JSON (%s, line %d)", member,
			     je.text, je.line);
	return o;
}

/* ---- the image: what import and commit agree on ---- */

struct layer_src {
	struct member *m;
	char blob[STORE_DIGEST_MAX]; /* the digest its manifest names */
	char diff[STORE_DIGEST_MAX]; /* the config's diffID */
};

struct image {
	char name[STORE_NAME_MAX]; /* the archive's name for it ("": none) */
	char digest[STORE_DIGEST_MAX];
	char config_digest[STORE_DIGEST_MAX];
	json_t *config;
	struct layer_src *layers;
	size_t n_layers;
};

static void image_free(struct image *im)
{
	json_decref(im->config);
	free(im->layers);
}

/* A blob of the layout: its member, checked against its descriptor's digest and size. */
static struct member *blob(struct import *imp, const struct oci_digest *d, int64_t size,
			   struct cell_error *err)
{
	if (d->alg != OCI_DIGEST_SHA256) {
		cell_err_msg(err, EINVAL, "blob %s: only sha256 digests are kept", d->text);
		return NULL;
	}
	char name[96];
	snprintf(name, sizeof(name), "blobs/sha256/%s", oci_digest_hex(d));
	struct member *m = file_of(imp, name, err);
	if (!m)
		return NULL;
	if (strcmp(m->digest, d->text)) {
		cell_err_msg(err, EBADMSG, "member '%s': digest mismatch: its bytes are %s", name,
			     m->digest);
		return NULL;
	}
	if (size >= 0 && (uint64_t)size != m->size) {
		cell_err_msg(err, EBADMSG,
			     "member '%s': %llu bytes, not %lld as its descriptor says", name,
			     (unsigned long long)m->size, (long long)size);
		return NULL;
	}
	return m;
}

/* The config and layers a manifest names, each checked. */
static int from_manifest(struct import *imp, const char *mdoc, size_t mlen, struct image *im,
			 struct cell_error *err)
{
	struct oci_manifest man = {0};
	int r = oci_manifest_parse(mdoc, mlen, NULL, NULL, &man, err);
	if (r < 0)
		return cell_err_wrap(err, "the image's manifest: ");
	struct member *cm = blob(imp, &man.config.digest, man.config.size, err);
	_cleanup_free_ char *cdoc = NULL;
	size_t clen = 0;
	if (!cm)
		r = -err->code;
	else
		r = read_doc(imp, cm, IMPORT_DOC_MAX, &cdoc, &clen, err);
	if (r == 0 && !(im->config = parse_doc(cdoc, clen, cm->name, err)))
		r = -EINVAL;
	if (r == 0) {
		snprintf(im->config_digest, sizeof(im->config_digest), "%s", cm->digest);
		if (man.n_layers > CELL_IMAGE_LAYERS_MAX)
			r = cell_err_msg(err, EFBIG, "the image has %u layers, more than %d",
					 man.n_layers, CELL_IMAGE_LAYERS_MAX);
	}
	if (r == 0 && !(im->layers = calloc(man.n_layers + 1, sizeof(*im->layers))))
		r = cell_err(err, ENOMEM, "layers");
	for (unsigned i = 0; r == 0 && i < man.n_layers; i++) {
		enum oci_compression c;
		r = oci_layer_compression(man.layers[i].media_type, &c, err);
		struct member *lm =
		    r == 0 ? blob(imp, &man.layers[i].digest, man.layers[i].size, err) : NULL;
		if (r == 0 && !lm)
			r = -err->code;
		if (r == 0) {
			im->layers[i].m = lm;
			snprintf(im->layers[i].blob, STORE_DIGEST_MAX, "%s", lm->digest);
			im->n_layers++;
		}
	}
	oci_manifest_free(&man);
	return r;
}

static const char *annotation(json_t *desc, const char *key)
{
	return json_string_value(json_object_get(json_object_get(desc, "annotations"), key));
}

/* Whether want (as given) names what the archive calls name: the same text, or the same
 * reference once both are normalized. */
static bool names_match(const char *name, const char *want)
{
	if (!name || !want)
		return false;
	if (!strcmp(name, want))
		return true;
	char a[STORE_NAME_MAX], b[STORE_NAME_MAX];
	struct cell_error ignored = {0};
	return image_import_name(name, a, &ignored) == 0 &&
	       image_import_name(want, b, &ignored) == 0 && !strcmp(a, b);
}

/* An annotation is a name for the image when it is a whole reference: the OCI ref.name
 * is often a tag alone ("1.0"), which names nothing. */
static void name_from(struct image *im, json_t *desc)
{
	const char *n = annotation(desc, "io.containerd.image.name");
	const char *ref = annotation(desc, "org.opencontainers.image.ref.name");
	if (!n && ref && (strchr(ref, '/') || strchr(ref, ':')))
		n = ref;
	struct cell_error ignored = {0};
	if (!n || image_import_name(n, im->name, &ignored) < 0)
		im->name[0] = '\0';
}

static int oci_layout(struct import *imp, const char *ref, struct image *im, struct cell_error *err)
{
	struct member *lm = file_of(imp, "oci-layout", err);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (!lm || read_doc(imp, lm, 4096, &text, &len, err) < 0)
		return -err->code;
	json_t *layout = parse_doc(text, len, "oci-layout", err);
	const char *v = json_string_value(json_object_get(layout, "imageLayoutVersion"));
	bool ok = v && !strncmp(v, "1.", 2);
	json_decref(layout);
	if (!ok)
		return cell_err_msg(err, EINVAL,
				    "member 'oci-layout': not an image layout of version 1.x");
	struct member *im_m = file_of(imp, "index.json", err);
	_cleanup_free_ char *idoc = NULL;
	size_t ilen = 0;
	if (!im_m || read_doc(imp, im_m, IMPORT_DOC_MAX, &idoc, &ilen, err) < 0)
		return -err->code;
	json_t *index = parse_doc(idoc, ilen, "index.json", err);
	json_t *entries = json_object_get(index, "manifests");
	if (!json_is_array(entries) || !json_array_size(entries)) {
		json_decref(index);
		return cell_err_msg(err, EINVAL, "member 'index.json': no manifests");
	}
	/* The image: the one the given ref names, else the only one, else the host's. */
	json_t *chosen = NULL, *e;
	size_t i;
	int r = 0;
	if (ref) {
		json_array_foreach(entries, i, e)
		{
			if (names_match(annotation(e, "io.containerd.image.name"), ref) ||
			    names_match(annotation(e, "org.opencontainers.image.ref.name"), ref))
				chosen = e;
		}
		if (!chosen)
			r = cell_err_msg(err, EINVAL,
					 "member 'index.json': no image named '%.200s'", ref);
	} else if (json_array_size(entries) == 1) {
		chosen = json_array_get(entries, 0);
	}
	struct oci_platform host;
	if (r == 0 && oci_platform_host(&host, err) < 0)
		r = -err->code;
	struct oci_descriptor d = {0};
	char *mdoc = NULL;
	size_t mlen = 0;
	if (r == 0 && chosen) {
		const char *dg = json_string_value(json_object_get(chosen, "digest"));
		const char *mt = json_string_value(json_object_get(chosen, "mediaType"));
		json_t *sz = json_object_get(chosen, "size");
		r = oci_digest_parse(dg ? dg : "", &d.digest, err);
		d.media = oci_media_parse(mt ? mt : "");
		d.size = json_is_integer(sz) ? json_integer_value(sz) : -1;
		if (r < 0)
			cell_err_wrap(err, "member 'index.json': ");
		name_from(im, chosen);
	} else if (r == 0) {
		r = oci_index_choose(idoc, ilen, NULL, &host, NULL, &d, err);
		if (r < 0)
			cell_err_wrap(err,
				      "member 'index.json' names %zu images (name one by its "
				      "ref): ",
				      json_array_size(entries));
		json_array_foreach(entries, i, e)
		{
			const char *dg = json_string_value(json_object_get(e, "digest"));
			if (r == 0 && dg && !strcmp(dg, d.digest.text))
				name_from(im, e);
		}
	}
	json_decref(index);
	/* An index below it: the host's platform's manifest. */
	for (int depth = 0; r == 0; depth++) {
		struct member *m = blob(imp, &d.digest, d.size, err);
		if (!m) {
			r = -err->code;
			break;
		}
		free(mdoc);
		mdoc = NULL;
		if ((r = read_doc(imp, m, OCI_MANIFEST_MAX, &mdoc, &mlen, err)) < 0)
			break;
		enum oci_media media;
		if ((r = oci_doc_media(mdoc, mlen, NULL, NULL, &media, err)) < 0) {
			cell_err_wrap(err, "member '%s': ", m->name);
			break;
		}
		if (oci_media_is_manifest(media)) {
			snprintf(im->digest, sizeof(im->digest), "%s", m->digest);
			r = from_manifest(imp, mdoc, mlen, im, err);
			break;
		}
		if (depth >= 3) {
			r = cell_err_msg(err, EINVAL, "member '%s': indexes nested too deep",
					 m->name);
			break;
		}
		r = oci_index_choose(mdoc, mlen, NULL, &host, NULL, &d, err);
		if (r < 0)
			cell_err_wrap(err, "member '%s': ", m->name);
	}
	free(mdoc);
	return r;
}

/* A layer's compression told by its first bytes. */
static const char *sniff_media(struct import *imp, const struct member *m)
{
	unsigned char head[4] = {0};
	int fd = open_spool(imp, m, NULL);
	ssize_t n = fd >= 0 ? pread(fd, head, sizeof(head), 0) : -1;
	if (fd >= 0)
		close(fd);
	if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
		return "application/vnd.oci.image.layer.v1.tar+gzip";
	if (n >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)
		return "application/vnd.oci.image.layer.v1.tar+zstd";
	return "application/vnd.oci.image.layer.v1.tar";
}

/* The canonical OCI manifest of a docker save image: its digest is the image's. */
static int canonical_manifest(struct import *imp, struct image *im, uint64_t config_size,
			      struct cell_error *err)
{
	json_t *layers = json_array();
	for (size_t i = 0; layers && i < im->n_layers; i++)
		json_array_append_new(layers, json_pack("{s:s, s:s, s:I}", "mediaType",
							sniff_media(imp, im->layers[i].m), "digest",
							im->layers[i].blob, "size",
							(json_int_t)im->layers[i].m->size));
	json_t *man =
	    json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
		      "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
		      "application/vnd.oci.image.config.v1+json", "digest", im->config_digest,
		      "size", (json_int_t)config_size, "layers", layers);
	char *text = man ? json_dumps(man, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(man);
	if (!text)
		return cell_err(err, ENOMEM, "the image's manifest");
	struct oci_digest d;
	oci_digest_of(text, strlen(text), OCI_DIGEST_SHA256, &d);
	free(text);
	snprintf(im->digest, sizeof(im->digest), "%.71s", d.text);
	return 0;
}

static int docker_entry(struct import *imp, json_t *e, size_t i, struct image *im,
			struct cell_error *err)
{
	const char *config = json_string_value(json_object_get(e, "Config"));
	json_t *layers = json_object_get(e, "Layers");
	if (!config || !json_is_array(layers))
		return cell_err_msg(err, EINVAL,
				    "member 'manifest.json': image %zu has no Config or Layers", i);
	if (json_array_size(layers) > CELL_IMAGE_LAYERS_MAX)
		return cell_err_msg(err, EFBIG, "member 'manifest.json': %zu layers, more than %d",
				    json_array_size(layers), CELL_IMAGE_LAYERS_MAX);
	struct member *cm = file_of(imp, config, err);
	_cleanup_free_ char *cdoc = NULL;
	size_t clen = 0;
	if (!cm || read_doc(imp, cm, IMPORT_DOC_MAX, &cdoc, &clen, err) < 0)
		return -err->code;
	if (!(im->config = parse_doc(cdoc, clen, cm->name, err)))
		return -EINVAL;
	snprintf(im->config_digest, sizeof(im->config_digest), "%s", cm->digest);
	if (!(im->layers = calloc(json_array_size(layers) + 1, sizeof(*im->layers))))
		return cell_err(err, ENOMEM, "layers");
	json_t *l;
	size_t k;
	json_array_foreach(layers, k, l)
	{
		struct member *lm =
		    json_is_string(l) ? file_of(imp, json_string_value(l), err) : NULL;
		if (!lm)
			return json_is_string(l) ? -err->code
						 : cell_err_msg(err, EINVAL,
								"member 'manifest.json': layer %zu "
								"is not a member's name",
								k);
		im->layers[k].m = lm;
		snprintf(im->layers[k].blob, STORE_DIGEST_MAX, "%s", lm->digest);
		im->n_layers++;
	}
	json_t *tags = json_object_get(e, "RepoTags");
	const char *tag = json_string_value(json_array_get(tags, 0));
	struct cell_error ignored = {0};
	if (!tag || image_import_name(tag, im->name, &ignored) < 0)
		im->name[0] = '\0';
	return canonical_manifest(imp, im, cm->size, err);
}

/* Whether the docker save image e is for the host (its config's platform). */
static bool docker_for_host(struct import *imp, json_t *e, const struct oci_platform *host)
{
	const char *config = json_string_value(json_object_get(e, "Config"));
	struct cell_error ignored = {0};
	struct member *cm = config ? file_of(imp, config, &ignored) : NULL;
	_cleanup_free_ char *doc = NULL;
	size_t len = 0;
	struct oci_config c = {0};
	if (!cm || read_doc(imp, cm, IMPORT_DOC_MAX, &doc, &len, &ignored) < 0 ||
	    oci_config_parse(doc, len, NULL, &c, &ignored) < 0)
		return false;
	bool ok = oci_config_check_platform(&c, host, &ignored) == 0;
	oci_config_free(&c);
	return ok;
}

static int docker_save(struct import *imp, const char *ref, struct image *im,
		       struct cell_error *err)
{
	struct member *mm = file_of(imp, "manifest.json", err);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (!mm || read_doc(imp, mm, IMPORT_DOC_MAX, &text, &len, err) < 0)
		return -err->code;
	json_t *all = parse_doc(text, len, "manifest.json", err);
	if (!all)
		return -EINVAL;
	size_t n = json_array_size(all), i, pick = n;
	int r = 0;
	json_t *e;
	if (!json_is_array(all) || !n || n > 256) {
		r = cell_err_msg(err, EINVAL,
				 "member 'manifest.json': not a list of 1 to 256 images");
	} else if (ref) {
		json_array_foreach(all, i, e)
		{
			json_t *t;
			size_t k;
			json_array_foreach(json_object_get(e, "RepoTags"), k, t)
			{
				if (names_match(json_string_value(t), ref))
					pick = i;
			}
		}
		if (pick == n)
			r = cell_err_msg(err, EINVAL,
					 "member 'manifest.json': no image tagged '%.200s'", ref);
	} else if (n == 1) {
		pick = 0;
	} else {
		struct oci_platform host;
		size_t matches = 0;
		if ((r = oci_platform_host(&host, err)) == 0) {
			json_array_foreach(all, i, e)
			{
				if (docker_for_host(imp, e, &host)) {
					pick = i;
					matches++;
				}
			}
			if (matches != 1)
				r = cell_err_msg(err, EINVAL,
						 "member 'manifest.json' names %zu images, %zu for "
						 "this host: name one by its tag",
						 n, matches);
		}
	}
	if (r == 0)
		r = docker_entry(imp, json_array_get(all, pick), pick, im, err);
	json_decref(all);
	return r;
}

/* ---- judge ---- */

/* The uncompressed content's digest of a layer (gzip, zstd or none), bounded. */
static int diff_id_of(struct import *imp, const struct member *m, char out[STORE_DIGEST_MAX],
		      struct cell_error *err)
{
	const struct layer_limits *lim = store_layer_limits();
	uint64_t max = lim->max_bytes + lim->max_entries * 1024 + TAIL_MAX;
	_cleanup_close_ int fd = open_spool(imp, m, err);
	if (fd < 0)
		return fd;
	struct archive *a = reader(true);
	if (!a)
		return cell_err(err, ENOMEM, "archive reader");
	struct archive_entry *e;
	int r = 0;
	if (archive_read_open_fd(a, fd, 64 << 10) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		r = cell_err_msg(err, EINVAL, "member '%.200s': not a layer: %s", m->name,
				 archive_error_string(a) ? archive_error_string(a) : "empty");
		archive_read_free(a);
		return r;
	}
	struct oci_digester d;
	if (oci_digest_init(&d, OCI_DIGEST_SHA256) < 0) {
		archive_read_free(a);
		return cell_err(err, ENOMEM, "hashing");
	}
	uint64_t total = 0;
	for (;;) {
		la_ssize_t n = archive_read_data(a, imp->buf, sizeof(imp->buf));
		if (n == 0)
			break;
		if (n < 0) {
			r = cell_err_msg(err, EINVAL, "member '%.200s': %s", m->name,
					 archive_error_string(a));
			break;
		}
		if ((total += (uint64_t)n) > max) {
			r = cell_err_msg(err, EFBIG,
					 "member '%.200s': more than %llu bytes uncompressed",
					 m->name, (unsigned long long)max);
			break;
		}
		oci_digest_update(&d, imp->buf, (size_t)n);
	}
	archive_read_free(a);
	if (r < 0) {
		oci_digest_abandon(&d);
		return r;
	}
	struct oci_digest dg;
	oci_digest_final(&d, &dg);
	snprintf(out, STORE_DIGEST_MAX, "%.71s", dg.text);
	return 0;
}

/* The config parsed and judged, and every layer's content against its diffIDs. */
static int judge(struct import *imp, struct image *im, struct cell_error *err)
{
	char *text = json_dumps(im->config, JSON_COMPACT);
	if (!text)
		return cell_err(err, ENOMEM, "config");
	struct oci_config c = {0};
	int r = oci_config_parse(text, strlen(text), NULL, &c, err);
	free(text);
	if (r < 0)
		return cell_err_wrap(err, "the image's config: ");
	struct oci_platform host;
	if ((r = oci_platform_host(&host, err)) == 0)
		r = oci_config_check_platform(&c, &host, err);
	if (r == 0 && c.n_diff_ids != im->n_layers)
		r = cell_err_msg(err, EBADMSG,
				 "the image's config names %zu layers (rootfs.diff_ids), its "
				 "manifest %zu",
				 c.n_diff_ids, im->n_layers);
	for (size_t i = 0; r == 0 && i < im->n_layers; i++) {
		if (c.diff_ids[i].alg != OCI_DIGEST_SHA256) {
			r = cell_err_msg(err, EINVAL, "diffID %s: only sha256 digests are kept",
					 c.diff_ids[i].text);
			break;
		}
		snprintf(im->layers[i].diff, STORE_DIGEST_MAX, "%.71s", c.diff_ids[i].text);
		char got[STORE_DIGEST_MAX];
		if ((r = diff_id_of(imp, im->layers[i].m, got, err)) < 0)
			break;
		if (strcmp(got, im->layers[i].diff))
			r = cell_err_msg(err, EBADMSG,
					 "member '%.200s': digest mismatch: its content is %s, "
					 "not %s as the config's diff_ids[%zu] says",
					 im->layers[i].m->name, got, im->layers[i].diff, i);
	}
	oci_config_free(&c);
	return r;
}

/* ---- store ---- */

static int store(struct import *imp, const struct import_opts *o, struct image *im,
		 const char *name, struct import_result *res, struct cell_error *err)
{
	char(*added)[STORE_DIGEST_MAX] = calloc(im->n_layers + 1, STORE_DIGEST_MAX);
	const char **parents = calloc(im->n_layers + 1, sizeof(*parents));
	struct store_image img = {0};
	img.layers = calloc(im->n_layers + 1, STORE_DIGEST_MAX);
	if (!added || !parents || !img.layers) {
		free(added);
		free(parents);
		free(img.layers);
		return cell_err(err, ENOMEM, "layers");
	}
	size_t n_added = 0;
	int r = 0;
	for (size_t i = 0; r == 0 && i < im->n_layers; i++) {
		/* The layers below, top first. */
		for (size_t k = 0; k < i; k++)
			parents[k] = im->layers[i - 1 - k].diff;
		bool had = store_has_layer(im->layers[i].diff);
		_cleanup_close_ int fd = open_spool(imp, im->layers[i].m, err);
		char diff[STORE_DIGEST_MAX];
		r = fd < 0 ? fd
			   : store_layer_add_over(fd, im->layers[i].blob, im->layers[i].diff,
						  parents, i, diff, err);
		if (r < 0) {
			cell_err_wrap(err, "member '%.200s': ", im->layers[i].m->name);
			break;
		}
		if (!had)
			snprintf(added[n_added++], STORE_DIGEST_MAX, "%s", diff);
		snprintf(img.layers[i], STORE_DIGEST_MAX, "%s", diff);
		img.bytes += store_layer_bytes(diff);
	}
	if (r == 0) {
		img.n_layers = im->n_layers;
		img.config = im->config;
		snprintf(img.digest, sizeof(img.digest), "%s", im->digest);
		snprintf(img.config_digest, sizeof(img.config_digest), "%s", im->config_digest);
		r = store_image_put_owned(name, o->owner_id, o->may_take, o->cls, &img, err);
	}
	if (r < 0 && n_added) {
		struct cell_error derr = {0};
		if (store_layers_drop((const char(*)[STORE_DIGEST_MAX])added, n_added, &derr) < 0)
			cell_err_drop(&derr, "the layers stay for a prune");
	}
	if (r == 0) {
		snprintf(res->name, sizeof(res->name), "%s", name);
		snprintf(res->digest, sizeof(res->digest), "%s", im->digest);
		res->layers = im->n_layers;
		res->layers_added = n_added;
	}
	free(added);
	free(parents);
	free(img.layers);
	return r;
}

/* ---- the whole ---- */

int image_import_name(const char *in, char out[STORE_NAME_MAX], struct cell_error *err)
{
	struct oci_ref ref;
	struct cell_error perr = {0};
	if (!in || !in[0] || oci_ref_parse(in, &ref, &perr) < 0)
		return cell_err_msg(err, EINVAL, "image name '%.200s' is not a reference: %s",
				    in ? in : "", perr.msg);
	if (ref.has_digest)
		return cell_err_msg(err, EINVAL,
				    "image name '%.200s': a name takes a tag, not a digest", in);
	if (oci_ref_format(&ref, out, STORE_NAME_MAX) < 0)
		return cell_err_msg(err, EINVAL, "image name '%.200s' is too long", in);
	return 0;
}

static void import_free(struct import *imp)
{
	for (size_t i = 0; i < imp->n; i++) {
		free(imp->m[i].name);
		free(imp->m[i].link);
	}
	free(imp->m);
	json_decref(imp->index);
	if (imp->dir >= 0)
		close(imp->dir);
	store_tmp_remove(imp->dir_name);
	free(imp);
}

int image_import(int fd, const struct import_opts *o, struct import_result *res,
		 struct cell_error *err)
{
	*res = (struct import_result){0};
	char given[STORE_NAME_MAX] = "";
	if (o->name && image_import_name(o->name, given, err) < 0)
		return -EINVAL;
	struct import *imp = calloc(1, sizeof(*imp));
	if (!imp)
		return cell_err(err, ENOMEM, "import");
	imp->src = fd;
	imp->index = json_object();
	imp->dir = store_tmp_make("import", imp->dir_name, sizeof(imp->dir_name), err);
	int r = !imp->index ? cell_err(err, ENOMEM, "import") : imp->dir < 0 ? imp->dir : 0;
	if (r == 0)
		r = spool(imp, err);
	res->bytes = imp->bytes_in;
	if (r == 0)
		r = check_links(imp, err);
	struct image im = {0};
	if (r == 0) {
		if (find(imp, "oci-layout") && find(imp, "index.json"))
			r = oci_layout(imp, o->ref, &im, err);
		else if (find(imp, "manifest.json"))
			r = docker_save(imp, o->ref, &im, err);
		else
			r = cell_err_msg(err, EINVAL,
					 "neither an OCI image layout (oci-layout, index.json) nor "
					 "a docker save archive (manifest.json)");
	}
	if (r == 0)
		r = judge(imp, &im, err);
	const char *name = given[0] ? given : im.name;
	if (r == 0 && !name[0])
		r = cell_err_msg(err, IMPORT_ENAME_REQUIRED,
				 "the archive names no image: give it a name");
	if (r == 0) {
		store_hold();
		r = store(imp, o, &im, name, res, err);
		store_unhold();
	}
	res->bytes = imp->bytes_in;
	image_free(&im);
	import_free(imp);
	return r;
}
