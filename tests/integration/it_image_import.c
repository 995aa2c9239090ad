/* Images made here: POST /v1/images/import of an OCI layout tar (plain, gzip) and of a
 * docker save archive, the hostile archive battery (each refusal names the member and
 * leaves the store as it was), names owned by their tenant, and POST
 * /v1/sandboxes/{id}/commit and /v1/snapshots/{id}/commit, each result run as a sandbox.
 *
 * Every test runs its celld on an images dir of its own (T/images-XXXXXX, the busybox
 * image copied in), so no other suite's store is ever touched. Archives are built by the
 * test: umoci's layouts from the registry lab (rl_build_layout), skopeo's docker-archive,
 * tar, and libarchive for the hostile ones. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/fsutil.h"
#include "harness.h"
#include "registry_lab.h"

static char images[H_PATH]; /* this test's images dir */

/* A fresh images dir holding the busybox image, and celld restarted on it (more: extra
 * flags; a first "tenants": with h_two_tenants' keys). */
static void own_store(const char *const *more)
{
	char *tmpl = h_fmt("%s/images-XXXXXX", H.dir);
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	snprintf(images, sizeof(images), "%s", tmpl);
	free(tmpl);
	char *src = h_fmt("%s/busybox", H.images), *dst = h_fmt("%s/busybox", images);
	char *const cp[] = {"/bin/cp", "-a", src, dst, NULL};
	struct h_proc p;
	h_run(cp, NULL, 60, &p);
	ck_assert_msg(p.status == 0, "cp: %s", p.err);
	h_proc_free(&p);
	free(src);
	free(dst);
	const char *flags[8] = {"--images", images};
	int n = 2;
	bool tenants = more && more[0] && !strcmp(more[0], "tenants");
	for (int i = tenants ? 1 : 0; more && more[i] && n < 7; i++)
		flags[n++] = more[i];
	flags[n] = NULL;
	if (tenants)
		h_two_tenants_with(flags);
	else
		h_celld_restart_with(flags);
}

/* The suite's own celld back, and this test's images dir removed (it is in T: never a
 * path from elsewhere). */
static void drop_store(void)
{
	h_celld_restart_with(NULL);
	int fd = open(H.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *name = strrchr(images, '/') + 1;
	struct cell_error err = {0};
	ck_assert_msg(fd >= 0 && !strncmp(name, "images-", 7) &&
			  cell_remove_tree_at(fd, name, &err) == 0,
		      "removing %s: %s", images, err.msg);
	close(fd);
}

/* Every name under .store's layers, images, refs and tmp, one a line, sorted. */
static char *store_listing(void)
{
	static const char *const subs[] = {"layers", "images", "refs", "tmp"};
	size_t cap = 1, len = 0;
	char *out = calloc(1, 1);
	for (size_t i = 0; i < 4; i++) {
		char *dir = h_fmt("%s/.store/%s", images, subs[i]);
		struct dirent **v;
		int n = scandir(dir, &v, NULL, alphasort);
		for (int k = 0; k < n; k++) {
			if (v[k]->d_name[0] != '.') {
				char *line = h_fmt("%s/%s\n", subs[i], v[k]->d_name);
				cap += strlen(line);
				out = realloc(out, cap);
				memcpy(out + len, line, strlen(line) + 1);
				len += strlen(line);
				free(line);
			}
			free(v[k]);
		}
		if (n >= 0)
			free(v);
		free(dir);
	}
	return out;
}

static json_t *load(const char *path)
{
	json_t *o = json_load_file(path, 0, NULL);
	ck_assert_msg(o, "reading %s", path);
	return o;
}

/* The store's ref record of name, and the image record it names. */
static json_t *store_ref(const char *name)
{
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(name, strlen(name), hex);
	char *path = h_fmt("%s/.store/refs/%s.json", images, hex);
	json_t *o = load(path);
	free(path);
	return o;
}

static json_t *store_image(const char *digest)
{
	char *path = h_fmt("%s/.store/images/%s.json", images, digest + 7);
	json_t *o = load(path);
	free(path);
	return o;
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ck_assert_msg(fd >= 0 && fstat(fd, &st) == 0, "%s: %s", path, strerror(errno));
	char *buf = malloc((size_t)st.st_size + 1);
	ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* POST /v1/images/import?query with file as the body (as tenant's key, NULL: the socket). */
static long post_import(const char *file, const char *query, const char *const *tenant,
			struct h_resp *r)
{
	size_t len;
	char *body = slurp(file, &len);
	char *path = h_fmt("/v1/images/import%s%s", query ? "?" : "", query ? query : "");
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = body,
			    .body_len = len ? len : 1,
			    .content_type = "application/x-tar",
			    .via = tenant ? H_TCP_NOKEY : H_UNIX,
			    .headers = tenant};
	long st = h_request(&req, r);
	free(body);
	free(path);
	return st;
}

static void expect(long got, long want, struct h_resp *r)
{
	ck_assert_msg(got == want, "HTTP %ld, not %ld: %s", got, want, r->body ? r->body : "");
}

static char *tar_layout(const char *layout, const char *name, bool gz)
{
	char *file = h_fmt("%s/%s", rl_dir(), name);
	char *const argv[] = {"/bin/tar", "-C", (char *)layout, gz ? "-czf" : "-cf", file,
			      ".",	  NULL};
	struct h_proc p;
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 0, "tar: %s", p.err);
	h_proc_free(&p);
	return file;
}

static char *docker_archive(const char *layout, const char *file_name, const char *tag)
{
	char *file = h_fmt("%s/%s", rl_dir(), file_name);
	char *src = h_fmt("oci:%s:img", layout), *dst = h_fmt("docker-archive:%s:%s", file, tag);
	const char *args[] = {"copy", "--quiet", src, dst, NULL};
	struct h_proc p;
	rl_skopeo(&p, args);
	ck_assert_msg(p.status == 0, "skopeo copy %s %s: %s%s", src, dst, p.out, p.err);
	h_proc_free(&p);
	free(src);
	free(dst);
	return file;
}

static const struct rl_image_spec multi = {.multi_layer = true};

/* ---- archives rewritten: members in memory ---- */

struct mem {
	char *name, *link, *data;
	size_t len;
	mode_t type;
};

static size_t read_members(const char *file, struct mem *out, size_t max)
{
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_filename(a, file, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		ck_assert_uint_lt(n, max);
		struct mem *m = &out[n++];
		m->name = strdup(archive_entry_pathname(e));
		m->type = archive_entry_filetype(e);
		m->link = archive_entry_symlink(e) ? strdup(archive_entry_symlink(e)) : NULL;
		m->len = (size_t)archive_entry_size(e);
		m->data = malloc(m->len + 1);
		ck_assert_int_eq(archive_read_data(a, m->data, m->len), (la_ssize_t)m->len);
		m->data[m->len] = '\0';
	}
	archive_read_free(a);
	return n;
}

static void write_members(const char *file, const struct mem *v, size_t n)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	ck_assert_int_eq(archive_write_open_filename(a, file), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, v[i].name);
		archive_entry_set_filetype(e, v[i].type ? v[i].type : AE_IFREG);
		archive_entry_set_perm(e, 0644);
		if (v[i].type == AE_IFCHR)
			archive_entry_set_rdev(e, makedev(1, 3));
		if (v[i].link)
			archive_entry_set_symlink(e, v[i].link);
		archive_entry_set_size(
		    e, (la_int64_t)(v[i].type == AE_IFREG || !v[i].type ? v[i].len : 0));
		ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
		if (v[i].len && (v[i].type == AE_IFREG || !v[i].type))
			archive_write_data(a, v[i].data, v[i].len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
}

static void free_members(struct mem *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].link);
		free(v[i].data);
	}
}

static struct mem *member(struct mem *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	ck_abort_msg("no member %s", name);
	return NULL;
}

static void sha256_digest(const void *data, size_t len, char out[72])
{
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(data, len, hex);
	snprintf(out, 72, "sha256:%s", hex);
}

/* A tar of one entry whose path escapes (a layer). */
static char *escaping_layer(size_t *len)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	size_t cap = 1 << 16, used = 0;
	char *buf = calloc(1, cap);
	ck_assert_int_eq(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "../escaped-by-import");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 3);
	ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
	archive_write_data(a, "bad", 3);
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	*len = used;
	return buf;
}

/* A raw ustar header of name with size (base-256 when it does not fit in octal). */
static void raw_header(unsigned char h[512], const char *name, unsigned long long size)
{
	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	if (size < 077777777777ull) {
		snprintf((char *)h + 124, 12, "%011llo", size);
	} else {
		h[124] = 0x80;
		for (int i = 0; i < 8; i++)
			h[135 - i] = (unsigned char)(size >> (8 * i));
	}
	memcpy(h + 136, "00000000000", 12);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* ---- tests ---- */

/* An OCI layout tar (plain and gzip) and a docker save archive of the same image: each
 * into the store under its name, the layers shared, and a sandbox runs the image. */
START_TEST(imports_layouts_and_docker_save)
{
	rl_start(RL_PLAIN);
	own_store(NULL);
	char *layout = rl_build_layout(&multi);
	char *plain = tar_layout(layout, "oci.tar", false);
	char *gz = tar_layout(layout, "oci.tar.gz", true);
	char *dsave = docker_archive(layout, "docker.tar", "lab/docker:2");

	struct h_resp r;
	expect(post_import(plain, "name=lab/oci:1", NULL, &r), 201, &r);
	ck_assert_str_eq(h_jstr(r.json, "name"), "docker.io/lab/oci:1");
	ck_assert_int_eq(h_jint(r.json, "layers"), 3);
	ck_assert_int_eq(h_jint(r.json, "layersAdded"), 3);
	char *digest = strdup(h_jstr(r.json, "digest"));
	h_resp_free(&r);
	json_t *ref = store_ref("docker.io/lab/oci:1");
	ck_assert_str_eq(h_jstr(ref, "digest"), digest);
	ck_assert_str_eq(h_jstr(ref, "owner"), "unix");
	json_decref(ref);
	json_t *rec = store_image(digest);
	ck_assert_uint_eq(json_array_size(json_object_get(rec, "layers")), 3);
	json_decref(rec);

	/* umoci's ref.name is a tag alone: no name for the image */
	expect(post_import(gz, NULL, NULL, &r), 400, &r);
	ck_assert_str_eq(h_err_code(&r), "IMAGE_NAME_REQUIRED");
	h_resp_free(&r);
	expect(post_import(gz, "name=lab/oci-gz:1&ref=img", NULL, &r), 201, &r);
	ck_assert_int_eq(h_jint(r.json, "layersAdded"), 0);
	ck_assert_str_eq(h_jstr(r.json, "digest"), digest);
	h_resp_free(&r);

	/* docker save: named by its RepoTags, its layers the same diffIDs */
	expect(post_import(dsave, NULL, NULL, &r), 201, &r);
	ck_assert_str_eq(h_jstr(r.json, "name"), "docker.io/lab/docker:2");
	ck_assert_int_eq(h_jint(r.json, "layers"), 3);
	ck_assert_int_eq(h_jint(r.json, "layersAdded"), 0);
	h_resp_free(&r);

	/* the CLI streams a file */
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "image", "import", plain, "lab/cli:1", NULL), 0);
	ck_assert_ptr_nonnull(strstr(p.out, "docker.io/lab/cli:1"));
	h_proc_free(&p);

	/* a sandbox of it: each layer's work, the whiteout and the opaque dir */
	char *id = h_create("lab/oci:1", NULL);
	char *out = h_sh(id, "cat " RL_ADDED "; ls " RL_OPAQUE_DIR "; test -e " RL_REMOVED
			     " || echo removed-gone");
	ck_assert_str_eq(out, RL_ADDED_TEXT "new\nremoved-gone\n");
	free(out);
	h_delete(id);
	free(id);

	free(digest);
	free(plain);
	free(gz);
	free(dsave);
	free(layout);
	drop_store();
	rl_stop();
}
END_TEST

/* Each hostile archive refused naming its member, the store as it was. */
START_TEST(hostile_archives_refused)
{
	rl_start(RL_PLAIN);
	own_store(NULL);
	char *layout = rl_build_layout(&(struct rl_image_spec){0});
	char *good = tar_layout(layout, "good.tar", false);
	char *dsave = docker_archive(layout, "dsave.tar", "lab/d:1");
	struct mem v[64];
	size_t n = read_members(good, v, 64);
	char *missing = NULL;
	struct mem dv[64];
	size_t dn = read_members(dsave, dv, 60);
	char *before = store_listing();

	struct {
		const char *what, *code, *needle;
		char *file;
	} cases[16];
	size_t nc = 0;
#define CASE(w, c, nd)                                                                             \
	cases[nc].what = (w), cases[nc].code = (c), cases[nc].needle = (nd),                       \
	cases[nc].file = h_fmt("%s/hostile-%zu.tar", rl_dir(), nc)

	/* path escapes, absolute, a device, a duplicate, a link out */
	const char *bad_names[] = {"../evil", "/etc/evil", "blobs/./x", "a//b"};
	for (size_t i = 0; i < 4; i++) {
		CASE("bad name", "INVALID_IMAGE_ARCHIVE", bad_names[i]);
		struct mem w[65];
		memcpy(w, v, n * sizeof(*v));
		w[n] = (struct mem){.name = (char *)bad_names[i], .data = "x", .len = 1};
		write_members(cases[nc++].file, w, n + 1);
	}
	{
		CASE("device", "INVALID_IMAGE_ARCHIVE", "dev-null");
		struct mem w[65];
		memcpy(w, v, n * sizeof(*v));
		w[n] = (struct mem){.name = "dev-null", .type = AE_IFCHR};
		write_members(cases[nc++].file, w, n + 1);
	}
	{
		CASE("duplicate", "INVALID_IMAGE_ARCHIVE", "index.json");
		struct mem w[65];
		memcpy(w, v, n * sizeof(*v));
		w[n] = *member(v, n, "./index.json");
		write_members(cases[nc++].file, w, n + 1);
	}
	{
		CASE("link out", "INVALID_IMAGE_ARCHIVE", "passwd-link");
		struct mem w[65];
		memcpy(w, v, n * sizeof(*v));
		w[n] = (struct mem){
		    .name = "passwd-link", .type = AE_IFLNK, .link = "../../etc/passwd"};
		write_members(cases[nc++].file, w, n + 1);
	}
	{
		/* the layer blob left out */
		json_t *idx = json_loads(member(v, n, "./index.json")->data, 0, NULL);
		const char *mdg =
		    h_jstr(json_array_get(json_object_get(idx, "manifests"), 0), "digest");
		char *mname = h_fmt("./blobs/sha256/%s", mdg + 7);
		json_t *man = json_loads(member(v, n, mname)->data, 0, NULL);
		const char *ldg =
		    h_jstr(json_array_get(json_object_get(man, "layers"), 0), "digest");
		char *lname = h_fmt("./blobs/sha256/%s", ldg + 7);
		CASE("missing layer", "INVALID_IMAGE_ARCHIVE", missing = strdup(lname + 2));
		struct mem w[64];
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (strcmp(v[i].name, lname))
				w[k++] = v[i];
		write_members(cases[nc++].file, w, k);
		free(lname);
		free(mname);
		json_decref(man);
		json_decref(idx);
	}
	/* docker save: a lying diffID, and a second layer that escapes */
	json_t *dman = json_loads(member(dv, dn, "manifest.json")->data, 0, NULL);
	const char *cfg_name = h_jstr(json_array_get(dman, 0), "Config");
	const char *layer0 = json_string_value(
	    json_array_get(json_object_get(json_array_get(dman, 0), "Layers"), 0));
	struct mem *cfg = member(dv, dn, cfg_name);
	{
		CASE("lying diffID", "DIGEST_MISMATCH", layer0);
		json_t *c = json_loads(cfg->data, 0, NULL);
		json_array_set_new(json_object_get(json_object_get(c, "rootfs"), "diff_ids"), 0,
				   json_string("sha256:00000000000000000000000000000000000000000000"
					       "00000000000000000000"));
		struct mem w[64];
		memcpy(w, dv, dn * sizeof(*dv));
		char *text = json_dumps(c, JSON_COMPACT);
		struct mem *wc = member(w, dn, cfg_name);
		wc->data = text;
		wc->len = strlen(text);
		write_members(cases[nc++].file, w, dn);
		free(text);
		json_decref(c);
	}
	{
		CASE("escaping layer", "INVALID_IMAGE_ARCHIVE", "escaped-by-import");
		size_t elen;
		char *evil = escaping_layer(&elen);
		char dg[72];
		sha256_digest(evil, elen, dg);
		json_t *c = json_loads(cfg->data, 0, NULL);
		json_array_append_new(json_object_get(json_object_get(c, "rootfs"), "diff_ids"),
				      json_string(dg));
		json_t *m2 = json_deep_copy(dman);
		json_array_append_new(json_object_get(json_array_get(m2, 0), "Layers"),
				      json_string("evil.tar"));
		char *ctext = json_dumps(c, JSON_COMPACT), *mtext = json_dumps(m2, JSON_COMPACT);
		struct mem w[64];
		memcpy(w, dv, dn * sizeof(*dv));
		member(w, dn, cfg_name)->data = ctext;
		member(w, dn, cfg_name)->len = strlen(ctext);
		member(w, dn, "manifest.json")->data = mtext;
		member(w, dn, "manifest.json")->len = strlen(mtext);
		w[dn] = (struct mem){.name = "evil.tar", .data = evil, .len = elen};
		write_members(cases[nc++].file, w, dn + 1);
		free(ctext);
		free(mtext);
		free(evil);
		json_decref(c);
		json_decref(m2);
	}
	{
		/* a header claiming 100 GiB: refused before a byte of it is read */
		CASE("huge", "INVALID_IMAGE_ARCHIVE", "huge-member");
		unsigned char h[1024] = {0};
		raw_header(h, "huge-member", 100ull << 30);
		int fd = open(cases[nc++].file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		ck_assert_int_eq(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
		close(fd);
	}
	{
		CASE("too many members", "INVALID_IMAGE_ARCHIVE", "f4096");
		int fd = open(cases[nc++].file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		for (int i = 0; i <= 4096; i++) {
			unsigned char h[512];
			char name[16];
			snprintf(name, sizeof(name), "f%d", i);
			raw_header(h, name, 0);
			ck_assert_int_eq(write(fd, h, 512), 512);
		}
		unsigned char end[1024] = {0};
		ck_assert_int_eq(write(fd, end, sizeof(end)), (ssize_t)sizeof(end));
		close(fd);
	}
	{
		CASE("junk", "INVALID_IMAGE_ARCHIVE", "not a tar archive");
		char junk[4096];
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (char)(i * 7 + 3);
		h_write_file(cases[nc].file, "", 0600);
		int fd = open(cases[nc++].file, O_WRONLY | O_TRUNC | O_CLOEXEC);
		ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
		close(fd);
	}
#undef CASE
	for (size_t i = 0; i < nc; i++) {
		struct h_resp r;
		long st = post_import(cases[i].file, "name=lab/hostile:1", NULL, &r);
		ck_assert_msg(st == 400 && !strcmp(h_err_code(&r), cases[i].code) &&
				  strstr(r.body, cases[i].needle),
			      "%s: %ld %s", cases[i].what, st, r.body);
		h_resp_free(&r);
		char *after = store_listing();
		ck_assert_msg(!strcmp(before, after), "%s changed the store:\n%s\nwas:\n%s",
			      cases[i].what, after, before);
		free(after);
		free(cases[i].file);
	}
	/* nothing escaped next to the store's layers */
	char *escaped = h_fmt("%s/.store/layers/escaped-by-import", images);
	ck_assert_int_ne(access(escaped, F_OK), 0);
	free(escaped);
	/* and the good ones still go in */
	struct h_resp r;
	expect(post_import(dsave, NULL, NULL, &r), 201, &r);
	h_resp_free(&r);

	json_decref(dman);
	free(missing);
	free_members(v, n);
	free_members(dv, dn);
	free(before);
	free(good);
	free(dsave);
	free(layout);
	drop_store();
	rl_stop();
}
END_TEST

/* A name is its importer's: another tenant's import of it is 409, its owner may move it. */
START_TEST(names_are_their_owners)
{
	rl_start(RL_PLAIN);
	const char *const tenants[] = {"tenants", NULL};
	own_store(tenants);
	char *layout = rl_build_layout(&(struct rl_image_spec){0});
	char *file = tar_layout(layout, "t.tar", false);
	struct h_resp r;
	expect(post_import(file, "name=team/tool:1", h_alice, &r), 201, &r);
	h_resp_free(&r);
	json_t *ref = store_ref("docker.io/team/tool:1");
	ck_assert_str_ne(h_jstr(ref, "owner"), "");
	json_decref(ref);
	expect(post_import(file, "name=team/tool:1", h_bob, &r), 409, &r);
	ck_assert_str_eq(h_err_code(&r), "IMAGE_NAME_TAKEN");
	h_resp_free(&r);
	expect(post_import(file, "name=team/tool:1", h_alice, &r), 201, &r);
	h_resp_free(&r);
	/* the operator's name is not a tenant's to move */
	expect(post_import(file, "name=ops/base:1", NULL, &r), 201, &r);
	h_resp_free(&r);
	expect(post_import(file, "name=ops/base:1", h_bob, &r), 409, &r);
	h_resp_free(&r);
	free(file);
	free(layout);
	drop_store();
	rl_stop();
}
END_TEST

static long commit(const char *kind, const char *id, const char *name, struct h_resp *r)
{
	char *path = h_fmt("/v1/%s/%s/commit", kind, id), *body = h_fmt("{\"name\":\"%s\"}", name);
	long st = h_http("POST", path, body, r);
	free(path);
	free(body);
	return st;
}

/* A paused sandbox of a built image (its loop disk) committed: refused while it runs, then
 * an image of two layers that a new sandbox runs, the file written there in it, a
 * directory made anew over the image's (opaque: none of the image's entries show through)
 * and a UTF-8 name and link target as they were written. */
START_TEST(commit_paused_sandbox)
{
	own_store(NULL);
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /root/work && echo committed > /root/work/file && "
		      "rm -f /etc/hostname.old; mkfifo /root/work/fifo && "
		      "rm -rf /usr/sbin && mkdir /usr/sbin && echo mine > /usr/sbin/only && "
		      "echo u > '/root/work/F\xc5\x91t\xc3\xa1n' && "
		      "ln -s 'F\xc5\x91t\xc3\xa1n' /root/work/link"));
	struct h_resp r;
	ck_assert_int_eq(commit("sandboxes", id, "lab/committed:1", &r), 409);
	h_resp_free(&r);
	char *pause = h_fmt("/v1/sandboxes/%s/pause", id);
	ck_assert_int_lt(h_http("POST", pause, NULL, NULL), 300);
	ck_assert_int_eq(commit("sandboxes", id, "lab/committed:1", &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "name"), "docker.io/lab/committed:1");
	ck_assert_int_eq(h_jint(r.json, "layers"), 2);
	h_resp_free(&r);
	char *id2 = h_create("lab/committed:1", NULL);
	char *out = h_sh(id2, "cat /root/work/file; test -p /root/work/fifo && echo fifo; "
			      "test -x /bin/busybox && echo busybox; ls /usr/sbin; "
			      "cat /root/work/link; readlink /root/work/link");
	ck_assert_str_eq(out, "committed\nfifo\nbusybox\nonly\nu\nF\xc5\x91t\xc3\xa1n\n");
	free(out);
	h_delete(id2);
	h_delete(id);
	free(id);
	free(id2);
	free(pause);
	drop_store();
}
END_TEST

/* A snapshot of a sandbox on an imported image, committed: the new image has the image's
 * layers and the snapshot's, and another tenant cannot commit it. */
START_TEST(commit_snapshot)
{
	rl_start(RL_PLAIN);
	own_store(NULL);
	char *layout = rl_build_layout(&multi);
	char *file = tar_layout(layout, "s.tar", false);
	struct h_resp r;
	expect(post_import(file, "name=lab/base:1", NULL, &r), 201, &r);
	h_resp_free(&r);
	char *id = h_create("lab/base:1", NULL);
	free(h_sh(id, "echo from-snapshot > /root/snap-file && rm " RL_ADDED));
	char *snap_path = h_fmt("/v1/sandboxes/%s/snapshots", id);
	ck_assert_int_eq(h_http("POST", snap_path, "{}", &r), 202);
	char *snap = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	ck_assert_int_eq(commit("snapshots", snap, "lab/from-snap:1", &r), 201);
	ck_assert_int_eq(h_jint(r.json, "layers"), 4);
	h_resp_free(&r);
	ck_assert_int_eq(commit("snapshots", "nosuchsnapshot", "lab/x:1", &r), 404);
	h_resp_free(&r);
	char *id2 = h_create("lab/from-snap:1", NULL);
	char *out = h_sh(id2, "cat /root/snap-file; ls " RL_OPAQUE_DIR "; test -e " RL_ADDED
			      " || echo added-gone");
	ck_assert_str_eq(out, "from-snapshot\nnew\nadded-gone\n");
	free(out);
	h_delete(id2);
	h_delete(id);
	char *del = h_fmt("/v1/snapshots/%s", snap);
	h_http("DELETE", del, NULL, NULL);
	free(del);
	free(id);
	free(id2);
	free(snap);
	free(snap_path);
	free(file);
	free(layout);
	drop_store();
	rl_stop();
}
END_TEST

static Suite *image_import_suite(void)
{
	Suite *s = suite_create("image_import");
	tcase_add_test(h_tcase(s, "imports_layouts_and_docker_save", 300),
		       imports_layouts_and_docker_save);
	tcase_add_test(h_tcase(s, "hostile_archives_refused", 300), hostile_archives_refused);
	tcase_add_test(h_tcase(s, "names_are_their_owners", 300), names_are_their_owners);
	tcase_add_test(h_tcase(s, "commit_paused_sandbox", 300), commit_paused_sandbox);
	tcase_add_test(h_tcase(s, "commit_snapshot", 300), commit_snapshot);
	return s;
}

int main(void)
{
	return h_main(image_import_suite());
}
