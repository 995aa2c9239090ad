/* image_pull.c: an image reference pulled from an OCI distribution registry into the layer
 * store (image_store.h).
 *
 * The transport is libcurl, linked into celld: a well-kept HTTP client (TLS with the
 * host's and a registry's own CAs, HTTP/2, proxies from the environment, redirects bounded
 * and kept on https) that the CLI already uses, rather than HTTP written here or a registry
 * client run as another program. Everything the registry answers is judged by oci_image.c
 * and every byte kept is verified against its digest; the layers are unpacked by cell's own
 * fd-relative code (layer_unpack.c).
 *
 * One pull: registries.conf (re-read per pull: a short name's search registries, each
 * one's mirrors first), the manifest (an index resolved to the host's platform), the
 * config, then the layers the store lacks (by the config's diffID): downloaded a few at
 * once into <images>/.store/partial/<hex> (resumed with a Range where a partial is left,
 * kept across restarts, removed after a week unused), verified, and unpacked bottom first,
 * each over the layers below it. Last the image record under its digest and its name (the
 * normalized reference). Credentials are a call's own (never written anywhere) or the
 * operator's auth file; Bearer tokens are cached in memory per realm, service, scope and
 * credentials until they expire. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cell/error.h"
#include "image_store.h"
#include "oci_image.h"

#define PULL_REGCONF_DEFAULT	 "/etc/containers/registries.conf"
#define PULL_REGCONF_DIR_DEFAULT "/etc/containers/registries.conf.d"
#define PULL_CERTS_DIR_DEFAULT	 "/etc/containers/certs.d"
#define PULL_STALL_DEFAULT_S	 60
#define PULL_PARALLEL_DEFAULT	 4
#define PULL_REDIRECTS_MAX	 8
#define PULL_CONFIG_MAX		 (4u << 20)	 /* bytes of an image config */
#define PULL_IMAGE_MAX_DEFAULT	 (64ull << 30)	 /* compressed bytes of one image */
#define PULL_PARTIAL_MAX_AGE_S	 (7 * 24 * 3600) /* a partial blob nobody resumed */

struct image_pull_config {
	const char *registries_conf;	 /* --registries-conf: read alone; NULL: see below */
	const char *registries_conf_dir; /* --registries-conf-dir; NULL: the default */
	const char *certs_dir;		 /* --registry-certs-dir; NULL: the default */
	const char *auth_file;		 /* --auth-file; NULL: $REGISTRY_AUTH_FILE, ... */
	unsigned stall_timeout_s;	 /* --pull-stall-timeout; 0: the default */
	unsigned parallel;		 /* blobs of one pull at once; 0: the default */
	uint64_t image_max;		 /* compressed bytes of one image; 0: the default */
};

enum image_pull_state {
	PULL_LAYER_WAITING,
	PULL_LAYER_DOWNLOADING,
	PULL_LAYER_EXTRACTING,
	PULL_LAYER_DONE,
	PULL_LAYER_EXISTS, /* in the store already: not downloaded */
};

struct image_pull_progress {
	const char *digest; /* the layer's blob digest */
	unsigned index;	    /* bottom first */
	unsigned count;
	enum image_pull_state state;
	uint64_t done, total; /* bytes of the blob */
};

/* Called from the pull's threads (one at a time, never for long: append and return). */
typedef void image_pull_progress_fn(void *cls, const struct image_pull_progress *p);

struct image_pull_result {
	char name[STORE_NAME_MAX];     /* "docker.io/library/busybox:latest" */
	char digest[STORE_DIGEST_MAX]; /* the manifest's */
	uint64_t fetched;	       /* bytes downloaded (blobs) */
	unsigned layers, layers_fetched;
	bool joined; /* another caller's pull of the same reference and credentials */
};

/* After store_init: the partial/ dir made (and swept of what is a week old), libcurl's
 * global state. */
int image_pull_init(const char *images_dir, const struct image_pull_config *cfg,
		    struct cell_error *err);

/* Pull reference into the store with creds (a request's own; NULL: the operator's auth
 * file, else anonymous). A second call for the same reference and credentials while one
 * runs waits for its result (and gets its progress). fn may be NULL. -ENOENT: no such
 * image or tag, or none for this platform; -EACCES: credentials refused or missing;
 * -EBADMSG: a digest mismatch; -EFBIG: a bound; -ETIMEDOUT: a stalled transfer; -ELOOP:
 * redirects; -EPROTO: an answer that is not what was asked (HTML, wrong length); err names
 * the registry and the blob. */
int image_pull(const char *reference, const struct oci_creds *creds, image_pull_progress_fn *fn,
	       void *cls, struct image_pull_result *out, struct cell_error *err);

const char *image_pull_state_name(enum image_pull_state s);
