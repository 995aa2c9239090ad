/* registry_lab: a real OCI distribution registry on 127.0.0.1 for the image tests, and the
 * images they pull from it, built and pushed by the test itself.
 *
 * rl_start(mode) runs Debian's `docker-registry serve CONFIG` (the CNCF distribution
 * registry) on 127.0.0.1:<free port>, its storage, config and log in a lab dir under the
 * suite's dir (T/rlab-XXXXXX), registered with the harness so it dies with the test even
 * when the test fails. Four modes:
 *
 *   RL_PLAIN  HTTP
 *   RL_TLS    HTTPS with a certificate for 127.0.0.1 and localhost, signed by a test CA
 *             (rl_ca_path(); rl_cert_dir() holds it as ca.crt for skopeo's --cert-dir),
 *             both made with the openssl CLI
 *   RL_BASIC  htpasswd: RL_USER's bcrypt hash made by libcrypt's crypt()
 *   RL_TOKEN  token auth: a token server in a thread of the test (rl_token_url()) signs
 *             RS256 JWTs with a key and self-signed certificate of its own (the registry's
 *             rootcertbundle, and the JWT's x5c): issuer RL_ISSUER, audience RL_SERVICE,
 *             five minutes' expiry, the access asked for to RL_USER with RL_PASS, none to
 *             an anonymous caller, 401 to wrong credentials
 *
 * rl_push_image builds an image with umoci from the host's static busybox (a user
 * `sandbox`, uid 1000, home /home/sandbox) and pushes it with skopeo. Layers, bottom up:
 *
 *   1  the root filesystem, with RL_REMOVED and RL_OPAQUE_DIR/old
 *   2  (multi_layer) RL_REMOVED deleted (a whiteout), RL_ADDED added (RL_ADDED_TEXT)
 *   3  (multi_layer) RL_OPAQUE_DIR made opaque, holding only RL_OPAQUE_NEW (written with
 *      tar and added with `umoci raw add-layer`: umoci never writes opaque markers)
 *
 * skopeo and umoci run with HOME, the XDG dirs, TMPDIR, _CONTAINERS_ROOTLESS_UID (so the
 * blob-info cache is the lab's: a host cache would hand back gzip blobs for a zstd push),
 * CONTAINERS_REGISTRIES_CONF, REGISTRY_AUTH_FILE, the signature policy and registries.d all
 * in the lab dir: they never read or write the host's.
 *
 * One lab per test process at a time; everything asserts (Check). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

enum rl_mode { RL_PLAIN, RL_TLS, RL_BASIC, RL_TOKEN };

#define RL_USER	      "lab-user"
#define RL_PASS	      "lab-pass-7d1f"
#define RL_SERVICE    "cell-lab-registry"
#define RL_ISSUER     "cell-lab-issuer"
#define RL_REMOVED    "/etc/cell-lab/removed"
#define RL_ADDED      "/etc/cell-lab/added"
#define RL_ADDED_TEXT "added by the second layer\n"
#define RL_OPAQUE_DIR "/opt/lab"
/* The file of an image's big layer (spec.big_layer): random bytes, its layer on top. */
#define RL_BIG_FILE	   "/opt/big/random"
#define RL_OPAQUE_OLD	   RL_OPAQUE_DIR "/old"
#define RL_OPAQUE_NEW	   RL_OPAQUE_DIR "/new"
#define RL_SANDBOX_UID	   1000
#define RL_SANDBOX_HOME	   "/home/sandbox"
#define RL_ENTRYPOINT_PATH RL_SANDBOX_HOME "/entrypoint.sh"

/* What the base layer is besides busybox and the lab's files. */
enum rl_flavour {
	RL_BUSYBOX,	/* /bin/sh and the applets, passwd with root and sandbox */
	RL_UBUNTU_LIKE, /* and /etc/os-release of Ubuntu 24.04, user ubuntu (RL_UBUNTU_UID,
			 * its home /home/ubuntu), no sudo */
	RL_DISTROLESS,	/* /bin/busybox alone: no /bin/sh, no passwd, no group */
};
#define RL_UBUNTU_UID 1001

struct rl_image_spec {
	enum rl_flavour flavour;
	bool multi_layer;	/* layers 2 and 3 above */
	bool docker_format;	/* Docker v2 schema 2 (skopeo --format v2s2), else OCI */
	bool zstd;		/* zstd layers (OCI only) */
	const char *const *env; /* NULL-terminated "K=V"; NULL: none */
	const char *workdir, *user;
	const char *const *entrypoint; /* NULL-terminated; NULL: unset */
	const char *const *cmd;
	const char *arch; /* the config's architecture; NULL: amd64 */
	/* NULL-terminated GOARCH names: an image each, pushed as <tag>-<arch>, and at tag an
	 * index (a Docker manifest list with docker_format) naming them */
	const char *const *archs;
	/* > 0: one more layer on top, RL_BIG_FILE of this many random bytes (they do not
	 * compress: the blob is about as big); rl_big_sha256 says what they hash to. */
	size_t big_layer;
};

void rl_start(enum rl_mode mode);
/* Kill the registry (and wait for it), stop the token server, remove the lab dir. A lab
 * not started: a no-op. */
void rl_stop(void);

/* Build and push NAME:TAG to the lab; the digest of what TAG names (malloc'd). */
char *rl_push_image(const char *name, const char *tag, const struct rl_image_spec *spec);

/* The same image built but not pushed: the OCI layout dir it is in (malloc'd; in the lab
 * dir, removed by rl_stop), the image tagged "img" there (org.opencontainers.image.ref.name
 * "img"). */
char *rl_build_layout(const struct rl_image_spec *spec);

enum rl_mode rl_mode(void);
pid_t rl_pid(void);
unsigned rl_port(void);
const char *rl_dir(void);	/* the lab dir */
const char *rl_url(void);	/* http[s]://127.0.0.1:PORT */
const char *rl_host(void);	/* 127.0.0.1:PORT */
const char *rl_creds(void);	/* RL_USER:RL_PASS in the auth modes, else NULL */
const char *rl_ca_path(void);	/* the test CA (RL_TLS), else NULL */
const char *rl_cert_dir(void);	/* a dir holding the CA as ca.crt (RL_TLS), else NULL */
const char *rl_token_url(void); /* the token server's realm (RL_TOKEN), else NULL */
/* The last few KiB of the registry's log (static buffer), for failure messages. */
const char *rl_log_tail(void);
/* The sha256 (hex) of the last big layer's RL_BIG_FILE built, "" before any. */
const char *rl_big_sha256(void);

/* An HTTP request to the registry through libcurl, as a client with the lab's credentials
 * would send it: RL_BASIC with basic auth, RL_TOKEN with a bearer token fetched for the
 * path's repository (pull and push), RL_TLS trusting the test CA. */
struct rl_http_opts {
	const char *body;
	size_t len;
	const char *content_type;
	const char *accept;	 /* NULL: every manifest and index type */
	bool anonymous;		 /* no credentials, no token */
	const char *user, *pass; /* other credentials than the lab's */
	bool no_ca;		 /* RL_TLS without trusting the test CA */
	const char *token;	 /* RL_TOKEN: send this bearer token as it is */
};
struct rl_resp {
	long status;   /* 0 when no HTTP answer came */
	int curl_code; /* CURLE_* when none came */
	char *body;
	size_t len;
	char *content_type, *www_authenticate, *digest; /* headers; NULL when absent */
};
long rl_http(const char *method, const char *path, const struct rl_http_opts *o, struct rl_resp *r);
void rl_resp_free(struct rl_resp *r);
/* A token from the lab's token server for scope (NULL: none) with user/pass (NULL:
 * anonymous): malloc'd, or NULL with the server's status in *status. */
char *rl_token(const char *scope, const char *user, const char *pass, long *status);

/* skopeo with the lab's environment: `skopeo --policy … --registries.d … ARGS…`. */
int rl_skopeo(struct h_proc *res, const char *const *args);
