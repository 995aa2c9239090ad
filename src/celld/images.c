/* Local images: <images>/<name>/rootfs. The name comes from a client, so it is validated
 * like an id before it can become part of a path (no "/", no "..", nothing odd). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "config.h"
#include "images.h"
#include "cell/id.h"
#include "fields.h"

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
