/* Image metadata from registries and archives, judged as hostile input (oci_image.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/log.h"
#include "oci_image.h"

/* ---- media types ---- */

static const struct {
	enum oci_media media;
	const char *name;
} media_names[] = {
    {OCI_MEDIA_OCI_INDEX, "application/vnd.oci.image.index.v1+json"},
    {OCI_MEDIA_OCI_MANIFEST, "application/vnd.oci.image.manifest.v1+json"},
    {OCI_MEDIA_OCI_CONFIG, "application/vnd.oci.image.config.v1+json"},
    {OCI_MEDIA_OCI_LAYER_TAR, "application/vnd.oci.image.layer.v1.tar"},
    {OCI_MEDIA_OCI_LAYER_GZIP, "application/vnd.oci.image.layer.v1.tar+gzip"},
    {OCI_MEDIA_OCI_LAYER_ZSTD, "application/vnd.oci.image.layer.v1.tar+zstd"},
    {OCI_MEDIA_DOCKER_LIST, "application/vnd.docker.distribution.manifest.list.v2+json"},
    {OCI_MEDIA_DOCKER_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"},
    {OCI_MEDIA_DOCKER_CONFIG, "application/vnd.docker.container.image.v1+json"},
    {OCI_MEDIA_DOCKER_LAYER_GZIP, "application/vnd.docker.image.rootfs.diff.tar.gzip"},
    {OCI_MEDIA_FOREIGN_LAYER, "application/vnd.oci.image.layer.nondistributable.v1.tar"},
    {OCI_MEDIA_FOREIGN_LAYER, "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"},
    {OCI_MEDIA_FOREIGN_LAYER, "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd"},
    {OCI_MEDIA_FOREIGN_LAYER, "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"},
    {OCI_MEDIA_DOCKER_SCHEMA1, "application/vnd.docker.distribution.manifest.v1+json"},
    {OCI_MEDIA_DOCKER_SCHEMA1, "application/vnd.docker.distribution.manifest.v1+prettyjws"},
};

enum oci_media oci_media_parse(const char *content_type)
{
	if (!content_type)
		return OCI_MEDIA_UNKNOWN;
	const char *s = content_type;
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strcspn(s, ";");
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(media_names); i++)
		if (strlen(media_names[i].name) == n && !strncasecmp(s, media_names[i].name, n))
			return media_names[i].media;
	return OCI_MEDIA_UNKNOWN;
}

const char *oci_media_name(enum oci_media m)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(media_names); i++)
		if (media_names[i].media == m)
			return media_names[i].name;
	return "";
}

bool oci_media_is_index(enum oci_media m)
{
	return m == OCI_MEDIA_OCI_INDEX || m == OCI_MEDIA_DOCKER_LIST;
}

bool oci_media_is_manifest(enum oci_media m)
{
	return m == OCI_MEDIA_OCI_MANIFEST || m == OCI_MEDIA_DOCKER_MANIFEST;
}

bool oci_media_is_layer(enum oci_media m)
{
	return m == OCI_MEDIA_OCI_LAYER_TAR || m == OCI_MEDIA_OCI_LAYER_GZIP ||
	       m == OCI_MEDIA_OCI_LAYER_ZSTD || m == OCI_MEDIA_DOCKER_LAYER_GZIP;
}

/* Why a media type is no layer cell takes, for a message "…: <why>". */
static int refuse_layer_media(const char *what, const char *type, enum oci_media m,
			      struct cell_error *err)
{
	if (m == OCI_MEDIA_FOREIGN_LAYER)
		return cell_err_msg(err, EPROTONOSUPPORT,
				    "%s is a non-distributable (foreign) layer (%s): its bytes "
				    "live outside the registry and cell does not fetch them",
				    what, type);
	if (m == OCI_MEDIA_DOCKER_SCHEMA1)
		return cell_err_msg(err, EPROTONOSUPPORT,
				    "%s: Docker schema 1 (%s) is not supported: push the image "
				    "again with a current client (schema 2 or OCI)",
				    what, type);
	return cell_err_msg(err, EPROTONOSUPPORT, "%s: media type '%.127s' is not a layer type",
			    what, type);
}

int oci_layer_compression(const char *media_type, enum oci_compression *out, struct cell_error *err)
{
	enum oci_media m = oci_media_parse(media_type);
	switch (m) {
	case OCI_MEDIA_OCI_LAYER_TAR:
		*out = OCI_COMPRESSION_NONE;
		return 0;
	case OCI_MEDIA_OCI_LAYER_GZIP:
	case OCI_MEDIA_DOCKER_LAYER_GZIP:
		*out = OCI_COMPRESSION_GZIP;
		return 0;
	case OCI_MEDIA_OCI_LAYER_ZSTD:
		*out = OCI_COMPRESSION_ZSTD;
		return 0;
	default:
		return refuse_layer_media("layer", media_type ? media_type : "(none)", m, err);
	}
}

/* ---- digests ---- */

static size_t digest_hex_len(enum oci_digest_alg alg)
{
	return alg == OCI_DIGEST_SHA512 ? 128 : 64;
}

int oci_digest_parse(const char *s, struct oci_digest *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return cell_err_msg(err, EINVAL, "digest missing");
	const char *hex;
	if (!strncmp(s, "sha256:", 7)) {
		out->alg = OCI_DIGEST_SHA256;
		hex = s + 7;
	} else if (!strncmp(s, "sha512:", 7)) {
		out->alg = OCI_DIGEST_SHA512;
		hex = s + 7;
	} else {
		return cell_err_msg(err, EINVAL,
				    "digest '%.80s' is not sha256:<hex> or sha512:<hex>", s);
	}
	size_t want = digest_hex_len(out->alg), n = 0;
	for (; hex[n]; n++) {
		char c = hex[n];
		if (n >= want || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return cell_err_msg(
			    err, EINVAL, "digest '%.80s' is not %zu lowercase hex digits", s, want);
	}
	if (n != want)
		return cell_err_msg(err, EINVAL, "digest '%.80s' is not %zu lowercase hex digits",
				    s, want);
	memcpy(out->text, s, 7 + want + 1);
	return 0;
}

bool oci_digest_equal(const struct oci_digest *a, const struct oci_digest *b)
{
	return a->alg == b->alg && a->alg && !strcmp(a->text, b->text);
}

const char *oci_digest_hex(const struct oci_digest *d)
{
	return d->text[0] ? d->text + 7 : "";
}

static const EVP_MD *digest_md(enum oci_digest_alg alg)
{
	return alg == OCI_DIGEST_SHA512	  ? EVP_sha512()
	       : alg == OCI_DIGEST_SHA256 ? EVP_sha256()
					  : NULL;
}

int oci_digest_init(struct oci_digester *d, enum oci_digest_alg alg)
{
	d->alg = alg;
	d->ctx = NULL;
	const EVP_MD *md = digest_md(alg);
	if (!md)
		return -EINVAL;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	if (EVP_DigestInit_ex(ctx, md, NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -EIO;
	}
	d->ctx = ctx;
	return 0;
}

int oci_digest_update(struct oci_digester *d, const void *buf, size_t len)
{
	if (!d->ctx)
		return -EINVAL;
	return EVP_DigestUpdate(d->ctx, buf, len) == 1 ? 0 : -EIO;
}

int oci_digest_final(struct oci_digester *d, struct oci_digest *out)
{
	memset(out, 0, sizeof(*out));
	if (!d->ctx)
		return -EINVAL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int ok = EVP_DigestFinal_ex(d->ctx, md, &n);
	oci_digest_abandon(d);
	if (ok != 1 || n * 2 != digest_hex_len(d->alg))
		return -EIO;
	out->alg = d->alg;
	memcpy(out->text, d->alg == OCI_DIGEST_SHA512 ? "sha512:" : "sha256:", 7);
	for (unsigned int i = 0; i < n; i++)
		snprintf(out->text + 7 + 2 * i, 3, "%02x", md[i]);
	return 0;
}

int oci_digest_verify(struct oci_digester *d, const struct oci_digest *expected,
		      struct cell_error *err)
{
	struct oci_digest got;
	int r = oci_digest_final(d, &got);
	if (r < 0)
		return cell_err(err, -r, "computing a digest");
	if (!oci_digest_equal(&got, expected))
		return cell_err_msg(err, EBADMSG, "digest mismatch: expected %s, got %s",
				    expected->text, got.text);
	return 0;
}

void oci_digest_abandon(struct oci_digester *d)
{
	if (d->ctx)
		EVP_MD_CTX_free(d->ctx);
	d->ctx = NULL;
}

int oci_digest_of(const void *buf, size_t len, enum oci_digest_alg alg, struct oci_digest *out)
{
	struct oci_digester d;
	int r = oci_digest_init(&d, alg);
	if (r < 0)
		return r;
	r = oci_digest_update(&d, buf, len);
	if (r < 0) {
		oci_digest_abandon(&d);
		return r;
	}
	return oci_digest_final(&d, out);
}

/* ---- platforms ---- */

static const struct {
	const char *machine;
	const char *arch;
	const char *variant;
} machines[] = {
    {"x86_64", "amd64", ""},   {"amd64", "amd64", ""},	   {"i386", "386", ""},
    {"i486", "386", ""},       {"i586", "386", ""},	   {"i686", "386", ""},
    {"aarch64", "arm64", ""},  {"arm64", "arm64", ""},	   {"armv8l", "arm", "v7"},
    {"armv7l", "arm", "v7"},   {"armv7", "arm", "v7"},	   {"armv6l", "arm", "v6"},
    {"armv5tel", "arm", "v5"}, {"armv5tejl", "arm", "v5"}, {"ppc64le", "ppc64le", ""},
    {"ppc64", "ppc64", ""},    {"s390x", "s390x", ""},	   {"riscv64", "riscv64", ""},
    {"mips64", "mips64", ""},  {"mips", "mips", ""},	   {"loongarch64", "loong64", ""},
};

int oci_platform_of_machine(const char *machine, struct oci_platform *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < CELL_ARRAY_SIZE(machines); i++) {
		if (strcmp(machine, machines[i].machine))
			continue;
		snprintf(out->os, sizeof(out->os), "linux");
		snprintf(out->arch, sizeof(out->arch), "%s", machines[i].arch);
		snprintf(out->variant, sizeof(out->variant), "%s", machines[i].variant);
		return 0;
	}
	return cell_err_msg(err, ENOTSUP, "machine '%.64s' has no image architecture cell knows",
			    machine);
}

int oci_platform_host(struct oci_platform *out, struct cell_error *err)
{
	struct utsname u;
	if (uname(&u) < 0)
		return cell_err(err, errno, "uname");
	return oci_platform_of_machine(u.machine, out, err);
}

void oci_platform_format(const struct oci_platform *p, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s%s%s", p->os[0] ? p->os : "?", p->arch[0] ? p->arch : "?",
		 p->variant[0] ? "/" : "", p->variant);
}

/* How well have fits want: 0 not at all, 1 an older arm, 2 either has no variant, 3 exact. */
static int platform_score(const struct oci_platform *have, const struct oci_platform *want)
{
	if (strcmp(have->os, want->os) || strcmp(have->arch, want->arch))
		return 0;
	const char *hv = have->variant, *wv = want->variant;
	if (!strcmp(have->arch, "arm64")) {
		hv = strcmp(hv, "v8") ? hv : "";
		wv = strcmp(wv, "v8") ? wv : "";
	}
	if (!strcmp(hv, wv))
		return 3;
	if (!hv[0] || !wv[0])
		return 2;
	/* an arm v5 or v6 image runs on v7 */
	if (!strcmp(have->arch, "arm") && hv[0] == 'v' && wv[0] == 'v' && strlen(hv) == 2 &&
	    strlen(wv) == 2 && hv[1] < wv[1])
		return 1;
	return 0;
}

bool oci_platform_match(const struct oci_platform *have, const struct oci_platform *want)
{
	return platform_score(have, want) > 0;
}

/* ---- JSON documents ---- */

struct limits {
	size_t size;
	unsigned layers;
	unsigned depth;
};

static struct limits limits_of(const struct oci_limits *lim)
{
	struct limits l = {OCI_MANIFEST_MAX, OCI_LAYERS_MAX, OCI_JSON_DEPTH_MAX};
	if (lim && lim->max_size && lim->max_size < l.size)
		l.size = lim->max_size;
	if (lim && lim->max_layers && lim->max_layers < l.layers)
		l.layers = lim->max_layers;
	if (lim && lim->max_depth && lim->max_depth < l.depth)
		l.depth = lim->max_depth;
	return l;
}

/* The nesting of a JSON text, counted before a parser recurses into it. */
static bool json_depth_within(const char *doc, size_t len, unsigned max)
{
	unsigned depth = 0;
	bool in_str = false, esc = false;
	for (size_t i = 0; i < len; i++) {
		char c = doc[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				return false;
		} else if ((c == ']' || c == '}') && depth) {
			depth--;
		}
	}
	return true;
}

static int json_load_bounded(const char *doc, size_t len, size_t max_size, unsigned max_depth,
			     const char *what, json_t **out, struct cell_error *err)
{
	*out = NULL;
	if (len > max_size)
		return cell_err_msg(err, EFBIG, "%s is %zu bytes, more than the %zu allowed", what,
				    len, max_size);
	if (!json_depth_within(doc, len, max_depth))
		return cell_err_msg(err, EINVAL, "%s nests deeper than %u levels", what, max_depth);
	json_error_t je;
	json_t *j = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return cell_err_msg(err, EINVAL, "%s is not valid JSON (line %d, column %d): %s",
				    what, je.line, je.column, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return cell_err_msg(err, EINVAL, "%s is not a JSON object", what);
	}
	*out = j;
	return 0;
}

static int load_doc(const char *doc, size_t len, const struct oci_limits *lim, const char *what,
		    json_t **out, struct cell_error *err)
{
	struct limits l = limits_of(lim);
	return json_load_bounded(doc, len, l.size, l.depth, what, out, err);
}

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

/* A string member into buf (bounded); absent or null leaves buf empty and returns 0 unless
 * required. */
static int get_strbuf(json_t *o, const char *key, const char *what, bool required, char *buf,
		      size_t size, struct cell_error *err)
{
	buf[0] = '\0';
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (required)
			return cell_err_msg(err, EINVAL, "%s: '%s' missing", what, key);
		return 0;
	}
	if (!json_is_string(v))
		return cell_err_msg(err, EINVAL, "%s: '%s' is not a string", what, key);
	if (json_string_length(v) >= size)
		return cell_err_msg(err, EINVAL, "%s: '%s' is longer than %zu bytes", what, key,
				    size - 1);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int parse_platform(json_t *o, const char *what, struct oci_platform *p,
			  struct cell_error *err)
{
	if (!json_is_object(o))
		return cell_err_msg(err, EINVAL, "%s: 'platform' is not an object", what);
	int r = get_strbuf(o, "os", what, true, p->os, sizeof(p->os), err);
	if (r >= 0)
		r = get_strbuf(o, "architecture", what, true, p->arch, sizeof(p->arch), err);
	if (r >= 0)
		r = get_strbuf(o, "variant", what, false, p->variant, sizeof(p->variant), err);
	return r;
}

static int parse_descriptor(json_t *o, const char *what, struct oci_descriptor *d,
			    struct cell_error *err)
{
	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return cell_err_msg(err, EINVAL, "%s is not an object", what);
	int r = get_strbuf(o, "mediaType", what, true, d->media_type, sizeof(d->media_type), err);
	if (r < 0)
		return r;
	d->media = oci_media_parse(d->media_type);
	json_t *dg = json_object_get(o, "digest");
	if (!json_is_string(dg))
		return cell_err_msg(err, EINVAL, "%s: 'digest' missing or not a string", what);
	r = oci_digest_parse(json_string_value(dg), &d->digest, err);
	if (r < 0)
		return cell_err_wrap(err, "%s: ", what);
	json_t *sz = json_object_get(o, "size");
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return cell_err_msg(err, EINVAL, "%s: 'size' missing or not a non-negative integer",
				    what);
	d->size = json_integer_value(sz);
	json_t *pl = json_object_get(o, "platform");
	if (pl && !json_is_null(pl)) {
		r = parse_platform(pl, what, &d->platform, err);
		if (r < 0)
			return r;
		d->has_platform = true;
	}
	return 0;
}

static int doc_media_of(json_t *j, const char *content_type, enum oci_media *out,
			struct cell_error *err)
{
	json_t *sv = json_object_get(j, "schemaVersion");
	json_t *mt = json_object_get(j, "mediaType");
	enum oci_media dm = OCI_MEDIA_UNKNOWN, cm = oci_media_parse(content_type);
	if (mt) {
		if (!json_is_string(mt))
			return cell_err_msg(err, EINVAL, "manifest: 'mediaType' is not a string");
		dm = oci_media_parse(json_string_value(mt));
		if (dm == OCI_MEDIA_DOCKER_SCHEMA1)
			return refuse_layer_media("manifest", json_string_value(mt), dm, err);
		if (!oci_media_is_index(dm) && !oci_media_is_manifest(dm))
			return cell_err_msg(err, EPROTONOSUPPORT,
					    "manifest: mediaType '%.127s' is neither an image "
					    "manifest nor an index",
					    json_string_value(mt));
	}
	if (cm == OCI_MEDIA_DOCKER_SCHEMA1 || (json_is_integer(sv) && json_integer_value(sv) == 1))
		return refuse_layer_media("manifest", oci_media_name(OCI_MEDIA_DOCKER_SCHEMA1),
					  OCI_MEDIA_DOCKER_SCHEMA1, err);
	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return cell_err_msg(err, EINVAL, "manifest: 'schemaVersion' is not 2");
	bool cm_known = oci_media_is_index(cm) || oci_media_is_manifest(cm);
	if (dm && cm_known && dm != cm)
		return cell_err_msg(err, EPROTO,
				    "manifest: its mediaType '%s' disagrees with the Content-Type "
				    "'%s' it came with",
				    oci_media_name(dm), oci_media_name(cm));
	if (dm) {
		*out = dm;
	} else if (cm_known) {
		*out = cm;
	} else if (json_object_get(j, "manifests")) {
		*out = OCI_MEDIA_OCI_INDEX;
	} else if (json_object_get(j, "config") && json_object_get(j, "layers")) {
		*out = OCI_MEDIA_OCI_MANIFEST;
	} else {
		return cell_err_msg(err, EPROTONOSUPPORT,
				    "manifest: neither an index ('manifests') nor a manifest "
				    "('config' and 'layers')");
	}
	/* the shape must agree with the type, whichever said it */
	if (oci_media_is_index(*out) && json_object_get(j, "layers"))
		return cell_err_msg(err, EPROTO, "manifest: an index (%s) with 'layers'",
				    oci_media_name(*out));
	if (oci_media_is_manifest(*out) && json_object_get(j, "manifests"))
		return cell_err_msg(err, EPROTO, "manifest: a manifest (%s) with 'manifests'",
				    oci_media_name(*out));
	return 0;
}

int oci_doc_media(const char *doc, size_t len, const char *content_type,
		  const struct oci_limits *lim, enum oci_media *out, struct cell_error *err)
{
	_cleanup_json_ json_t *j = NULL;
	int r = load_doc(doc, len, lim, "manifest", &j, err);
	if (r < 0)
		return r;
	return doc_media_of(j, content_type, out, err);
}

int oci_index_choose(const char *doc, size_t len, const char *content_type,
		     const struct oci_platform *want, const struct oci_limits *lim,
		     struct oci_descriptor *out, struct cell_error *err)
{
	_cleanup_json_ json_t *j = NULL;
	enum oci_media m;
	int r = load_doc(doc, len, lim, "index", &j, err);
	if (r < 0)
		return r;
	r = doc_media_of(j, content_type, &m, err);
	if (r < 0)
		return r;
	if (!oci_media_is_index(m))
		return cell_err_msg(err, EINVAL, "index: the document is a %s, not an index",
				    oci_media_name(m));
	json_t *arr = json_object_get(j, "manifests");
	if (!json_is_array(arr))
		return cell_err_msg(err, EINVAL, "index: 'manifests' is not an array");
	if (json_array_size(arr) > OCI_INDEX_ENTRIES_MAX)
		return cell_err_msg(err, E2BIG, "index: %zu manifests, more than the %d allowed",
				    json_array_size(arr), OCI_INDEX_ENTRIES_MAX);
	char offers[256] = "";
	size_t used = 0;
	int best = 0;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		char what[48];
		snprintf(what, sizeof(what), "index: manifests[%zu]", i);
		struct oci_descriptor d;
		r = parse_descriptor(json_array_get(arr, i), what, &d, err);
		if (r < 0)
			return r;
		if (!oci_media_is_manifest(d.media) || !d.has_platform)
			continue; /* nested indexes, attestations without a platform */
		int score = platform_score(&d.platform, want);
		if (score > best) {
			best = score;
			*out = d;
		}
		char p[96];
		oci_platform_format(&d.platform, p, sizeof(p));
		if (strstr(offers, p) || used + strlen(p) + 3 >= sizeof(offers))
			continue;
		used += snprintf(offers + used, sizeof(offers) - used, "%s%s", used ? ", " : "", p);
	}
	if (best)
		return 0;
	char w[96];
	oci_platform_format(want, w, sizeof(w));
	return cell_err_msg(err, ENOENT, "no image for %s in the index; it offers: %s", w,
			    used ? offers : "nothing with a platform");
}

void oci_manifest_free(struct oci_manifest *m)
{
	free(m->layers);
	m->layers = NULL;
	m->n_layers = 0;
}

int oci_manifest_parse(const char *doc, size_t len, const char *content_type,
		       const struct oci_limits *lim, struct oci_manifest *out,
		       struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	struct limits l = limits_of(lim);
	_cleanup_json_ json_t *j = NULL;
	int r = load_doc(doc, len, lim, "manifest", &j, err);
	if (r < 0)
		return r;
	r = doc_media_of(j, content_type, &out->media, err);
	if (r < 0)
		return r;
	if (!oci_media_is_manifest(out->media))
		return cell_err_msg(err, EINVAL, "manifest: the document is a %s, not a manifest",
				    oci_media_name(out->media));
	r = parse_descriptor(json_object_get(j, "config"), "manifest: config", &out->config, err);
	if (r < 0)
		return r;
	if (out->config.media != OCI_MEDIA_OCI_CONFIG &&
	    out->config.media != OCI_MEDIA_DOCKER_CONFIG)
		return cell_err_msg(err, EPROTONOSUPPORT,
				    "manifest: config mediaType '%s' is not an image config: not "
				    "a container image",
				    out->config.media_type);
	json_t *arr = json_object_get(j, "layers");
	if (!json_is_array(arr))
		return cell_err_msg(err, EINVAL, "manifest: 'layers' is not an array");
	size_t n = json_array_size(arr);
	if (n > l.layers)
		return cell_err_msg(err, E2BIG, "manifest: %zu layers, more than the %u allowed", n,
				    l.layers);
	struct oci_descriptor *layers = calloc(n ? n : 1, sizeof(*layers));
	if (!layers)
		return cell_err(err, ENOMEM, "manifest: layers");
	for (size_t i = 0; i < n; i++) {
		char what[48];
		snprintf(what, sizeof(what), "manifest: layers[%zu]", i);
		r = parse_descriptor(json_array_get(arr, i), what, &layers[i], err);
		if (r >= 0 && !oci_media_is_layer(layers[i].media)) {
			char w2[200];
			snprintf(w2, sizeof(w2), "%s (%s)", what, layers[i].digest.text);
			r = refuse_layer_media(w2, layers[i].media_type, layers[i].media, err);
		}
		if (r < 0) {
			free(layers);
			return r;
		}
	}
	out->layers = layers;
	out->n_layers = (unsigned)n;
	return 0;
}

/* ---- image configs ---- */

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void oci_config_free(struct oci_config *c)
{
	strv_free(c->env);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	strv_free(c->exposed_ports);
	strv_free(c->label_keys);
	strv_free(c->label_values);
	free(c->workdir);
	free(c->user);
	free(c->stop_signal);
	free(c->diff_ids);
	memset(c, 0, sizeof(*c));
}

#define CONFIG_LIST_MAX 4096

/* config.<key> when present and not null, of the given type; *out NULL when absent. */
static int member(json_t *o, const char *key, json_type type, json_t **out, struct cell_error *err)
{
	static const char *const names[] = {
	    [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array", [JSON_STRING] = "a string"};
	*out = json_object_get(o, key);
	if (!*out || json_is_null(*out)) {
		*out = NULL;
		return 0;
	}
	if (json_typeof(*out) != type)
		return cell_err_msg(err, EINVAL, "image config: config.%s is not %s", key,
				    names[type]);
	return 0;
}

static int get_str(json_t *o, const char *key, char **out, struct cell_error *err)
{
	json_t *v;
	*out = NULL;
	int r = member(o, key, JSON_STRING, &v, err);
	if (r < 0 || !v)
		return r;
	*out = strdup(json_string_value(v));
	return *out ? 0 : cell_err(err, ENOMEM, "image config: config.%s", key);
}

static int strv_new(size_t n, char ***out, const char *key, struct cell_error *err)
{
	if (n > CONFIG_LIST_MAX)
		return cell_err_msg(err, E2BIG,
				    "image config: config.%s has %zu entries, more "
				    "than the %d allowed",
				    key, n, CONFIG_LIST_MAX);
	*out = calloc(n + 1, sizeof(char *));
	return *out ? 0 : cell_err(err, ENOMEM, "image config: config.%s", key);
}

static int get_strv(json_t *o, const char *key, char ***out, size_t *n, bool *has,
		    struct cell_error *err)
{
	json_t *v;
	int r = member(o, key, JSON_ARRAY, &v, err);
	if (r < 0 || !v)
		return r;
	if ((r = strv_new(json_array_size(v), out, key, err)) < 0)
		return r;
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *s = json_array_get(v, i);
		if (!json_is_string(s))
			return cell_err_msg(err, EINVAL,
					    "image config: config.%s[%zu] is not a string", key, i);
		if (!((*out)[i] = strdup(json_string_value(s))))
			return cell_err(err, ENOMEM, "image config: config.%s", key);
		*n = i + 1;
	}
	if (has)
		*has = true;
	return 0;
}

/* An object's keys (and string values when values is not NULL). */
static int get_keys(json_t *o, const char *key, char ***keys, char ***values, size_t *n,
		    struct cell_error *err)
{
	json_t *v;
	int r = member(o, key, JSON_OBJECT, &v, err);
	if (r < 0 || !v)
		return r;
	size_t count = json_object_size(v);
	r = strv_new(count, keys, key, err);
	if (r >= 0 && values)
		r = strv_new(count, values, key, err);
	if (r < 0)
		return r;
	const char *k;
	json_t *val;
	size_t i = 0;
	json_object_foreach(v, k, val)
	{
		if (values && !json_is_string(val))
			return cell_err_msg(err, EINVAL,
					    "image config: config.%s['%.64s'] is not a string", key,
					    k);
		if (!((*keys)[i] = strdup(k)) ||
		    (values && !((*values)[i] = strdup(json_string_value(val)))))
			return cell_err(err, ENOMEM, "image config: config.%s", key);
		*n = ++i;
	}
	return 0;
}

static int config_parse_json(json_t *j, const struct limits *l, struct oci_config *c,
			     struct cell_error *err)
{
	int r =
	    get_strbuf(j, "os", "image config", true, c->platform.os, sizeof(c->platform.os), err);
	if (r >= 0)
		r = get_strbuf(j, "architecture", "image config", true, c->platform.arch,
			       sizeof(c->platform.arch), err);
	if (r >= 0)
		r = get_strbuf(j, "variant", "image config", false, c->platform.variant,
			       sizeof(c->platform.variant), err);
	if (r < 0)
		return r;
	json_t *cfg = json_object_get(j, "config");
	if (cfg && !json_is_null(cfg)) {
		if (!json_is_object(cfg))
			return cell_err_msg(err, EINVAL, "image config: 'config' is not an object");
		if ((r = get_strv(cfg, "Env", &c->env, &c->n_env, NULL, err)) < 0 ||
		    (r = get_str(cfg, "WorkingDir", &c->workdir, err)) < 0 ||
		    (r = get_str(cfg, "User", &c->user, err)) < 0 ||
		    (r = get_strv(cfg, "Entrypoint", &c->entrypoint, &c->n_entrypoint,
				  &c->has_entrypoint, err)) < 0 ||
		    (r = get_strv(cfg, "Cmd", &c->cmd, &c->n_cmd, &c->has_cmd, err)) < 0 ||
		    (r = get_keys(cfg, "ExposedPorts", &c->exposed_ports, NULL, &c->n_exposed_ports,
				  err)) < 0 ||
		    (r = get_keys(cfg, "Labels", &c->label_keys, &c->label_values, &c->n_labels,
				  err)) < 0 ||
		    (r = get_str(cfg, "StopSignal", &c->stop_signal, err)) < 0)
			return r;
		for (size_t i = 0; i < c->n_env; i++)
			if (!strchr(c->env[i], '=') || c->env[i][0] == '=')
				return cell_err_msg(err, EINVAL,
						    "image config: config.Env[%zu] '%.64s' is not "
						    "NAME=value",
						    i, c->env[i]);
	}
	json_t *rootfs = json_object_get(j, "rootfs");
	if (!json_is_object(rootfs))
		return cell_err_msg(err, EINVAL, "image config: 'rootfs' missing or not an object");
	json_t *type = json_object_get(rootfs, "type");
	if (!json_is_string(type) || strcmp(json_string_value(type), "layers"))
		return cell_err_msg(err, EINVAL, "image config: rootfs.type is not \"layers\"");
	json_t *ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(ids))
		return cell_err_msg(err, EINVAL, "image config: rootfs.diff_ids is not an array");
	size_t n = json_array_size(ids);
	if (n > l->layers)
		return cell_err_msg(err, E2BIG,
				    "image config: rootfs.diff_ids has %zu entries, more than the "
				    "%u layers allowed",
				    n, l->layers);
	c->diff_ids = calloc(n ? n : 1, sizeof(*c->diff_ids));
	if (!c->diff_ids)
		return cell_err(err, ENOMEM, "image config: rootfs.diff_ids");
	for (size_t i = 0; i < n; i++) {
		json_t *d = json_array_get(ids, i);
		if (!json_is_string(d))
			return cell_err_msg(
			    err, EINVAL, "image config: rootfs.diff_ids[%zu] is not a string", i);
		r = oci_digest_parse(json_string_value(d), &c->diff_ids[i], err);
		if (r < 0)
			return cell_err_wrap(err, "image config: rootfs.diff_ids[%zu]: ", i);
		c->n_diff_ids = i + 1;
	}
	return 0;
}

int oci_config_parse(const char *doc, size_t len, const struct oci_limits *lim,
		     struct oci_config *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	struct limits l = limits_of(lim);
	_cleanup_json_ json_t *j = NULL;
	int r = load_doc(doc, len, lim, "image config", &j, err);
	if (r < 0)
		return r;
	r = config_parse_json(j, &l, out, err);
	if (r < 0)
		oci_config_free(out);
	return r;
}

int oci_config_check_layers(const struct oci_config *c, const struct oci_manifest *m,
			    struct cell_error *err)
{
	if (c->n_diff_ids != m->n_layers)
		return cell_err_msg(err, EBADMSG,
				    "image config: rootfs.diff_ids lists %zu layers, the manifest "
				    "%u",
				    c->n_diff_ids, m->n_layers);
	return 0;
}

int oci_config_check_platform(const struct oci_config *c, const struct oci_platform *want,
			      struct cell_error *err)
{
	if (oci_platform_match(&c->platform, want))
		return 0;
	char have[96], w[96];
	oci_platform_format(&c->platform, have, sizeof(have));
	oci_platform_format(want, w, sizeof(w));
	return cell_err_msg(err, ENOEXEC, "the image is for %s; this host runs %s", have, w);
}

/* ---- image references ---- */

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_word(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool path_component_ok(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if (!is_lower_alnum(s[i]))
			return false;
		while (i < n && is_lower_alnum(s[i]))
			i++;
		if (i == n)
			return true;
		if (s[i] == '.') {
			i++;
		} else if (s[i] == '_') {
			i += (i + 1 < n && s[i + 1] == '_') ? 2 : 1;
		} else if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
		} else {
			return false;
		}
		if (i == n)
			return false;
	}
	return n > 0;
}

static int check_path(const char *path, struct cell_error *err)
{
	if (!*path)
		return cell_err_msg(err, EINVAL, "reference: empty repository path");
	for (const char *p = path; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			return cell_err_msg(err, EINVAL,
					    "reference: repository path '%.255s' must be lowercase",
					    path);
	for (const char *p = path;;) {
		size_t n = strcspn(p, "/");
		if (!path_component_ok(p, n))
			return cell_err_msg(err, EINVAL,
					    "reference: repository path '%.255s' has an invalid "
					    "component '%.*s'",
					    path, (int)(n > 64 ? 64 : n), p);
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

static bool port_ok(const char *p)
{
	if (!*p || strlen(p) > 5)
		return false;
	long v = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
	}
	return v > 0 && v < 65536;
}

/* host[:port] or [IPv6]:port */
static int check_registry(const char *reg, struct cell_error *err)
{
	const char *port = NULL;
	if (reg[0] == '[') {
		const char *close = strchr(reg, ']');
		if (!close || close == reg + 1)
			return cell_err_msg(err, EINVAL,
					    "reference: registry '%.255s' has no closing ']'", reg);
		for (const char *p = reg + 1; p < close; p++)
			if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
				return cell_err_msg(err, EINVAL,
						    "reference: registry '%.255s' is no IPv6 "
						    "address",
						    reg);
		if (close[1] && close[1] != ':')
			return cell_err_msg(err, EINVAL,
					    "reference: registry '%.255s': junk after ']'", reg);
		port = close[1] ? close + 2 : NULL;
	} else {
		size_t hn = strcspn(reg, ":");
		if (!hn)
			return cell_err_msg(err, EINVAL, "reference: registry '%.255s' has no host",
					    reg);
		if (reg[hn - 1] == '.')
			return cell_err_msg(err, EINVAL,
					    "reference: registry host '%.*s' ends in '.'", (int)hn,
					    reg);
		for (size_t i = 0; i < hn;) {
			size_t ln = strcspn(reg + i, ".:");
			if (ln > hn - i)
				ln = hn - i;
			if (!ln || reg[i] == '-' || reg[i + ln - 1] == '-')
				return cell_err_msg(err, EINVAL,
						    "reference: registry host '%.*s' is not a host "
						    "name",
						    (int)hn, reg);
			for (size_t k = i; k < i + ln; k++)
				if (!isalnum((unsigned char)reg[k]) && reg[k] != '-')
					return cell_err_msg(err, EINVAL,
							    "reference: registry host '%.*s' is "
							    "not a host name",
							    (int)hn, reg);
			i += ln + 1;
		}
		port = reg[hn] ? reg + hn + 1 : NULL;
	}
	if (port && !port_ok(port))
		return cell_err_msg(err, EINVAL, "reference: registry '%.255s' has a bad port",
				    reg);
	return 0;
}

static bool tag_ok(const char *t)
{
	size_t n = strlen(t);
	if (!n || n > OCI_TAG_MAX || !is_word(t[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_word(t[i]) && t[i] != '.' && t[i] != '-')
			return false;
	return true;
}

/* registry/path into out, with Docker Hub's library/ and the total length checked. */
static int ref_set_name(struct oci_ref *out, const char *registry, const char *path,
			struct cell_error *err)
{
	if (!strcmp(registry, "index.docker.io"))
		registry = "docker.io";
	bool hub = !strcmp(registry, "docker.io");
	int n = snprintf(out->path, sizeof(out->path), "%s%s",
			 hub && !strchr(path, '/') ? "library/" : "", path);
	size_t total = strlen(registry) + 1 + (size_t)n;
	if (n < 0 || (size_t)n >= sizeof(out->path) || total > 255)
		return cell_err_msg(err, ENAMETOOLONG,
				    "reference: name '%.64s/%.64s…' is longer than 255 characters",
				    registry, path);
	snprintf(out->registry, sizeof(out->registry), "%s", registry);
	return 0;
}

int oci_ref_parse(const char *s, struct oci_ref *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	size_t len = strlen(s);
	if (!len)
		return cell_err_msg(err, EINVAL, "reference: empty");
	if (len > 512)
		return cell_err_msg(err, ENAMETOOLONG, "reference: longer than 512 characters");
	char buf[513];
	memcpy(buf, s, len + 1);
	char *at = strchr(buf, '@');
	if (at) {
		*at = '\0';
		int r = oci_digest_parse(at + 1, &out->digest, err);
		if (r < 0)
			return cell_err_wrap(err, "reference '%.128s': ", s);
		out->has_digest = true;
	}
	char *slash = strrchr(buf, '/');
	char *colon = strrchr(slash ? slash : buf, ':');
	if (colon) {
		*colon = '\0';
		if (!tag_ok(colon + 1))
			return cell_err_msg(err, EINVAL,
					    "reference '%.128s': tag '%.128s' is not "
					    "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}",
					    s, colon + 1);
		snprintf(out->tag, sizeof(out->tag), "%s", colon + 1);
	}
	char *first = strchr(buf, '/');
	const char *registry = "docker.io", *path = buf;
	if (first) {
		size_t n = (size_t)(first - buf);
		bool host = buf[0] == '[' || memchr(buf, '.', n) || memchr(buf, ':', n) ||
			    (n == 9 && !strncmp(buf, "localhost", 9));
		if (host) {
			*first = '\0';
			registry = buf;
			path = first + 1;
			int r = check_registry(registry, err);
			if (r < 0)
				return r;
		}
	}
	out->short_name = path == buf;
	int r = check_path(path, err);
	if (r < 0)
		return r;
	if (out->short_name)
		snprintf(out->short_path, sizeof(out->short_path), "%s", path);
	r = ref_set_name(out, registry, path, err);
	if (r < 0)
		return r;
	if (!out->tag[0] && !out->has_digest)
		snprintf(out->tag, sizeof(out->tag), "latest");
	return 0;
}

int oci_ref_format(const struct oci_ref *r, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s%s%s%s%s", r->registry, r->path, r->tag[0] ? ":" : "",
			 r->tag, r->has_digest ? "@" : "", r->has_digest ? r->digest.text : "");
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return n;
}

int oci_ref_qualify(const struct oci_ref *short_ref, const char *registry, struct oci_ref *out,
		    struct cell_error *err)
{
	if (!short_ref->short_name)
		return cell_err_msg(err, EINVAL, "reference: %s/%s is not a short name",
				    short_ref->registry, short_ref->path);
	int r = check_registry(registry, err);
	if (r < 0)
		return r;
	*out = *short_ref;
	out->short_name = false;
	out->short_path[0] = '\0';
	return ref_set_name(out, registry, short_ref->short_path, err);
}

const char *oci_registry_host(const char *registry)
{
	if (!strcmp(registry, "docker.io") || !strcmp(registry, "index.docker.io"))
		return "registry-1.docker.io";
	return registry;
}

/* ---- WWW-Authenticate ---- */

static bool is_tchar(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_t68char(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("-._~+/", c));
}

/* token68 ("abc==") up to the end or the next comma: its length, 0 when there is none. */
static size_t token68_len(const char *p)
{
	size_t n = 0;
	while (is_t68char(p[n]))
		n++;
	if (!n)
		return 0;
	while (p[n] == '=')
		n++;
	size_t k = n;
	while (p[k] == ' ' || p[k] == '\t')
		k++;
	return (p[k] == '\0' || p[k] == ',') ? n : 0;
}

static int auth_param(struct oci_challenge *c, const char *name, size_t nlen, const char *val,
		      size_t vlen, size_t off, struct cell_error *err)
{
	static const struct {
		const char *name;
		size_t offset, size;
	} fields[] = {
	    {"realm", offsetof(struct oci_challenge, realm),
	     sizeof(((struct oci_challenge *)0)->realm)},
	    {"service", offsetof(struct oci_challenge, service),
	     sizeof(((struct oci_challenge *)0)->service)},
	    {"scope", offsetof(struct oci_challenge, scope),
	     sizeof(((struct oci_challenge *)0)->scope)},
	    {"error", offsetof(struct oci_challenge, error),
	     sizeof(((struct oci_challenge *)0)->error)},
	};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(fields); i++) {
		if (strlen(fields[i].name) != nlen || strncasecmp(fields[i].name, name, nlen))
			continue;
		char *dst = (char *)c + fields[i].offset;
		if (dst[0])
			return cell_err_msg(err, EINVAL,
					    "WWW-Authenticate: %s given twice (offset %zu)",
					    fields[i].name, off);
		if (vlen >= fields[i].size)
			return cell_err_msg(
			    err, EINVAL, "WWW-Authenticate: %s longer than %zu bytes (offset %zu)",
			    fields[i].name, fields[i].size - 1, off);
		memcpy(dst, val, vlen);
		dst[vlen] = '\0';
	}
	return 0;
}

#define AUTH_PARAMS_MAX 32

int oci_www_auth_parse(const char *header, struct oci_challenge *out, size_t max,
		       struct cell_error *err)
{
	size_t len = strlen(header);
	if (len > OCI_AUTH_HEADER_MAX)
		return cell_err_msg(err, EINVAL, "WWW-Authenticate: longer than %d bytes",
				    OCI_AUTH_HEADER_MAX);
	size_t n = 0;
	unsigned params = 0;
	struct oci_challenge *cur = NULL;
	char val[OCI_AUTH_HEADER_MAX + 1];
	const char *p = header;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			break;
		size_t off = (size_t)(p - header);
		const char *tok = p;
		while (is_tchar(*p))
			p++;
		size_t tlen = (size_t)(p - tok);
		if (!tlen)
			return cell_err_msg(err, EINVAL,
					    "WWW-Authenticate: unexpected '%c' at offset %zu", *p,
					    off);
		const char *q = p;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '=') {
			/* a new challenge: its scheme, then maybe a token68 */
			if (n == max)
				return cell_err_msg(
				    err, E2BIG, "WWW-Authenticate: more than %zu challenges", max);
			if (tlen >= sizeof(cur->scheme_name))
				return cell_err_msg(
				    err, EINVAL,
				    "WWW-Authenticate: scheme longer than %zu bytes "
				    "at offset %zu",
				    sizeof(cur->scheme_name) - 1, off);
			cur = &out[n++];
			memset(cur, 0, sizeof(*cur));
			memcpy(cur->scheme_name, tok, tlen);
			cur->scheme = !strcasecmp(cur->scheme_name, "bearer")  ? OCI_AUTH_BEARER
				      : !strcasecmp(cur->scheme_name, "basic") ? OCI_AUTH_BASIC
									       : OCI_AUTH_OTHER;
			params = 0;
			if (q != p) {
				size_t t68 = token68_len(q);
				p = t68 ? q + t68 : q;
			}
			continue;
		}
		if (!cur)
			return cell_err_msg(err, EINVAL,
					    "WWW-Authenticate: parameter '%.*s' before any scheme",
					    (int)(tlen > 32 ? 32 : tlen), tok);
		if (++params > AUTH_PARAMS_MAX)
			return cell_err_msg(err, E2BIG,
					    "WWW-Authenticate: more than %d parameters in a "
					    "challenge",
					    AUTH_PARAMS_MAX);
		p = q + 1;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t vlen = 0;
		if (*p == '"') {
			p++;
			for (;;) {
				char c = *p;
				if (!c)
					return cell_err_msg(err, EINVAL,
							    "WWW-Authenticate: unterminated quoted "
							    "string from offset %zu",
							    off);
				if (c == '"')
					break;
				if (c == '\\') {
					c = *++p;
					if (!c)
						continue;
				}
				if ((unsigned char)c < 0x20 && c != '\t')
					return cell_err_msg(
					    err, EINVAL,
					    "WWW-Authenticate: control character in "
					    "a quoted string at offset %zu",
					    (size_t)(p - header));
				val[vlen++] = c;
				p++;
			}
			p++;
		} else {
			while (is_tchar(*p))
				val[vlen++] = *p++;
			if (!vlen)
				return cell_err_msg(
				    err, EINVAL,
				    "WWW-Authenticate: parameter '%.*s' has no value "
				    "(offset %zu)",
				    (int)(tlen > 32 ? 32 : tlen), tok, off);
		}
		int r = auth_param(cur, tok, tlen, val, vlen, off, err);
		if (r < 0)
			return r;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && *p != ',')
			return cell_err_msg(err, EINVAL,
					    "WWW-Authenticate: unexpected '%c' at offset %zu", *p,
					    (size_t)(p - header));
	}
	if (!n)
		return cell_err_msg(err, EINVAL, "WWW-Authenticate: no challenge");
	for (size_t i = 0; i < n; i++)
		if (out[i].scheme == OCI_AUTH_BEARER && !out[i].realm[0])
			return cell_err_msg(err, EINVAL,
					    "WWW-Authenticate: Bearer challenge without a realm");
	return (int)n;
}

/* ---- registries.conf: a TOML subset ---- */

struct toml {
	const char *p, *end;
	const char *name;
	unsigned line;
	struct cell_error *err;
};

#define TOML_ARRAY_MAX OCI_REGCONF_SEARCH_MAX

struct toml_val {
	enum { TV_STR, TV_BOOL, TV_ARRAY, TV_INT } type;
	char s[OCI_NAME_MAX];
	bool b;
	unsigned n;
	char arr[TOML_ARRAY_MAX][OCI_NAME_MAX];
};

static int toml_fail(struct toml *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int toml_fail(struct toml *t, const char *fmt, ...)
{
	char msg[CELL_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return cell_err_msg(t->err, EINVAL, "%s:%u: %s", t->name, t->line, msg);
}

static void toml_blank(struct toml *t)
{
	while (t->p < t->end && (*t->p == ' ' || *t->p == '\t'))
		t->p++;
}

/* Blanks, comments and newlines (inside arrays). */
static void toml_space(struct toml *t)
{
	for (;;) {
		toml_blank(t);
		if (t->p < t->end && *t->p == '#') {
			while (t->p < t->end && *t->p != '\n')
				t->p++;
		}
		if (t->p < t->end && *t->p == '\r' && t->p + 1 < t->end && t->p[1] == '\n')
			t->p++;
		if (t->p < t->end && *t->p == '\n') {
			t->p++;
			t->line++;
			continue;
		}
		return;
	}
}

/* The rest of a line after a value or a header: blanks and a comment only. */
static int toml_eol(struct toml *t)
{
	toml_blank(t);
	if (t->p < t->end && *t->p == '#')
		while (t->p < t->end && *t->p != '\n')
			t->p++;
	if (t->p < t->end && *t->p == '\r')
		t->p++;
	if (t->p < t->end && *t->p != '\n')
		return toml_fail(t, "unexpected '%c' after the value", *t->p);
	if (t->p < t->end) {
		t->p++;
		t->line++;
	}
	return 0;
}

static int toml_string(struct toml *t, char *out, size_t size)
{
	char q = *t->p++;
	if (t->p + 1 < t->end && t->p[0] == q && t->p[1] == q)
		return toml_fail(t, "multi-line strings are not supported");
	size_t n = 0;
	for (;;) {
		if (t->p >= t->end || *t->p == '\n')
			return toml_fail(t, "unterminated string");
		char c = *t->p++;
		if (c == q)
			break;
		if ((unsigned char)c < 0x20 && c != '\t')
			return toml_fail(t, "control character in a string");
		if (c == '\\' && q == '"') {
			if (t->p >= t->end)
				return toml_fail(t, "unterminated string");
			char e = *t->p++;
			switch (e) {
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case '"':
				c = '"';
				break;
			case '\\':
				c = '\\';
				break;
			default:
				return toml_fail(t, "escape '\\%c' is not supported", e);
			}
		}
		if (n + 1 >= size)
			return toml_fail(t, "string longer than %zu bytes", size - 1);
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

static int toml_value(struct toml *t, struct toml_val *v)
{
	memset(v, 0, sizeof(*v));
	if (t->p >= t->end)
		return toml_fail(t, "value missing");
	char c = *t->p;
	if (c == '"' || c == '\'') {
		v->type = TV_STR;
		return toml_string(t, v->s, sizeof(v->s));
	}
	if (c == '[') {
		v->type = TV_ARRAY;
		t->p++;
		for (;;) {
			toml_space(t);
			if (t->p < t->end && *t->p == ']') {
				t->p++;
				return 0;
			}
			if (t->p >= t->end || (*t->p != '"' && *t->p != '\''))
				return toml_fail(t, "an array here holds strings only");
			if (v->n == TOML_ARRAY_MAX)
				return toml_fail(t, "array of more than %d entries",
						 TOML_ARRAY_MAX);
			int r = toml_string(t, v->arr[v->n], sizeof(v->arr[v->n]));
			if (r < 0)
				return r;
			v->n++;
			toml_space(t);
			if (t->p < t->end && *t->p == ',')
				t->p++;
			else if (t->p >= t->end || *t->p != ']')
				return toml_fail(t, "expected ',' or ']' in an array");
		}
	}
	size_t n = 0;
	while (t->p + n < t->end && (isalnum((unsigned char)t->p[n]) || t->p[n] == '_' ||
				     t->p[n] == '-' || t->p[n] == '+'))
		n++;
	if (n == 4 && !strncmp(t->p, "true", 4)) {
		v->type = TV_BOOL;
		v->b = true;
	} else if (n == 5 && !strncmp(t->p, "false", 5)) {
		v->type = TV_BOOL;
	} else if (n && n < 20 && strspn(t->p, "+-0123456789_") >= n) {
		v->type = TV_INT;
	} else if (c == '{') {
		return toml_fail(t, "inline tables are not supported");
	} else {
		return toml_fail(t, "value '%.*s' is not a string, a boolean or an array",
				 (int)(n ? (n > 32 ? 32 : n) : 1), t->p);
	}
	t->p += n;
	return 0;
}

static int toml_key(struct toml *t, char *out, size_t size)
{
	if (t->p < t->end && (*t->p == '"' || *t->p == '\''))
		return toml_string(t, out, size);
	size_t n = 0;
	while (t->p + n < t->end &&
	       (isalnum((unsigned char)t->p[n]) || t->p[n] == '_' || t->p[n] == '-'))
		n++;
	if (!n)
		return toml_fail(t, "expected a key, found '%c'", *t->p);
	if (n >= size)
		return toml_fail(t, "key longer than %zu bytes", size - 1);
	memcpy(out, t->p, n);
	out[n] = '\0';
	t->p += n;
	toml_blank(t);
	if (t->p < t->end && *t->p == '.')
		return toml_fail(t, "dotted keys are not supported ('%s.')", out);
	return 0;
}

enum regconf_section { SEC_TOP, SEC_REGISTRY, SEC_MIRROR, SEC_IGNORED };

struct regconf_file {
	bool has_search;
	unsigned n_search;
	char search[OCI_REGCONF_SEARCH_MAX][OCI_NAME_MAX];
	unsigned n_regs;
	struct oci_regconf_registry regs[OCI_REGCONF_REGS_MAX];
	/* keys given in the current table, to refuse one given twice */
	char seen[16][64];
	unsigned n_seen;
};

static int toml_header(struct toml *t, struct regconf_file *f, enum regconf_section *sec)
{
	bool array = t->p + 1 < t->end && t->p[1] == '[';
	t->p += array ? 2 : 1;
	toml_blank(t);
	const char *name = t->p;
	while (t->p < t->end && *t->p != ']' && *t->p != '\n')
		t->p++;
	size_t n = (size_t)(t->p - name);
	while (n && (name[n - 1] == ' ' || name[n - 1] == '\t'))
		n--;
	if (t->p >= t->end || *t->p != ']' || (array && (t->p + 1 >= t->end || t->p[1] != ']')))
		return toml_fail(t, "unterminated table header");
	t->p += array ? 2 : 1;
	f->n_seen = 0;
	if (n >= 10 && !strncmp(name, "registries", 10) && (n == 10 || name[10] == '.'))
		return toml_fail(t,
				 "the v1 format ([%.*s]) is not supported: use version 2's "
				 "unqualified-search-registries and [[registry]] tables "
				 "(containers-registries.conf(5))",
				 (int)n, name);
	if (array && n == 8 && !strncmp(name, "registry", 8)) {
		if (f->n_regs == OCI_REGCONF_REGS_MAX)
			return toml_fail(t, "more than %d [[registry]] tables",
					 OCI_REGCONF_REGS_MAX);
		memset(&f->regs[f->n_regs++], 0, sizeof(f->regs[0]));
		*sec = SEC_REGISTRY;
	} else if (array && n == 15 && !strncmp(name, "registry.mirror", 15)) {
		if (!f->n_regs)
			return toml_fail(t, "[[registry.mirror]] before any [[registry]]");
		struct oci_regconf_registry *reg = &f->regs[f->n_regs - 1];
		if (reg->n_mirrors == OCI_REGCONF_MIRRORS_MAX)
			return toml_fail(t, "more than %d mirrors in a [[registry]]",
					 OCI_REGCONF_MIRRORS_MAX);
		memset(&reg->mirrors[reg->n_mirrors++], 0, sizeof(reg->mirrors[0]));
		*sec = SEC_MIRROR;
	} else if (!array && ((n == 8 && !strncmp(name, "registry", 8)) ||
			      (n == 15 && !strncmp(name, "registry.mirror", 15)))) {
		return toml_fail(t, "[%.*s] must be an array of tables: [[%.*s]]", (int)n, name,
				 (int)n, name);
	} else {
		*sec = SEC_IGNORED; /* [aliases] and other tables cell has no use for */
	}
	return toml_eol(t);
}

static int want_type(struct toml *t, const struct toml_val *v, int type, const char *key)
{
	static const char *const names[] = {"a string", "a boolean", "an array", "an integer"};
	if ((int)v->type != type)
		return toml_fail(t, "%s must be %s", key, names[type]);
	return 0;
}

static int toml_assign(struct toml *t, struct regconf_file *f, enum regconf_section sec,
		       const char *key, const struct toml_val *v)
{
	for (unsigned i = 0; i < f->n_seen; i++)
		if (!strcmp(f->seen[i], key))
			return toml_fail(t, "%s given twice", key);
	if (f->n_seen < CELL_ARRAY_SIZE(f->seen))
		snprintf(f->seen[f->n_seen++], sizeof(f->seen[0]), "%s", key);
	int r = 0;
	if (sec == SEC_TOP && !strcmp(key, "unqualified-search-registries")) {
		if ((r = want_type(t, v, TV_ARRAY, key)) < 0)
			return r;
		f->has_search = true;
		f->n_search = v->n;
		memcpy(f->search, v->arr, sizeof(f->search));
	} else if (sec == SEC_REGISTRY || sec == SEC_MIRROR) {
		struct oci_regconf_registry *reg = &f->regs[f->n_regs - 1];
		struct oci_regconf_mirror *m =
		    sec == SEC_MIRROR ? &reg->mirrors[reg->n_mirrors - 1] : NULL;
		if (!strcmp(key, "location")) {
			if ((r = want_type(t, v, TV_STR, key)) < 0)
				return r;
			memcpy(m ? m->location : reg->location, v->s, sizeof(v->s));
		} else if (!strcmp(key, "insecure")) {
			if ((r = want_type(t, v, TV_BOOL, key)) < 0)
				return r;
			*(m ? &m->insecure : &reg->insecure) = v->b;
		} else if (!m && !strcmp(key, "prefix")) {
			if ((r = want_type(t, v, TV_STR, key)) < 0)
				return r;
			memcpy(reg->prefix, v->s, sizeof(v->s));
		} else if (!m && !strcmp(key, "blocked")) {
			if ((r = want_type(t, v, TV_BOOL, key)) < 0)
				return r;
			reg->blocked = v->b;
		}
		/* mirror-by-digest-only, pull-from-mirror: all mirrors are tried for tags too */
	}
	return 0;
}

/* A location or prefix: host[:port][/path], no scheme, no empty component. */
static int check_location(struct toml *t, const char *what, const char *loc, bool wildcard_ok)
{
	if (strstr(loc, "://"))
		return toml_fail(t,
				 "%s '%s' must not name a scheme (set insecure = true for "
				 "HTTP)",
				 what, loc);
	if (wildcard_ok && !strncmp(loc, "*.", 2)) {
		if (strchr(loc, '/') || strchr(loc + 2, '*') || !loc[2])
			return toml_fail(t, "%s '%s': a wildcard is '*.domain' alone", what, loc);
		return 0;
	}
	size_t n = strlen(loc);
	if (!n || loc[0] == '/' || loc[n - 1] == '/' || strstr(loc, "//") || strchr(loc, '*') ||
	    strchr(loc, ' '))
		return toml_fail(t, "%s '%s' is not host[:port][/path]", what, loc);
	return 0;
}

static int regconf_finish(struct toml *t, struct regconf_file *f)
{
	for (unsigned i = 0; i < f->n_regs; i++) {
		struct oci_regconf_registry *reg = &f->regs[i];
		int r;
		if (!reg->prefix[0] && !reg->location[0])
			return toml_fail(t, "[[registry]] %u has neither prefix nor location",
					 i + 1);
		if (!reg->prefix[0])
			memcpy(reg->prefix, reg->location, sizeof(reg->prefix));
		if ((r = check_location(t, "prefix", reg->prefix, true)) < 0)
			return r;
		if (reg->location[0] &&
		    (r = check_location(t, "location", reg->location, false)) < 0)
			return r;
		if (!reg->location[0] && strncmp(reg->prefix, "*.", 2))
			memcpy(reg->location, reg->prefix, sizeof(reg->location));
		for (unsigned k = 0; k < reg->n_mirrors; k++) {
			if (!reg->mirrors[k].location[0])
				return toml_fail(t, "a mirror of '%s' has no location",
						 reg->prefix);
			if ((r = check_location(t, "mirror location", reg->mirrors[k].location,
						false)) < 0)
				return r;
		}
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(f->regs[k].prefix, reg->prefix))
				return toml_fail(t, "prefix '%s' has two [[registry]] tables",
						 reg->prefix);
	}
	return 0;
}

int oci_regconf_parse(struct oci_regconf *conf, const char *text, size_t len, const char *name,
		      struct cell_error *err)
{
	if (len > OCI_REGCONF_FILE_MAX)
		return cell_err_msg(err, EFBIG, "%s: %zu bytes, more than the %u allowed", name,
				    len, OCI_REGCONF_FILE_MAX);
	if (memchr(text, '\0', len))
		return cell_err_msg(err, EINVAL, "%s: a NUL byte", name);
	_cleanup_free_ struct regconf_file *f = calloc(1, sizeof(*f));
	_cleanup_free_ struct toml_val *v = calloc(1, sizeof(*v));
	if (!f || !v)
		return cell_err(err, ENOMEM, "%s", name);
	struct toml t = {.p = text, .end = text + len, .name = name, .line = 1, .err = err};
	enum regconf_section sec = SEC_TOP;
	int r;
	for (;;) {
		toml_space(&t);
		if (t.p >= t.end)
			break;
		if (*t.p == '[') {
			if ((r = toml_header(&t, f, &sec)) < 0)
				return r;
			continue;
		}
		char key[64];
		if ((r = toml_key(&t, key, sizeof(key))) < 0)
			return r;
		toml_blank(&t);
		if (t.p >= t.end || *t.p != '=')
			return toml_fail(&t, "expected '=' after %s", key);
		t.p++;
		toml_blank(&t);
		unsigned line = t.line;
		if ((r = toml_value(&t, v)) < 0)
			return r;
		unsigned after = t.line;
		t.line = line;
		if (sec != SEC_IGNORED && (r = toml_assign(&t, f, sec, key, v)) < 0)
			return r;
		t.line = after;
		if ((r = toml_eol(&t)) < 0)
			return r;
	}
	if ((r = regconf_finish(&t, f)) < 0)
		return r;
	for (unsigned i = 0; i < f->n_search; i++) {
		struct cell_error e2;
		char probe[OCI_NAME_MAX + 8];
		snprintf(probe, sizeof(probe), "%s", f->search[i]);
		if (check_registry(probe, &e2) < 0)
			return cell_err_msg(err, EINVAL,
					    "%s: unqualified-search-registries: '%s' is not a "
					    "registry",
					    name, f->search[i]);
	}
	/* merge: the later search list replaces, a prefix given again replaces */
	if (f->has_search) {
		conf->has_search = true;
		conf->n_search = f->n_search;
		memcpy(conf->search, f->search, sizeof(conf->search));
	}
	for (unsigned i = 0; i < f->n_regs; i++) {
		unsigned k = 0;
		while (k < conf->n_regs && strcmp(conf->regs[k].prefix, f->regs[i].prefix))
			k++;
		if (k == conf->n_regs) {
			if (conf->n_regs == OCI_REGCONF_REGS_MAX)
				return cell_err_msg(err, E2BIG,
						    "%s: more than %d [[registry]] tables in all",
						    name, OCI_REGCONF_REGS_MAX);
			conf->n_regs++;
		}
		conf->regs[k] = f->regs[i];
	}
	return 0;
}

/* A whole small file into a malloc'd, NUL-terminated buffer; -ENOENT as it is. */
static int read_small_file(const char *path, size_t max, char **out, size_t *len,
			   struct cell_error *err)
{
	*out = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : cell_err(err, errno, "opening %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return cell_err(err, errno, "%s", path);
	if (!S_ISREG(st.st_mode))
		return cell_err_msg(err, EINVAL, "%s is not a regular file", path);
	if ((size_t)st.st_size > max)
		return cell_err_msg(err, EFBIG, "%s is %lld bytes, more than the %zu allowed", path,
				    (long long)st.st_size, max);
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return cell_err(err, ENOMEM, "%s", path);
	size_t n = 0;
	for (;;) {
		ssize_t k = read(fd, buf + n, max + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return cell_err(err, errno, "reading %s", path);
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max)
			return cell_err_msg(err, EFBIG, "%s is more than %zu bytes", path, max);
	}
	buf[n] = '\0';
	*len = n;
	*out = steal_ptr(buf);
	return 0;
}

static int regconf_file(struct oci_regconf *conf, const char *path, bool must_exist,
			struct cell_error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_small_file(path, OCI_REGCONF_FILE_MAX, &text, &len, err);
	if (r == -ENOENT)
		return must_exist ? cell_err(err, ENOENT, "%s", path) : 0;
	if (r < 0)
		return r;
	return oci_regconf_parse(conf, text, len, path, err);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int regconf_dropins(struct oci_regconf *conf, const char *dir, struct cell_error *err)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : cell_err(err, errno, "opening %s", dir);
	char *names[OCI_REGCONF_DROPINS_MAX];
	size_t n = 0;
	int r = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] == '.' || l < 6 || strcmp(e->d_name + l - 5, ".conf"))
			continue;
		if (n == OCI_REGCONF_DROPINS_MAX) {
			r = cell_err_msg(err, E2BIG, "%s: more than %d drop-ins", dir,
					 OCI_REGCONF_DROPINS_MAX);
			break;
		}
		if (!(names[n] = strdup(e->d_name))) {
			r = cell_err(err, ENOMEM, "%s", dir);
			break;
		}
		n++;
	}
	if (r >= 0)
		qsort(names, n, sizeof(names[0]), name_cmp);
	for (size_t i = 0; i < n; i++) {
		if (r >= 0) {
			char path[4096];
			if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >=
			    (int)sizeof(path))
				r = cell_err_msg(err, ENAMETOOLONG, "%s/%s", dir, names[i]);
			else
				r = regconf_file(conf, path, true, err);
		}
		free(names[i]);
	}
	return r;
}

int oci_regconf_load(const char *main_path, const char *dropin_dir, const char *override,
		     struct oci_regconf **out, struct cell_error *err)
{
	*out = NULL;
	_cleanup_free_ struct oci_regconf *conf = calloc(1, sizeof(*conf));
	if (!conf)
		return cell_err(err, ENOMEM, "registries.conf");
	int r;
	if (override && *override) {
		r = regconf_file(conf, override, true, err);
	} else {
		r = main_path ? regconf_file(conf, main_path, false, err) : 0;
		if (r >= 0 && dropin_dir)
			r = regconf_dropins(conf, dropin_dir, err);
	}
	if (r < 0)
		return r;
	*out = steal_ptr(conf);
	return 0;
}

/* Does prefix name ref (whole components; "*.domain" any host below domain)? */
static bool prefix_matches(const char *prefix, const char *name, const char *host, size_t hlen)
{
	if (!strncmp(prefix, "*.", 2)) {
		size_t sl = strlen(prefix + 1); /* ".domain" */
		return hlen > sl && !strncmp(host + hlen - sl, prefix + 1, sl);
	}
	size_t pl = strlen(prefix);
	return !strncmp(name, prefix, pl) && (name[pl] == '\0' || name[pl] == '/');
}

static int endpoint_of(struct oci_endpoint *e, const char *location, const char *rest,
		       bool insecure, bool mirror, struct cell_error *err)
{
	char full[2 * OCI_NAME_MAX + 2];
	snprintf(full, sizeof(full), "%s%s", location, rest);
	char *slash = strchr(full, '/');
	if (!slash || !slash[1])
		return cell_err_msg(err, EINVAL,
				    "registries.conf: '%s' rewrites the reference to '%.255s', "
				    "which has no repository path",
				    location, full);
	*slash = '\0';
	if (strlen(full) >= sizeof(e->registry) || strlen(slash + 1) >= sizeof(e->path))
		return cell_err_msg(err, ENAMETOOLONG,
				    "registries.conf: '%s' rewrites the reference beyond 255 "
				    "characters",
				    location);
	memset(e, 0, sizeof(*e));
	snprintf(e->registry, sizeof(e->registry), "%s", full);
	snprintf(e->path, sizeof(e->path), "%s", slash + 1);
	e->insecure = insecure;
	e->mirror = mirror;
	return 0;
}

int oci_regconf_endpoints(const struct oci_regconf *conf, const struct oci_ref *ref,
			  struct oci_endpoint out[OCI_ENDPOINTS_MAX], struct cell_error *err)
{
	char name[2 * OCI_NAME_MAX + 2];
	snprintf(name, sizeof(name), "%s/%s", ref->registry, ref->path);
	const char *close = ref->registry[0] == '[' ? strchr(ref->registry, ']') : NULL;
	size_t hlen = close ? (size_t)(close - ref->registry) + 1 : strcspn(ref->registry, ":");
	const struct oci_regconf_registry *best = NULL;
	for (unsigned i = 0; conf && i < conf->n_regs; i++) {
		const struct oci_regconf_registry *reg = &conf->regs[i];
		if (prefix_matches(reg->prefix, name, ref->registry, hlen) &&
		    (!best || strlen(reg->prefix) > strlen(best->prefix)))
			best = reg;
	}
	int n = 0, r;
	if (!best) {
		r = endpoint_of(&out[0], ref->registry, name + strlen(ref->registry), false, false,
				err);
		return r < 0 ? r : 1;
	}
	if (best->blocked)
		return cell_err_msg(err, EACCES,
				    "registry %s is blocked by registries.conf (prefix "
				    "'%s')",
				    name, best->prefix);
	bool wildcard = !strncmp(best->prefix, "*.", 2);
	const char *rest = wildcard ? name + strlen(ref->registry) : name + strlen(best->prefix);
	const char *location = wildcard ? ref->registry : best->location;
	for (unsigned k = 0; k < best->n_mirrors; k++, n++)
		if ((r = endpoint_of(&out[n], best->mirrors[k].location, rest,
				     best->mirrors[k].insecure, true, err)) < 0)
			return r;
	if ((r = endpoint_of(&out[n], location, rest, best->insecure, false, err)) < 0)
		return r;
	return n + 1;
}

/* ---- auth files ---- */

/* An auth file key as a registry[/namespace] ("https://index.docker.io/v1/" → docker.io). */
static void auth_key_norm(const char *key, char *out, size_t size, bool *legacy)
{
	*legacy = false;
	const char *s = key;
	if (!strncmp(s, "https://", 8) || !strncmp(s, "http://", 7)) {
		s = strstr(s, "://") + 3;
		*legacy = true;
	}
	size_t n = *legacy ? strcspn(s, "/") : strlen(s);
	while (n && s[n - 1] == '/')
		n--;
	size_t hn = strcspn(s, "/");
	if (hn > n)
		hn = n;
	const char *host_alias[] = {"index.docker.io", "registry-1.docker.io"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(host_alias); i++) {
		if (hn == strlen(host_alias[i]) && !strncmp(s, host_alias[i], hn)) {
			snprintf(out, size, "docker.io%.*s", (int)(n - hn), s + hn);
			return;
		}
	}
	snprintf(out, size, "%.*s", (int)n, s);
}

static int auth_entry(json_t *e, const char *file, const char *key, struct oci_creds *out,
		      struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!json_is_object(e))
		return cell_err_msg(err, EINVAL, "%s: auths['%.128s'] is not an object", file, key);
	json_t *auth = json_object_get(e, "auth");
	if (json_is_string(auth) && json_string_length(auth)) {
		uint8_t *raw = NULL;
		size_t rlen = 0;
		if (cell_base64_decode(json_string_value(auth), json_string_length(auth), &raw,
				       &rlen) < 0)
			return cell_err_msg(err, EINVAL, "%s: auths['%.128s'].auth is not base64",
					    file, key);
		char *colon = memchr(raw, ':', rlen);
		int r = 0;
		if (!colon || memchr(raw, '\0', rlen))
			r = cell_err_msg(err, EINVAL,
					 "%s: auths['%.128s'].auth is not base64 of user:password",
					 file, key);
		else if ((size_t)(colon - (char *)raw) >= sizeof(out->user) ||
			 rlen - (size_t)(colon - (char *)raw) - 1 >= sizeof(out->pass))
			r = cell_err_msg(err, EINVAL, "%s: auths['%.128s'].auth is too long", file,
					 key);
		else {
			memcpy(out->user, raw, (size_t)(colon - (char *)raw));
			memcpy(out->pass, colon + 1, rlen - (size_t)(colon - (char *)raw) - 1);
		}
		OPENSSL_cleanse(raw, rlen);
		free(raw);
		return r < 0 ? r : 1;
	}
	char what[160];
	snprintf(what, sizeof(what), "%s: auths['%.128s']", file, key);
	int r = get_strbuf(e, "username", what, false, out->user, sizeof(out->user), err);
	if (r >= 0)
		r = get_strbuf(e, "password", what, false, out->pass, sizeof(out->pass), err);
	if (r < 0)
		return r;
	if (out->user[0])
		return 1;
	if (json_object_get(e, "identitytoken"))
		log_info("%s: auths['%.128s'] holds an identity token, which cell does not use",
			 file, key);
	return 0;
}

int oci_authfile_parse(const char *doc, size_t len, const char *name, const char *registry,
		       const char *path, struct oci_creds *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_json_ json_t *j = NULL;
	int r = json_load_bounded(doc, len, OCI_AUTHFILE_MAX, OCI_JSON_DEPTH_MAX, name, &j, err);
	if (r < 0)
		return r;
	if (json_object_get(j, "credHelpers") || json_object_get(j, "credsStore"))
		log_info("%s: credHelpers and credsStore are not used by cell; only its 'auths' "
			 "entries count",
			 name);
	json_t *auths = json_object_get(j, "auths");
	if (!auths || json_is_null(auths))
		return 0;
	if (!json_is_object(auths))
		return cell_err_msg(err, EINVAL, "%s: 'auths' is not an object", name);
	char target[2 * OCI_NAME_MAX + 2];
	bool dummy;
	char reg[OCI_NAME_MAX + 16];
	auth_key_norm(registry, reg, sizeof(reg), &dummy);
	snprintf(target, sizeof(target), "%s%s%s", reg, path && *path ? "/" : "", path ? path : "");
	const char *best_key = NULL;
	size_t best_len = 0;
	bool best_legacy = true;
	const char *key;
	json_t *val;
	json_object_foreach(auths, key, val)
	{
		char norm[2 * OCI_NAME_MAX + 2];
		bool legacy;
		if (strlen(key) >= sizeof(norm))
			continue;
		auth_key_norm(key, norm, sizeof(norm), &legacy);
		size_t nl = strlen(norm);
		if (!nl || strncmp(target, norm, nl) || (target[nl] && target[nl] != '/'))
			continue;
		if (!best_key || nl > best_len || (nl == best_len && best_legacy && !legacy)) {
			best_key = key;
			best_len = nl;
			best_legacy = legacy;
		}
	}
	if (!best_key)
		return 0;
	return auth_entry(json_object_get(auths, best_key), name, best_key, out, err);
}

int oci_authfile_load(const char *file, const char *registry, const char *path,
		      struct oci_creds *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_small_file(file, OCI_AUTHFILE_MAX, &text, &len, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = oci_authfile_parse(text, len, file, registry, path, out, err);
	OPENSSL_cleanse(text, len);
	return r;
}
