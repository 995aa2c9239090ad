/* The engine's root directory, read from the mount table (rootfs.h). mountinfo escapes
 * space, tab, newline and backslash in paths as \ooo; overlay's own options escape ',' and
 * ':' in a path with a backslash. The table is the host's, written by the kernel from
 * mounts root made: bounded all the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "rootfs.h"

#define MOUNTINFO_MAX (16u << 20)

/* mountinfo's \ooo escapes undone in place. */
static void unescape_octal(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* The next item of an overlay option list split at sep, with "\sep" and "\\" kept as the
 * characters; NULL at the end. */
static char *next_item(char **cursor, char sep)
{
	char *s = *cursor;
	if (!s || !*s)
		return NULL;
	char *w = s, *r = s;
	for (; *r && *r != sep; r++) {
		if (r[0] == '\\' && r[1])
			r++;
		*w++ = *r;
	}
	*cursor = *r ? r + 1 : NULL;
	*w = '\0';
	return s;
}

static int take_options(char *opts, struct oci_rootfs *out, struct cell_error *err)
{
	char *lower = NULL, *upper = NULL, *work = NULL;
	for (char *cur = opts, *o; (o = next_item(&cur, ','));) {
		if (!strncmp(o, "lowerdir=", 9))
			lower = o + 9;
		else if (!strncmp(o, "upperdir=", 9))
			upper = o + 9;
		else if (!strncmp(o, "workdir=", 8))
			work = o + 8;
	}
	if (!lower || !upper || !work)
		return cell_err_msg(err, EINVAL,
				    "the root overlay has no %s dir (a read-only "
				    "snapshot is not supported yet)",
				    !lower   ? "lower"
				    : !upper ? "upper"
					     : "work");
	for (char *cur = lower, *l; (l = next_item(&cur, ':'));) {
		if (out->n_lowers == CELL_IMAGE_LAYERS_MAX)
			return cell_err_msg(err, E2BIG, "the root overlay has more than %d layers",
					    CELL_IMAGE_LAYERS_MAX);
		if (l[0] != '/' || !(out->lowers[out->n_lowers++] = strdup(l)))
			return cell_err_msg(err, EINVAL, "the root overlay's lower dir '%.200s'",
					    l);
	}
	char *slash = strrchr(upper, '/'), *wslash = strrchr(work, '/');
	if (upper[0] != '/' || !slash || !slash[1] || !wslash || strcmp(wslash + 1, "work") ||
	    (size_t)(slash - upper) != (size_t)(wslash - work) ||
	    strncmp(upper, work, (size_t)(slash - upper)))
		return cell_err_msg(err, EINVAL,
				    "the root overlay's upper dir %.200s and work dir %.200s are "
				    "not siblings named <name> and work",
				    upper, work);
	out->layer_dir = strndup(upper, (size_t)(slash - upper));
	out->upper_name = strdup(slash + 1);
	out->overlay = true;
	return out->layer_dir && out->upper_name ? 0 : cell_err(err, ENOMEM, "root overlay");
}

int oci_rootfs_read(const char *root, struct oci_rootfs *out, struct cell_error *err)
{
	*out = (struct oci_rootfs){0};
	_cleanup_free_ char *text = NULL;
	int r =
	    cell_read_file_at(AT_FDCWD, "/proc/self/mountinfo", MOUNTINFO_MAX, &text, NULL, err);
	if (r < 0)
		return r;
	/* The last mount at root is the one on top. */
	char *found = NULL;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *f[6] = {0}, *p = line;
		for (int i = 0; i < 6 && p; i++) {
			f[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		char *dash = p ? strstr(p, "- ") : NULL;
		if (!f[4] || !dash)
			continue;
		unescape_octal(f[4]);
		if (strcmp(f[4], root))
			continue;
		found = dash + 2;
	}
	if (!found || strncmp(found, "overlay ", 8))
		return 0;
	char *src = strchr(found + 8, ' ');
	if (!src)
		return 0;
	unescape_octal(src + 1);
	r = take_options(src + 1, out, err);
	if (r < 0)
		oci_rootfs_clear(out);
	return r;
}

void oci_rootfs_clear(struct oci_rootfs *r)
{
	for (size_t i = 0; i < r->n_lowers; i++)
		free(r->lowers[i]);
	free(r->layer_dir);
	free(r->upper_name);
	*r = (struct oci_rootfs){0};
}
