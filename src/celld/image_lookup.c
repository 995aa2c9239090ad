/* A path in an image's merged view (image_lookup.h). An image's layers are unpacked in
 * overlayfs' own format (layer_unpack.c): a whiteout is a 0/0 character device, an opaque
 * directory carries trusted.overlay.opaque "y". */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "image_lookup.h"

#define LOOKUP_COMP_MAX 32

enum found { FOUND_ENTRY, FOUND_HIDDEN, FOUND_NOT_HERE };

bool layer_dir_opaque(int fd)
{
	char v[2];
	return fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

/* What one layer says of comp[0..n): an entry, a hiding (whiteout, file on the way, or an
 * opaque directory above where this layer ends), or nothing (look below). */
static int lookup_layer(int layer, char *const *comp, size_t n, enum found *out)
{
	_cleanup_close_ int cur = fcntl(layer, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	bool opaque = false;
	for (size_t i = 0; i < n; i++) {
		struct stat sb;
		if (fstatat(cur, comp[i], &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return -errno;
			*out = opaque ? FOUND_HIDDEN : FOUND_NOT_HERE;
			return 0;
		}
		if (S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0)) {
			*out = FOUND_HIDDEN;
			return 0;
		}
		if (i + 1 == n || S_ISLNK(sb.st_mode)) {
			*out = FOUND_ENTRY;
			return 0;
		}
		if (!S_ISDIR(sb.st_mode)) {
			*out = FOUND_HIDDEN;
			return 0;
		}
		int next = openat(cur, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return -errno;
		close(cur);
		cur = next;
		opaque = opaque || layer_dir_opaque(cur);
	}
	*out = FOUND_NOT_HERE; /* not reached: the last component answers above */
	return 0;
}

static int split(char *path, char **comp, size_t *n)
{
	*n = 0;
	for (char *save = NULL, *c = strtok_r(path, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, ".") || !strcmp(c, "..") || *n == LOOKUP_COMP_MAX)
			return -EINVAL;
		comp[(*n)++] = c;
	}
	return *n ? 0 : -EINVAL;
}

int image_lookup(json_t *layers, const char *rootfs, const char *rel, struct cell_error *err)
{
	char path[4096], *comp[LOOKUP_COMP_MAX];
	size_t n;
	if (strlen(rel) >= sizeof(path))
		return cell_err_msg(err, ENAMETOOLONG, "image path '%.64s...' is too long", rel);
	strcpy(path, rel);
	if (split(path, comp, &n) < 0)
		return cell_err_msg(err, EINVAL, "image path '%.200s' is not a plain relative path",
				    rel);
	size_t layer_count = json_array_size(layers);
	for (size_t l = 0; l < (layer_count ? layer_count : 1); l++) {
		const char *dir =
		    layer_count ? json_string_value(json_array_get(layers, l)) : rootfs;
		_cleanup_close_ int fd =
		    dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : (errno = EINVAL, -1);
		enum found f = FOUND_NOT_HERE;
		int r = fd < 0 ? -errno : lookup_layer(fd, comp, n, &f);
		if (r < 0)
			return cell_err(err, -r, "looking up /%.200s in the image's layer %s", rel,
					dir ? dir : "(none)");
		if (f == FOUND_ENTRY)
			return 1;
		if (f == FOUND_HIDDEN)
			return 0;
	}
	return 0;
}
