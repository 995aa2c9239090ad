/* Images a create may name: those cell built, <images>/<name>/rootfs, whose name comes from
 * a client and is validated like an id before it can become part of a path (no "/", no
 * "..", nothing odd); and those of the layer store, found by name (hashed there, never a
 * path) or by their normalized registry reference. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "config.h"
#include "images.h"
#include "cell/id.h"
#include "fields.h"
#include "oci_image.h"

/* "name" or "name:latest" (clients configured with a repository and a tag send the tag
 * "latest" by default; a local image is its one version) → name in out. */
static int local_name(const char *uri, char *out, size_t size, struct cell_error *err)
{
	const char *colon = strchr(uri, ':');
	size_t len = colon ? (size_t)(colon - uri) : strlen(uri);
	if (colon && strcmp(colon, ":latest"))
		return cell_err_msg(err, EINVAL,
				    "image.uri '%.80s': local images have no tags (give the name, "
				    "or name:latest)",
				    uri);
	if (len >= size)
		return cell_err_msg(err, EINVAL, "image.uri '%.80s' is not a local image name",
				    uri);
	memcpy(out, uri, len);
	out[len] = '\0';
	if (!cell_id_valid(out))
		return cell_err_msg(err, EINVAL, "image.uri '%.80s' is not a local image name",
				    uri);
	return 0;
}

int image_resolve(const char *uri_in, char *buf, size_t size, struct cell_error *err)
{
	char uri[CELL_ID_MAX + 1];
	int r = local_name(uri_in, uri, sizeof(uri), err);
	if (r < 0)
		return r;
	if ((size_t)snprintf(buf, size, "%s/%s/rootfs", celld.images_dir, uri) >= size)
		return cell_err(err, ENAMETOOLONG, "image.uri '%s'", uri);
	/* O_NOFOLLOW on the name: the image dir must not redirect elsewhere on the host. */
	_cleanup_close_ int dfd = open(celld.images_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(err, errno, "images dir %s", celld.images_dir);
	_cleanup_close_ int ifd = openat(dfd, uri, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int rfd =
	    ifd < 0 ? -1 : openat(ifd, "rootfs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Only a missing name is "not found": running out of fds or memory is the host's
	 * capacity, not the client's mistake. */
	if (rfd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
		return cell_err(err, errno, "image '%s' under %s", uri, celld.images_dir);
	if (rfd < 0)
		return cell_err_msg(err, ENOENT, "image '%s' not found under %s", uri,
				    celld.images_dir);
	struct stat st;
	/* The lower layer is shared by every sandbox of that image: only root may own it. */
	if (fstat(rfd, &st) < 0 || st.st_uid != 0)
		return cell_err_msg(err, EPERM, "image '%s': %s is not owned by root", uri, buf);
	return 0;
}

#define BUILT_MANIFEST_MAX (64u << 10)
#define BUILT_ARGV_MAX	   256

/* 1 to BUILT_ARGV_MAX strings without a NUL inside. */
static bool valid_argv(json_t *a)
{
	size_t n = json_array_size(a), i;
	json_t *v;
	if (!json_is_array(a) || !n || n > BUILT_ARGV_MAX)
		return false;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return false;
	}
	return true;
}

/* The store's image for uri: as named, else as its normalized reference. */
static int store_find(const char *uri, struct store_image *img, struct cell_error *err)
{
	struct cell_error e1 = {0};
	int r = store_image_get(uri, img, &e1);
	if (r != -ENOENT) {
		if (r < 0)
			*err = e1;
		return r;
	}
	struct oci_ref ref;
	struct cell_error rerr = {0};
	if (oci_ref_parse(uri, &ref, &rerr) < 0)
		return cell_err_msg(err, EINVAL, "image.uri '%.200s': %s", uri, rerr.msg);
	char norm[STORE_NAME_MAX];
	oci_ref_format(&ref, norm, sizeof(norm));
	r = store_image_get(norm, img, err);
	if (r == -ENOENT)
		return cell_err_msg(
		    err, ENOENT,
		    "image '%.200s' not found (neither built under %s nor pulled as "
		    "%s)",
		    uri, celld.images_dir, norm);
	return r;
}

static int found_from_store(const struct store_image *img, struct image_found *out,
			    struct cell_error *err)
{
	char **dirs = NULL;
	int r = store_image_dirs(img, &dirs, err);
	if (r < 0)
		return r;
	out->layers = json_array();
	for (size_t i = 0; out->layers && i < img->n_layers; i++)
		if (json_array_append_new(out->layers, json_string(dirs[i])) < 0)
			break;
	if (!out->layers || json_array_size(out->layers) != img->n_layers || !img->n_layers) {
		store_dirs_free(dirs, img->n_layers);
		return img->n_layers
			   ? cell_err(err, ENOMEM, "image layers")
			   : cell_err_msg(err, EINVAL, "image %s has no layers", img->digest);
	}
	snprintf(out->rootfs, sizeof(out->rootfs), "%s", dirs[0]);
	store_dirs_free(dirs, img->n_layers);
	snprintf(out->digest, sizeof(out->digest), "%s", img->digest);
	snprintf(out->private_to, sizeof(out->private_to), "%s", img->private_to);
	out->config = json_incref(img->config);
	return 0;
}

/* A built image's manifest.json (build-image writes it beside rootfs) may name the
 * entrypoint its sandboxes run when a create names none, as an OCI image's config does:
 * "entrypoint": ["/opt/code-interpreter/code-interpreter.sh"]. Handed on as such a config,
 * {"config": {"Entrypoint": [...]}}; *config stays NULL when there is none. */
static int built_config(const char *rootfs, json_t **config, struct cell_error *err)
{
	*config = NULL;
	char path[4096];
	const char *slash = strrchr(rootfs, '/');
	if (!slash || (size_t)snprintf(path, sizeof(path), "%.*s/manifest.json",
				       (int)(slash - rootfs), rootfs) >= sizeof(path))
		return 0;
	_cleanup_free_ char *text = NULL;
	size_t len;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(AT_FDCWD, path, BUILT_MANIFEST_MAX, &text, &len, &rerr);
	if (r == -ENOENT)
		return 0;
	/* The operator's file, not the client's request: a bad one is celld's failure (EIO),
	 * unless the host is short of memory or fds. */
	if (r < 0)
		return cell_err_msg(err, r == -ENOMEM || r == -EMFILE || r == -ENFILE ? -r : EIO,
				    "%s: %s", path, rerr.msg);
	json_error_t jerr;
	json_t *m = json_loadb(text, len, 0, &jerr);
	json_t *ep = json_object_get(m, "entrypoint");
	bool ok = json_is_object(m) && (!ep || valid_argv(ep));
	if (ok && ep)
		*config = json_pack("{s:{s:O}}", "config", "Entrypoint", ep);
	json_decref(m);
	if (!ok)
		return cell_err_msg(err, EIO,
				    "%s: not an object whose entrypoint (when there) is 1 to %d "
				    "strings",
				    path, BUILT_ARGV_MAX);
	return ep && !*config ? cell_err(err, ENOMEM, "%s", path) : 0;
}

int image_find(const char *uri, struct image_found *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	struct cell_error lerr = {0};
	int r = image_resolve(uri, out->rootfs, sizeof(out->rootfs), &lerr);
	if (r == 0)
		return built_config(out->rootfs, &out->config, err);
	if (r != -ENOENT && r != -EINVAL) {
		*err = lerr;
		return r;
	}
	struct store_image img;
	struct cell_error serr = {0};
	int s = store_find(uri, &img, &serr);
	if (s == -EINVAL) { /* not a reference either: the local name's complaint */
		*err = lerr;
		return r;
	}
	if (s < 0) {
		*err = serr;
		return s;
	}
	s = found_from_store(&img, out, err);
	store_image_free(&img);
	if (s < 0)
		image_found_free(out);
	return s;
}

void image_found_free(struct image_found *f)
{
	json_decref(f->layers);
	json_decref(f->config);
	f->layers = f->config = NULL;
}

bool image_is_built(const char *uri)
{
	char rootfs[4096];
	struct cell_error err = {0};
	return image_resolve(uri, rootfs, sizeof(rootfs), &err) == 0;
}
