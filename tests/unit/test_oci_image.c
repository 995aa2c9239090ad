/* Image metadata judged as hostile input (src/celld/oci_image.c): media types, digests,
 * platforms and an index's choice, manifests, image configs, references, WWW-Authenticate,
 * registries.conf with its drop-ins, auth files. Each area: what a registry really sends,
 * then what a hostile or broken one might, each refusal naming the field, line or key. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/celld/oci_image.h"
#include "unit.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DA    "sha256:" HEX64
#define DB                                                                                         \
	"sha256:"                                                                                  \
	"1111111111111111111111111111111111111111111111111111111111111111"
#define DC                                                                                         \
	"sha256:"                                                                                  \
	"2222222222222222222222222222222222222222222222222222222222222222"

#define ck_err_has(err, text)                                                                      \
	ck_assert_msg(strstr((err).msg, (text)), "message '%s' lacks '%s'", (err).msg, (text))

/* ---- media types ---- */

START_TEST(media_types)
{
	ck_assert_int_eq(oci_media_parse("application/vnd.oci.image.index.v1+json"),
			 OCI_MEDIA_OCI_INDEX);
	ck_assert_int_eq(oci_media_parse(" Application/VND.oci.image.manifest.v1+json ; "
					 "charset=utf-8"),
			 OCI_MEDIA_OCI_MANIFEST);
	ck_assert_int_eq(
	    oci_media_parse("application/vnd.docker.distribution.manifest.list.v2+json"),
	    OCI_MEDIA_DOCKER_LIST);
	ck_assert_int_eq(oci_media_parse("application/vnd.docker.container.image.v1+json"),
			 OCI_MEDIA_DOCKER_CONFIG);
	ck_assert_int_eq(
	    oci_media_parse("application/vnd.docker.distribution.manifest.v1+prettyjws"),
	    OCI_MEDIA_DOCKER_SCHEMA1);
	ck_assert_int_eq(oci_media_parse("application/json"), OCI_MEDIA_UNKNOWN);
	ck_assert_int_eq(oci_media_parse("text/html"), OCI_MEDIA_UNKNOWN);
	ck_assert_int_eq(oci_media_parse(NULL), OCI_MEDIA_UNKNOWN);
	ck_assert_int_eq(oci_media_parse("application/vnd.oci.image.manifest.v1+jsonx"),
			 OCI_MEDIA_UNKNOWN);
	ck_assert_str_eq(oci_media_name(OCI_MEDIA_OCI_LAYER_ZSTD),
			 "application/vnd.oci.image.layer.v1.tar+zstd");
	ck_assert(oci_media_is_index(OCI_MEDIA_DOCKER_LIST));
	ck_assert(oci_media_is_manifest(OCI_MEDIA_DOCKER_MANIFEST));
	ck_assert(!oci_media_is_layer(OCI_MEDIA_FOREIGN_LAYER));
}
END_TEST

START_TEST(layer_compression)
{
	struct cell_error err = {0};
	enum oci_compression c;
	ck_assert_int_eq(oci_layer_compression("application/vnd.oci.image.layer.v1.tar", &c, &err),
			 0);
	ck_assert_int_eq(c, OCI_COMPRESSION_NONE);
	ck_assert_int_eq(
	    oci_layer_compression("application/vnd.oci.image.layer.v1.tar+gzip", &c, &err), 0);
	ck_assert_int_eq(c, OCI_COMPRESSION_GZIP);
	ck_assert_int_eq(
	    oci_layer_compression("application/vnd.docker.image.rootfs.diff.tar.gzip", &c, &err),
	    0);
	ck_assert_int_eq(c, OCI_COMPRESSION_GZIP);
	ck_assert_int_eq(
	    oci_layer_compression("application/vnd.oci.image.layer.v1.tar+zstd", &c, &err), 0);
	ck_assert_int_eq(c, OCI_COMPRESSION_ZSTD);

	ck_assert_int_eq(oci_layer_compression(
			     "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", &c, &err),
			 -EPROTONOSUPPORT);
	ck_err_has(err, "non-distributable");
	ck_assert_int_eq(
	    oci_layer_compression("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
				  &c, &err),
	    -EPROTONOSUPPORT);
	ck_err_has(err, "foreign");
	ck_assert_int_eq(
	    oci_layer_compression("application/vnd.docker.distribution.manifest.v1+json", &c, &err),
	    -EPROTONOSUPPORT);
	ck_err_has(err, "schema 1");
	ck_assert_int_eq(oci_layer_compression("application/x-bzip2", &c, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "application/x-bzip2");
	ck_assert_int_eq(oci_layer_compression(NULL, &c, &err), -EPROTONOSUPPORT);
}
END_TEST

/* ---- digests ---- */

START_TEST(digest_parse)
{
	struct cell_error err = {0};
	struct oci_digest d, e;
	ck_assert_int_eq(oci_digest_parse(DA, &d, &err), 0);
	ck_assert_int_eq(d.alg, OCI_DIGEST_SHA256);
	ck_assert_str_eq(d.text, DA);
	ck_assert_str_eq(oci_digest_hex(&d), HEX64);
	ck_assert_int_eq(oci_digest_parse("sha512:" HEX64 HEX64, &e, &err), 0);
	ck_assert_int_eq(e.alg, OCI_DIGEST_SHA512);
	ck_assert(!oci_digest_equal(&d, &e));
	struct oci_digest d2;
	ck_assert_int_eq(oci_digest_parse(DA, &d2, &err), 0);
	ck_assert(oci_digest_equal(&d, &d2));

	static const char *const bad[] = {
	    "",
	    "sha256:",
	    "sha256:" HEX64 "0",       /* too long */
	    "sha256:0123456789abcdef", /* too short */
	    "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", /* upper */
	    "sha256:0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef",
	    "SHA256:" HEX64,
	    "md5:0123456789abcdef0123456789abcdef",
	    HEX64,
	    "sha512:" HEX64, /* sha512 needs 128 */
	    "sha256:" HEX64 "\n",
	    "sha256:../../etc/passwd",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(oci_digest_parse(bad[i], &d, &err) == -EINVAL, "'%s' accepted",
			      bad[i]);
		ck_err_has(err, "digest");
	}
	ck_assert_int_eq(oci_digest_parse(NULL, &d, &err), -EINVAL);
}
END_TEST

START_TEST(digest_compute_and_verify)
{
	struct cell_error err = {0};
	struct oci_digest d, e, want;
	ck_assert_int_eq(oci_digest_of("", 0, OCI_DIGEST_SHA256, &d), 0);
	ck_assert_str_eq(d.text,
			 "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	ck_assert_int_eq(oci_digest_of("abc", 3, OCI_DIGEST_SHA512, &d), 0);
	ck_assert_str_eq(d.text, "sha512:"
				 "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2"
				 "192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");

	const char text[] = "the quick brown fox jumps over the lazy dog";
	ck_assert_int_eq(oci_digest_of(text, strlen(text), OCI_DIGEST_SHA256, &want), 0);
	struct oci_digester s;
	ck_assert_int_eq(oci_digest_init(&s, OCI_DIGEST_SHA256), 0);
	for (size_t i = 0; i < strlen(text); i += 5)
		ck_assert_int_eq(
		    oci_digest_update(&s, text + i, strlen(text) - i < 5 ? strlen(text) - i : 5),
		    0);
	ck_assert_int_eq(oci_digest_final(&s, &e), 0);
	ck_assert(oci_digest_equal(&e, &want));

	ck_assert_int_eq(oci_digest_init(&s, OCI_DIGEST_SHA256), 0);
	ck_assert_int_eq(oci_digest_update(&s, text, strlen(text)), 0);
	ck_assert_int_eq(oci_digest_verify(&s, &want, &err), 0);

	/* one byte different: the message names both */
	ck_assert_int_eq(oci_digest_init(&s, OCI_DIGEST_SHA256), 0);
	ck_assert_int_eq(oci_digest_update(&s, text, strlen(text) - 1), 0);
	ck_assert_int_eq(oci_digest_verify(&s, &want, &err), -EBADMSG);
	char expect[256];
	snprintf(expect, sizeof(expect), "digest mismatch: expected %s, got sha256:", want.text);
	ck_err_has(err, expect);
	/* a verifier of another algorithm never matches */
	ck_assert_int_eq(oci_digest_init(&s, OCI_DIGEST_SHA512), 0);
	ck_assert_int_eq(oci_digest_update(&s, text, strlen(text)), 0);
	ck_assert_int_eq(oci_digest_verify(&s, &want, &err), -EBADMSG);
	/* abandoned and used after final */
	ck_assert_int_eq(oci_digest_init(&s, OCI_DIGEST_SHA256), 0);
	oci_digest_abandon(&s);
	ck_assert_int_eq(oci_digest_update(&s, "x", 1), -EINVAL);
	ck_assert_int_eq(oci_digest_init(&s, 0), -EINVAL);
}
END_TEST

/* ---- platforms ---- */

START_TEST(platforms)
{
	struct cell_error err = {0};
	struct oci_platform p;
	char buf[64];
	static const struct {
		const char *machine, *want;
	} cases[] = {
	    {"x86_64", "linux/amd64"},	{"aarch64", "linux/arm64"},   {"armv7l", "linux/arm/v7"},
	    {"armv6l", "linux/arm/v6"}, {"i686", "linux/386"},	      {"ppc64le", "linux/ppc64le"},
	    {"s390x", "linux/s390x"},	{"riscv64", "linux/riscv64"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(oci_platform_of_machine(cases[i].machine, &p, &err), 0);
		oci_platform_format(&p, buf, sizeof(buf));
		ck_assert_str_eq(buf, cases[i].want);
	}
	ck_assert_int_eq(oci_platform_of_machine("pdp11", &p, &err), -ENOTSUP);
	ck_err_has(err, "pdp11");
	ck_assert_int_eq(oci_platform_host(&p, &err), 0);
	ck_assert_str_eq(p.os, "linux");

	struct oci_platform arm64 = {"linux", "arm64", ""}, arm64v8 = {"linux", "arm64", "v8"};
	struct oci_platform v6 = {"linux", "arm", "v6"}, v7 = {"linux", "arm", "v7"};
	struct oci_platform amd64 = {"linux", "amd64", ""}, win = {"windows", "amd64", ""};
	ck_assert(oci_platform_match(&arm64v8, &arm64));
	ck_assert(oci_platform_match(&arm64, &arm64v8));
	ck_assert(oci_platform_match(&v6, &v7));
	ck_assert(!oci_platform_match(&v7, &v6));
	ck_assert(!oci_platform_match(&amd64, &arm64));
	ck_assert(!oci_platform_match(&win, &amd64));
}
END_TEST

/* ---- indexes ---- */

#define ENTRY(media, digest, plat)                                                                 \
	"{\"mediaType\":\"" media "\",\"digest\":\"" digest "\",\"size\":527" plat "}"
#define OCI_MAN	       "application/vnd.oci.image.manifest.v1+json"
#define DOCKER_MAN     "application/vnd.docker.distribution.manifest.v2+json"
#define PLAT(os, arch) ",\"platform\":{\"os\":\"" os "\",\"architecture\":\"" arch "\"}"
#define PLATV(os, arch, v)                                                                         \
	",\"platform\":{\"os\":\"" os "\",\"architecture\":\"" arch "\",\"variant\":\"" v "\"}"

static const char index_doc[] =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
    "\"manifests\":[" ENTRY(OCI_MAN, DA, PLAT("linux", "amd64")) "," ENTRY(
	OCI_MAN, DB,
	PLAT("linux", "arm64")) "," ENTRY(OCI_MAN, DC,
					  PLATV("linux", "arm",
						"v7")) "," ENTRY(OCI_MAN, DC,
								 PLAT("unknown", "unknown")) "]}";

START_TEST(index_choice)
{
	struct cell_error err = {0};
	struct oci_descriptor d;
	struct oci_platform amd64 = {"linux", "amd64", ""}, arm64 = {"linux", "arm64", "v8"};
	struct oci_platform v7 = {"linux", "arm", "v7"}, s390 = {"linux", "s390x", ""};
	ck_assert_int_eq(
	    oci_index_choose(index_doc, strlen(index_doc), NULL, &amd64, NULL, &d, &err), 0);
	ck_assert_str_eq(d.digest.text, DA);
	ck_assert_int_eq(d.size, 527);
	ck_assert_int_eq(d.media, OCI_MEDIA_OCI_MANIFEST);
	ck_assert_int_eq(
	    oci_index_choose(index_doc, strlen(index_doc), NULL, &arm64, NULL, &d, &err), 0);
	ck_assert_str_eq(d.digest.text, DB);
	ck_assert_int_eq(oci_index_choose(index_doc, strlen(index_doc), NULL, &v7, NULL, &d, &err),
			 0);
	ck_assert_str_eq(d.digest.text, DC);
	ck_assert_int_eq(
	    oci_index_choose(index_doc, strlen(index_doc), NULL, &s390, NULL, &d, &err), -ENOENT);
	ck_assert_str_eq(err.msg, "no image for linux/s390x in the index; it offers: linux/amd64, "
				  "linux/arm64, linux/arm/v7, unknown/unknown");

	/* a Docker manifest list known only by its Content-Type and its shape */
	static const char list[] = "{\"schemaVersion\":2,\"manifests\":[" ENTRY(
	    DOCKER_MAN, DB, PLAT("linux", "arm64")) "]}";
	ck_assert_int_eq(
	    oci_index_choose(list, strlen(list),
			     "application/vnd.docker.distribution.manifest.list.v2+json", &amd64,
			     NULL, &d, &err),
	    -ENOENT);
	ck_assert_str_eq(err.msg, "no image for linux/amd64 in the index; it offers: linux/arm64");
	ck_assert_int_eq(oci_index_choose(list, strlen(list), NULL, &arm64, NULL, &d, &err), 0);

	/* a bad entry is named */
	static const char bad[] = "{\"schemaVersion\":2,\"manifests\":[" ENTRY(
	    OCI_MAN, DA, PLAT("linux", "amd64")) ",{\"mediaType\":\"" OCI_MAN
						 "\",\"digest\":\"sha256:zz\",\"size\":1}]}";
	ck_assert_int_eq(oci_index_choose(bad, strlen(bad), NULL, &amd64, NULL, &d, &err), -EINVAL);
	ck_err_has(err, "manifests[1]");
	static const char negsize[] =
	    "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MAN "\",\"digest\":\"" DA
	    "\",\"size\":-1}]}";
	ck_assert_int_eq(oci_index_choose(negsize, strlen(negsize), NULL, &amd64, NULL, &d, &err),
			 -EINVAL);
	ck_err_has(err, "'size'");
	/* a manifest is no index */
	static const char man[] = "{\"schemaVersion\":2,\"config\":" ENTRY(
	    "application/vnd.oci.image.config.v1+json", DA, "") ",\"layers\":[]}";
	ck_assert_int_eq(oci_index_choose(man, strlen(man), NULL, &amd64, NULL, &d, &err), -EINVAL);
	ck_err_has(err, "not an index");

	/* more entries than allowed */
	char *big = malloc(300 * 300);
	size_t n = (size_t)sprintf(big, "{\"schemaVersion\":2,\"manifests\":[");
	for (int i = 0; i < OCI_INDEX_ENTRIES_MAX + 1; i++)
		n += (size_t)sprintf(big + n, "%s" ENTRY(OCI_MAN, DA, PLAT("linux", "amd64")),
				     i ? "," : "");
	n += (size_t)sprintf(big + n, "]}");
	ck_assert_int_eq(oci_index_choose(big, n, NULL, &amd64, NULL, &d, &err), -E2BIG);
	free(big);
}
END_TEST

/* ---- manifests ---- */

#define CONFIG_DESC(media) ENTRY(media, DA, "")
#define OCI_CONFIG	   "application/vnd.oci.image.config.v1+json"
#define OCI_GZ		   "application/vnd.oci.image.layer.v1.tar+gzip"
#define OCI_ZST		   "application/vnd.oci.image.layer.v1.tar+zstd"

static const char oci_manifest[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MAN
    "\",\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[" ENTRY(OCI_GZ, DB, "") "," ENTRY(
	OCI_ZST, DC, "") "],\"annotations\":{\"a\":\"b\"}}";

START_TEST(manifest_valid)
{
	struct cell_error err = {0};
	struct oci_manifest m;
	ck_assert_int_eq(
	    oci_manifest_parse(oci_manifest, strlen(oci_manifest), NULL, NULL, &m, &err), 0);
	ck_assert_int_eq(m.media, OCI_MEDIA_OCI_MANIFEST);
	ck_assert_int_eq(m.config.media, OCI_MEDIA_OCI_CONFIG);
	ck_assert_str_eq(m.config.digest.text, DA);
	ck_assert_uint_eq(m.n_layers, 2);
	ck_assert_str_eq(m.layers[0].digest.text, DB);
	ck_assert_int_eq(m.layers[1].media, OCI_MEDIA_OCI_LAYER_ZSTD);
	oci_manifest_free(&m);

	/* Docker schema 2, its type from the document; then one without a mediaType, typed
	 * by its Content-Type, and by its shape alone */
	static const char docker[] =
	    "{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_MAN "\",\"config\":" CONFIG_DESC(
		"application/"
		"vnd.docker.container.image.v1+"
		"json") ",\"layers\":[" ENTRY("application/vnd.docker.image.rootfs.diff.tar.gzip",
					      DB, "") "]}";
	ck_assert_int_eq(oci_manifest_parse(docker, strlen(docker), DOCKER_MAN, NULL, &m, &err), 0);
	ck_assert_int_eq(m.media, OCI_MEDIA_DOCKER_MANIFEST);
	ck_assert_int_eq(m.config.media, OCI_MEDIA_DOCKER_CONFIG);
	oci_manifest_free(&m);
	static const char bare[] = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(
	    OCI_CONFIG) ",\"layers\":[" ENTRY(OCI_GZ, DB, "") "]}";
	ck_assert_int_eq(oci_manifest_parse(bare, strlen(bare), DOCKER_MAN, NULL, &m, &err), 0);
	ck_assert_int_eq(m.media, OCI_MEDIA_DOCKER_MANIFEST);
	oci_manifest_free(&m);
	ck_assert_int_eq(
	    oci_manifest_parse(bare, strlen(bare), "application/octet-stream", NULL, &m, &err), 0);
	ck_assert_int_eq(m.media, OCI_MEDIA_OCI_MANIFEST);
	oci_manifest_free(&m);
	enum oci_media media;
	ck_assert_int_eq(oci_doc_media(index_doc, strlen(index_doc), NULL, NULL, &media, &err), 0);
	ck_assert_int_eq(media, OCI_MEDIA_OCI_INDEX);
	ck_assert_int_eq(oci_doc_media(bare, strlen(bare), NULL, NULL, &media, &err), 0);
	ck_assert_int_eq(media, OCI_MEDIA_OCI_MANIFEST);
}
END_TEST

static int parse_manifest(const char *doc, const char *ct, const struct oci_limits *lim,
			  struct cell_error *err)
{
	struct oci_manifest m;
	int r = oci_manifest_parse(doc, strlen(doc), ct, lim, &m, err);
	if (r >= 0)
		oci_manifest_free(&m);
	return r;
}

START_TEST(manifest_hostile)
{
	struct cell_error err = {0};
	/* the document and its Content-Type disagree */
	ck_assert_int_eq(parse_manifest(oci_manifest, DOCKER_MAN, NULL, &err), -EPROTO);
	ck_err_has(err, "disagrees");
	/* schema 1, by mediaType, by Content-Type, by schemaVersion */
	static const char s1[] = "{\"schemaVersion\":1,\"name\":\"x\",\"fsLayers\":[]}";
	ck_assert_int_eq(parse_manifest(s1, NULL, NULL, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "schema 1");
	ck_assert_int_eq(parse_manifest(s1,
					"application/vnd.docker.distribution.manifest.v1+prettyjws",
					NULL, &err),
			 -EPROTONOSUPPORT);
	ck_err_has(err, "schema 1");
	static const char s1m[] =
	    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest."
	    "v1+json\"}";
	ck_assert_int_eq(parse_manifest(s1m, NULL, NULL, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "schema 1");
	/* a foreign layer, named by index and digest */
	static const char foreign[] =
	    "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[" ENTRY(
		OCI_GZ, DB,
		"") "," ENTRY("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", DC,
			      "") "]}";
	ck_assert_int_eq(parse_manifest(foreign, NULL, NULL, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "layers[1] (" DC ") is a non-distributable (foreign) layer");
	static const char weird[] = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(
	    OCI_CONFIG) ",\"layers\":[" ENTRY("application/x-tar+bzip2", DB, "") "]}";
	ck_assert_int_eq(parse_manifest(weird, NULL, NULL, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "layers[0]");
	/* an artifact, not an image */
	static const char helm[] = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(
	    "application/vnd.cncf.helm.config.v1+json") ",\"layers\":[]}";
	ck_assert_int_eq(parse_manifest(helm, NULL, NULL, &err), -EPROTONOSUPPORT);
	ck_err_has(err, "not an image config");
	/* shapes and types */
	ck_assert_int_eq(
	    parse_manifest("<html><body>502 Bad Gateway</body></html>", "text/html", NULL, &err),
	    -EINVAL);
	ck_err_has(err, "not valid JSON");
	ck_assert_int_eq(parse_manifest("[1,2]", NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "not a JSON object");
	ck_assert_int_eq(parse_manifest("{\"schemaVersion\":2}", NULL, NULL, &err),
			 -EPROTONOSUPPORT);
	ck_err_has(err, "neither an index");
	ck_assert_int_eq(parse_manifest(index_doc, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "not a manifest");
	static const char sv3[] =
	    "{\"schemaVersion\":3,\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[]}";
	ck_assert_int_eq(parse_manifest(sv3, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "schemaVersion");
	static const char both[] =
	    "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MAN
	    "\",\"manifests\":[],\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[]}";
	ck_assert_int_eq(parse_manifest(both, NULL, NULL, &err), -EPROTO);
	/* duplicate keys: which config would a second reader see? */
	static const char dup[] = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(
	    OCI_CONFIG) ",\"layers\":[],\"config\":" CONFIG_DESC(OCI_CONFIG) "}";
	ck_assert_int_eq(parse_manifest(dup, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "duplicate");
	static const char size_real[] =
	    "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" OCI_CONFIG "\",\"digest\":\"" DA
	    "\",\"size\":1.5},\"layers\":[]}";
	ck_assert_int_eq(parse_manifest(size_real, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "config: 'size'");
	static const char no_digest[] =
	    "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" OCI_CONFIG
	    "\",\"size\":1},\"layers\":[]}";
	ck_assert_int_eq(parse_manifest(no_digest, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "'digest'");

	/* bounds: size, nesting (counted before parsing), layers */
	struct oci_limits small = {.max_size = 100};
	ck_assert_int_eq(parse_manifest(oci_manifest, NULL, &small, &err), -EFBIG);
	ck_err_has(err, "more than the 100 allowed");
	char deep[4096];
	size_t n = (size_t)sprintf(deep, "{\"schemaVersion\":2,\"x\":");
	for (int i = 0; i < 1000; i++)
		deep[n++] = '[';
	for (int i = 0; i < 1000; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	ck_assert_int_eq(parse_manifest(deep, NULL, NULL, &err), -EINVAL);
	ck_err_has(err, "nests deeper than 32");
	/* brackets inside strings do not count */
	char flat[2048];
	n = (size_t)sprintf(flat, "{\"schemaVersion\":2,\"x\":\"");
	for (int i = 0; i < 500; i++)
		flat[n++] = '[';
	n += (size_t)sprintf(flat + n,
			     "\\\"\",\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[]}");
	ck_assert_int_eq(parse_manifest(flat, NULL, NULL, &err), 0);

	char *many = malloc(200 * 200);
	n = (size_t)sprintf(
	    many, "{\"schemaVersion\":2,\"config\":" CONFIG_DESC(OCI_CONFIG) ",\"layers\":[");
	for (int i = 0; i < OCI_LAYERS_MAX + 1; i++)
		n += (size_t)sprintf(many + n, "%s" ENTRY(OCI_GZ, DB, ""), i ? "," : "");
	sprintf(many + n, "]}");
	ck_assert_int_eq(parse_manifest(many, NULL, NULL, &err), -E2BIG);
	ck_err_has(err, "129 layers, more than the 128 allowed");
	struct oci_limits few = {.max_layers = 1};
	ck_assert_int_eq(parse_manifest(oci_manifest, NULL, &few, &err), -E2BIG);
	free(many);
}
END_TEST

/* ---- image configs ---- */

static const char config_doc[] =
    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
    "\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\",\"LANG=C.UTF-8\"],"
    "\"WorkingDir\":\"/home/sandbox\",\"User\":\"sandbox\","
    "\"Entrypoint\":[\"/home/sandbox/entrypoint.sh\"],\"Cmd\":[\"serve\",\"--port\",\"8080\"],"
    "\"ExposedPorts\":{\"8080/tcp\":{},\"53/udp\":{}},"
    "\"Labels\":{\"org.opencontainers.image.title\":\"lab\"},\"StopSignal\":\"SIGTERM\"},"
    "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" DA "\",\"" DB "\"]},"
    "\"history\":[{\"created_by\":\"x\"}]}";

START_TEST(config_valid)
{
	struct cell_error err = {0};
	struct oci_config c;
	ck_assert_int_eq(oci_config_parse(config_doc, strlen(config_doc), NULL, &c, &err), 0);
	ck_assert_uint_eq(c.n_env, 2);
	ck_assert_str_eq(c.env[1], "LANG=C.UTF-8");
	ck_assert_ptr_null(c.env[2]);
	ck_assert_str_eq(c.workdir, "/home/sandbox");
	ck_assert_str_eq(c.user, "sandbox");
	ck_assert(c.has_entrypoint && c.n_entrypoint == 1);
	ck_assert(c.has_cmd && c.n_cmd == 3);
	ck_assert_str_eq(c.cmd[2], "8080");
	ck_assert_uint_eq(c.n_exposed_ports, 2);
	ck_assert_str_eq(c.exposed_ports[0], "8080/tcp");
	ck_assert_uint_eq(c.n_labels, 1);
	ck_assert_str_eq(c.label_values[0], "lab");
	ck_assert_str_eq(c.stop_signal, "SIGTERM");
	ck_assert_str_eq(c.platform.arch, "amd64");
	ck_assert_uint_eq(c.n_diff_ids, 2);
	ck_assert_str_eq(c.diff_ids[1].text, DB);

	struct oci_manifest m;
	ck_assert_int_eq(
	    oci_manifest_parse(oci_manifest, strlen(oci_manifest), NULL, NULL, &m, &err), 0);
	ck_assert_int_eq(oci_config_check_layers(&c, &m, &err), 0);
	m.n_layers = 1;
	ck_assert_int_eq(oci_config_check_layers(&c, &m, &err), -EBADMSG);
	ck_err_has(err, "rootfs.diff_ids lists 2 layers, the manifest 1");
	m.n_layers = 2;
	oci_manifest_free(&m);

	struct oci_platform amd64 = {"linux", "amd64", ""}, arm64 = {"linux", "arm64", ""};
	ck_assert_int_eq(oci_config_check_platform(&c, &amd64, &err), 0);
	ck_assert_int_eq(oci_config_check_platform(&c, &arm64, &err), -ENOEXEC);
	ck_assert_str_eq(err.msg, "the image is for linux/amd64; this host runs linux/arm64");
	oci_config_free(&c);

	/* a minimal one: no config at all, null Cmd, no layers */
	static const char minimal[] = "{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":"
				      "\"v8\",\"config\":{\"Cmd\":null},"
				      "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
	ck_assert_int_eq(oci_config_parse(minimal, strlen(minimal), NULL, &c, &err), 0);
	ck_assert(!c.has_cmd && !c.has_entrypoint);
	ck_assert_ptr_null(c.workdir);
	ck_assert_int_eq(oci_config_check_platform(&c, &arm64, &err), 0);
	oci_config_free(&c);
}
END_TEST

static int parse_config(const char *doc, struct cell_error *err)
{
	struct oci_config c;
	int r = oci_config_parse(doc, strlen(doc), NULL, &c, err);
	if (r >= 0)
		oci_config_free(&c);
	return r;
}

#define CFG(inner, rootfs)                                                                         \
	"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{" inner "},\"rootfs\":" rootfs "}"
#define ROOTFS "{\"type\":\"layers\",\"diff_ids\":[\"" DA "\"]}"

START_TEST(config_hostile)
{
	struct cell_error err = {0};
	ck_assert_int_eq(parse_config(CFG("\"Env\":[\"NOEQUALS\"]", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "config.Env[0]");
	ck_assert_int_eq(parse_config(CFG("\"Env\":[\"=x\"]", ROOTFS), &err), -EINVAL);
	ck_assert_int_eq(parse_config(CFG("\"Env\":\"PATH=/bin\"", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "config.Env is not an array");
	ck_assert_int_eq(parse_config(CFG("\"Cmd\":[\"a\",1]", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "config.Cmd[1]");
	ck_assert_int_eq(parse_config(CFG("\"User\":0", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "config.User");
	ck_assert_int_eq(parse_config(CFG("\"Labels\":{\"a\":1}", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "config.Labels['a']");
	ck_assert_int_eq(parse_config(CFG("\"ExposedPorts\":[\"80/tcp\"]", ROOTFS), &err), -EINVAL);
	ck_err_has(err, "ExposedPorts");
	ck_assert_int_eq(parse_config(CFG("\"Env\":[\"A=\\u0000\"]", ROOTFS), &err), -EINVAL);
	ck_assert_int_eq(parse_config(CFG("", "{\"type\":\"layers\"}"), &err), -EINVAL);
	ck_err_has(err, "rootfs.diff_ids");
	ck_assert_int_eq(parse_config(CFG("", "{\"type\":\"fs\",\"diff_ids\":[]}"), &err), -EINVAL);
	ck_err_has(err, "rootfs.type");
	ck_assert_int_eq(
	    parse_config(CFG("", "{\"type\":\"layers\",\"diff_ids\":[\"sha256:x\"]}"), &err),
	    -EINVAL);
	ck_err_has(err, "rootfs.diff_ids[0]");
	ck_assert_int_eq(parse_config("{\"os\":\"linux\",\"rootfs\":" ROOTFS "}", &err), -EINVAL);
	ck_err_has(err, "'architecture' missing");
	ck_assert_int_eq(parse_config(CFG("\"User\":\"a\",\"User\":\"root\"", ROOTFS), &err),
			 -EINVAL);
	ck_err_has(err, "duplicate");
}
END_TEST

/* ---- references ---- */

START_TEST(references)
{
	static const struct {
		const char *in, *out;
		bool short_name;
	} cases[] = {
	    {"busybox", "docker.io/library/busybox:latest", true},
	    {"busybox:1.36", "docker.io/library/busybox:1.36", true},
	    {"library/busybox", "docker.io/library/busybox:latest", true},
	    {"org/app", "docker.io/org/app:latest", true},
	    {"docker.io/busybox", "docker.io/library/busybox:latest", false},
	    {"index.docker.io/busybox", "docker.io/library/busybox:latest", false},
	    {"index.docker.io/org/app:v1", "docker.io/org/app:v1", false},
	    {"ghcr.io/org/agent:1.4", "ghcr.io/org/agent:1.4", false},
	    {"quay.io/org/sub/app", "quay.io/org/sub/app:latest", false},
	    {"localhost/app", "localhost/app:latest", false},
	    {"localhost:5000/app", "localhost:5000/app:latest", false},
	    {"127.0.0.1:5000/x:1", "127.0.0.1:5000/x:1", false},
	    {"[::1]:5000/x", "[::1]:5000/x:latest", false},
	    {"[fe80::1]/x", "[fe80::1]/x:latest", false},
	    {"python:3.12-slim", "docker.io/library/python:3.12-slim", true},
	    {"org/a.b-c__d/e---f:Tag_1.x-y", "docker.io/org/a.b-c__d/e---f:Tag_1.x-y", true},
	    {"busybox@" DA, "docker.io/library/busybox@" DA, true},
	    {"busybox:1@" DA, "docker.io/library/busybox:1@" DA, true},
	    {"localhost:5000", "docker.io/library/localhost:5000", true}, /* as Docker reads it */
	};
	struct cell_error err = {0};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct oci_ref r;
		char buf[600];
		ck_assert_msg(oci_ref_parse(cases[i].in, &r, &err) == 0, "'%s': %s", cases[i].in,
			      err.msg);
		ck_assert_int_ge(oci_ref_format(&r, buf, sizeof(buf)), 0);
		ck_assert_msg(!strcmp(buf, cases[i].out), "'%s' formatted '%s', not '%s'",
			      cases[i].in, buf, cases[i].out);
		ck_assert_msg(r.short_name == cases[i].short_name, "'%s' short_name %d",
			      cases[i].in, r.short_name);
	}
	struct oci_ref r, q;
	ck_assert_int_eq(oci_ref_parse("busybox", &r, &err), 0);
	ck_assert_str_eq(r.short_path, "busybox");
	ck_assert_str_eq(oci_registry_host(r.registry), "registry-1.docker.io");
	ck_assert_int_eq(oci_ref_qualify(&r, "quay.io", &q, &err), 0);
	char buf[600];
	oci_ref_format(&q, buf, sizeof(buf));
	ck_assert_str_eq(buf, "quay.io/busybox:latest");
	ck_assert_int_eq(oci_ref_qualify(&r, "docker.io", &q, &err), 0);
	oci_ref_format(&q, buf, sizeof(buf));
	ck_assert_str_eq(buf, "docker.io/library/busybox:latest");
	ck_assert_int_eq(oci_ref_qualify(&q, "quay.io", &r, &err), -EINVAL);
	ck_assert_str_eq(oci_registry_host("ghcr.io"), "ghcr.io");
	ck_assert_int_eq(oci_ref_format(&q, buf, 10), -ENAMETOOLONG);
}
END_TEST

START_TEST(references_hostile)
{
	static const struct {
		const char *in, *says;
	} bad[] = {
	    {"", "empty"},
	    {"Busybox", "lowercase"},
	    {"docker.io/Library/x", "lowercase"},
	    {"x:", "tag"},
	    {"x:-a", "tag"},
	    {"x:a/b", "port"}, /* a ':' before the first '/' makes a registry */
	    {"x@sha256:abc", "digest"},
	    {"x@", "digest"},
	    {"a//b", "component"},
	    {"a/", "component"},
	    {"/a", "component"},
	    {"-a", "component"},
	    {"a-", "component"},
	    {"a..b", "component"},
	    {"a___b", "component"},
	    {"a b", "component"},
	    {"reg.io/../etc", "component"},
	    {"[::1/x", "']'"},
	    {"[zz]:5000/x", "IPv6"},
	    {"reg.io:70000/x", "port"},
	    {"reg.io:/x", "port"},
	    {"reg.io:abc/x", "port"},
	    {"-reg.io/x", "host"},
	    {"reg..io/x", "host"},
	    {"re_g.io/x", "host"},
	    {"reg.io./x", "'.'"},
	};
	struct cell_error err = {0};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct oci_ref r;
		ck_assert_msg(oci_ref_parse(bad[i].in, &r, &err) < 0, "'%s' accepted", bad[i].in);
		ck_assert_msg(strstr(err.msg, bad[i].says), "'%s': '%s' lacks '%s'", bad[i].in,
			      err.msg, bad[i].says);
	}
	char longtag[200] = "x:";
	memset(longtag + 2, 'a', OCI_TAG_MAX + 1);
	struct oci_ref r;
	ck_assert_int_eq(oci_ref_parse(longtag, &r, &err), -EINVAL);
	ck_err_has(err, "tag");
	longtag[2 + OCI_TAG_MAX] = '\0';
	ck_assert_int_eq(oci_ref_parse(longtag, &r, &err), 0);
	char longname[600];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(oci_ref_parse(longname, &r, &err), -ENAMETOOLONG);
	longname[300] = '\0';
	ck_assert_int_eq(oci_ref_parse(longname, &r, &err), -ENAMETOOLONG);
}
END_TEST

/* ---- WWW-Authenticate ---- */

START_TEST(www_authenticate)
{
	struct cell_error err = {0};
	struct oci_challenge c[OCI_CHALLENGES_MAX];
	int n = oci_www_auth_parse(
	    "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
	    "scope=\"repository:library/busybox:pull,push\"",
	    c, OCI_CHALLENGES_MAX, &err);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(c[0].scheme, OCI_AUTH_BEARER);
	ck_assert_str_eq(c[0].realm, "https://auth.docker.io/token");
	ck_assert_str_eq(c[0].service, "registry.docker.io");
	ck_assert_str_eq(c[0].scope, "repository:library/busybox:pull,push");

	n = oci_www_auth_parse("Negotiate abc+/==, basic REALM=\"a \\\"quoted\\\" \\\\ realm\" , "
			       "Bearer realm=\"http://127.0.0.1:1/t\", error=insufficient_scope, "
			       "unknown=\"x,y\"",
			       c, OCI_CHALLENGES_MAX, &err);
	ck_assert_msg(n == 3, "%d %s", n, err.msg);
	ck_assert_int_eq(c[0].scheme, OCI_AUTH_OTHER);
	ck_assert_str_eq(c[0].scheme_name, "Negotiate");
	ck_assert_int_eq(c[1].scheme, OCI_AUTH_BASIC);
	ck_assert_str_eq(c[1].realm, "a \"quoted\" \\ realm");
	ck_assert_int_eq(c[2].scheme, OCI_AUTH_BEARER);
	ck_assert_str_eq(c[2].realm, "http://127.0.0.1:1/t");
	ck_assert_str_eq(c[2].error, "insufficient_scope");
	ck_assert_int_eq(oci_www_auth_parse("Basic", c, OCI_CHALLENGES_MAX, &err), 1);
	ck_assert_str_eq(c[0].realm, "");

	static const struct {
		const char *in, *says;
	} bad[] = {
	    {"", "no challenge"},
	    {" , ,", "no challenge"},
	    {"Bearer service=\"x\"", "without a realm"},
	    {"Bearer realm=\"unterminated", "unterminated"},
	    {"realm=\"x\"", "before any scheme"},
	    {"Bearer realm=\"a\", service=", "no value"},
	    {"Bearer realm=\"a\" junk", "unexpected"},
	    {"Bearer realm=http://x/t", "unexpected ':'"}, /* a URL is no token: quote it */
	    {"Bearer realm=\"a\", realm=\"b\"", "twice"},
	    {"Bearer realm=\"a\x01\"", "control"},
	    {"@Bearer", "unexpected '@'"},
	    {"A, B, C, D, E, F, G, H, I", "more than 8 challenges"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(oci_www_auth_parse(bad[i].in, c, OCI_CHALLENGES_MAX, &err) < 0,
			      "'%s' accepted", bad[i].in);
		ck_assert_msg(strstr(err.msg, bad[i].says), "'%s': '%s' lacks '%s'", bad[i].in,
			      err.msg, bad[i].says);
	}
	char *huge = malloc(OCI_AUTH_HEADER_MAX + 100);
	strcpy(huge, "Bearer realm=\"");
	memset(huge + 14, 'a', OCI_AUTH_HEADER_MAX);
	strcpy(huge + 14 + OCI_AUTH_HEADER_MAX, "\"");
	ck_assert_int_eq(oci_www_auth_parse(huge, c, OCI_CHALLENGES_MAX, &err), -EINVAL);
	ck_err_has(err, "longer than");
	huge[14 + 2000] = '"';
	huge[14 + 2001] = '\0';
	ck_assert_int_eq(oci_www_auth_parse(huge, c, OCI_CHALLENGES_MAX, &err), -EINVAL);
	ck_err_has(err, "realm longer than 1023");
	free(huge);
	char params[2048] = "Bearer realm=x";
	for (int i = 0; i < 40; i++)
		sprintf(params + strlen(params), ",p%d=v", i);
	ck_assert_int_eq(oci_www_auth_parse(params, c, OCI_CHALLENGES_MAX, &err), -E2BIG);
}
END_TEST

/* ---- registries.conf ---- */

static const char regconf_main[] =
    "# a comment\n"
    "unqualified-search-registries = [\"registry.fedoraproject.org\", 'quay.io',\n"
    "    \"docker.io\", # trailing comma and comments inside\n"
    "]\n"
    "short-name-mode = \"enforcing\"\n"
    "\n"
    "[[registry]]\n"
    "prefix = \"docker.io\"\n"
    "location = \"docker.io\"\n"
    "[[registry.mirror]]\n"
    "location = \"mirror.local:5000/hub\"\n"
    "insecure = true\n"
    "[[registry.mirror]]\n"
    "location = \"mirror2.local\"\n"
    "\n"
    "[[registry]]\n"
    "location = \"127.0.0.1:5000\"  # prefix defaults to the location\n"
    "insecure = true\n"
    "\n"
    "[[registry]]\n"
    "prefix = \"example.com/foo\"\n"
    "location = \"internal.example.com/bar\"\n"
    "\n"
    "[[registry]]\n"
    "prefix = \"*.evil.test\"\n"
    "blocked = true\n"
    "\n"
    "[[registry]]\n"
    "prefix = \"*.example.com\"\n"
    "insecure = true\n"
    "\n"
    "[aliases]\n"
    "\"fedora\" = \"registry.fedoraproject.org/fedora\"\n";

static struct oci_regconf *regconf_of(const char *text, struct cell_error *err, int *rc)
{
	struct oci_regconf *c = calloc(1, sizeof(*c));
	*rc = oci_regconf_parse(c, text, strlen(text), "test.conf", err);
	return c;
}

static int endpoints_of(const struct oci_regconf *c, const char *ref,
			struct oci_endpoint out[OCI_ENDPOINTS_MAX], struct cell_error *err)
{
	struct oci_ref r;
	ck_assert_int_eq(oci_ref_parse(ref, &r, err), 0);
	return oci_regconf_endpoints(c, &r, out, err);
}

START_TEST(regconf_v2)
{
	struct cell_error err = {0};
	int rc;
	struct oci_regconf *c = regconf_of(regconf_main, &err, &rc);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert(c->has_search);
	ck_assert_uint_eq(c->n_search, 3);
	ck_assert_str_eq(c->search[1], "quay.io");
	ck_assert_uint_eq(c->n_regs, 5);
	ck_assert_str_eq(c->regs[1].prefix, "127.0.0.1:5000");

	struct oci_endpoint e[OCI_ENDPOINTS_MAX];
	/* mirrors first, the path after the prefix kept */
	ck_assert_int_eq(endpoints_of(c, "busybox", e, &err), 3);
	ck_assert_str_eq(e[0].registry, "mirror.local:5000");
	ck_assert_str_eq(e[0].path, "hub/library/busybox");
	ck_assert(e[0].insecure && e[0].mirror);
	ck_assert_str_eq(e[1].registry, "mirror2.local");
	ck_assert_str_eq(e[1].path, "library/busybox");
	ck_assert(!e[1].insecure);
	ck_assert_str_eq(e[2].registry, "docker.io");
	ck_assert(!e[2].mirror && !e[2].insecure);
	ck_assert_int_eq(endpoints_of(c, "127.0.0.1:5000/lab/x:1", e, &err), 1);
	ck_assert(e[0].insecure);
	ck_assert_str_eq(e[0].path, "lab/x");
	/* a prefix matches whole components */
	ck_assert_int_eq(endpoints_of(c, "example.com/foo/app", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "internal.example.com");
	ck_assert_str_eq(e[0].path, "bar/app");
	ck_assert_int_eq(endpoints_of(c, "example.com/foobar/app", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "example.com");
	ck_assert_str_eq(e[0].path, "foobar/app");
	/* wildcards: any host below the domain, the reference unchanged */
	ck_assert_int_eq(endpoints_of(c, "a.b.example.com:443/app", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "a.b.example.com:443");
	ck_assert(e[0].insecure);
	ck_assert_int_eq(endpoints_of(c, "x.evil.test/app", e, &err), -EACCES);
	ck_err_has(err, "blocked");
	ck_assert_int_eq(endpoints_of(c, "evil.test/app", e, &err), 1);
	/* nothing matches: the reference's own registry */
	ck_assert_int_eq(endpoints_of(c, "ghcr.io/org/x", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "ghcr.io");
	ck_assert_str_eq(e[0].path, "org/x");
	ck_assert_int_eq(endpoints_of(NULL, "[::1]:5000/x", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "[::1]:5000");

	/* a drop-in: the search list replaced, a prefix replaced, the rest kept */
	static const char dropin[] = "unqualified-search-registries = [\"127.0.0.1:5000\"]\n"
				     "[[registry]]\nprefix=\"docker.io\"\nlocation=\"hub.local\"\n"
				     "insecure=true\n";
	ck_assert_int_eq(oci_regconf_parse(c, dropin, strlen(dropin), "d.conf", &err), 0);
	ck_assert_uint_eq(c->n_search, 1);
	ck_assert_uint_eq(c->n_regs, 5);
	ck_assert_int_eq(endpoints_of(c, "busybox", e, &err), 1);
	ck_assert_str_eq(e[0].registry, "hub.local");
	ck_assert(e[0].insecure);
	free(c);
}
END_TEST

START_TEST(regconf_hostile)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
	    {"[registries.search]\nregistries = ['docker.io']\n", "test.conf:1: the v1 format"},
	    {"[registries.insecure]\n", "v1 format"},
	    {"[registry]\nlocation = \"x\"\n", "[[registry]]"},
	    {"[[registry.mirror]]\nlocation = \"x\"\n", "before any [[registry]]"},
	    {"\n\n[[registry]]\nlocation = \"http://x.io\"\n", "scheme"},
	    {"[[registry]]\nlocation = \"x.io/\"\n", "host[:port][/path]"},
	    {"[[registry]]\nprefix = \"*.a.io/x\"\n", "wildcard"},
	    {"[[registry]]\ninsecure = true\n", "neither prefix nor location"},
	    {"[[registry]]\nlocation = \"a.io\"\nlocation = \"b.io\"\n", "test.conf:3: location "
									 "given twice"},
	    {"[[registry]]\nlocation = \"a.io\"\n[[registry]]\nlocation = \"a.io\"\n",
	     "two [[registry]]"},
	    {"[[registry]]\nlocation = 5\n", "location must be a string"},
	    {"[[registry]]\nlocation = \"a.io\"\ninsecure = \"yes\"\n",
	     "insecure must be a boolean"},
	    {"unqualified-search-registries = \"docker.io\"\n", "must be an array"},
	    {"unqualified-search-registries = [\"http://x\"]\n", "not a registry"},
	    {"unqualified-search-registries = [1]\n", "strings only"},
	    {"unqualified-search-registries = [\"a\"\n", "expected ',' or ']'"},
	    {"x = {a = 1}\n", "inline tables"},
	    {"a.b = 1\n", "dotted keys"},
	    {"x = \"\"\"long\"\"\"\n", "multi-line"},
	    {"x = \"unterminated\n", "unterminated"},
	    {"x = \"\\q\"\n", "escape"},
	    {"x = 1 2\n", "after the value"},
	    {"x\n", "expected '='"},
	    {"= 1\n", "expected a key"},
	    {"x = nope\n", "not a string"},
	    {"[[registry\n", "unterminated table header"},
	    {"[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\ninsecure = true\n",
	     "no location"},
	};
	struct cell_error err = {0};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;
		struct oci_regconf *c = regconf_of(bad[i].text, &err, &rc);
		ck_assert_msg(rc < 0, "'%s' accepted", bad[i].text);
		ck_assert_msg(strstr(err.msg, bad[i].says), "'%s': '%s' lacks '%s'", bad[i].text,
			      err.msg, bad[i].says);
		free(c);
	}
	/* bounds: too many mirrors, too many registries, a long string, a NUL */
	char buf[64 << 10];
	size_t n = (size_t)sprintf(buf, "[[registry]]\nlocation=\"a.io\"\n");
	for (int i = 0; i < OCI_REGCONF_MIRRORS_MAX + 1; i++)
		n += (size_t)sprintf(buf + n, "[[registry.mirror]]\nlocation=\"m%d.io\"\n", i);
	int rc;
	struct oci_regconf *c = regconf_of(buf, &err, &rc);
	ck_assert_int_eq(rc, -EINVAL);
	ck_err_has(err, "more than 8 mirrors");
	free(c);
	n = 0;
	for (int i = 0; i < OCI_REGCONF_REGS_MAX + 1; i++)
		n += (size_t)sprintf(buf + n, "[[registry]]\nlocation=\"r%d.io\"\n", i);
	c = regconf_of(buf, &err, &rc);
	ck_assert_int_eq(rc, -EINVAL);
	ck_err_has(err, "more than 64");
	free(c);
	n = (size_t)sprintf(buf, "[[registry]]\nlocation=\"");
	memset(buf + n, 'a', 300);
	sprintf(buf + n + 300, "\"\n");
	c = regconf_of(buf, &err, &rc);
	ck_assert_int_eq(rc, -EINVAL);
	ck_err_has(err, "longer than 255");
	ck_assert_int_eq(oci_regconf_parse(c, "a = 1\0", 6, "nul.conf", &err), -EINVAL);
	free(c);
}
END_TEST

/* Files of a test under a mkdtemp dir, removed one by one (never recursively). */
struct tmpfiles {
	char dir[64];
	char paths[8][128];
	int n;
};

static const char *tmp_write(struct tmpfiles *t, const char *rel, const char *text)
{
	ck_assert_int_lt(t->n, 8);
	char *p = t->paths[t->n++], dir[sizeof(t->dir)];
	memcpy(dir, t->dir, sizeof(dir));
	snprintf(p, sizeof(t->paths[0]), "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static void tmp_cleanup(struct tmpfiles *t, const char *subdir)
{
	for (int i = t->n - 1; i >= 0; i--)
		unlink(t->paths[i]);
	if (subdir) {
		char p[192];
		snprintf(p, sizeof(p), "%s/%s", t->dir, subdir);
		rmdir(p);
	}
	rmdir(t->dir);
}

START_TEST(regconf_files)
{
	struct tmpfiles t = {.dir = "/tmp/cell-unit-regconf.XXXXXX"};
	ck_assert_ptr_nonnull(mkdtemp(t.dir));
	char dropins[128];
	snprintf(dropins, sizeof(dropins), "%s/registries.conf.d", t.dir);
	ck_assert_int_eq(mkdir(dropins, 0700), 0);
	const char *main_path = tmp_write(&t, "registries.conf",
					  "unqualified-search-registries = [\"docker.io\"]\n"
					  "[[registry]]\nlocation=\"a.io\"\n");
	tmp_write(&t, "registries.conf.d/20-b.conf",
		  "unqualified-search-registries = [\"b.io\"]\n");
	tmp_write(&t, "registries.conf.d/10-a.conf",
		  "unqualified-search-registries = [\"a.io\"]\n"
		  "[[registry]]\nlocation=\"a.io\"\ninsecure=true\n");
	tmp_write(&t, "registries.conf.d/30-c.conf.disabled", "garbage = {\n");
	const char *override =
	    tmp_write(&t, "override.conf", "unqualified-search-registries = [\"o.io\"]\n");
	struct cell_error err = {0};
	struct oci_regconf *c = NULL;
	ck_assert_int_eq(oci_regconf_load(main_path, dropins, NULL, &c, &err), 0);
	ck_assert_uint_eq(c->n_search, 1);
	ck_assert_str_eq(c->search[0], "b.io"); /* 20-b after 10-a */
	ck_assert_uint_eq(c->n_regs, 1);
	ck_assert(c->regs[0].insecure); /* 10-a replaced the main file's a.io */
	free(c);
	ck_assert_int_eq(oci_regconf_load(main_path, dropins, override, &c, &err), 0);
	ck_assert_str_eq(c->search[0], "o.io");
	ck_assert_uint_eq(c->n_regs, 0);
	free(c);
	/* missing main file and drop-in dir: an empty configuration; a missing override: an
	 * error */
	ck_assert_int_eq(
	    oci_regconf_load("/nonexistent/registries.conf", "/nonexistent/d", NULL, &c, &err), 0);
	ck_assert(!c->has_search && !c->n_regs);
	free(c);
	ck_assert_int_eq(oci_regconf_load(NULL, NULL, "/nonexistent/o.conf", &c, &err), -ENOENT);
	/* a bad drop-in is named */
	tmp_write(&t, "registries.conf.d/40-bad.conf", "\n[registries.search]\n");
	ck_assert_int_eq(oci_regconf_load(main_path, dropins, NULL, &c, &err), -EINVAL);
	ck_err_has(err, "40-bad.conf:2: the v1 format");
	ck_assert_ptr_null(c);
	tmp_cleanup(&t, "registries.conf.d");
}
END_TEST

/* ---- auth files ---- */

/* base64("user:pass") = dXNlcjpwYXNz, ("hub:secret") = aHViOnNlY3JldA==,
 * ("org:orgpass") = b3JnOm9yZ3Bhc3M= */
static const char authfile[] =
    "{\"auths\":{"
    "\"https://index.docker.io/v1/\":{\"auth\":\"aHViOnNlY3JldA==\"},"
    "\"quay.io\":{\"auth\":\"dXNlcjpwYXNz\"},"
    "\"quay.io/org\":{\"auth\":\"b3JnOm9yZ3Bhc3M=\"},"
    "\"127.0.0.1:5000\":{\"username\":\"lab\",\"password\":\"labpass\"},"
    "\"token.io\":{\"identitytoken\":\"x\"}"
    "},\"credHelpers\":{\"gcr.io\":\"gcloud\"},\"credsStore\":\"desktop\"}";

static int creds_for(const char *doc, const char *reg, const char *path, struct oci_creds *c,
		     struct cell_error *err)
{
	return oci_authfile_parse(doc, strlen(doc), "auth.json", reg, path, c, err);
}

START_TEST(authfile_lookup)
{
	struct cell_error err = {0};
	struct oci_creds c;
	ck_assert_int_eq(creds_for(authfile, "docker.io", "library/busybox", &c, &err), 1);
	ck_assert_str_eq(c.user, "hub");
	ck_assert_str_eq(c.pass, "secret");
	ck_assert_int_eq(creds_for(authfile, "quay.io", "org/app", &c, &err), 1);
	ck_assert_str_eq(c.user, "org");
	ck_assert_int_eq(creds_for(authfile, "quay.io", "organisation/app", &c, &err), 1);
	ck_assert_str_eq(c.user, "user"); /* whole components only */
	ck_assert_int_eq(creds_for(authfile, "127.0.0.1:5000", "x", &c, &err), 1);
	ck_assert_str_eq(c.pass, "labpass");
	ck_assert_int_eq(creds_for(authfile, "ghcr.io", "x", &c, &err), 0);
	ck_assert_int_eq(creds_for(authfile, "token.io", "x", &c, &err), 0);
	ck_assert_int_eq(creds_for(authfile, "127.0.0.1:5001", "x", &c, &err), 0);

	/* an exact docker.io key wins over the legacy URL; a namespace key over the host */
	static const char hub[] =
	    "{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":"
	    "\"aHViOnNlY3JldA==\"},\"docker.io\":{\"auth\":\"dXNlcjpwYXNz\"},"
	    "\"registry-1.docker.io/library\":{\"auth\":\"b3JnOm9yZ3Bhc3M=\"}}}";
	ck_assert_int_eq(creds_for(hub, "docker.io", "org/x", &c, &err), 1);
	ck_assert_str_eq(c.user, "user");
	ck_assert_int_eq(creds_for(hub, "docker.io", "library/x", &c, &err), 1);
	ck_assert_str_eq(c.user, "org");
	ck_assert_int_eq(creds_for("{}", "docker.io", "x", &c, &err), 0);

	static const struct {
		const char *doc, *says;
	} bad[] = {
	    {"{\"auths\":{\"a.io\":{\"auth\":\"!!!!\"}}}", "auths['a.io'].auth is not base64"},
	    {"{\"auths\":{\"a.io\":{\"auth\":\"bm9jb2xvbg==\"}}}", "user:password"},
	    {"{\"auths\":{\"a.io\":\"x\"}}", "auths['a.io'] is not an object"},
	    {"{\"auths\":[]}", "'auths' is not an object"},
	    {"{\"auths\":{\"a.io\":{\"username\":5}}}", "'username' is not a string"},
	    {"{\"auths\":{\"a.io\":{}},\"auths\":{}}", "duplicate"},
	    {"not json", "not valid JSON"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(creds_for(bad[i].doc, "a.io", "x", &c, &err) < 0, "'%s' accepted",
			      bad[i].doc);
		ck_assert_msg(strstr(err.msg, bad[i].says), "'%s': '%s' lacks '%s'", bad[i].doc,
			      err.msg, bad[i].says);
	}
	char longpass[2048] = "{\"auths\":{\"a.io\":{\"username\":\"u\",\"password\":\"";
	memset(longpass + strlen(longpass), 'p', 1100);
	strcat(longpass, "\"}}}");
	ck_assert_int_eq(creds_for(longpass, "a.io", "x", &c, &err), -EINVAL);
	ck_err_has(err, "'password' is longer than 1023");
}
END_TEST

START_TEST(authfile_files)
{
	struct tmpfiles t = {.dir = "/tmp/cell-unit-auth.XXXXXX"};
	ck_assert_ptr_nonnull(mkdtemp(t.dir));
	const char *p = tmp_write(&t, "auth.json", authfile);
	struct cell_error err = {0};
	struct oci_creds c;
	ck_assert_int_eq(oci_authfile_load(p, "quay.io", "org/x", &c, &err), 1);
	ck_assert_str_eq(c.pass, "orgpass");
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/none.json", t.dir);
	ck_assert_int_eq(oci_authfile_load(missing, "quay.io", "org/x", &c, &err), 0);
	ck_assert_int_eq(oci_authfile_load(t.dir, "quay.io", "org/x", &c, &err), -EINVAL);
	ck_err_has(err, "not a regular file");
	tmp_cleanup(&t, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("oci_image");
	TCase *tc = tcase_create("oci_image");
	tcase_add_test(tc, media_types);
	tcase_add_test(tc, layer_compression);
	tcase_add_test(tc, digest_parse);
	tcase_add_test(tc, digest_compute_and_verify);
	tcase_add_test(tc, platforms);
	tcase_add_test(tc, index_choice);
	tcase_add_test(tc, manifest_valid);
	tcase_add_test(tc, manifest_hostile);
	tcase_add_test(tc, config_valid);
	tcase_add_test(tc, config_hostile);
	tcase_add_test(tc, references);
	tcase_add_test(tc, references_hostile);
	tcase_add_test(tc, www_authenticate);
	tcase_add_test(tc, regconf_v2);
	tcase_add_test(tc, regconf_hostile);
	tcase_add_test(tc, regconf_files);
	tcase_add_test(tc, authfile_lookup);
	tcase_add_test(tc, authfile_files);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
