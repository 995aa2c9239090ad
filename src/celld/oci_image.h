/* What a registry or an image archive hands us, parsed and judged: media types, digests,
 * the host's platform and an index's choice of it, manifests, image configs, image
 * references, WWW-Authenticate challenges, registries.conf and auth files.
 *
 * Everything here is hostile input: every document is bounded (size, nesting, counts,
 * string lengths) and every refusal names the field, the line or the key. Pure (jansson
 * and libcrypto; files read only by oci_regconf_load and oci_authfile_load): unit suites
 * link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

/* ---- media types ---- */

enum oci_media {
	OCI_MEDIA_UNKNOWN = 0,
	OCI_MEDIA_OCI_INDEX,
	OCI_MEDIA_OCI_MANIFEST,
	OCI_MEDIA_OCI_CONFIG,
	OCI_MEDIA_OCI_LAYER_TAR,
	OCI_MEDIA_OCI_LAYER_GZIP,
	OCI_MEDIA_OCI_LAYER_ZSTD,
	OCI_MEDIA_DOCKER_LIST,
	OCI_MEDIA_DOCKER_MANIFEST,
	OCI_MEDIA_DOCKER_CONFIG,
	OCI_MEDIA_DOCKER_LAYER_GZIP,
	/* Refused wherever met, with a message saying why. */
	OCI_MEDIA_FOREIGN_LAYER,  /* OCI non-distributable, Docker foreign: fetched elsewhere */
	OCI_MEDIA_DOCKER_SCHEMA1, /* signed or not: deprecated, no config, no diff ids */
};

/* The media type of a Content-Type or mediaType value: parameters (";charset=...") and
 * surrounding blanks ignored, case-insensitive. OCI_MEDIA_UNKNOWN for anything else. */
enum oci_media oci_media_parse(const char *content_type);
/* The canonical text of a known type ("" for OCI_MEDIA_UNKNOWN). */
const char *oci_media_name(enum oci_media m);
bool oci_media_is_index(enum oci_media m);
bool oci_media_is_manifest(enum oci_media m);
bool oci_media_is_layer(enum oci_media m);

enum oci_compression { OCI_COMPRESSION_NONE, OCI_COMPRESSION_GZIP, OCI_COMPRESSION_ZSTD };
/* The compression of a layer's media type; -EPROTONOSUPPORT naming the type for a foreign
 * layer, a schema 1 type or anything that is not a layer. */
int oci_layer_compression(const char *media_type, enum oci_compression *out,
			  struct cell_error *err);

/* ---- digests ---- */

enum oci_digest_alg { OCI_DIGEST_SHA256 = 1, OCI_DIGEST_SHA512 };
/* "sha512:" and 128 hex digits, and the NUL */
#define OCI_DIGEST_MAX 136

struct oci_digest {
	enum oci_digest_alg alg;
	char text[OCI_DIGEST_MAX]; /* "sha256:<64 lowercase hex>" */
};

/* "sha256:<64 lowercase hex>" or "sha512:<128 lowercase hex>"; -EINVAL otherwise. */
int oci_digest_parse(const char *s, struct oci_digest *out, struct cell_error *err);
bool oci_digest_equal(const struct oci_digest *a, const struct oci_digest *b);
/* The hex part of a parsed digest (after "alg:"). */
const char *oci_digest_hex(const struct oci_digest *d);
int oci_digest_of(const void *buf, size_t len, enum oci_digest_alg alg, struct oci_digest *out);

/* A streaming digest: init, update per chunk, then final (or verify, which finals and
 * compares); oci_digest_abandon frees one left unfinished. */
struct oci_digester {
	enum oci_digest_alg alg;
	void *ctx; /* EVP_MD_CTX */
};
int oci_digest_init(struct oci_digester *d, enum oci_digest_alg alg);
int oci_digest_update(struct oci_digester *d, const void *buf, size_t len);
int oci_digest_final(struct oci_digester *d, struct oci_digest *out);
/* -EBADMSG "digest mismatch: expected …, got …" when the bytes were not the expected. */
int oci_digest_verify(struct oci_digester *d, const struct oci_digest *expected,
		      struct cell_error *err);
void oci_digest_abandon(struct oci_digester *d);

/* ---- platforms ---- */

struct oci_platform {
	char os[32];
	char arch[32];	  /* GOARCH: amd64, arm64, arm, 386, ppc64le, s390x, riscv64 ... */
	char variant[16]; /* v6, v7, v8 or "" */
};

/* linux + the GOARCH (and arm variant) of uname's machine; -ENOTSUP for a machine Go
 * names nothing. oci_platform_of_machine does the mapping for a given machine name. */
int oci_platform_host(struct oci_platform *out, struct cell_error *err);
int oci_platform_of_machine(const char *machine, struct oci_platform *out, struct cell_error *err);
/* "linux/arm/v7", "linux/amd64" */
void oci_platform_format(const struct oci_platform *p, char *buf, size_t size);
/* Does an image for have run where want is wanted (an empty variant of either matches,
 * arm64's "v8" is its default)? */
bool oci_platform_match(const struct oci_platform *have, const struct oci_platform *want);

/* ---- documents: indexes, manifests, configs ---- */

#define OCI_LAYERS_MAX	      128
#define OCI_MANIFEST_MAX      (4u << 20)
#define OCI_JSON_DEPTH_MAX    32
#define OCI_INDEX_ENTRIES_MAX 256

/* The bounds a caller puts on documents (zeros mean the defaults above; none may exceed
 * them). */
struct oci_limits {
	size_t max_size;
	unsigned max_layers;
	unsigned max_depth;
};

struct oci_descriptor {
	enum oci_media media;
	char media_type[128];
	struct oci_digest digest;
	int64_t size;
	bool has_platform;
	struct oci_platform platform;
};

/* What a manifest document is: its own mediaType, else the Content-Type it came with,
 * else its shape ("manifests": an OCI index; "config" and "layers": an OCI manifest). A
 * mediaType and a Content-Type naming different manifest types are refused, as is schema 1
 * (-EPROTONOSUPPORT), and a document too large, too deep or with duplicate keys. */
int oci_doc_media(const char *doc, size_t len, const char *content_type,
		  const struct oci_limits *lim, enum oci_media *out, struct cell_error *err);

/* The entry of an index (or manifest list) for want; -ENOENT "no image for linux/amd64 in
 * the index; it offers: linux/arm64, linux/arm/v7" when it has none. */
int oci_index_choose(const char *doc, size_t len, const char *content_type,
		     const struct oci_platform *want, const struct oci_limits *lim,
		     struct oci_descriptor *out, struct cell_error *err);

struct oci_manifest {
	enum oci_media media;
	struct oci_descriptor config;
	unsigned n_layers;
	struct oci_descriptor *layers; /* bottom first */
};
int oci_manifest_parse(const char *doc, size_t len, const char *content_type,
		       const struct oci_limits *lim, struct oci_manifest *out,
		       struct cell_error *err);
void oci_manifest_free(struct oci_manifest *m);

/* String lists are NULL-terminated, with their count beside them. */
struct oci_config {
	char **env;
	size_t n_env;
	char *workdir; /* NULL when not set (as User and StopSignal) */
	char *user;
	bool has_entrypoint;
	char **entrypoint;
	size_t n_entrypoint;
	bool has_cmd;
	char **cmd;
	size_t n_cmd;
	char **exposed_ports; /* "80/tcp" */
	size_t n_exposed_ports;
	char **label_keys;
	char **label_values;
	size_t n_labels;
	char *stop_signal;
	struct oci_platform platform;
	struct oci_digest *diff_ids;
	size_t n_diff_ids;
};
int oci_config_parse(const char *doc, size_t len, const struct oci_limits *lim,
		     struct oci_config *out, struct cell_error *err);
void oci_config_free(struct oci_config *c);
/* rootfs.diff_ids must count as many as the manifest's layers (-EBADMSG). */
int oci_config_check_layers(const struct oci_config *c, const struct oci_manifest *m,
			    struct cell_error *err);
/* The config's os/architecture(/variant) must run on want (-ENOEXEC naming both). */
int oci_config_check_platform(const struct oci_config *c, const struct oci_platform *want,
			      struct cell_error *err);

/* ---- image references ---- */

#define OCI_NAME_MAX 256
#define OCI_TAG_MAX  128

struct oci_ref {
	char registry[OCI_NAME_MAX]; /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
	char path[OCI_NAME_MAX];     /* "library/busybox" */
	char tag[OCI_TAG_MAX + 1];   /* "latest" when neither a tag nor a digest was given */
	bool has_digest;
	struct oci_digest digest;
	/* No registry was written: registries.conf's unqualified-search-registries apply,
	 * and short_path is the path as written ("busybox", not "library/busybox"). */
	bool short_name;
	char short_path[OCI_NAME_MAX];
};

/* [registry[:port]/]path[:tag][@digest], Docker Hub's rules: docker.io when the first
 * component is no host (no '.', no ':', not "localhost"), index.docker.io its alias,
 * "library/" before a single-component Docker Hub path. -EINVAL naming the part. */
int oci_ref_parse(const char *s, struct oci_ref *out, struct cell_error *err);
/* "docker.io/library/busybox:latest", "127.0.0.1:5000/x@sha256:…"; the length written,
 * or -ENAMETOOLONG. */
int oci_ref_format(const struct oci_ref *r, char *buf, size_t size);
/* A short name's reference in registry (the path as written, "library/" on docker.io). */
int oci_ref_qualify(const struct oci_ref *short_ref, const char *registry, struct oci_ref *out,
		    struct cell_error *err);
/* The host to connect to for a registry name: registry-1.docker.io for docker.io. */
const char *oci_registry_host(const char *registry);

/* ---- WWW-Authenticate ---- */

#define OCI_CHALLENGES_MAX  8
#define OCI_AUTH_HEADER_MAX 8192

enum oci_auth_scheme { OCI_AUTH_OTHER, OCI_AUTH_BASIC, OCI_AUTH_BEARER };

struct oci_challenge {
	enum oci_auth_scheme scheme;
	char scheme_name[32];
	char realm[1024];
	char service[256];
	char scope[1024];
	char error[64]; /* Bearer's error="insufficient_scope" */
};

/* Every challenge of a WWW-Authenticate value (or of several joined with ", "); the count,
 * or -EINVAL naming the offset. A Bearer challenge without a realm is refused. */
int oci_www_auth_parse(const char *header, struct oci_challenge *out, size_t max,
		       struct cell_error *err);

/* ---- registries.conf (v2) ---- */

#define OCI_REGCONF_SEARCH_MAX	16
#define OCI_REGCONF_REGS_MAX	64
#define OCI_REGCONF_MIRRORS_MAX 8
#define OCI_REGCONF_FILE_MAX	(256u << 10)
#define OCI_REGCONF_DROPINS_MAX 64

struct oci_regconf_mirror {
	char location[OCI_NAME_MAX];
	bool insecure;
};

struct oci_regconf_registry {
	char prefix[OCI_NAME_MAX]; /* the location when the file gave no prefix */
	char location[OCI_NAME_MAX];
	bool insecure;
	bool blocked;
	unsigned n_mirrors;
	struct oci_regconf_mirror mirrors[OCI_REGCONF_MIRRORS_MAX];
};

struct oci_regconf {
	bool has_search;
	unsigned n_search;
	char search[OCI_REGCONF_SEARCH_MAX][OCI_NAME_MAX];
	unsigned n_regs;
	struct oci_regconf_registry regs[OCI_REGCONF_REGS_MAX];
};

/* Merges one file's text (named by name in errors, "name:line: …") into conf: a search
 * list replaces the earlier one, a [[registry]] replaces the one of the same prefix. The
 * v1 format ([registries.search] …) is refused as such. */
int oci_regconf_parse(struct oci_regconf *conf, const char *text, size_t len, const char *name,
		      struct cell_error *err);
/* override (e.g. $CONTAINERS_REGISTRIES_CONF) is read alone when not NULL; otherwise
 * main_path (missing is fine) then dropin_dir's *.conf in name order. *out is calloc'd. */
int oci_regconf_load(const char *main_path, const char *dropin_dir, const char *override,
		     struct oci_regconf **out, struct cell_error *err);

struct oci_endpoint {
	char registry[OCI_NAME_MAX];
	char path[OCI_NAME_MAX];
	bool insecure;
	bool mirror;
};
#define OCI_ENDPOINTS_MAX (OCI_REGCONF_MIRRORS_MAX + 1)

/* Where to pull ref from, in order: the matching [[registry]]'s mirrors, then its location
 * (the prefix rewritten), with their insecure flags; the reference's own registry when no
 * entry matches. A prefix matches whole path components ("*.example.com" any host below
 * example.com); the longest wins. -EACCES for a blocked one. Returns the count. */
int oci_regconf_endpoints(const struct oci_regconf *conf, const struct oci_ref *ref,
			  struct oci_endpoint out[OCI_ENDPOINTS_MAX], struct cell_error *err);

/* ---- auth files (auth.json, ~/.docker/config.json) ---- */

#define OCI_AUTHFILE_MAX (1u << 20)

struct oci_creds {
	char user[256];
	char pass[1024];
};

/* The credentials file holds for registry/path: the longest namespace key first
 * ("quay.io/org/repo", "quay.io/org"), then the host; Docker Hub's aliases (index.docker.io,
 * registry-1.docker.io, https://index.docker.io/v1/) count as docker.io. 1 when found, 0
 * when not (or when the file does not exist), -errno naming the key otherwise.
 * credHelpers and credsStore are not run. */
int oci_authfile_load(const char *file, const char *registry, const char *path,
		      struct oci_creds *out, struct cell_error *err);
/* The same on a document in memory (name for errors). */
int oci_authfile_parse(const char *doc, size_t len, const char *name, const char *registry,
		       const char *path, struct oci_creds *out, struct cell_error *err);
